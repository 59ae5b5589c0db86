//! [`FileLock`]: an exclusive `flock`, released when dropped or when the process dies.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};

use crate::error::SessionError;

/// How often a bounded wait tries the lock again.
const RETRY: Duration = Duration::from_millis(20);

/// An exclusive advisory lock on a file.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

fn open(path: &Path) -> Result<File, SessionError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| SessionError::io(path, e))
}

impl FileLock {
    /// Waits for the lock as long as it takes (used for short critical sections).
    pub(crate) fn acquire(path: &Path) -> Result<FileLock, SessionError> {
        let file = open(path)?;
        flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| SessionError::io(path, e.into()))?;
        Ok(FileLock { _file: file })
    }

    /// Takes the lock if it is free; `None` if another holder has it.
    pub(crate) fn try_acquire(path: &Path) -> Result<Option<FileLock>, SessionError> {
        let file = open(path)?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(FileLock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(SessionError::io(path, e.into())),
        }
    }

    /// Takes the lock, waiting at most `wait` for its holder; `None` when the wait ran out or
    /// as soon as `stop` says so (a cancel).
    pub(crate) fn acquire_within_or_stop(
        path: &Path,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<FileLock>, SessionError> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(lock) = Self::try_acquire(path)? {
                return Ok(Some(lock));
            }
            let now = Instant::now();
            if now >= deadline || stop() {
                return Ok(None);
            }
            std::thread::sleep(RETRY.min(deadline - now));
        }
    }
}

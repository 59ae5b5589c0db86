//! [`FileLock`]: an advisory `flock` held for as long as the value lives, released when
//! dropped or when the process dies (the kernel releases it).

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};

use super::error::StateFileError;

/// How often a bounded wait tries the lock again.
const RETRY: Duration = Duration::from_millis(20);

/// An advisory lock on a file (exclusive unless taken with [`FileLock::try_shared`]).
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

/// How to open the lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// Create it if missing.
    IfMissing,
    /// Create it; fail if it exists (claims a fresh name).
    New,
}

fn open(path: &Path, create: Create) -> Result<File, StateFileError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true);
    match create {
        Create::IfMissing => options.create(true).truncate(false),
        Create::New => options.create_new(true),
    };
    options.open(path).map_err(|e| StateFileError::io(path, e))
}

/// Takes the lock with `operation` without waiting; `None` when another holder has it.
fn try_lock(path: &Path, operation: FlockOperation) -> Result<Option<FileLock>, StateFileError> {
    let file = open(path, Create::IfMissing)?;
    match flock(&file, operation) {
        Ok(()) => Ok(Some(FileLock { file })),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(StateFileError::io(path, e.into())),
    }
}

impl FileLock {
    /// Waits for the exclusive lock as long as it takes (for short critical sections).
    pub fn acquire(path: &Path, create: Create) -> Result<FileLock, StateFileError> {
        let file = open(path, create)?;
        flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| StateFileError::io(path, e.into()))?;
        Ok(FileLock { file })
    }

    /// Takes the exclusive lock if it is free; `None` if another holder has it.
    pub fn try_acquire(path: &Path) -> Result<Option<FileLock>, StateFileError> {
        try_lock(path, FlockOperation::NonBlockingLockExclusive)
    }

    /// Waits for a shared lock as long as an exclusive holder has it (for locks whose
    /// exclusive holders hold them briefly).
    pub fn acquire_shared(path: &Path) -> Result<FileLock, StateFileError> {
        let file = open(path, Create::IfMissing)?;
        flock(&file, FlockOperation::LockShared).map_err(|e| StateFileError::io(path, e.into()))?;
        Ok(FileLock { file })
    }

    /// Takes a shared lock if no exclusive holder has it; `None` otherwise.
    pub fn try_shared(path: &Path) -> Result<Option<FileLock>, StateFileError> {
        try_lock(path, FlockOperation::NonBlockingLockShared)
    }

    /// Takes the exclusive lock, waiting at most `wait` for its holder; `None` when the wait
    /// ran out or as soon as `stop` says so (a cancel).
    pub fn acquire_within_or_stop(
        path: &Path,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<FileLock>, StateFileError> {
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

    /// Whether the locked file is still the one at `path` (not removed or replaced since).
    pub fn is_at(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), std::fs::metadata(path)) {
            (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_exclusive_holder_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let held = FileLock::acquire(&path, Create::IfMissing).unwrap();
        assert!(held.is_at(&path));
        assert!(FileLock::try_acquire(&path).unwrap().is_none());
        assert!(FileLock::try_shared(&path).unwrap().is_none());
        drop(held);
        assert!(FileLock::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn shared_holders_keep_the_exclusive_one_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let a = FileLock::try_shared(&path).unwrap().unwrap();
        let b = FileLock::try_shared(&path).unwrap().unwrap();
        assert!(FileLock::try_acquire(&path).unwrap().is_none());
        drop((a, b));
        assert!(FileLock::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn create_new_claims_a_fresh_name_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let _held = FileLock::acquire(&path, Create::New).unwrap();
        let again = FileLock::acquire(&path, Create::New).unwrap_err();
        assert_eq!(again.path, path);
        assert!(matches!(
            again.kind,
            super::super::StateFileErrorKind::Io(ref e) if e.kind() == std::io::ErrorKind::AlreadyExists
        ));
    }

    #[test]
    fn a_bounded_wait_runs_out_or_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let held = FileLock::acquire(&path, Create::IfMissing).unwrap();
        let started = Instant::now();
        let none =
            FileLock::acquire_within_or_stop(&path, Duration::from_millis(60), &|| false).unwrap();
        assert!(none.is_none());
        assert!(started.elapsed() >= Duration::from_millis(60));
        let stopped =
            FileLock::acquire_within_or_stop(&path, Duration::from_secs(60), &|| true).unwrap();
        assert!(stopped.is_none());
        drop(held);
        let free = FileLock::acquire_within_or_stop(&path, Duration::ZERO, &|| false).unwrap();
        assert!(free.is_some());
    }

    #[test]
    fn a_replaced_file_is_no_longer_the_locked_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let held = FileLock::acquire(&path, Create::IfMissing).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(!held.is_at(&path));
        std::fs::write(&path, "").unwrap();
        assert!(!held.is_at(&path));
    }
}

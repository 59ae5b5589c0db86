//! [`FileLock`]: an exclusive `flock` held for as long as the value lives.

use std::fs::File;
use std::path::Path;

use rustix::fs::{FlockOperation, flock};

use crate::error::WorkspaceError;

/// An exclusive advisory lock on a file; released when dropped (or when the process dies).
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

/// How to open the lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Create {
    /// Create it if missing.
    IfMissing,
    /// Create it; fail if it exists (claims a fresh name).
    New,
}

impl FileLock {
    fn open(path: &Path, create: Create) -> std::io::Result<File> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true);
        match create {
            Create::IfMissing => options.create(true),
            Create::New => options.create_new(true),
        };
        options.open(path)
    }

    /// Waits for the lock.
    pub(crate) fn acquire(path: &Path, create: Create) -> Result<FileLock, WorkspaceError> {
        let file = Self::open(path, create).map_err(|e| WorkspaceError::io(path, e))?;
        flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| WorkspaceError::io(path, e.into()))?;
        Ok(FileLock { _file: file })
    }

    /// Whether the locked file is still the one at `path` (not removed or replaced since).
    pub(crate) fn is_at(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self._file.metadata(), std::fs::metadata(path)) {
            (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
            _ => false,
        }
    }

    /// Takes a shared lock if no exclusive holder has it; `None` otherwise.
    pub(crate) fn try_shared(path: &Path) -> Result<Option<FileLock>, WorkspaceError> {
        let file = Self::open(path, Create::IfMissing).map_err(|e| WorkspaceError::io(path, e))?;
        match flock(&file, FlockOperation::NonBlockingLockShared) {
            Ok(()) => Ok(Some(FileLock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(WorkspaceError::io(path, e.into())),
        }
    }

    /// Takes the lock if it is free; `None` if another holder has it.
    pub(crate) fn try_acquire(path: &Path) -> Result<Option<FileLock>, WorkspaceError> {
        let file = Self::open(path, Create::IfMissing).map_err(|e| WorkspaceError::io(path, e))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(FileLock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(WorkspaceError::io(path, e.into())),
        }
    }
}

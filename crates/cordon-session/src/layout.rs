//! Where each file of a session lives under `$CORDON_HOME` (masked from every sandboxed
//! program, like the rest of cordon's home).
//!
//! ```text
//! $CORDON_HOME/sessions/<id>/
//!   state.json     the record (cordon.session/v1): temp file + fsync + rename, under state.lock
//!   state.lock     flock around every read-modify-write of the record
//!   writer.lock    flock held by the one writer (an exec without --read-only, a push import,
//!                  a pull's export); released by the kernel when its holder dies
//!   watcher.lock   flock held by the one review watcher (`session watch`)
//!   tree/          the session's own repository (work tree + .git), the sandbox's workspace;
//!                  for an overlay session an empty directory, its tree being
//!   layer/         an overlay session's layer (`upper/`: its `.git` and its changes; `work/`)
//!                  over the commit's shared base tree ($CORDON_HOME/bases/<commit>)
//!   transfer-*/    cordon's scratch for one bundle on its way in or out; removed after use
//! ```

use std::path::{Path, PathBuf};

use crate::id::SessionId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    home: PathBuf,
}

impl Layout {
    pub(crate) fn new(home: PathBuf) -> Layout {
        Layout { home }
    }

    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    pub(crate) fn sessions(&self) -> PathBuf {
        self.home.join("sessions")
    }

    pub(crate) fn dir(&self, id: &SessionId) -> PathBuf {
        self.sessions().join(id.as_str())
    }

    pub(crate) fn state(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("state.json")
    }

    pub(crate) fn state_lock(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("state.lock")
    }

    pub(crate) fn writer_lock(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("writer.lock")
    }

    pub(crate) fn watcher_lock(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("watcher.lock")
    }

    pub(crate) fn tree(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("tree")
    }

    pub(crate) fn layer(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("layer")
    }

    /// A fresh scratch directory name for one transfer.
    pub(crate) fn transfer(&self, id: &SessionId, tag: &str) -> PathBuf {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.dir(id)
            .join(format!("transfer-{tag}-{}-{n}", std::process::id()))
    }
}

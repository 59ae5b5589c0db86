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
//!   readers.lock   flock held shared by every program running over the session's layers
//!                  (exec, diff); taken exclusive, without waiting, to let go of frozen
//!                  layers the session no longer stands on (after a flatten)
//!   tree/          the session's own repository (work tree + .git), the sandbox's workspace;
//!                  for an overlay session an empty directory, its tree being
//!   layer/         an overlay session's layer (`upper/`: its `.git` and its changes; `work/`)
//!                  over the commit's shared base tree ($CORDON_HOME/bases/<commit>); after
//!                  a fork, `layer/<n>/` (`upper/`, `work/`) over its frozen layers
//!                  ($CORDON_HOME/layers/<id>, shared with the forks)
//!   transfer-*/    cordon's scratch for one bundle on its way in or out; removed after use
//! ```

use std::path::PathBuf;

use cordon_workspace::state::{StateLayout, unique_name};

use crate::id::SessionId;

/// Where a session's files are: the directories every object of the state directory has
/// (`sessions/<id>/`, its `tree/` and `layer/`, through [`StateLayout`]), and the files only
/// sessions have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    state: StateLayout,
}

impl std::ops::Deref for Layout {
    type Target = StateLayout;

    fn deref(&self) -> &StateLayout {
        &self.state
    }
}

impl Layout {
    pub(crate) fn new(home: PathBuf) -> Layout {
        Layout {
            state: StateLayout::new(home, "sessions"),
        }
    }

    pub(crate) fn sessions(&self) -> PathBuf {
        self.root()
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

    pub(crate) fn readers_lock(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("readers.lock")
    }

    pub(crate) fn watcher_lock(&self, id: &SessionId) -> PathBuf {
        self.dir(id).join("watcher.lock")
    }

    /// The directory of an overlay session's upper layer of `generation` (`upper/`, `work/`):
    /// `layer/` for the first, `layer/<n>/` for each after a fork.
    pub(crate) fn generation(&self, id: &SessionId, generation: u32) -> PathBuf {
        match generation {
            0 => self.layer(id),
            n => self.layer(id).join(n.to_string()),
        }
    }

    /// A fresh scratch directory name for one transfer.
    pub(crate) fn transfer(&self, id: &SessionId, tag: &str) -> PathBuf {
        self.dir(id).join(unique_name(&format!("transfer-{tag}")))
    }
}

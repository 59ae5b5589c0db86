//! Where each file of a workspace lives under `$CORDON_HOME`.
//!
//! ```text
//! $CORDON_HOME/
//!   workspaces/
//!     <id>.json      the record (cordon.workspace/v1), replaced atomically
//!     <id>.lock      flock: held while the workspace is created, changed or removed
//!     <id>/tree/     the files (for git-worktree: the linked worktree)
//!     <id>/scratch/  cordon's private data for the workspace (cache layers of a
//!                    verification); never visible to programs, removed with the workspace
//!   locks/
//!     repo-<hash>.lock   flock per source repository, around `git worktree add/remove/prune`
//! ```

use std::path::{Path, PathBuf};

use crate::id::WorkspaceId;

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

    pub(crate) fn workspaces(&self) -> PathBuf {
        self.home.join("workspaces")
    }

    pub(crate) fn locks(&self) -> PathBuf {
        self.home.join("locks")
    }

    pub(crate) fn record(&self, id: &WorkspaceId) -> PathBuf {
        self.workspaces().join(format!("{id}.json"))
    }

    pub(crate) fn lock(&self, id: &WorkspaceId) -> PathBuf {
        self.workspaces().join(format!("{id}.lock"))
    }

    pub(crate) fn dir(&self, id: &WorkspaceId) -> PathBuf {
        self.workspaces().join(id.as_str())
    }

    pub(crate) fn scratch(&self, id: &WorkspaceId) -> PathBuf {
        self.dir(id).join("scratch")
    }

    pub(crate) fn tree(&self, id: &WorkspaceId) -> PathBuf {
        self.dir(id).join("tree")
    }

    /// The lock of a source repository, named by a stable hash of its common directory.
    pub(crate) fn repo_lock(&self, git_common_dir: &Path) -> PathBuf {
        use std::os::unix::ffi::OsStrExt;
        // FNV-1a: stable across builds and versions, unlike std's hasher.
        let hash = git_common_dir
            .as_os_str()
            .as_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        self.locks().join(format!("repo-{hash:016x}.lock"))
    }
}

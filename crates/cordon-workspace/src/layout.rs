//! Where each file of a workspace lives under `$CORDON_HOME`.
//!
//! ```text
//! $CORDON_HOME/
//!   workspaces/
//!     <id>.json      the record (cordon.workspace/v1), replaced atomically
//!     <id>.lock      flock: held while the workspace is created, changed or removed
//!     <id>/tree/     the files (git-worktree: the linked worktree; overlay: an empty
//!                    directory, where cordon's host-side git sees the merged tree)
//!     <id>/layer/    overlay: `upper/` (the workspace's changes) and `work/` (overlayfs's)
//!     <id>/git/      overlay: the workspace's git directory (`HEAD`, `commondir`, `index`)
//!     <id>/dot-git   overlay: the `.git` file shown at the top of the tree (read-only)
//!     <id>/mount.lock  overlay: flock, exclusive while the tree is mounted writable
//!     .ended/<id>.json  how a removed workspace ended (removed, expired, ...), for errors
//!                    about it; deleted by `gc --older-than`
//!     <id>/scratch/  cordon's private data for the workspace (cache layers of a
//!                    verification); never visible to programs, removed with the workspace
//!   bases/
//!     <commit>/      a commit's files, checked out once, shared read-only by every overlay
//!                    workspace, session and cache of it: `tree/`, `index`, `base.json`
//!     <commit>.lock  flock around creating, holding and removing the base
//!     <commit>.holds/<holder>   one file per holder (its content: the holder's record, which
//!                    gc checks); gc removes a base without holders
//!   overlay-support.json   whether overlay workspaces work on this host (probed once a boot)
//!   locks/
//!     repo-<hash>.lock   flock per source repository, around `git worktree add/remove/prune`
//! ```

use std::path::{Path, PathBuf};

use crate::id::WorkspaceId;
use crate::state::StateLayout;

/// Where a workspace's files are: the directories every object of the state directory has
/// (`workspaces/<id>/`, its `tree/` and `layer/`, through [`StateLayout`]), and the files
/// only workspaces have.
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
            state: StateLayout::new(home, "workspaces"),
        }
    }

    pub(crate) fn workspaces(&self) -> PathBuf {
        self.root()
    }

    pub(crate) fn locks(&self) -> PathBuf {
        self.home().join("locks")
    }

    pub(crate) fn record(&self, id: &WorkspaceId) -> PathBuf {
        self.workspaces().join(format!("{id}.json"))
    }

    pub(crate) fn lock(&self, id: &WorkspaceId) -> PathBuf {
        self.workspaces().join(format!("{id}.lock"))
    }

    /// Where the ends of removed workspaces are remembered.
    pub(crate) fn ended(&self) -> PathBuf {
        self.workspaces().join(".ended")
    }

    pub(crate) fn scratch(&self, id: &WorkspaceId) -> PathBuf {
        self.dir(id).join("scratch")
    }

    pub(crate) fn git_dir(&self, id: &WorkspaceId) -> PathBuf {
        self.dir(id).join("git")
    }

    pub(crate) fn dot_git(&self, id: &WorkspaceId) -> PathBuf {
        self.dir(id).join("dot-git")
    }

    pub(crate) fn mount_lock(&self, id: &WorkspaceId) -> PathBuf {
        self.dir(id).join("mount.lock")
    }

    pub(crate) fn bases(&self) -> PathBuf {
        self.home().join("bases")
    }

    pub(crate) fn support(&self) -> PathBuf {
        self.home().join("overlay-support.json")
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

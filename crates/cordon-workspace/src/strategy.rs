//! What each [`Strategy`] does to make, change and unmake a workspace's files.
//!
//! A new strategy (an overlayfs copy-on-write tree is planned) adds a variant to
//! [`Strategy`] and an arm to each function here; records, locks and gc stay as they are.

use std::path::{Path, PathBuf};

use cordon_git::{CommitId, Repo, Worktree};

use crate::error::WorkspaceError;
use crate::layout::Layout;
use crate::lock::{Create, FileLock};
use crate::record::{Strategy, WorkspaceRecord};

/// Makes the files of a new workspace at `tree`; returns the git directory, if any.
pub(crate) fn create(
    strategy: Strategy,
    layout: &Layout,
    repo: &Repo,
    tree: &Path,
    commit: &CommitId,
) -> Result<Option<PathBuf>, WorkspaceError> {
    match strategy {
        Strategy::GitWorktree => {
            let worktree = {
                let _repo_lock =
                    FileLock::acquire(&layout.repo_lock(repo.common_dir()), Create::IfMissing)?;
                repo.add_worktree_unpopulated(tree, commit)?
            };
            worktree.populate(commit)?;
            Ok(Some(worktree.git_dir().to_owned()))
        }
    }
}

/// The git worktree of a record, for diff and apply.
pub(crate) fn worktree(record: &WorkspaceRecord) -> Option<Worktree> {
    match record.strategy {
        Strategy::GitWorktree => record.git_dir.clone().map(|git_dir| {
            Worktree::from_parts(record.git_common_dir.clone(), git_dir, record.path.clone())
        }),
    }
}

/// Unmakes the files of a workspace (and its git metadata); fine if they are already gone.
pub(crate) fn destroy(layout: &Layout, record: &WorkspaceRecord) -> Result<(), WorkspaceError> {
    match record.strategy {
        Strategy::GitWorktree => {
            let repo = Repo::from_common_dir(record.git_common_dir.clone());
            let _repo_lock =
                FileLock::acquire(&layout.repo_lock(&record.git_common_dir), Create::IfMissing)?;
            // The files first, by cordon itself (whatever depth or permissions a program left;
            // `git worktree remove` would walk the tree with a descriptor per level), then
            // the repository's metadata entry of this worktree, and only that one.
            remove_dir_all(&record.path)?;
            if record.git_common_dir.is_dir() {
                repo.forget_worktree(&record.path)?;
            }
            Ok(())
        }
    }
}

pub(crate) fn remove_dir_all(path: &Path) -> Result<(), WorkspaceError> {
    crate::remove::remove_tree(path).map_err(|e| WorkspaceError::io(path, e))
}

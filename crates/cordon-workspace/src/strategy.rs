//! What each [`Strategy`] does to make, change and unmake a workspace's files.
//!
//! - **git-worktree**: a detached `git worktree` of the repository, checked out in full.
//! - **overlay**: the commit's shared base tree (checked out once, [`crate::BaseTree`]) under
//!   a private upper layer. Creating one writes a handful of small files whatever the size of
//!   the repository: the upper and work directories, the workspace's git directory (`HEAD` at
//!   the commit, `commondir` naming the repository's git data, and a copy of the base's index,
//!   whose stat data matches the base's files as overlayfs shows them, so `git status` reads
//!   nothing it need not), and the `.git` file that points there. The host never mounts it:
//!   the sandbox does, inside its own mount namespace, and cordon's host-side git runs through
//!   the helper, which mounts it in a private namespace of its own ([`overlay_launcher`]).

use std::path::{Path, PathBuf};

use cordon_git::{Launcher, Layers, Repo, Worktree};

use crate::bases::BaseHolder;
use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::layout::Layout;
use crate::record::{Strategy, WorkspaceRecord};
use crate::state::{Create, FileLock};
use crate::workspaces::Workspaces;

/// Makes the files of a new workspace at `tree`; returns the git directory, if any.
pub(crate) fn create(
    workspaces: &Workspaces,
    record: &WorkspaceRecord,
    repo: &Repo,
) -> Result<Option<PathBuf>, WorkspaceError> {
    let layout = workspaces.layout();
    let (tree, commit) = (&record.path, &record.commit);
    match record.strategy {
        Strategy::GitWorktree => {
            let worktree = {
                let _repo_lock =
                    FileLock::acquire(&layout.repo_lock(repo.common_dir()), Create::IfMissing)?;
                repo.add_worktree_unpopulated(tree, commit)?
            };
            worktree.populate(commit)?;
            Ok(Some(worktree.git_dir().to_owned()))
        }
        Strategy::Overlay => {
            let id = &record.id;
            let base = workspaces.hold_base(repo, commit, &holder(layout, record))?;
            let layer = layout.layer(id);
            let git_dir = layout.git_dir(id);
            for dir in [tree, &layer.join("upper"), &layer.join("work"), &git_dir] {
                std::fs::create_dir_all(dir).map_err(|e| WorkspaceError::io(dir, e))?;
            }
            write(&git_dir.join("HEAD"), format!("{commit}\n").as_bytes())?;
            let mut common = record
                .git_common_dir
                .as_os_str()
                .as_encoded_bytes()
                .to_vec();
            common.push(b'\n');
            write(&git_dir.join("commondir"), &common)?;
            // The base's index, hard-linked: git never writes an index in place (it writes
            // `index.lock` and renames it over), so the first git command that changes this
            // workspace's index gives it its own file and the base's stays as it was. Until
            // then a workspace costs no disk per tracked file (a copy is about 80 bytes each).
            // A file system that refuses the link gets a copy.
            let index = git_dir.join("index");
            if std::fs::hard_link(&base.index, &index).is_err() {
                std::fs::copy(&base.index, &index).map_err(|e| WorkspaceError::io(&index, e))?;
            }
            let mut dot_git = b"gitdir: ".to_vec();
            dot_git.extend_from_slice(git_dir.as_os_str().as_encoded_bytes());
            dot_git.push(b'\n');
            write(&layout.dot_git(id), &dot_git)?;
            // The `.git` the programs see: in the upper layer (so the name exists in the
            // tree), and covered read-only by the sandbox with `dot-git`.
            write(&layer.join("upper/.git"), &dot_git)?;
            Ok(Some(git_dir))
        }
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), WorkspaceError> {
    std::fs::write(path, bytes).map_err(|e| WorkspaceError::io(path, e))
}

/// The name under which an overlay workspace holds its base.
pub(crate) fn holder(layout: &Layout, record: &WorkspaceRecord) -> BaseHolder {
    BaseHolder {
        name: format!("ws-{}", record.id),
        proof: layout.record(&record.id),
    }
}

/// The parts of an overlay workspace the sandbox and the helper mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayParts {
    /// The read-only layers, topmost first: the base tree.
    pub lowers: Vec<PathBuf>,
    /// cordon's directory holding the writable layer (`upper/`, `work/`).
    pub layer: PathBuf,
    /// The workspace's git directory (`HEAD`, `commondir`, `index`).
    pub git_dir: PathBuf,
    /// The `.git` file to show, read-only, at the top of the tree.
    pub dot_git: PathBuf,
    /// The (empty) host directory of the tree: where cordon's helper mounts it.
    pub mount_point: PathBuf,
}

impl OverlayParts {
    /// The merged tree as cordon reads it on the host, without mounting: upper, then base.
    pub fn layers(&self) -> Layers {
        let mut layers = vec![self.layer.join("upper")];
        layers.extend(self.lowers.iter().cloned());
        Layers::new(layers)
    }
}

/// The layers of an overlay workspace, computed from cordon's own layout (never from paths a
/// record names, which a forged record could point elsewhere); canonical, as mounts need.
pub(crate) fn overlay_parts(
    workspaces: &Workspaces,
    record: &WorkspaceRecord,
) -> Result<Option<OverlayParts>, WorkspaceError> {
    if record.strategy != Strategy::Overlay {
        return Ok(None);
    }
    let layout = workspaces.layout();
    let canon = |p: PathBuf| p.canonicalize().map_err(|e| WorkspaceError::io(&p, e));
    let base = workspaces.existing_base(&record.commit).ok_or_else(|| {
        WorkspaceError::new(WorkspaceErrorKind::BaseMissing {
            commit: record.commit.clone(),
        })
    })?;
    Ok(Some(OverlayParts {
        lowers: vec![base.tree],
        layer: canon(layout.layer(&record.id))?,
        git_dir: canon(layout.git_dir(&record.id))?,
        dot_git: canon(layout.dot_git(&record.id))?,
        mount_point: canon(layout.tree(&record.id))?,
    }))
}

/// Runs programs (git) with an overlay workspace's tree mounted over its mount point, in a
/// private namespace of the helper: read-only (the upper as one more lower layer) or
/// writable.
pub(crate) fn overlay_launcher(
    parts: &OverlayParts,
    writable: bool,
) -> Result<Launcher, WorkspaceError> {
    let upper = parts.layer.join("upper");
    let exec = if writable {
        cordon_sandbox::OverlayExec {
            mount_at: parts.mount_point.clone(),
            lowers: parts.lowers.clone(),
            upper: Some(cordon_sandbox::UpperLayer {
                upper,
                work: parts.layer.join("work"),
                volatile: false,
            }),
        }
    } else {
        let mut lowers = vec![upper];
        lowers.extend(parts.lowers.iter().cloned());
        cordon_sandbox::OverlayExec {
            mount_at: parts.mount_point.clone(),
            lowers,
            upper: None,
        }
    };
    let launcher = cordon_sandbox::TreeLauncher::new(&exec)
        .map_err(|e| WorkspaceError::new(WorkspaceErrorKind::OverlayUnavailable(e.to_string())))?;
    Ok(Launcher {
        program: launcher.program,
        args: launcher.args,
        env: launcher.env,
    })
}

/// The git worktree of a record, for diff and apply (an overlay's through its launcher).
pub(crate) fn worktree(
    workspaces: &Workspaces,
    record: &WorkspaceRecord,
    writable: bool,
) -> Result<Option<Worktree>, WorkspaceError> {
    let Some(git_dir) = record.git_dir.clone() else {
        return Ok(None);
    };
    let worktree =
        Worktree::from_parts(record.git_common_dir.clone(), git_dir, record.path.clone());
    match overlay_parts(workspaces, record)? {
        None => Ok(Some(worktree)),
        Some(parts) => {
            let launcher = overlay_launcher(&parts, writable)?;
            let worktree = Worktree::from_parts(
                record.git_common_dir.clone(),
                parts.git_dir.clone(),
                parts.mount_point.clone(),
            );
            Ok(Some(worktree.with_layers(parts.layers(), launcher)))
        }
    }
}

/// Unmakes the files of a workspace (and its git metadata); fine if they are already gone.
pub(crate) fn destroy(
    workspaces: &Workspaces,
    record: &WorkspaceRecord,
) -> Result<(), WorkspaceError> {
    let layout = workspaces.layout();
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
        Strategy::Overlay => {
            // The repository was never touched: the workspace's directory holds everything.
            remove_dir_all(&layout.dir(&record.id))?;
            workspaces.release_base(record.commit.as_str(), &holder(layout, record).name)
        }
    }
}

pub(crate) fn remove_dir_all(path: &Path) -> Result<(), WorkspaceError> {
    crate::remove::remove_tree(path).map_err(|e| WorkspaceError::io(path, e))
}

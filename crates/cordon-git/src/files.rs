//! Writing whole files into a worktree without git: the checkout's own changed files, copied
//! into a workspace (`cordon verify` of a checkout as it is), each path checked as a patch's.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use crate::changes::{ChangeStatus, ChangedFile, RepoPath};
use crate::error::{GitError, GitErrorKind};
use crate::worktree::Worktree;

/// A regular file to write into a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Where, relative to the top of the tree.
    pub path: RepoPath,
    /// Its bytes.
    pub contents: Vec<u8>,
    /// Whether it is executable (mode 755, else 644).
    pub executable: bool,
}

impl Worktree {
    /// Writes `files` into the worktree, replacing what is there: into its topmost layer (an
    /// overlay's upper directory, before any program has run over it; else the worktree's own
    /// directory), without running git. Every path is checked first as a patch's paths are
    /// (relative, no `..`, nothing under `.git`, not `.gitmodules`, no symlink on the way), and
    /// a file is never written through a symlink; nothing is written unless every path passes.
    /// Returns the files changed (`added` where the tree had none).
    pub fn write_files(&self, files: &[NewFile]) -> Result<Vec<ChangedFile>, GitError> {
        let tree = self.tree();
        let refused = |path: &RepoPath, reason| {
            GitError::patch(GitErrorKind::PatchRefused {
                path: path.to_string_lossy().into_owned(),
                reason,
            })
        };
        let mut changed = Vec::with_capacity(files.len());
        for file in files {
            crate::patch::safety::check_lexical(&file.path)
                .and_then(|()| {
                    crate::patch::safety::check_no_symlink_on_path(
                        &tree,
                        &file.path,
                        &Default::default(),
                    )
                })
                .map_err(|reason| refused(&file.path, reason))?;
            let exists = tree.lstat(file.path.as_path()).ok().flatten().is_some();
            changed.push(ChangedFile {
                path: file.path.clone(),
                old_path: None,
                status: if exists {
                    ChangeStatus::Modified
                } else {
                    ChangeStatus::Added
                },
            });
        }
        let top: PathBuf = tree
            .layers()
            .first()
            .cloned()
            .unwrap_or_else(|| self.path().to_owned());
        for file in files {
            let path = top.join(file.path.as_path());
            let io = |source| {
                GitError::new(
                    &["write-files".to_owned()],
                    GitErrorKind::Io {
                        path: path.clone(),
                        source,
                    },
                )
            };
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            let mode = if file.executable { 0o755 } else { 0o644 };
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                .open(&path)
                .map_err(io)?;
            out.write_all(&file.contents).map_err(io)?;
            out.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(io)?;
        }
        Ok(changed)
    }
}

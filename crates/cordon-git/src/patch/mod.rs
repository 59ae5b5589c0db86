//! Applying a patch to a worktree: all or nothing, paths confined.
//!
//! The order of checks, each able to refuse with nothing changed:
//! 1. size (at most [`MAX_PATCH_BYTES`]);
//! 2. cordon's own reading of the file headers (`parse.rs`) and git's
//!    (`git apply --numstat -z`) must name the same paths in the same order;
//! 3. every path, before and after, passes `safety.rs`;
//! 4. `git apply --check`, then `git apply` (atomic: without `--reject` git writes nothing
//!    unless every hunk applies), with every configured filter blanked.

mod parse;
pub(crate) mod safety;

use std::collections::HashSet;

pub use safety::RefusalReason;

use crate::changes::{ChangeStatus, ChangedFile, RepoPath};
use crate::command::{GitCommand, split_nul};
use crate::error::{GitError, GitErrorKind};
use crate::worktree::Worktree;

/// The largest patch [`Worktree::apply_patch`] accepts: 64 MiB.
pub const MAX_PATCH_BYTES: u64 = 64 * 1024 * 1024;

/// The mode of a symlink in git.
const SYMLINK_MODE: u32 = 0o120000;

impl Worktree {
    /// Applies `patch` (as `git diff --binary` writes it, or a unified diff) to the worktree's
    /// files, all or nothing; returns the files it changed.
    pub fn apply_patch(&self, patch: &[u8]) -> Result<Vec<ChangedFile>, GitError> {
        let size = patch.len() as u64;
        if size > MAX_PATCH_BYTES {
            return Err(GitError::patch(GitErrorKind::PatchTooLarge {
                size,
                limit: MAX_PATCH_BYTES,
            }));
        }
        let files =
            parse::parse(patch).map_err(|e| GitError::patch(GitErrorKind::PatchMalformed(e)))?;
        self.compare_with_git(patch, &files)?;
        check_paths(&self.tree(), &files)?;

        let apply = |check: bool| -> Result<(), GitError> {
            let mut cmd = self.on_files(["apply", "--whitespace=nowarn"]);
            if check {
                cmd = cmd.arg("--check");
            }
            match cmd.neutralize_drivers()?.run_with_input(patch) {
                Ok(_) => Ok(()),
                Err(GitError {
                    args,
                    kind: GitErrorKind::Failed { stderr, .. },
                }) => Err(GitError {
                    args,
                    kind: GitErrorKind::PatchDoesNotApply { stderr },
                }),
                Err(e) => Err(e),
            }
        };
        apply(true)?;
        apply(false)?;
        Ok(files
            .into_iter()
            .map(|f| {
                let (path, old_path) = match f.status {
                    ChangeStatus::Renamed | ChangeStatus::Copied => (f.new_path, f.old_path),
                    _ => (f.new_path.or(f.old_path), None),
                };
                ChangedFile {
                    path: path.unwrap_or_else(|| RepoPath::from_bytes("")),
                    old_path,
                    status: f.status,
                }
            })
            .collect())
    }

    /// Refuses the patch unless git reads the same paths from it as `files`.
    fn compare_with_git(&self, patch: &[u8], files: &[parse::FilePatch]) -> Result<(), GitError> {
        let cmd = GitCommand::new(&self.context(), ["apply", "--numstat", "-z"]);
        let out = match cmd.run_with_input(patch) {
            Ok(out) => out,
            Err(GitError {
                kind: GitErrorKind::Failed { stderr, .. },
                ..
            }) => {
                return Err(GitError::patch(GitErrorKind::PatchMalformed(
                    stderr.trim_end().to_owned(),
                )));
            }
            Err(e) => return Err(e),
        };
        // git names one path per file: the new one, or the old one of a deleted file. The old
        // name of a rename or copy is only read by `parse.rs` (which refuses names the two
        // readers could split differently); `git apply` refuses unsafe old names as well.
        let ours = files
            .iter()
            .map(|f| f.new_path.as_ref().or(f.old_path.as_ref()));
        let theirs = parse_numstat(&out.stdout);
        let same = theirs.as_ref().is_some_and(|theirs| {
            theirs.len() == files.len() && theirs.iter().zip(ours).all(|(t, o)| Some(t) == o)
        });
        if same {
            Ok(())
        } else {
            Err(GitError::patch(GitErrorKind::PatchMalformed(
                "git reads different file names from the patch than its headers say".to_owned(),
            )))
        }
    }
}

/// Parses `git apply --numstat -z` into one path per file: `added\tdeleted\tpath\0`, or, in
/// the rename form of `git diff --numstat -z`, `added\tdeleted\t\0old\0new\0` (the new one).
fn parse_numstat(out: &[u8]) -> Option<Vec<RepoPath>> {
    let mut records = split_nul(out);
    let mut entries = Vec::new();
    while let Some(record) = records.next() {
        let mut fields = record.splitn(3, |&b| b == b'\t');
        let (_added, _deleted, path) = (fields.next()?, fields.next()?, fields.next()?);
        if path.is_empty() {
            let _old = records.next()?;
            entries.push(RepoPath::from_bytes(records.next()?.to_vec()));
        } else {
            entries.push(RepoPath::from_bytes(path.to_vec()));
        }
    }
    Some(entries)
}

fn check_paths(root: &crate::layers::Layers, files: &[parse::FilePatch]) -> Result<(), GitError> {
    let new_symlinks: HashSet<&[u8]> = files
        .iter()
        .filter(|f| f.new_mode == Some(SYMLINK_MODE))
        .filter_map(|f| f.new_path.as_ref().map(RepoPath::as_bytes))
        .collect();
    for path in files
        .iter()
        .flat_map(|f| f.old_path.iter().chain(&f.new_path))
    {
        safety::check_lexical(path)
            .and_then(|()| safety::check_no_symlink_on_path(root, path, &new_symlinks))
            .map_err(|reason| {
                GitError::patch(GitErrorKind::PatchRefused {
                    path: path.to_string_lossy().into_owned(),
                    reason,
                })
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_z_with_renames_and_binary() {
        let out = b"1\t0\ta b\0-\t-\tbin\x000\t0\t\0old\0new\0";
        let entries = parse_numstat(out).unwrap();
        let text: Vec<String> = entries.iter().map(|p| p.to_string()).collect();
        assert_eq!(text, vec!["a b", "bin", "new"]);
        assert!(parse_numstat(b"1\t0\t\0old\0").is_none());
    }
}

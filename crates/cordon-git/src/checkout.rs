//! [`Checkout`]: the user's own checkout (the main work tree or a linked one), read to learn
//! what it holds beyond `HEAD` — never written: not its files, not its index, not its stash.

use std::path::{Path, PathBuf};

use crate::changes::RepoPath;
use crate::command::{GitCommand, GitContext};
use crate::error::{GitError, GitErrorKind};
use crate::repo::CommitId;
use crate::worktree::{Worktree, WorktreeDiff};

/// A checkout of the user's repository: its work tree and its own git directory (where its
/// index is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    common_dir: PathBuf,
    git_dir: PathBuf,
    top: PathBuf,
}

impl Checkout {
    /// The checkout containing `path`; `None` in a bare repository (no work tree), or inside
    /// a git directory.
    pub fn open(path: &Path) -> Result<Option<Checkout>, GitError> {
        let dir = std::fs::canonicalize(path).map_err(|source| {
            GitError::new(
                &["rev-parse".to_owned()],
                GitErrorKind::Io {
                    path: path.to_owned(),
                    source,
                },
            )
        })?;
        let context = GitContext::Discover { dir };
        let query = |args: &[&str]| {
            GitCommand::new(&context, ["rev-parse", "--path-format=absolute"])
                .args(args)
                .read_only()
        };
        let cmd = query(&[
            "--is-inside-work-tree",
            "--git-common-dir",
            "--absolute-git-dir",
            "--show-toplevel",
        ]);
        let out = match cmd.run() {
            Ok(out) => out,
            // `--show-toplevel` fails without a work tree (a bare repository, a git
            // directory): then there is no checkout, else the error is real.
            Err(e) => {
                let inside = query(&["--is-inside-work-tree"]).run()?;
                if inside.stdout.starts_with(b"false") {
                    return Ok(None);
                }
                return Err(e);
            }
        };
        let text = String::from_utf8(out.stdout).map_err(|_| {
            GitError::new(
                &cmd.display_args(),
                GitErrorKind::UnexpectedOutput("not UTF-8".to_owned()),
            )
        })?;
        match text.lines().collect::<Vec<_>>()[..] {
            ["true", common_dir, git_dir, top] => Ok(Some(Checkout {
                common_dir: common_dir.into(),
                git_dir: git_dir.into(),
                top: top.into(),
            })),
            ["false", ..] => Ok(None),
            _ => Err(GitError::new(
                &cmd.display_args(),
                GitErrorKind::UnexpectedOutput(format!("unexpected output {text:?}")),
            )),
        }
    }

    /// The top of the work tree.
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The repository this checkout belongs to.
    pub fn repo(&self) -> crate::Repo {
        crate::Repo::from_parts(self.common_dir.clone(), Some(self.top.clone()))
    }

    /// Resolves a revision as this checkout sees it: `HEAD` is the checkout's own (a linked
    /// worktree's, not the main one's).
    pub fn resolve_commit(&self, rev: &str) -> Result<CommitId, GitError> {
        let spec = format!("{rev}^{{commit}}");
        let cmd = GitCommand::new(
            &GitContext::GitDir {
                git_dir: self.git_dir.clone(),
            },
            ["rev-parse", "--verify", "--quiet", "--end-of-options"],
        )
        .arg(&spec)
        .read_only();
        let out = cmd.run().map_err(|e| self.repo().unresolved(rev, e))?;
        let line = crate::command::one_line(&cmd.display_args(), &out.stdout)?;
        CommitId::parse(&line)
            .ok_or_else(|| GitError::new(&cmd.display_args(), GitErrorKind::UnexpectedOutput(line)))
    }

    /// What the checkout holds beyond `head`: staged, unstaged and untracked (not ignored)
    /// changes, with the patch that makes `head`'s files into the checkout's. The files are
    /// staged into a scratch index and object directory under `scratch` (removed afterwards;
    /// the repository's objects serve as an alternate), so neither the checkout's index, its
    /// files, its stash nor the repository's object store is written. Ignored files are left
    /// out by the repository's `.gitignore` files, `.git/info/exclude` and the user's own
    /// ignore file (`$XDG_CONFIG_HOME/git/ignore`, else `~/.config/git/ignore`).
    pub fn changes(&self, head: &CommitId, scratch: &Path) -> Result<WorktreeDiff, GitError> {
        let worktree = Worktree::from_parts(
            self.common_dir.clone(),
            self.git_dir.clone(),
            self.top.clone(),
        );
        worktree.diff_with(head, true, scratch, user_excludes_file().as_deref())
    }
}

/// How a path of the checkout differs from `HEAD` ([`Checkout::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKind {
    /// Its content changed (staged or not).
    Modified,
    /// Staged as new.
    Added,
    /// Deleted (staged or not).
    Deleted,
    /// Staged as moved from another path.
    Renamed,
    /// A type or mode change, or a merge conflict.
    Other,
    /// New, not staged, not ignored.
    Untracked,
}

/// One path of [`Checkout::status`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// The path, relative to the top of the work tree (`dir/` for an untracked directory
    /// that is a repository itself).
    pub path: RepoPath,
    /// How it differs.
    pub kind: StatusKind,
    /// Its mode in the work tree (`0o100644`, `0o100755`, `0o120000` for a symlink), when git
    /// reported one (tracked paths); `None` for untracked paths.
    pub worktree_mode: Option<u32>,
}

impl Checkout {
    /// What differs from `HEAD`, path by path, from one `git status` that takes no lock and
    /// writes nothing (not even the index's stat data): cheaper than [`Checkout::changes`],
    /// which also makes the patch.
    pub fn status(&self) -> Result<Vec<StatusEntry>, GitError> {
        let cmd = GitCommand::new(
            &GitContext::WorkTree {
                git_dir: self.git_dir.clone(),
                work_tree: self.top.clone(),
            },
            [
                "status",
                "--porcelain=v2",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=none",
            ],
        )
        .read_only();
        let cmd = match user_excludes_file() {
            Some(file) => cmd.excludes_file(&file),
            None => cmd,
        };
        let out = cmd.neutralize_drivers()?.run()?;
        parse_status(&out.stdout)
            .map_err(|detail| GitError::new(&cmd_args(), GitErrorKind::UnexpectedOutput(detail)))
    }
}

fn cmd_args() -> Vec<String> {
    vec!["status".to_owned(), "--porcelain=v2".to_owned()]
}

/// Parses `git status --porcelain=v2 -z`.
fn parse_status(out: &[u8]) -> Result<Vec<StatusEntry>, String> {
    let mut records = crate::command::split_nul(out);
    let mut entries = Vec::new();
    while let Some(record) = records.next() {
        let fields = |n: usize| -> Result<(Vec<&[u8]>, &[u8]), String> {
            let mut parts = record.splitn(n + 1, |&b| b == b' ');
            let head: Vec<&[u8]> = parts.by_ref().take(n).collect();
            let rest = parts.next().ok_or_else(|| {
                format!("short status record {:?}", String::from_utf8_lossy(record))
            })?;
            Ok((head, rest))
        };
        let mode = |field: &[u8]| {
            std::str::from_utf8(field)
                .ok()
                .and_then(|m| u32::from_str_radix(m, 8).ok())
        };
        match record.first() {
            Some(b'1') => {
                let (head, path) = fields(8)?;
                let xy = head[1];
                let kind = if xy.contains(&b'D') {
                    StatusKind::Deleted
                } else if xy.contains(&b'T') {
                    StatusKind::Other
                } else if xy.first() == Some(&b'A') {
                    StatusKind::Added
                } else {
                    StatusKind::Modified
                };
                entries.push(StatusEntry {
                    path: RepoPath::from_bytes(path.to_vec()),
                    kind,
                    worktree_mode: mode(head[5]),
                });
            }
            Some(b'2') => {
                let (head, path) = fields(9)?;
                records.next().ok_or("a rename without its original path")?;
                entries.push(StatusEntry {
                    path: RepoPath::from_bytes(path.to_vec()),
                    kind: StatusKind::Renamed,
                    worktree_mode: mode(head[5]),
                });
            }
            Some(b'u') => {
                let (_, path) = fields(10)?;
                entries.push(StatusEntry {
                    path: RepoPath::from_bytes(path.to_vec()),
                    kind: StatusKind::Other,
                    worktree_mode: None,
                });
            }
            Some(b'?') => {
                let (_, path) = fields(1)?;
                entries.push(StatusEntry {
                    path: RepoPath::from_bytes(path.to_vec()),
                    kind: StatusKind::Untracked,
                    worktree_mode: None,
                });
            }
            // `!` (ignored, not asked for) and `#` headers (not asked for).
            _ => {}
        }
    }
    Ok(entries)
}

/// The user's own ignore file, as git finds it by default, when it exists.
fn user_excludes_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    let file = config.join("git").join("ignore");
    file.is_file().then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_v2_records() {
        let h = "0".repeat(40);
        let out = format!(
            "1 .M N... 100644 100644 100644 {h} {h} src/a b.rs\0\
             1 A. N... 000000 100755 100755 {h} {h} run.sh\0\
             1 D. N... 100644 000000 000000 {h} {h} gone\0\
             1 .T N... 100644 100644 120000 {h} {h} link\0\
             2 R. N... 100644 100644 100644 {h} {h} R100 new\0old\0\
             ? notes.txt\0? sub/\0"
        );
        let got: Vec<(String, StatusKind, Option<u32>)> = parse_status(out.as_bytes())
            .unwrap()
            .into_iter()
            .map(|e| (e.path.to_string(), e.kind, e.worktree_mode))
            .collect();
        assert_eq!(
            got,
            [
                ("src/a b.rs".into(), StatusKind::Modified, Some(0o100644)),
                ("run.sh".into(), StatusKind::Added, Some(0o100755)),
                ("gone".into(), StatusKind::Deleted, Some(0)),
                ("link".into(), StatusKind::Other, Some(0o120000)),
                ("new".into(), StatusKind::Renamed, Some(0o100644)),
                ("notes.txt".into(), StatusKind::Untracked, None),
                ("sub/".into(), StatusKind::Untracked, None),
            ]
        );
    }
}

//! [`Checkout`]: the user's own checkout (the main work tree or a linked one), read to learn
//! what it holds beyond `HEAD` — never written: not its files, not its index, not its stash.

use std::path::{Path, PathBuf};

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
        let out = cmd.run()?;
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

/// The user's own ignore file, as git finds it by default, when it exists.
fn user_excludes_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    let file = config.join("git").join("ignore");
    file.is_file().then_some(file)
}

//! [`Repo`]: the user's repository, and the worktrees cordon adds to it.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::command::{GitCommand, GitContext, one_line};
use crate::error::{GitError, GitErrorKind};
use crate::worktree::Worktree;

/// A full commit id (hexadecimal object name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct CommitId(String);

impl CommitId {
    /// A commit id from its hexadecimal text; `None` unless it is 40 or 64 hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        let valid = matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| CommitId(text.to_ascii_lowercase()))
    }

    /// The hexadecimal text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CommitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A repository named by the user.
///
/// Every operation runs with `--git-dir=<common dir>` and no work tree, so none of them reads
/// or writes the user's checkout, index, `HEAD` or branches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    common_dir: PathBuf,
    toplevel: Option<PathBuf>,
}

/// One entry of `git worktree list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorktreeEntry {
    /// The work tree's directory.
    pub path: PathBuf,
    /// The checked-out commit, if any.
    pub head: Option<CommitId>,
    /// The checked-out branch (`refs/heads/...`), if not detached.
    pub branch: Option<String>,
    /// Whether `HEAD` is detached.
    pub detached: bool,
    /// Whether this is the repository itself, bare.
    pub bare: bool,
    /// Whether git considers the entry stale (its directory is gone).
    pub prunable: bool,
}

impl Repo {
    /// Opens the repository containing `path`.
    ///
    /// `path` is canonicalized and trusted for git's `safe.directory` check: the user named it.
    pub fn open(path: &Path) -> Result<Repo, GitError> {
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
        let cmd = GitCommand::new(
            &context,
            [
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir",
                "--is-bare-repository",
            ],
        )
        .read_only();
        let out = cmd.run()?;
        let text = String::from_utf8(out.stdout).map_err(|_| {
            GitError::new(
                &cmd.display_args(),
                GitErrorKind::UnexpectedOutput("not UTF-8".to_owned()),
            )
        })?;
        let lines: Vec<&str> = text.lines().collect();
        let [common_dir, bare] = lines[..] else {
            return Err(GitError::new(
                &cmd.display_args(),
                GitErrorKind::UnexpectedOutput(format!("expected two lines, got {text:?}")),
            ));
        };
        let toplevel = if bare == "true" {
            None
        } else {
            let cmd = GitCommand::new(&context, ["rev-parse", "--show-toplevel"]).read_only();
            Some(PathBuf::from(one_line(
                &cmd.display_args(),
                &cmd.run()?.stdout,
            )?))
        };
        Ok(Repo {
            common_dir: PathBuf::from(common_dir),
            toplevel,
        })
    }

    /// Opens the repository containing `path` and resolves `rev` in it, with one git process
    /// where it can (a checkout's repository; else as [`Repo::open`] then
    /// [`Repo::resolve_commit`], whose errors it returns).
    pub fn open_at(path: &Path, rev: &str) -> Result<(Repo, CommitId), GitError> {
        // A revision that looks like an option takes the slow path (with `--end-of-options`,
        // which `rev-parse` would echo among these outputs).
        if !rev.starts_with('-')
            && let Ok(dir) = std::fs::canonicalize(path)
        {
            let cmd = GitCommand::new(
                &GitContext::Discover { dir },
                [
                    "rev-parse",
                    "--path-format=absolute",
                    "--git-common-dir",
                    "--is-bare-repository",
                    "--show-toplevel",
                ],
            )
            .arg(format!("{rev}^{{commit}}"))
            .read_only();
            if let Ok(out) = cmd.run()
                && let Ok(text) = String::from_utf8(out.stdout)
                && let [common_dir, "false", toplevel, commit] =
                    text.lines().collect::<Vec<_>>()[..]
                && let Some(commit) = CommitId::parse(commit)
            {
                let repo = Repo::from_parts(common_dir.into(), Some(toplevel.into()));
                return Ok((repo, commit));
            }
        }
        let repo = Repo::open(path)?;
        let commit = repo.resolve_commit(rev)?;
        Ok((repo, commit))
    }

    /// A repository from its common git directory (as stored in a workspace record).
    pub fn from_common_dir(common_dir: PathBuf) -> Repo {
        Repo {
            common_dir,
            toplevel: None,
        }
    }

    pub(crate) fn from_parts(common_dir: PathBuf, toplevel: Option<PathBuf>) -> Repo {
        Repo {
            common_dir,
            toplevel,
        }
    }

    /// The common git directory (`.git` of the main checkout, or the bare repository).
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// The top of the main checkout, when known and not bare.
    pub fn toplevel(&self) -> Option<&Path> {
        self.toplevel.as_deref()
    }

    fn context(&self) -> GitContext {
        GitContext::GitDir {
            git_dir: self.common_dir.clone(),
        }
    }

    /// Resolves a revision (branch, tag, commit id, `HEAD~2`, ...) to a commit.
    pub fn resolve_commit(&self, rev: &str) -> Result<CommitId, GitError> {
        let spec = format!("{rev}^{{commit}}");
        let cmd = GitCommand::new(
            &self.context(),
            ["rev-parse", "--verify", "--quiet", "--end-of-options"],
        )
        .arg(&spec)
        .read_only();
        let out = cmd.run().map_err(|e| self.unresolved(rev, e))?;
        let line = one_line(&cmd.display_args(), &out.stdout)?;
        CommitId::parse(&line)
            .ok_or_else(|| GitError::new(&cmd.display_args(), GitErrorKind::UnexpectedOutput(line)))
    }

    /// What `rev-parse --verify --quiet` failing for `rev` means: `--quiet` says nothing, so
    /// its exit 1 becomes "no commits yet" or "unknown revision"; other errors pass as they are.
    pub(crate) fn unresolved(&self, rev: &str, error: GitError) -> GitError {
        match error {
            GitError {
                kind: GitErrorKind::Failed { code: Some(1), .. },
                args,
            } => {
                let kind = if self.has_commits() {
                    GitErrorKind::UnknownRevision {
                        rev: rev.to_owned(),
                    }
                } else {
                    GitErrorKind::NoCommits
                };
                GitError { args, kind }
            }
            e => e,
        }
    }

    /// Whether the repository has any commit at all (any ref, or a HEAD that resolves).
    pub fn has_commits(&self) -> bool {
        GitCommand::new(
            &self.context(),
            ["for-each-ref", "--count=1", "--format=%(objectname)"],
        )
        .read_only()
        .run()
        .is_ok_and(|out| !out.stdout.is_empty())
            || GitCommand::new(
                &self.context(),
                ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
            )
            .read_only()
            .run()
            .is_ok()
    }

    /// The blob id of the regular file (or symlink) at `path` in `commit`, `None` when there is
    /// no such file. Two commits whose file has the same id have the same bytes there.
    pub fn blob_id_at(&self, commit: &CommitId, path: &str) -> Result<Option<String>, GitError> {
        let spec = format!("{}:{path}", commit.as_str());
        let cmd = GitCommand::new(
            &self.context(),
            ["rev-parse", "--verify", "--quiet", "--end-of-options"],
        )
        .arg(&spec)
        .read_only();
        let id = match cmd.run() {
            Ok(out) => one_line(&cmd.display_args(), &out.stdout)?,
            Err(GitError {
                kind: GitErrorKind::Failed { code: Some(1), .. },
                ..
            }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let kind = GitCommand::new(&self.context(), ["cat-file", "-t", id.as_str()]).read_only();
        let out = kind.run()?;
        Ok((one_line(&kind.display_args(), &out.stdout)? == "blob").then_some(id))
    }

    /// The bytes of blob `id` (as given by [`Repo::blob_id_at`]).
    pub fn read_blob(&self, id: &str) -> Result<Vec<u8>, GitError> {
        let cmd = GitCommand::new(&self.context(), ["cat-file", "blob", id]).read_only();
        Ok(cmd.run()?.stdout)
    }

    /// What differs between two commits (renames found), without any work tree.
    pub fn diff_commits(
        &self,
        from: &CommitId,
        to: &CommitId,
    ) -> Result<Vec<crate::ChangedFile>, GitError> {
        let cmd = GitCommand::new(
            &self.context(),
            [
                "diff",
                "--raw",
                "-z",
                "--no-abbrev",
                "--no-ext-diff",
                "--no-textconv",
                "--find-renames",
                from.as_str(),
                to.as_str(),
                "--",
            ],
        )
        .read_only();
        let out = cmd.run()?;
        crate::changes::parse_raw(&out.stdout).map_err(|detail| {
            GitError::new(&cmd.display_args(), GitErrorKind::UnexpectedOutput(detail))
        })
    }

    /// The commit of the first of `refs` (full names, in order of preference) that exists,
    /// from one `git for-each-ref` (a symbolic ref such as `refs/remotes/origin/HEAD` names its
    /// target's commit); `None` when none does.
    pub fn first_ref(&self, refs: &[&str]) -> Result<Option<CommitId>, GitError> {
        let cmd = GitCommand::new(
            &self.context(),
            [
                "for-each-ref",
                "--format=%(refname) %(objectname) %(objecttype)",
            ],
        )
        .args(refs)
        .read_only();
        let out = cmd.run()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let found: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| {
                let mut parts = l.split(' ');
                let (name, id, kind) = (parts.next()?, parts.next()?, parts.next()?);
                (kind == "commit").then_some((name, id))
            })
            .collect();
        Ok(refs
            .iter()
            .find_map(|wanted| found.iter().find(|(name, _)| name == wanted))
            .and_then(|(_, id)| CommitId::parse(id)))
    }

    /// The best common ancestor of two commits, `None` when they share no history.
    pub fn merge_base(&self, a: &CommitId, b: &CommitId) -> Result<Option<CommitId>, GitError> {
        let cmd =
            GitCommand::new(&self.context(), ["merge-base", a.as_str(), b.as_str()]).read_only();
        match cmd.run() {
            Ok(out) => {
                let line = one_line(&cmd.display_args(), &out.stdout)?;
                CommitId::parse(&line).map(Some).ok_or_else(|| {
                    GitError::new(&cmd.display_args(), GitErrorKind::UnexpectedOutput(line))
                })
            }
            Err(GitError {
                kind: GitErrorKind::Failed { code: Some(1), .. },
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes the files of `commit` into the empty directory `tree` and their index (with the
    /// stat data of the files just written) to `index`, without any worktree, branch or `HEAD`
    /// of the repository's changing: the read-only base of overlay workspaces. Every driver
    /// configured in the repository is blanked (no filter runs), and the index is refreshed
    /// once the clock has moved past the files' times, so no entry is "racily clean" (which
    /// would make every later `git status` re-read those files).
    pub fn checkout_tree(
        &self,
        commit: &CommitId,
        tree: &Path,
        index: &Path,
    ) -> Result<(), GitError> {
        let context = GitContext::WorkTree {
            git_dir: self.common_dir.clone(),
            work_tree: tree.to_owned(),
        };
        GitCommand::new(&context, ["read-tree", "--reset", "-u"])
            .arg(commit.as_str())
            .index_file(index)
            .neutralize_drivers()?
            .run()?;
        let newest = newest_mtime(tree);
        while std::time::SystemTime::now() <= newest {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // The coarse clock that stamps files may lag the fine one a tick.
        std::thread::sleep(std::time::Duration::from_millis(10));
        GitCommand::new(&context, ["update-index", "-q", "--refresh"])
            .index_file(index)
            .neutralize_drivers()?
            .run()
            .map(drop)
    }

    /// Adds a detached worktree at `path` (which must not exist) with the content of `commit`:
    /// [`Repo::add_worktree_unpopulated`] then [`Worktree::populate`].
    pub fn add_worktree(&self, path: &Path, commit: &CommitId) -> Result<Worktree, GitError> {
        let worktree = self.add_worktree_unpopulated(path, commit)?;
        worktree.populate(commit)?;
        Ok(worktree)
    }

    /// Registers a detached worktree at `path` with `HEAD` at `commit`, without writing its
    /// files: this is the only step that changes the repository's shared worktree metadata
    /// (callers serialize it per repository; populating can then run in parallel).
    ///
    /// No branch is created or checked out, so git never refuses with "already checked out"
    /// and the user's branches are untouched.
    pub fn add_worktree_unpopulated(
        &self,
        path: &Path,
        commit: &CommitId,
    ) -> Result<Worktree, GitError> {
        GitCommand::new(
            &self.context(),
            ["worktree", "add", "--detach", "--no-checkout", "--quiet"],
        )
        .arg(path)
        .arg(commit.as_str())
        .run()?;
        Worktree::from_dot_git(self.common_dir.clone(), path)
    }

    /// Removes the worktree at `path`, with its untracked and modified files.
    ///
    /// When git cannot (the directory is gone, or its `.git` file was rewritten), the
    /// directory is deleted without following symlinks and its metadata entry forgotten
    /// ([`Repo::forget_worktree`]; never a `git worktree prune`, which would also drop the
    /// user's own worktrees that merely look gone, e.g. on an unmounted disk).
    pub fn remove_worktree(&self, path: &Path) -> Result<(), GitError> {
        let absolute = std::path::absolute(path);
        let path = absolute.as_deref().unwrap_or(path);
        let cmd = GitCommand::new(
            &self.context(),
            ["worktree", "remove", "--force", "--force"],
        )
        .arg(path);
        if cmd.run().is_ok() {
            return Ok(());
        }
        match std::fs::remove_dir_all(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(GitError::new(
                    &cmd.display_args(),
                    GitErrorKind::Io {
                        path: path.to_owned(),
                        source,
                    },
                ));
            }
        }
        self.forget_worktree(path).map(drop)
    }

    /// Forgets the worktree registered for `path`, and only that one: the entry under
    /// `<common-dir>/worktrees/` whose `gitdir` file names `path/.git`. Unlike
    /// `git worktree prune`, the user's own worktrees are never touched. Returns whether an
    /// entry was removed.
    pub fn forget_worktree(&self, path: &Path) -> Result<bool, GitError> {
        let wanted = dot_git_candidates(path);
        let entries_dir = self.common_dir.join("worktrees");
        let io_error = |path: &Path, source| {
            GitError::new(
                &["forget-worktree".to_owned()],
                GitErrorKind::Io {
                    path: path.to_owned(),
                    source,
                },
            )
        };
        let entries = match std::fs::read_dir(&entries_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(&entries_dir, e)),
        };
        let mut removed = false;
        for entry in entries.flatten() {
            let entry_path = entry.path();
            // Only real directories (a symlink planted here is not followed).
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Ok(gitdir) = std::fs::read_to_string(entry_path.join("gitdir")) else {
                continue;
            };
            if wanted.iter().any(|w| Path::new(gitdir.trim_end()) == w) {
                std::fs::remove_dir_all(&entry_path).map_err(|e| io_error(&entry_path, e))?;
                removed = true;
            }
        }
        Ok(removed)
    }

    /// Lists the worktrees of the repository, its main checkout first.
    pub fn list_worktrees(&self) -> Result<Vec<WorktreeEntry>, GitError> {
        let cmd =
            GitCommand::new(&self.context(), ["worktree", "list", "--porcelain", "-z"]).read_only();
        let out = cmd.run()?;
        parse_worktree_list(&out.stdout).map_err(|detail| {
            GitError::new(&cmd.display_args(), GitErrorKind::UnexpectedOutput(detail))
        })
    }
}

/// The latest modification time under `dir` (symlinks not followed).
fn newest_mtime(dir: &Path) -> std::time::SystemTime {
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if let Ok(t) = meta.modified() {
            newest = newest.max(t);
        }
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    newest
}

/// The forms in which git may have recorded `path/.git`: absolute as given, and with the
/// symlinks of its nearest existing ancestor resolved (git records real paths).
fn dot_git_candidates(path: &Path) -> Vec<std::path::PathBuf> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut candidates = vec![absolute.join(".git")];
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            break;
        };
        rest.push(name.to_owned());
        existing = parent;
    }
    if let Ok(mut real) = existing.canonicalize() {
        real.extend(rest.iter().rev());
        candidates.push(real.join(".git"));
    }
    candidates
}

fn parse_worktree_list(out: &[u8]) -> Result<Vec<WorktreeEntry>, String> {
    use std::os::unix::ffi::OsStrExt;
    let mut entries = Vec::new();
    let mut current: Option<WorktreeEntry> = None;
    // Records are NUL-terminated lines; an empty record ends an entry.
    for field in out.split(|&b| b == 0) {
        if field.is_empty() {
            entries.extend(current.take());
            continue;
        }
        let (label, value) = match field.iter().position(|&b| b == b' ') {
            Some(at) => (&field[..at], Some(&field[at + 1..])),
            None => (field, None),
        };
        if label == b"worktree" {
            entries.extend(current.take());
            let path = value.ok_or("worktree without a path")?;
            current = Some(WorktreeEntry {
                path: PathBuf::from(std::ffi::OsStr::from_bytes(path)),
                head: None,
                branch: None,
                detached: false,
                bare: false,
                prunable: false,
            });
            continue;
        }
        let entry = current
            .as_mut()
            .ok_or("attribute before the first worktree")?;
        let text = value.map(|v| String::from_utf8_lossy(v).into_owned());
        match label {
            b"HEAD" => entry.head = text.as_deref().and_then(CommitId::parse),
            b"branch" => entry.branch = text,
            b"detached" => entry.detached = true,
            b"bare" => entry.bare = true,
            b"prunable" => entry.prunable = true,
            _ => {}
        }
    }
    entries.extend(current);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_list_porcelain_z() {
        let head = "a".repeat(40);
        let out = format!(
            "worktree /r\0HEAD {head}\0branch refs/heads/main\0\0worktree /w x\0HEAD {head}\0detached\0prunable gone\0\0"
        );
        let entries = parse_worktree_list(out.as_bytes()).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].branch.as_deref(), Some("refs/heads/main"));
        assert_eq!(entries[1].path, PathBuf::from("/w x"));
        assert!(entries[1].detached && entries[1].prunable);
        assert!(parse_worktree_list(b"HEAD x\0").is_err());
    }

    #[test]
    fn commit_ids_are_validated() {
        assert!(CommitId::parse(&"A".repeat(40)).is_some());
        assert!(CommitId::parse("abc").is_none());
        assert!(CommitId::parse(&"g".repeat(40)).is_none());
    }
}

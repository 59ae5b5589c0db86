//! `repo.clone` and `repo.applyPatch` jobs: server-side workspaces that later jobs use, made
//! with the hardened git (no hooks, no filters, no global config).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cordon_git::{GitCommand, GitContext, GitError, GitErrorKind, GitOutput, RunBounds};
use sha2::{Digest, Sha256};

use super::{Attempt, Outcome};
use crate::api::{ApplyPatchInputs, CloneInputs};

/// The branch a clone's workspace has checked out: sessions start from it and pull into it,
/// applied patches are committed on it.
pub const WORKSPACE_BRANCH: &str = "work";

/// A transfer slower than `http.lowSpeedLimit` bytes a second for this long is abandoned by
/// git itself (a server that stalls), whatever is left of the job's timeout.
const LOW_SPEED_TIME: &str = "60";

/// The end of the attempt's time: its start plus the job's timeout.
pub(crate) fn deadline_of(attempt: &Attempt<'_>, started: Instant) -> Instant {
    started + Duration::from_millis(attempt.job.timeout_ms)
}

/// The outcome of a clone that failed: past the job's deadline it is a `timeout`, stopped
/// by a cancel `cancelled`, anything else `setup`.
fn clone_failed(attempt: &Attempt<'_>, error: &GitError) -> Outcome {
    match error.kind {
        GitErrorKind::TimedOut => Outcome::failed(
            "timeout",
            format!(
                "the clone ran past the job's timeout of {} ms; git was killed",
                attempt.job.timeout_ms
            ),
        ),
        GitErrorKind::Stopped => Outcome::failed("cancelled", "the job was cancelled"),
        _ => Outcome::failed("setup", error.to_string()),
    }
}

/// A `repo.clone` job: a workspace under the server's data directory, kept for later jobs.
pub(crate) fn clone_job(attempt: &Attempt<'_>) -> Outcome {
    let deadline = deadline_of(attempt, Instant::now());
    let inputs: CloneInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let parent = attempt.service.data_dir.join("workspaces");
    let dest = parent.join(attempt.job.id.as_str());
    if let Err(error) = std::fs::create_dir_all(&parent) {
        return Outcome::failed(
            "infra",
            format!("cannot create {}: {error}", parent.display()),
        );
    }
    // Cloned under a name of this attempt's own, then moved into place: an earlier attempt
    // still running somewhere (its lease lost) never removes or mixes into this one's.
    let staged = parent.join(format!(".{}-{}", attempt.job.id, attempt.job.attempt));
    let _ = std::fs::remove_dir_all(&staged);
    let stop = || attempt.cancel.is_cancelled();
    let bounds = RunBounds {
        deadline: Some(deadline),
        stop: Some(&stop),
    };
    let url = match source(attempt, &inputs.url) {
        Ok(url) => url,
        Err(o) => return o,
    };
    let placed = clone(
        &parent,
        &staged,
        &url,
        inputs.rev.as_deref(),
        inputs.depth,
        bounds,
    )
    .map_err(|e| clone_failed(attempt, &e))
    .and_then(|commit| {
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&staged, &dest)
            .map(|()| commit)
            .map_err(|e| {
                Outcome::failed(
                    "setup",
                    format!("cannot move the clone to {}: {e}", dest.display()),
                )
            })
    });
    match placed {
        Ok(commit) => Outcome::succeeded(serde_json::json!({
            "workspace": dest.display().to_string(),
            "commit": commit,
            "branch": WORKSPACE_BRANCH,
        })),
        Err(outcome) => {
            let _ = std::fs::remove_dir_all(&staged);
            outcome
        }
    }
}

/// What a clone reads from.
enum Source {
    /// A local repository's git directory, checked again now (the file system may have
    /// changed since the submission was checked): every symlink resolved, everything git
    /// reads of it inside the directory named ([`crate::sources::check_git_dir`]).
    GitDir(PathBuf),
    /// A remote URL, as it is.
    Remote(String),
}

/// The source `url` names, checked.
fn source(attempt: &Attempt<'_>, url: &str) -> Result<Source, Outcome> {
    match crate::sources::local_path(url) {
        Some(path) => crate::sources::check_local(&path, &attempt.service.state_dirs())
            .and_then(|real| crate::sources::check_git_dir(&real))
            .map(Source::GitDir)
            .map_err(|reason| Outcome::failed("policy", reason)),
        None => Ok(Source::Remote(url.to_owned())),
    }
}

/// A clone of `url` at `rev` for one job alone, under the attempt's scratch directory; git is
/// killed at `deadline` or on the attempt's cancel.
pub(crate) fn clone_for_job(
    attempt: &Attempt<'_>,
    deadline: Instant,
    url: &str,
    rev: Option<&str>,
) -> Result<PathBuf, Outcome> {
    let scratch = attempt.scratch();
    let scratch = scratch.as_path();
    let dest = scratch.join("repo");
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(scratch).map_err(|error| {
        Outcome::failed(
            "infra",
            format!("cannot create {}: {error}", scratch.display()),
        )
    })?;
    let url = source(attempt, url)?;
    let stop = || attempt.cancel.is_cancelled();
    let bounds = RunBounds {
        deadline: Some(deadline),
        stop: Some(&stop),
    };
    clone(scratch, &dest, &url, rev, None, bounds)
        .map(|_| dest)
        .map_err(|e| clone_failed(attempt, &e))
}

/// Clones `source` into `dest` (which must not exist) and checks `rev` out on the workspace
/// branch; returns the commit. Each git command is killed, with every process it started,
/// when `bounds` say so; a stalled transfer ends by git's low-speed limit.
fn clone(
    parent: &Path,
    dest: &Path,
    source: &Source,
    rev: Option<&str>,
    depth: Option<u32>,
    bounds: RunBounds<'_>,
) -> Result<String, GitError> {
    let mut args = vec!["clone".to_owned(), "--quiet".into(), "--no-checkout".into()];
    if let Some(depth) = depth {
        args.push(format!("--depth={depth}"));
    }
    let url = match source {
        // A local source's objects come as a pack from `upload-pack` in its git directory
        // alone: nothing is hard-linked or copied file by file (no alternates carried over),
        // and `--strict` makes upload-pack read that directory, neither `DIR/.git` nor a
        // `.git` file nor `DIR.git` beside it.
        Source::GitDir(git_dir) => {
            args.push("--no-local".into());
            args.push("--upload-pack=git-upload-pack --strict".into());
            git_dir.display().to_string()
        }
        Source::Remote(url) => url.clone(),
    };
    args.push("--".into());
    args.push(url);
    args.push(dest.display().to_string());
    GitCommand::new(
        &GitContext::Discover {
            dir: parent.to_owned(),
        },
        &args,
    )
    .config(&[
        ("http.lowSpeedLimit".into(), "1".into()),
        ("http.lowSpeedTime".into(), LOW_SPEED_TIME.into()),
    ])
    .run_bounded(bounds)?;
    let repo = cordon_git::Repo::open(dest)?;
    // A branch of the source is a remote-tracking branch of the clone.
    let rev = rev.unwrap_or("HEAD");
    let commit = match repo.resolve_commit(rev) {
        Ok(commit) => commit,
        Err(error) => repo
            .resolve_commit(&format!("refs/remotes/origin/{rev}"))
            .map_err(|_| error)?,
    };
    GitCommand::new(
        &GitContext::Discover {
            dir: dest.to_owned(),
        },
        [
            "checkout",
            "--quiet",
            "-B",
            WORKSPACE_BRANCH,
            commit.as_str(),
        ],
    )
    .run_bounded(bounds)?;
    Ok(commit.as_str().to_owned())
}

/// How often a job waiting for a workspace another job holds looks again.
const LOCK_RETRY: Duration = Duration::from_millis(50);

/// The right to change a service workspace: an exclusive `flock` on a file beside its tree
/// (outside it, so no program in it can touch the file), released when dropped or when the
/// process dies. The jobs that write a workspace (`repo.applyPatch`, `run`) hold it for
/// their whole work, so that no two of them mix their changes.
#[derive(Debug)]
pub(crate) struct WorkspaceLock {
    _file: std::fs::File,
}

/// Waits for the workspace `root`'s lock until `deadline` (a `timeout`) or the attempt's
/// cancel (`cancelled`).
pub(crate) fn lock_workspace(
    attempt: &Attempt<'_>,
    root: &Path,
    deadline: Instant,
) -> Result<WorkspaceLock, Outcome> {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = root.with_file_name(format!(".{name}.lock"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Outcome::failed("infra", format!("cannot open {}: {e}", path.display())))?;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(WorkspaceLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Outcome::failed(
                    "infra",
                    format!("cannot lock {}: {e}", path.display()),
                ));
            }
        }
        if attempt.cancel.is_cancelled() {
            return Err(Outcome::failed("cancelled", "the job was cancelled"));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Outcome::failed(
                "timeout",
                format!(
                    "another job used the workspace {} for the whole of this job's timeout of {} ms",
                    root.display(),
                    attempt.job.timeout_ms
                ),
            ));
        }
        std::thread::sleep(LOCK_RETRY.min(deadline - now));
    }
}

/// A `repo.applyPatch` job.
pub(crate) fn apply_patch_job(attempt: &Attempt<'_>) -> Outcome {
    let deadline = deadline_of(attempt, Instant::now());
    let inputs: ApplyPatchInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let root = match attempt.workspace_of(&inputs.workspace.from_job) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let _lock = match lock_workspace(attempt, &root, deadline) {
        Ok(lock) => lock,
        Err(o) => return o,
    };
    match apply_and_commit(&root, &inputs, attempt) {
        Ok(result) => Outcome::succeeded(result),
        Err(outcome) => outcome,
    }
}

/// The paths as `--pathspec-from-file=- --pathspec-file-nul` reads them.
fn nul_list(paths: &[Vec<u8>]) -> Vec<u8> {
    let mut list = Vec::new();
    for path in paths {
        list.extend_from_slice(path);
        list.push(0);
    }
    list
}

/// Applies the patch (all or nothing, paths confined) to a clean tree, checks the expected
/// files, and commits the patch's paths alone, so that a later job at `HEAD` sees the change.
/// Whatever fails after the patch was applied puts the patch's paths (and only those) back
/// as `HEAD` has them.
fn apply_and_commit(
    root: &Path,
    inputs: &ApplyPatchInputs,
    attempt: &Attempt<'_>,
) -> Result<serde_json::Value, Outcome> {
    let git_dir = root.join(".git");
    let worktree =
        cordon_git::Worktree::from_parts(git_dir.clone(), git_dir.clone(), root.to_owned());
    let git = WorkspaceGit::new(root);
    git.require_clean()?;
    let changed = worktree.apply_patch(inputs.patch.as_bytes()).map_err(|e| {
        let reason = super::failure::chain(&e, None);
        Outcome::failed("usage", format!("the patch was refused: {reason}"))
    })?;
    let mut applied: Vec<String> = changed.iter().map(|c| c.path.to_string()).collect();
    applied.sort();
    let paths = touched_paths(&changed);
    if paths.is_empty() {
        return Err(Outcome::failed("usage", "the patch changes no file"));
    }
    let list = nul_list(&paths);
    let committed = (|| {
        if let Some(expected) = &inputs.expect_files {
            let mut expected = expected.clone();
            expected.sort();
            if expected != applied {
                return Err(Outcome::failed(
                    "usage",
                    format!("the patch changes {applied:?}, not the expected {expected:?}"),
                ));
            }
        }
        git.commit_paths(&list, inputs, attempt)
    })();
    let (numstat, patch_id) = match committed {
        Ok(done) => done,
        Err(outcome) => {
            if let Err(error) = git.restore(&list) {
                eprintln!(
                    "cordon serve: job {}: cannot put the patch's paths back in {}: {error:?}",
                    attempt.job.id,
                    root.display()
                );
            }
            return Err(outcome);
        }
    };
    let (insertions, deletions) = numstat_totals(&numstat.stdout);
    let commit = cordon_git::Repo::open(root)
        .and_then(|r| r.resolve_commit("HEAD"))
        .map_err(|e| Outcome::failed("setup", e.to_string()))?;
    Ok(serde_json::json!({
        "workspace": root.display().to_string(),
        "commit": commit.as_str(),
        "applied_files": applied,
        "diff": {"files": changed.len(), "insertions": insertions, "deletions": deletions},
        "patch_id": patch_id,
    }))
}

/// Every path the patch touched (a rename's old path too), sorted, for staging and
/// restoring.
fn touched_paths(changed: &[cordon_git::ChangedFile]) -> Vec<Vec<u8>> {
    let mut paths: Vec<Vec<u8>> = changed
        .iter()
        .flat_map(|c| std::iter::once(&c.path).chain(c.old_path.as_ref()))
        .map(|p| p.as_bytes().to_vec())
        .filter(|p| !p.is_empty())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The lines added and removed in all, from `git diff --numstat -z`.
fn numstat_totals(numstat: &[u8]) -> (u64, u64) {
    let (mut insertions, mut deletions) = (0u64, 0u64);
    for entry in numstat.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(entry);
        let mut fields = text.split('\t');
        insertions += fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        deletions += fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    }
    (insertions, deletions)
}

/// Git on a server-side workspace, for applying a patch: the git directory and the work tree
/// named explicitly (a `core.worktree` or `.git` file cannot point git elsewhere), every
/// driver that could run a program blanked, pathspecs literal.
struct WorkspaceGit {
    context: GitContext,
}

impl WorkspaceGit {
    fn new(root: &Path) -> WorkspaceGit {
        WorkspaceGit {
            context: GitContext::WorkTree {
                git_dir: root.join(".git"),
                work_tree: root.to_owned(),
            },
        }
    }

    fn command(&self, args: &[&str]) -> Result<GitCommand, Outcome> {
        GitCommand::new(&self.context, args)
            .env("GIT_LITERAL_PATHSPECS", "1")
            .neutralize_drivers()
            .map_err(|e| Outcome::failed("setup", e.to_string()))
    }

    /// Refuses changes no job committed (a `run` job's files), so that the commit holds the
    /// patch alone and a failed apply never has to tell its changes from theirs.
    fn require_clean(&self) -> Result<(), Outcome> {
        let status = self
            .command(&["status", "--porcelain", "-z", "--untracked-files=all"])?
            .run()
            .map_err(|e| Outcome::failed("setup", e.to_string()))?;
        if status.stdout.is_empty() {
            return Ok(());
        }
        let entries: Vec<String> = status
            .stdout
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect();
        let shown = entries.iter().take(10).cloned().collect::<Vec<_>>();
        let more = entries.len().saturating_sub(shown.len());
        Err(Outcome::failed(
            "usage",
            format!(
                "the workspace has changes no job committed ({shown:?}{}); a patch is applied \
                 only to a clean tree, so that its commit holds the patch alone. Nothing was \
                 applied. A `run` job in the workspace can put the tree back \
                 (`git checkout-index --all --force && git clean -fdq`)",
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ),
        ))
    }

    /// Stages the paths of `list` (NUL-separated), named one by one, so even a path the
    /// repository ignores is staged.
    fn stage(&self, list: &[u8]) -> Result<GitOutput, Outcome> {
        self.command(&[
            "add",
            "--all",
            "--force",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ])?
        .run_with_input(list)
        .map_err(|e| Outcome::failed("setup", e.to_string()))
    }

    /// Puts the paths of `list` back as `HEAD` has them, in the index and the tree.
    fn restore(&self, list: &[u8]) -> Result<GitOutput, Outcome> {
        // Staged first, so that a file the patch added is known to git and removed.
        let _ = self.stage(list);
        self.command(&[
            "restore",
            "--quiet",
            "--source=HEAD",
            "--staged",
            "--worktree",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ])
        .and_then(|c| {
            c.run_with_input(list)
                .map_err(|e| Outcome::failed("setup", e.to_string()))
        })
    }

    /// Stages and commits the patch's paths (`list`) alone, whatever else the index might
    /// hold; returns the staged diff's `--numstat` and the patch's id.
    fn commit_paths(
        &self,
        list: &[u8],
        inputs: &ApplyPatchInputs,
        attempt: &Attempt<'_>,
    ) -> Result<(GitOutput, String), Outcome> {
        self.stage(list)?;
        let numstat = self
            .command(&["diff", "--cached", "--numstat", "-z"])?
            .run()
            .map_err(|e| Outcome::failed("setup", e.to_string()))?;
        let patch_id: String = Sha256::digest(inputs.patch.as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        let message = format!("cordon job {}: patch {patch_id}", attempt.job.id);
        // The patch's paths only, whatever else the index might hold.
        self.command(&[
            "commit",
            "--quiet",
            "--no-verify",
            "-m",
            &message,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ])?
        .config(&[
            ("user.name".into(), "cordon".into()),
            ("user.email".into(), "cordon@localhost".into()),
        ])
        .run_with_input(list)
        .map_err(|e| Outcome::failed("setup", e.to_string()))?;
        Ok((numstat, patch_id))
    }
}

//! `repo.clone` and `repo.applyPatch` jobs: server-side workspaces that later jobs use, made
//! with the hardened git (no hooks, no filters, no global config).

use std::path::{Path, PathBuf};

use cordon_git::{GitCommand, GitContext};
use sha2::{Digest, Sha256};

use super::{Attempt, Outcome};
use crate::api::{ApplyPatchInputs, CloneInputs};

/// The branch a clone's workspace has checked out: sessions start from it and pull into it,
/// applied patches are committed on it.
pub const WORKSPACE_BRANCH: &str = "work";

/// A `repo.clone` job: a workspace under the server's data directory, kept for later jobs.
pub(crate) fn clone_job(attempt: &Attempt<'_>) -> Outcome {
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
    let placed = clone(
        &parent,
        &staged,
        &inputs.url,
        inputs.rev.as_deref(),
        inputs.depth,
    )
    .map_err(|e| e.to_string())
    .and_then(|commit| {
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&staged, &dest)
            .map(|()| commit)
            .map_err(|e| format!("cannot move the clone to {}: {e}", dest.display()))
    });
    match placed {
        Ok(commit) => Outcome::succeeded(serde_json::json!({
            "workspace": dest.display().to_string(),
            "commit": commit,
            "branch": WORKSPACE_BRANCH,
        })),
        Err(error) => {
            let _ = std::fs::remove_dir_all(&staged);
            Outcome::failed("setup", error)
        }
    }
}

/// A clone of `url` at `rev` for one job alone, under the attempt's scratch directory.
pub(crate) fn clone_for_job(
    scratch: &Path,
    url: &str,
    rev: Option<&str>,
) -> Result<PathBuf, Outcome> {
    let dest = scratch.join("repo");
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(scratch).map_err(|error| {
        Outcome::failed(
            "infra",
            format!("cannot create {}: {error}", scratch.display()),
        )
    })?;
    clone(scratch, &dest, url, rev, None)
        .map(|_| dest)
        .map_err(|e| Outcome::failed("setup", e.to_string()))
}

/// Clones `url` into `dest` (which must not exist) and checks `rev` out on the workspace
/// branch; returns the commit.
fn clone(
    parent: &Path,
    dest: &Path,
    url: &str,
    rev: Option<&str>,
    depth: Option<u32>,
) -> Result<String, cordon_git::GitError> {
    let mut args = vec!["clone".to_owned(), "--quiet".into(), "--no-checkout".into()];
    if let Some(depth) = depth {
        args.push(format!("--depth={depth}"));
    }
    args.push("--".into());
    args.push(url.to_owned());
    args.push(dest.display().to_string());
    GitCommand::new(
        &GitContext::Discover {
            dir: parent.to_owned(),
        },
        &args,
    )
    .run()?;
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
    .run()?;
    Ok(commit.as_str().to_owned())
}

/// A `repo.applyPatch` job.
pub(crate) fn apply_patch_job(attempt: &Attempt<'_>) -> Outcome {
    let inputs: ApplyPatchInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let root = match attempt.workspace_of(&inputs.workspace.from_job) {
        Ok(p) => p,
        Err(o) => return o,
    };
    match apply_and_commit(&root, &inputs, attempt) {
        Ok(result) => Outcome::succeeded(result),
        Err(outcome) => outcome,
    }
}

/// Applies the patch (all or nothing, paths confined), checks the expected files, and
/// commits, so that a later job at `HEAD` sees the change.
fn apply_and_commit(
    root: &Path,
    inputs: &ApplyPatchInputs,
    attempt: &Attempt<'_>,
) -> Result<serde_json::Value, Outcome> {
    let git_dir = root.join(".git");
    let worktree =
        cordon_git::Worktree::from_parts(git_dir.clone(), git_dir.clone(), root.to_owned());
    // The git directory and the work tree named explicitly (a `core.worktree` or `.git` file
    // cannot point git elsewhere), and every driver that could run a program blanked.
    let context = GitContext::WorkTree {
        git_dir,
        work_tree: root.to_owned(),
    };
    let git = |args: &[&str]| {
        GitCommand::new(&context, args)
            .neutralize_drivers()
            .and_then(|c| c.run())
            .map_err(|e| Outcome::failed("setup", e.to_string()))
    };
    let changed = worktree
        .apply_patch(inputs.patch.as_bytes())
        .map_err(|e| Outcome::failed("usage", format!("the patch was refused: {e}")))?;
    let mut applied: Vec<String> = changed.iter().map(|c| c.path.to_string()).collect();
    applied.sort();
    if let Some(expected) = &inputs.expect_files {
        let mut expected = expected.clone();
        expected.sort();
        if expected != applied {
            // Back to the commit the patch was applied on: nothing of it stays.
            git(&["reset", "--quiet", "--hard", "HEAD"])?;
            git(&["clean", "--quiet", "-fd"])?;
            return Err(Outcome::failed(
                "usage",
                format!("the patch changes {applied:?}, not the expected {expected:?}"),
            ));
        }
    }
    git(&["add", "--all"])?;
    let numstat = git(&["diff", "--cached", "--numstat", "-z"])?;
    let (mut insertions, mut deletions) = (0u64, 0u64);
    for entry in numstat.stdout.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(entry);
        let mut fields = text.split('\t');
        insertions += fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        deletions += fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    }
    let patch_id: String = Sha256::digest(inputs.patch.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let message = format!("cordon job {}: patch {patch_id}", attempt.job.id);
    GitCommand::new(
        &context,
        ["commit", "--quiet", "--no-verify", "-m", &message],
    )
    .config(&[
        ("user.name".into(), "cordon".into()),
        ("user.email".into(), "cordon@localhost".into()),
    ])
    .neutralize_drivers()
    .and_then(|c| c.run())
    .map_err(|e| Outcome::failed("setup", e.to_string()))?;
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

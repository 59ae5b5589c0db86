//! Garbage collection: [`Workspaces::gc`] and [`Workspaces::reconcile_on_start`].
//!
//! What is collected, each under the workspace's lock (a workspace whose lock is held — being
//! created, changed or removed right now — is skipped, never waited for):
//!
//! | record state / condition                               | reason                |
//! |--------------------------------------------------------|-----------------------|
//! | `creating`, creator gone (pid + start time)            | `creation_abandoned`  |
//! | `removing` (lock free: the remover died)               | `removal_interrupted` |
//! | `ready`, directory gone                                | `missing_directory`   |
//! | `ready`, transient, owner gone                         | `owner_gone`          |
//! | `ready`, unused longer than its own `idle_timeout_s`   | `idle`                |
//! | `ready`, idle longer than `older_than`, see below      | `idle`                |
//! | directory without a record (full gc only)              | `orphan_directory`    |
//! | record that is not JSON, older than a minute (full gc) | `unreadable_record`   |
//!
//! `older_than` applies to persistent workspaces too (it is how old persistent ones are
//! cleaned up: "idle" is the modification time of the record, refreshed by create, apply and
//! diff), but never to a transient workspace whose owner still runs. The removed workspaces'
//! own worktree entries are forgotten at the end (never a `git worktree prune`: the user's
//! own worktrees stay registered, even when they look gone). Stray lock and temporary files older than
//! a minute are deleted (younger ones may belong to a create in progress). A record that is
//! JSON but not `cordon.workspace/v1` (a newer cordon's) is reported as a failure and left.
//!
//! A full gc then removes the base trees (`bases/<commit>`) that no live holder holds: a hold
//! whose holder's record is gone is stale and dropped; a base being created or taken hold of
//! right now (its lock is held) is left for the next gc.
//!
//! Each removal is remembered (`workspaces/.ended/<id>.json`: removed, expired, owner gone),
//! so an error about the id says what became of it; `older_than` forgets older ends.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cordon_git::Repo;

use crate::ended::WorkspaceEndReason;
use crate::error::WorkspaceError;
use crate::id::WorkspaceId;
use crate::record::{self, Stored, WorkspaceRecord, WorkspaceState};
use crate::reports::{GcFailure, GcReason, GcRemoval, GcReport, GcReportTag};
use crate::state::Liveness;
use crate::state::{Create, FileLock};
use crate::workspaces::Workspaces;

/// Lock and temporary files younger than this are left alone.
const STRAY_FILE_GRACE: Duration = Duration::from_secs(60);

enum Outcome {
    Kept,
    /// Removed; with the repository and tree whose metadata entry must be forgotten.
    Removed(GcRemoval, Option<(PathBuf, PathBuf)>),
    Nothing,
}

impl Workspaces {
    /// Collects what is no longer needed (see the module documentation for the rules).
    pub fn gc(&self, older_than: Option<Duration>) -> Result<GcReport, WorkspaceError> {
        let mut ids = BTreeSet::new();
        let mut stray = Vec::new();
        for name in self.entry_names()? {
            let stem = name
                .strip_suffix(".json")
                .or_else(|| name.strip_suffix(".lock"))
                .unwrap_or(&name);
            match stem.parse::<WorkspaceId>() {
                Ok(id) => {
                    ids.insert(id);
                }
                Err(_) if name.starts_with('.') && name.contains(".json.tmp-") => stray.push(name),
                Err(_) => {}
            }
        }
        for name in stray {
            remove_if_old(&self.layout().workspaces().join(name));
        }
        let mut report = self.collect(ids, older_than, true);
        // After the workspaces and the caches: the ones just removed no longer hold their bases.
        (report.caches_removed, report.cache_failures) = self.caches().gc(older_than);
        (report.bases_removed, report.base_failures) = self.gc_bases();
        (report.layers_removed, report.layer_failures) = self.gc_layers();
        if let Some(age) = older_than {
            crate::ended::forget_older_than(&self.layout().ended(), age);
        }
        Ok(report)
    }

    /// A cheap gc for each start of cordon: reads only the records, and does nothing more
    /// unless a transient workspace's owner is gone or a creation or removal was interrupted.
    pub fn reconcile_on_start(&self) -> Result<GcReport, WorkspaceError> {
        Ok(self.collect(self.record_ids()?.into_iter().collect(), None, false))
    }

    fn collect(
        &self,
        ids: BTreeSet<WorkspaceId>,
        older_than: Option<Duration>,
        full: bool,
    ) -> GcReport {
        let mut report = GcReport {
            schema: GcReportTag,
            removed: Vec::new(),
            kept: 0,
            pruned_repos: Vec::new(),
            failures: Vec::new(),
            bases_removed: Vec::new(),
            base_failures: Vec::new(),
            caches_removed: Vec::new(),
            cache_failures: Vec::new(),
            layers_removed: Vec::new(),
            layer_failures: Vec::new(),
        };
        let mut repos = BTreeSet::new();
        for id in ids {
            match self.examine(&id, older_than, full) {
                Ok(Outcome::Kept) => report.kept += 1,
                Ok(Outcome::Removed(removal, common_dir)) => {
                    repos.extend(common_dir);
                    report.removed.push(removal);
                }
                Ok(Outcome::Nothing) => {}
                Err(e) => report.failures.push(GcFailure {
                    id,
                    message: e.to_string(),
                }),
            }
        }
        for (common_dir, tree) in repos {
            if !common_dir.is_dir() {
                continue;
            }
            // Only the removed workspace's own entry: never `git worktree prune`, which would
            // also drop the user's worktrees that merely look gone.
            let forgotten =
                FileLock::acquire(&self.layout().repo_lock(&common_dir), Create::IfMissing)
                    .map_err(WorkspaceError::from)
                    .and_then(|_lock| {
                        Ok(Repo::from_common_dir(common_dir.clone()).forget_worktree(&tree)?)
                    });
            if forgotten.is_ok_and(|removed| removed) && !report.pruned_repos.contains(&common_dir)
            {
                report.pruned_repos.push(common_dir);
            }
        }
        report
    }

    fn examine(
        &self,
        id: &WorkspaceId,
        older_than: Option<Duration>,
        full: bool,
    ) -> Result<Outcome, WorkspaceError> {
        let layout = self.layout();
        let record_path = layout.record(id);
        // Decide without the lock first: the common case (nothing to do) takes no lock.
        match record::read_stored(&record_path)? {
            Stored::Found(record) if verdict(&record, &record_path, older_than).is_none() => {
                return Ok(Outcome::Kept);
            }
            Stored::Missing | Stored::Corrupt if !full => return Ok(Outcome::Nothing),
            Stored::Corrupt if age(&record_path).is_none_or(|age| age < STRAY_FILE_GRACE) => {
                return Ok(Outcome::Kept);
            }
            _ => {}
        }
        let Some(lock) = FileLock::try_acquire(&layout.lock(id))? else {
            return Ok(Outcome::Kept);
        };
        match record::read_stored(&record_path)? {
            Stored::Found(record) => {
                let Some(reason) = verdict(&record, &record_path, older_than) else {
                    return Ok(Outcome::Kept);
                };
                self.destroy_locked(&record)?;
                self.remember_end(&record, WorkspaceEndReason::of_gc(reason));
                drop(lock);
                let removal = GcRemoval {
                    id: id.clone(),
                    reason,
                    repo: Some(record.repo.clone()),
                };
                Ok(Outcome::Removed(
                    removal,
                    Some((record.git_common_dir, record.path)),
                ))
            }
            stored @ (Stored::Missing | Stored::Corrupt) => {
                let dir = layout.dir(id);
                let corrupt = matches!(stored, Stored::Corrupt);
                if dir.exists() || corrupt {
                    let tree = layout.tree(id);
                    let common_dir = orphan_common_dir(&tree).map(|c| (c, tree));
                    crate::strategy::remove_dir_all(&dir)?;
                    record::remove(&record_path, record::Durability::Durable)?;
                    let _ = std::fs::remove_file(layout.lock(id));
                    let reason = if corrupt {
                        GcReason::UnreadableRecord
                    } else {
                        GcReason::OrphanDirectory
                    };
                    Ok(Outcome::Removed(
                        GcRemoval {
                            id: id.clone(),
                            reason,
                            repo: None,
                        },
                        common_dir,
                    ))
                } else {
                    remove_if_old(&layout.lock(id));
                    Ok(Outcome::Nothing)
                }
            }
        }
    }
}

/// Why a record's workspace should go, if it should.
fn verdict(
    record: &WorkspaceRecord,
    record_path: &Path,
    older_than: Option<Duration>,
) -> Option<GcReason> {
    let owner = record.owner().liveness();
    match record.state {
        WorkspaceState::Removing => Some(GcReason::RemovalInterrupted),
        WorkspaceState::Creating => {
            (owner == Liveness::Gone).then_some(GcReason::CreationAbandoned)
        }
        WorkspaceState::Ready => {
            if !record.path.is_dir() {
                Some(GcReason::MissingDirectory)
            } else if !record.persistent && owner == Liveness::Gone {
                Some(GcReason::OwnerGone)
            } else {
                let live_transient = !record.persistent && owner != Liveness::Gone;
                let unused = age(record_path);
                let past = |limit: Duration| unused.is_some_and(|age| age > limit);
                let expired = record
                    .idle_timeout_s
                    .is_some_and(|s| past(Duration::from_secs(s)));
                let idle = expired || older_than.is_some_and(past);
                (idle && !live_transient).then_some(GcReason::Idle)
            }
        }
    }
}

fn age(path: &Path) -> Option<Duration> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    Some(
        SystemTime::now()
            .duration_since(modified)
            .unwrap_or_default(),
    )
}

fn remove_if_old(path: &Path) {
    if age(path).is_some_and(|age| age > STRAY_FILE_GRACE) {
        let _ = std::fs::remove_file(path);
    }
}

/// The repository of a worktree directory that lost its record, if its `.git` file and the
/// repository's metadata still point at each other.
fn orphan_common_dir(tree: &Path) -> Option<PathBuf> {
    let dot_git = tree.join(".git");
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let git_dir = PathBuf::from(text.strip_prefix("gitdir: ")?.trim_end());
    let back = std::fs::read_to_string(git_dir.join("gitdir")).ok()?;
    if Path::new(back.trim_end()) != dot_git {
        return None;
    }
    let common = std::fs::read_to_string(git_dir.join("commondir")).ok()?;
    std::fs::canonicalize(git_dir.join(common.trim_end())).ok()
}

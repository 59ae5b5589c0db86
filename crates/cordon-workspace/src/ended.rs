//! How a workspace ended, remembered after its record is gone: an error about a missing
//! workspace says whether it was removed, expired or never existed.
//!
//! One small file per ended workspace, `$CORDON_HOME/workspaces/.ended/<id>.json`, written
//! when the workspace's files are gone (by `remove` or gc) and deleted by `gc --older-than`
//! with the records of ended sessions.

use std::path::Path;
use std::time::{Duration, SystemTime};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::id::WorkspaceId;
use crate::record::WorkspaceRecord;
use crate::reports::GcReason;

/// Why a workspace is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceEndReason {
    /// `cordon workspace remove` (or a library caller's removal).
    Removed,
    /// Not used for longer than its idle timeout (or `gc --older-than`): removed by gc.
    Expired,
    /// A transient workspace whose creating process ended: removed by gc.
    OwnerGone,
    /// Removed by gc for another reason (its creation or removal was interrupted, its
    /// directory vanished).
    Collected,
}

/// A workspace that was there and is gone (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceEnd {
    /// The workspace's id.
    pub id: WorkspaceId,
    /// Why it is gone.
    pub reason: WorkspaceEndReason,
    /// When it went (RFC 3339, UTC).
    pub ended_at: String,
    /// Its idle timeout, in seconds, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_s: Option<u64>,
    /// The process that created it.
    pub owner_pid: u32,
}

impl WorkspaceEnd {
    /// The end of `record`, now, for `reason`.
    pub(crate) fn of(record: &WorkspaceRecord, reason: WorkspaceEndReason) -> WorkspaceEnd {
        WorkspaceEnd {
            id: record.id.clone(),
            reason,
            ended_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            idle_timeout_s: record.idle_timeout_s,
            owner_pid: record.owner_pid,
        }
    }
}

impl std::fmt::Display for WorkspaceEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason {
            WorkspaceEndReason::Removed => {
                write!(
                    f,
                    "it was removed at {} (`cordon workspace remove`)",
                    self.ended_at
                )
            }
            WorkspaceEndReason::Expired => match self.idle_timeout_s {
                Some(s) => write!(
                    f,
                    "it expired: unused for longer than its idle timeout ({}), `cordon gc` removed it at {}",
                    cordon_types::units::format_duration(Duration::from_secs(s)),
                    self.ended_at
                ),
                None => write!(
                    f,
                    "it expired: unused for longer than `cordon gc --older-than` allowed, removed at {}",
                    self.ended_at
                ),
            },
            WorkspaceEndReason::OwnerGone => write!(
                f,
                "it was transient, and `cordon gc` removed it at {} once the process that created it (pid {}) had ended",
                self.ended_at, self.owner_pid
            ),
            WorkspaceEndReason::Collected => {
                write!(f, "`cordon gc` removed it at {}", self.ended_at)
            }
        }
    }
}

impl WorkspaceEndReason {
    /// How gc's reason to remove a workspace reads as its end.
    pub(crate) fn of_gc(reason: GcReason) -> WorkspaceEndReason {
        match reason {
            GcReason::Idle => WorkspaceEndReason::Expired,
            GcReason::OwnerGone => WorkspaceEndReason::OwnerGone,
            GcReason::CreationAbandoned
            | GcReason::RemovalInterrupted
            | GcReason::MissingDirectory
            | GcReason::OrphanDirectory
            | GcReason::UnreadableRecord => WorkspaceEndReason::Collected,
        }
    }
}

/// Remembers `end` (best effort: a missing marker only makes an error say less).
pub(crate) fn remember(dir: &Path, end: &WorkspaceEnd) {
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = crate::state::write_json(
            &dir.join(format!("{}.json", end.id)),
            end,
            crate::state::Durability::Atomic,
        );
    }
}

/// How workspace `id` ended, if it did.
pub(crate) fn recall(dir: &Path, id: &WorkspaceId) -> Option<WorkspaceEnd> {
    crate::state::read_json(&dir.join(format!("{id}.json")))
        .ok()
        .flatten()
}

/// Forgets the ends older than `age`.
pub(crate) fn forget_older_than(dir: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|elapsed| elapsed > age));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

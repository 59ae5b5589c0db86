//! The wire documents operators read: a job's attempts (`cordon.attempt-list/v1`) and the
//! workers sharing the store (`cordon.worker-list/v1`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use cordon_store::{AttemptRow, WorkerRow};

use crate::api::{JobFailure, rfc3339};

cordon_types::schema_tag!(
    /// The tag of a job's attempts: `cordon.attempt-list/v1`.
    AttemptListTag,
    "cordon.attempt-list/v1"
);
cordon_types::schema_tag!(
    /// The tag of the workers' list: `cordon.worker-list/v1`.
    WorkerListTag,
    "cordon.worker-list/v1"
);

/// One attempt of a job, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptDocument {
    /// Which attempt (from 1).
    pub attempt: u32,
    /// The worker that ran it.
    pub worker: Option<String>,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// When it ended (RFC 3339, by its worker's clock), once it did.
    pub finished_at: Option<String>,
    /// How long it ran, milliseconds, once it ended.
    pub duration_ms: Option<u64>,
    /// How it ended: `succeeded`, `failed`, `cancelled`, `interrupted`, `retry` (failed; the
    /// job was queued again) or `lost` (its worker died or lost its lease); `null` while it
    /// runs.
    pub outcome: Option<String>,
    /// Why it failed, if it did.
    pub failure: Option<JobFailure>,
    /// CPU time of its programs, milliseconds, when measured.
    pub cpu_ms: Option<u64>,
}

impl From<&AttemptRow> for AttemptDocument {
    fn from(row: &AttemptRow) -> Self {
        AttemptDocument {
            attempt: row.attempt,
            worker: row.worker.clone(),
            started_at: rfc3339(row.started_at_ms),
            finished_at: row.finished_at_ms.map(rfc3339),
            duration_ms: row
                .finished_at_ms
                .map(|end| u64::try_from(end - row.started_at_ms).unwrap_or(0)),
            outcome: row.outcome.clone(),
            failure: row
                .failure
                .clone()
                .and_then(|f| serde_json::from_value(f).ok()),
            cpu_ms: row.cpu_ms,
        }
    }
}

/// `GET /v1/jobs/{id}/attempts`: every attempt of a job, oldest first (each one's output:
/// `GET /v1/jobs/{id}/transcript?attempt=N`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptList {
    /// `cordon.attempt-list/v1`.
    pub schema: AttemptListTag,
    /// The job.
    pub job: String,
    /// Its attempts.
    pub attempts: Vec<AttemptDocument>,
}

/// A process that runs jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerDocument {
    /// Its name (`cordon serve`: the host name by default; `cordon worker --name`).
    pub name: String,
    /// The host it runs on.
    pub host: String,
    /// The cordon version it runs.
    pub version: String,
    /// Its process id on that host.
    pub pid: u32,
    /// Jobs it runs at once.
    pub slots: u32,
    /// The jobs it runs now.
    pub running: Vec<String>,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339).
    pub heartbeat_at: String,
    /// `live`; `draining` (finishes its jobs, takes no new ones); `lost` (no heartbeat for
    /// longer than its lease: killed, paused or cut off; its jobs go to other workers).
    pub state: String,
}

impl WorkerDocument {
    /// The document of a stored worker, as it stands at `now_ms`.
    pub fn of(row: &WorkerRow, now_ms: i64) -> Self {
        WorkerDocument {
            name: row.name.clone(),
            host: row.host.clone(),
            version: row.version.clone(),
            pid: row.pid,
            slots: row.slots,
            running: row.running.iter().map(ToString::to_string).collect(),
            started_at: rfc3339(row.started_at_ms),
            heartbeat_at: rfc3339(row.heartbeat_at_ms),
            state: row.state(now_ms).as_str().into(),
        }
    }
}

/// `GET /v1/workers`: every worker registered in the store, by name (an operator token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerList {
    /// `cordon.worker-list/v1`.
    pub schema: WorkerListTag,
    /// The workers.
    pub workers: Vec<WorkerDocument>,
}

//! The wire documents operators read: a job's attempts (`cordon.attempt-list/v1`), its
//! webhook deliveries (`cordon.delivery-list/v1`) and the workers sharing the store
//! (`cordon.worker-list/v1`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use cordon_store::{AttemptRow, DeliveryRow, WorkerRow};

use crate::api::{JobFailure, rfc3339};

cordon_types::schema_tag!(
    /// The tag of a job's attempts: `cordon.attempt-list/v1`.
    AttemptListTag,
    "cordon.attempt-list/v1"
);
cordon_types::schema_tag!(
    /// The tag of a job's webhook deliveries: `cordon.delivery-list/v1`.
    DeliveryListTag,
    "cordon.delivery-list/v1"
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

/// One try of a webhook delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryTryDocument {
    /// Which try (from 1).
    pub number: u32,
    /// When it was sent (RFC 3339).
    pub at: String,
    /// How long the receiver took to answer, or to fail, milliseconds.
    pub duration_ms: u64,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why the try failed without an answer.
    pub error: Option<String>,
}

/// One delivery of a job's end to one webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryDocument {
    /// Its id (`d-…`), sent as `X-Cordon-Delivery` on every try.
    pub id: String,
    /// Where it goes.
    pub url: String,
    /// `pending` (tried again at `next_at`), `delivered` (a 2xx answer) or `failed` (given
    /// up after `max_tries`).
    pub state: String,
    /// Tries made.
    pub tries: u32,
    /// Tries allowed.
    pub max_tries: u32,
    /// When it was queued (RFC 3339).
    pub created_at: String,
    /// When the next try is due, while it is pending.
    pub next_at: Option<String>,
    /// When it was delivered or given up.
    pub finished_at: Option<String>,
    /// Every try, oldest first.
    pub try_log: Vec<DeliveryTryDocument>,
}

impl From<&DeliveryRow> for DeliveryDocument {
    fn from(row: &DeliveryRow) -> Self {
        let pending = row.state == cordon_store::DeliveryState::Pending;
        DeliveryDocument {
            id: row.id.clone(),
            url: row.url.clone(),
            state: row.state.as_str().into(),
            tries: row.tries,
            max_tries: row.max_tries,
            created_at: rfc3339(row.created_at_ms),
            next_at: pending.then(|| rfc3339(row.next_at_ms)),
            finished_at: row.finished_at_ms.map(rfc3339),
            try_log: row
                .try_log
                .iter()
                .map(|t| DeliveryTryDocument {
                    number: t.number,
                    at: rfc3339(t.at_ms),
                    duration_ms: t.duration_ms,
                    status: t.status,
                    error: t.error.clone(),
                })
                .collect(),
        }
    }
}

/// `GET /v1/jobs/{id}/deliveries`: the webhook deliveries of a job's end, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryList {
    /// `cordon.delivery-list/v1`.
    pub schema: DeliveryListTag,
    /// The job.
    pub job: String,
    /// Its deliveries.
    pub deliveries: Vec<DeliveryDocument>,
}

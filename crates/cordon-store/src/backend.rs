//! The contract every storage backend fulfils, and the enum that picks one at run time.
//!
//! Callers never see a backend: they use [`crate::Store`], whose methods dispatch through
//! [`AnyBackend`]. The traits are synchronous: the SQLite backend calls SQLite directly on the
//! caller's thread (no runtime, no worker thread), which is what keeps recording a local run
//! cheap; a backend that needs an async client drives it on a runtime of its own.

use crate::error::StoreErrorKind;
use crate::jobs::{
    AttemptEnd, AttemptHistogram, AttemptRow, AttemptTiming, Claim, Claimed, JobEvent, JobFilter,
    JobId, JobRow, JobState, NewJob, QueueDepth, Recovered, RunningJobs, TokenRow, Usage,
};
use crate::model::{
    Chunk, ChunkFilter, NewRun, RunFilter, RunId, RunRecord, RunState, RunSummary, StageRecord,
    Stream,
};
use crate::owner::Owner;
use crate::sqlite::SqliteBackend;
use crate::webhooks::{DeliveryRow, DeliveryTry, NewDelivery, TryVerdict};
use crate::workers::{WorkerInfo, WorkerRow};

/// A transcript chunk ready to be written: numbered, placed, compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncodedChunk {
    pub(crate) seq: u64,
    pub(crate) stage: Option<String>,
    pub(crate) stream: Stream,
    pub(crate) offset: u64,
    pub(crate) at_ms: i64,
    pub(crate) data: EncodedData,
}

/// How a chunk's bytes are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EncodedData {
    /// LZ4 block compression of `raw_len` bytes.
    Lz4 { raw_len: u64, bytes: Vec<u8> },
    /// The bytes themselves (when compression would not make them smaller).
    Raw(Vec<u8>),
    /// A marker: this many bytes were lost.
    Lost(u64),
}

impl EncodedData {
    /// Compresses `bytes` when that makes them smaller.
    pub(crate) fn encode(bytes: &[u8]) -> Self {
        let compressed = lz4_flex::block::compress(bytes);
        if compressed.len() < bytes.len() {
            EncodedData::Lz4 {
                raw_len: bytes.len() as u64,
                bytes: compressed,
            }
        } else {
            EncodedData::Raw(bytes.to_vec())
        }
    }
}

/// Where a run's transcript continues: the next sequence number and, per (stage, stream),
/// the next byte offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TranscriptCursor {
    pub(crate) next_seq: u64,
    pub(crate) offsets: Vec<((Option<String>, Stream), u64)>,
}

/// What a backend does. Each method is one short statement or transaction; the owner checks
/// and time keeping stay in [`crate::Store`], so backends only move rows.
pub(crate) trait Backend {
    /// Inserts a `running` run; `false` when the id is taken.
    fn insert_run(
        &self,
        id: &RunId,
        run: &NewRun,
        owner: &Owner,
        started_at_ms: i64,
    ) -> Result<bool, StoreErrorKind>;
    /// Inserts or replaces a stage; `false` when the run does not exist.
    fn record_stage(&self, id: &RunId, stage: &StageRecord) -> Result<bool, StoreErrorKind>;
    /// Records the outcome and document; `false` when the run does not exist.
    fn finish_run(
        &self,
        id: &RunId,
        state: RunState,
        document: Option<(&str, &serde_json::Value)>,
        finished_at_ms: i64,
    ) -> Result<bool, StoreErrorKind>;
    /// Where the run's transcript continues.
    fn transcript_cursor(&self, id: &RunId) -> Result<TranscriptCursor, StoreErrorKind>;
    /// Appends chunks in one transaction.
    fn append_chunks(&self, id: &RunId, chunks: &[EncodedChunk]) -> Result<(), StoreErrorKind>;
    /// Runs matching the filter, newest first.
    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreErrorKind>;
    /// One run with its stages and document.
    fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreErrorKind>;
    /// Up to `limit` chunks after `after_seq`, in order.
    fn read_chunks(
        &self,
        id: &RunId,
        filter: &ChunkFilter,
        after_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<Chunk>, StoreErrorKind>;
    /// A run's state and owner.
    fn run_owner(&self, id: &RunId) -> Result<Option<(RunState, Owner)>, StoreErrorKind>;
    /// The `running` runs started on `host`, with their owners.
    fn running_runs(&self, host: &str) -> Result<Vec<(RunId, Owner)>, StoreErrorKind>;
    /// Marks a `running` run `interrupted`; `false` when it is not running any more.
    fn interrupt(&self, id: &RunId) -> Result<bool, StoreErrorKind>;
    /// Deletes the finished runs started before `cutoff_ms`, with their stages and chunks.
    fn delete_started_before(&self, cutoff_ms: i64) -> Result<u64, StoreErrorKind>;
}

/// What a backend does for the job service: the queue, attempts, events, tokens, audit. The
/// store moves rows; the server decides (policy, limits, retry rules).
pub(crate) trait JobBackend {
    /// Enqueues a job (or returns the one its idempotency key names, and `false`).
    fn insert_job(&self, job: &NewJob, now: i64) -> Result<(JobRow, bool), StoreErrorKind>;
    /// The job an idempotency key names in a project.
    fn find_job_by_key(&self, project: &str, key: &str) -> Result<Option<JobRow>, StoreErrorKind>;
    /// One job.
    fn get_job(&self, id: &JobId) -> Result<Option<JobRow>, StoreErrorKind>;
    /// Jobs matching the filter, newest first.
    fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>, StoreErrorKind>;
    /// Reclaims expired leases, then claims the next job within the limits, for the whole
    /// store (one transaction).
    fn claim_job(&self, claim: &Claim<'_>, now: i64) -> Result<Claimed, StoreErrorKind>;
    /// Extends a running attempt's lease to `until`; `false` when `worker` no longer runs it.
    fn renew_lease(
        &self,
        id: &JobId,
        attempt: u32,
        worker: &str,
        until: i64,
    ) -> Result<bool, StoreErrorKind>;
    /// Reclaims the running jobs whose lease ended before `now`.
    fn expire_leases(&self, now: i64) -> Result<Recovered, StoreErrorKind>;
    /// The running jobs of `worker` with a cancel asked for.
    fn cancel_requests(&self, worker: &str) -> Result<Vec<(JobId, u32)>, StoreErrorKind>;
    /// Ends an attempt, fenced by its number.
    fn end_attempt(
        &self,
        id: &JobId,
        attempt: u32,
        end: &AttemptEnd,
        now: i64,
    ) -> Result<bool, StoreErrorKind>;
    /// Cancels a queued job, flags a running one.
    fn cancel_job(&self, id: &JobId, now: i64) -> Result<Option<JobState>, StoreErrorKind>;
    /// Reclaims the running jobs of `worker` (and those without a worker) at once.
    fn recover_jobs(&self, worker: &str, now: i64) -> Result<Recovered, StoreErrorKind>;
    /// Appends an event to a job's log; with `attempt`, only while the job runs that attempt
    /// (`None` when refused).
    fn append_attempt_event(
        &self,
        id: &JobId,
        attempt: Option<u32>,
        kind: &str,
        data: &serde_json::Value,
        now: i64,
    ) -> Result<Option<u64>, StoreErrorKind>;
    /// A job's events after `after_seq` (only those of `attempt`, when given).
    fn job_events(
        &self,
        id: &JobId,
        attempt: Option<u32>,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreErrorKind>;
}

/// What a backend does for the service around the queue: usage, metrics, tokens, audit.
pub(crate) trait ServiceBackend {
    /// What a project's attempts used since `since`.
    fn project_usage(&self, project: &str, since: i64, now: i64) -> Result<Usage, StoreErrorKind>;
    /// Attempts that ended since `since`, oldest first.
    fn attempt_timings(&self, since: i64, limit: u32)
    -> Result<Vec<AttemptTiming>, StoreErrorKind>;
    /// The ended attempts' durations in buckets of `bounds_ms`.
    fn attempt_histogram(&self, bounds_ms: &[u64])
    -> Result<Vec<AttemptHistogram>, StoreErrorKind>;
    /// Queued jobs per project.
    fn queue_depth(&self, now: i64) -> Result<Vec<QueueDepth>, StoreErrorKind>;
    /// Running jobs per project.
    fn running_per_project(&self) -> Result<Vec<RunningJobs>, StoreErrorKind>;
    /// Jobs per state.
    fn jobs_per_state(&self) -> Result<Vec<(JobState, u64)>, StoreErrorKind>;
    /// Stores a token.
    fn create_token(&self, token: &NewToken<'_>) -> Result<(), StoreErrorKind>;
    /// The live token with this hash.
    fn find_token(&self, hash: &str, now: i64) -> Result<Option<TokenRow>, StoreErrorKind>;
    /// The token with this hash, live or not.
    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>, StoreErrorKind>;
    /// Records that a token was used at `at`.
    fn touch_token(&self, id: &str, at: i64) -> Result<(), StoreErrorKind>;
    /// Every token, newest first.
    fn list_tokens(&self) -> Result<Vec<TokenRow>, StoreErrorKind>;
    /// Revokes a live token.
    fn revoke_token(&self, id: &str, now: i64) -> Result<bool, StoreErrorKind>;
    /// Appends to the audit trail.
    fn audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreErrorKind>;
    /// The audit trail, oldest first.
    fn audit_log(&self) -> Result<Vec<(i64, String, String, String)>, StoreErrorKind>;
}

/// What a backend does for operators: workers, attempts, webhook deliveries, readiness.
pub(crate) trait OpsBackend {
    /// Inserts or replaces a worker's row.
    fn register_worker(&self, worker: &WorkerInfo, now: i64) -> Result<(), StoreErrorKind>;
    /// Records a heartbeat; `Some(draining)`, or `None` when the worker has no row.
    fn worker_heartbeat(&self, name: &str, now: i64) -> Result<Option<bool>, StoreErrorKind>;
    /// Sets a worker's drain flag; `false` when it has no row.
    fn drain_worker(&self, name: &str) -> Result<bool, StoreErrorKind>;
    /// Removes a worker's row.
    fn remove_worker(&self, name: &str) -> Result<(), StoreErrorKind>;
    /// Removes the rows of workers lost before `before` (heartbeat + lease < before).
    fn forget_lost_workers(&self, before: i64) -> Result<u64, StoreErrorKind>;
    /// Every worker, by name, with its running jobs.
    fn list_workers(&self) -> Result<Vec<WorkerRow>, StoreErrorKind>;
    /// A job's attempts, in order.
    fn job_attempts(&self, id: &JobId) -> Result<Vec<AttemptRow>, StoreErrorKind>;
    /// Queues deliveries.
    fn enqueue_deliveries(&self, queued: &QueuedDeliveries<'_>) -> Result<(), StoreErrorKind>;
    /// Locks the first due delivery until `until`.
    fn claim_delivery(&self, now: i64, until: i64) -> Result<Option<DeliveryRow>, StoreErrorKind>;
    /// Records a try and what follows it.
    fn record_delivery_try(
        &self,
        id: &str,
        attempt: &DeliveryTry,
        verdict: TryVerdict,
    ) -> Result<(), StoreErrorKind>;
    /// When the next pending delivery is due.
    fn next_delivery_at(&self) -> Result<Option<i64>, StoreErrorKind>;
    /// A job's deliveries with their tries.
    fn job_deliveries(&self, job: &JobId) -> Result<Vec<DeliveryRow>, StoreErrorKind>;
    /// A trivial query, within `timeout`.
    fn ping(&self, timeout: std::time::Duration) -> Result<(), StoreErrorKind>;
}

/// Deliveries to queue, one per webhook, all of the same body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueuedDeliveries<'a> {
    pub(crate) ids: &'a [String],
    pub(crate) job: &'a JobId,
    pub(crate) project: &'a str,
    pub(crate) webhooks: &'a [NewDelivery],
    pub(crate) body: &'a str,
    pub(crate) max_tries: u32,
    pub(crate) now: i64,
}

/// A token to store (its secret's hash only).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewToken<'a> {
    pub(crate) id: &'a str,
    pub(crate) hash: &'a str,
    pub(crate) project: &'a str,
    pub(crate) scopes: &'a [String],
    pub(crate) now: i64,
    pub(crate) expires: Option<i64>,
    pub(crate) name: Option<&'a str>,
}

/// One line of the audit trail.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AuditEntry<'a> {
    pub(crate) actor: &'a str,
    pub(crate) action: &'a str,
    pub(crate) target: &'a str,
    pub(crate) detail: &'a serde_json::Value,
    pub(crate) now: i64,
}

/// The backend a store uses.
#[derive(Debug)]
pub(crate) enum AnyBackend {
    /// One SQLite file.
    Sqlite(SqliteBackend),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(crate::postgres::PostgresBackend),
}

/// Calls `$method` on whichever backend `$backend` holds, through `$trait`.
macro_rules! dispatch {
    ($backend:expr, $trait:ident :: $method:ident ( $($arg:expr),* )) => {
        match $backend {
            $crate::backend::AnyBackend::Sqlite(b) => {
                $crate::backend::$trait::$method(b, $($arg),*)
            }
            #[cfg(feature = "postgres")]
            $crate::backend::AnyBackend::Postgres(b) => {
                $crate::backend::$trait::$method(b, $($arg),*)
            }
        }
    };
}
pub(crate) use dispatch;

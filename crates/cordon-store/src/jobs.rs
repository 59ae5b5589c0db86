//! The job service's data: jobs, their states, attempts, events, tokens — what goes into the
//! queue and what comes out (the methods are in `queue.rs`).

use std::str::FromStr;

use std::time::Duration;

use crate::error::StoreErrorKind;
use crate::store::now_ms;

/// A job's id: `j-` and 10 lowercase base32 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(String);

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

pub(crate) fn random_name(prefix: &str) -> String {
    let mut bits =
        getrandom::u64().unwrap_or_else(|_| now_ms() as u64 ^ u64::from(std::process::id()));
    let mut id = String::with_capacity(prefix.len() + 10);
    id.push_str(prefix);
    for _ in 0..10 {
        id.push(char::from(ALPHABET[(bits & 31) as usize]));
        bits >>= 5;
    }
    id
}

impl JobId {
    /// A new random id.
    pub fn generate() -> Self {
        Self(random_name("j-"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text that is not a job id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a job id: {0:?} (expected j- and 10 characters a-z, 2-7)")]
pub struct InvalidJobId(pub String);

impl FromStr for JobId {
    type Err = InvalidJobId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let valid = text.len() == 12
            && text.starts_with("j-")
            && text.bytes().skip(2).all(|b| ALPHABET.contains(&b));
        if valid {
            Ok(Self(text.to_owned()))
        } else {
            Err(InvalidJobId(text.to_owned()))
        }
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting for a worker (new, or a retry waiting for its backoff).
    Queued,
    /// A worker runs it.
    Running,
    /// It did its work (for a verify: the gate passed).
    Succeeded,
    /// It ended without doing its work, and no retry is left or allowed.
    Failed,
    /// Cancelled before or while it ran.
    Cancelled,
    /// Its server died while it ran, and no retry was left.
    Interrupted,
}

impl JobState {
    /// Every state.
    pub const ALL: [JobState; 6] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Interrupted,
    ];

    /// The state's name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Interrupted => "interrupted",
        }
    }

    /// Whether the job will not change any more.
    pub fn is_final(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }
}

impl FromStr for JobState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| format!("unknown job state {text:?}"))
    }
}

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The project it belongs to.
    pub project: String,
    /// Its type (`run`, `verify`, …).
    pub job_type: String,
    /// Higher runs first within its project.
    pub priority: i64,
    /// How many attempts it may take.
    pub max_attempts: u32,
    /// Its time limit per attempt, in milliseconds.
    pub timeout_ms: u64,
    /// The client's key: the same key in the same project names the same job.
    pub idempotency_key: Option<String>,
    /// Its inputs (secret names only, never values).
    pub inputs: serde_json::Value,
    /// The token that submitted it.
    pub submitted_by: String,
    /// The job this one re-runs (the same inputs, submitted again).
    pub rerun_of: Option<JobId>,
    /// Slots of the concurrency limits it holds while it runs (at least 1): a job that runs
    /// several things at once (a `session.compare`) counts as that many jobs.
    pub slots: u32,
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// Its id.
    pub id: JobId,
    /// Its project.
    pub project: String,
    /// Its type.
    pub job_type: String,
    /// Its state.
    pub state: JobState,
    /// Its priority within the project.
    pub priority: i64,
    /// Attempts started so far.
    pub attempt: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Time limit per attempt, milliseconds.
    pub timeout_ms: u64,
    /// The client's idempotency key.
    pub idempotency_key: Option<String>,
    /// The inputs.
    pub inputs: serde_json::Value,
    /// The type's output document, once it has one.
    pub result: Option<serde_json::Value>,
    /// Why it failed (`{category, reason}`), if it did.
    pub failure: Option<serde_json::Value>,
    /// Whether a cancel was asked for.
    pub cancel_requested: bool,
    /// When it was submitted (Unix epoch ms).
    pub created_at_ms: i64,
    /// Not claimed before this time (a retry's backoff).
    pub not_before_ms: i64,
    /// When its latest attempt started.
    pub started_at_ms: Option<i64>,
    /// When it reached a final state.
    pub finished_at_ms: Option<i64>,
    /// The token that submitted it.
    pub submitted_by: String,
    /// The worker that holds it while it runs (kept after it ends: who ran it last).
    pub worker: Option<String>,
    /// When its worker's lease ends, while it runs (Unix epoch ms): past it, the job is
    /// reclaimed for another attempt and every late write of this attempt is refused.
    pub lease_expires_at_ms: Option<i64>,
    /// The job this one re-runs.
    pub rerun_of: Option<JobId>,
    /// Slots of the concurrency limits it holds while it runs (see [`NewJob::slots`]).
    pub slots: u32,
}

/// Which jobs to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only these projects (a token sees only its own).
    pub projects: Vec<String>,
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs older than this `(created_at_ms, id)` (the previous page's last).
    pub before: Option<(i64, String)>,
    /// At most this many.
    pub limit: u32,
}

/// One entry of a job's live log.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEvent {
    /// Its place in the job's log, from 1.
    pub seq: u64,
    /// When it was written (Unix epoch ms).
    pub at_ms: i64,
    /// `state`, `stage`, `output` or `result`.
    pub kind: String,
    /// What happened (JSON; output already redacted).
    pub data: serde_json::Value,
    /// The attempt that wrote it (the server's own events: the attempt the job was at; 0
    /// before the first).
    pub attempt: u32,
}

/// One attempt of a job, as recorded: who ran it, when, and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRow {
    /// Which attempt (from 1).
    pub attempt: u32,
    /// The worker that ran it (none for a store of version 3).
    pub worker: Option<String>,
    /// When it started (Unix epoch ms).
    pub started_at_ms: i64,
    /// When it ended, once it did.
    pub finished_at_ms: Option<i64>,
    /// How it ended: a final job state, `retry` or `lost`; `None` while it runs.
    pub outcome: Option<String>,
    /// Why it failed (`{category, reason}`), if it did.
    pub failure: Option<serde_json::Value>,
    /// Its CPU time, when measured.
    pub cpu_ms: Option<u64>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptEnd {
    /// The job reached a final state.
    Final {
        /// The state (never `queued` or `running`).
        state: JobState,
        /// The type's output document.
        result: Option<serde_json::Value>,
        /// Why it failed.
        failure: Option<serde_json::Value>,
        /// The attempt's CPU time (user + system, the whole process tree), when measured.
        cpu_ms: Option<u64>,
    },
    /// The job goes back to the queue for another attempt after `not_before_ms`.
    Retry {
        /// When it may be claimed again.
        not_before_ms: i64,
        /// Why this attempt failed.
        failure: serde_json::Value,
        /// The attempt's CPU time (user + system, the whole process tree), when measured.
        cpu_ms: Option<u64>,
    },
}

impl AttemptEnd {
    /// The attempt's CPU time, when measured.
    pub fn cpu_ms(&self) -> Option<u64> {
        match self {
            AttemptEnd::Final { cpu_ms, .. } | AttemptEnd::Retry { cpu_ms, .. } => *cpu_ms,
        }
    }
}

/// What a worker asks of [`crate::Store::claim_job`].
#[derive(Clone, Copy)]
pub struct Claim<'a> {
    /// The worker's name, unique among the workers sharing the store (e.g. `host/slot`); the
    /// same name after a restart lets [`crate::Store::recover_jobs`] reclaim its jobs at once.
    pub worker: &'a str,
    /// How long the claimed job stays this worker's without a [`crate::Store::renew_lease`].
    pub lease: Duration,
    /// The most jobs running at once across everything sharing the store (in slots: a job
    /// holding several counts as that many).
    pub workers: u32,
    /// The most jobs of a project running at once across everything sharing the store (in
    /// slots, as `workers`).
    pub concurrency: &'a (dyn Fn(&str) -> u32 + Sync),
}

impl std::fmt::Debug for Claim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("worker", &self.worker)
            .field("lease", &self.lease)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

/// What a claim did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claimed {
    /// The job now running under the claimer's lease, if the limits allowed one.
    pub job: Option<JobRow>,
    /// Jobs whose lease had expired, reclaimed before choosing (for the caller's events).
    pub expired: Recovered,
}

/// What a project used: the budgets' measure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Wall-clock milliseconds of its attempts within the window (running ones up to now).
    pub wall_ms: u64,
    /// CPU milliseconds of its attempts that ended within the window (measured ones).
    pub cpu_ms: u64,
}

/// One finished attempt, for duration histograms and outcome counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptTiming {
    /// The job.
    pub job_id: JobId,
    /// Which attempt.
    pub attempt: u32,
    /// The job's project.
    pub project: String,
    /// The job's type.
    pub job_type: String,
    /// The worker that ran it, when known.
    pub worker: Option<String>,
    /// How it ended: a final job state, `retry`, `lost` (its lease expired or its worker
    /// restarted) or `interrupted` (recovered by a store of version 3).
    pub outcome: String,
    /// When it started (Unix epoch ms).
    pub started_at_ms: i64,
    /// How long it ran.
    pub duration_ms: u64,
    /// Its CPU time, when measured.
    pub cpu_ms: Option<u64>,
}

/// The durations of the attempts that ended, per project, job type and outcome, counted
/// into buckets: a Prometheus histogram's series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptHistogram {
    /// The project.
    pub project: String,
    /// The job type.
    pub job_type: String,
    /// How the attempts ended (a final job state, `retry`, `lost`, `interrupted`).
    pub outcome: String,
    /// For each bound asked for, the attempts that took at most that many milliseconds.
    pub at_most: Vec<u64>,
    /// All the attempts.
    pub count: u64,
    /// Their durations added up, in milliseconds.
    pub sum_ms: u64,
}

/// The SQL of the histogram query for `bounds_ms` (integers only: nothing from outside).
pub(crate) fn histogram_sql(bounds_ms: &[u64]) -> String {
    let duration = "(a.finished_at_ms - a.started_at_ms)";
    let buckets: String = bounds_ms
        .iter()
        .map(|b| format!(", CAST(SUM(CASE WHEN {duration} <= {b} THEN 1 ELSE 0 END) AS BIGINT)"))
        .collect();
    format!(
        "SELECT a.project, j.type, COALESCE(a.outcome, ''), CAST(COUNT(*) AS BIGINT), \
         CAST(COALESCE(SUM({duration}), 0) AS BIGINT){buckets} \
         FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
         WHERE a.finished_at_ms IS NOT NULL \
         GROUP BY a.project, j.type, COALESCE(a.outcome, '') ORDER BY 1, 2, 3"
    )
}

/// How many jobs wait in a project's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDepth {
    /// The project.
    pub project: String,
    /// Jobs `queued`, including retries still in their backoff.
    pub queued: u32,
    /// Of those, the ones a claim could take now.
    pub ready: u32,
}

/// What one project's running jobs hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningJobs {
    /// The project.
    pub project: String,
    /// Its jobs in state `running`.
    pub jobs: u32,
    /// The concurrency slots they hold: one each, or as many as a `session.compare` took
    /// when it was queued (what the claim counts against the limits).
    pub slots: u32,
}

/// An API token as stored (its secret is never stored, only its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    /// Its id (`t-…`), shown in listings and the audit trail.
    pub id: String,
    /// The project it acts for.
    pub project: String,
    /// What it may do (`submit`, `read`, `admin`).
    pub scopes: Vec<String>,
    /// When it was created.
    pub created_at_ms: i64,
    /// When it stops working, if ever.
    pub expires_at_ms: Option<i64>,
    /// When it was revoked, if it was.
    pub revoked_at_ms: Option<i64>,
    /// What its creator called it.
    pub name: Option<String>,
    /// When it was last used (to the minute: uses are written at most once a minute).
    pub last_used_at_ms: Option<i64>,
}

/// What became of running jobs whose worker is gone (its lease expired, or it restarted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Jobs put back in the queue for another attempt.
    pub requeued: Vec<JobId>,
    /// Jobs marked `interrupted` (no attempt left).
    pub interrupted: Vec<JobId>,
    /// Jobs marked `cancelled` (a cancel had been asked for while they ran).
    pub cancelled: Vec<JobId>,
}

pub(crate) fn corrupt(what: impl Into<String>) -> StoreErrorKind {
    StoreErrorKind::Corrupt { what: what.into() }
}

/// The slots a job holding `slots` really takes under `claim`'s limits: never more than its
/// project's concurrency or all the workers (a limit lowered since it was queued does not
/// keep it waiting for ever), at least one.
pub fn effective_slots(slots: i64, concurrency: u32, workers: u32) -> i64 {
    slots
        .min(i64::from(concurrency))
        .min(i64::from(workers))
        .max(1)
}

/// The slots the running jobs `(project, slots)` hold: in all, and per project (each as
/// many as it asked for when queued, within all the workers: a project past its budget, whose
/// concurrency now reads 0, still holds what its running jobs took).
pub(crate) fn busy_slots(
    claim: &Claim<'_>,
    running: Vec<(String, i64)>,
) -> (i64, std::collections::HashMap<String, i64>) {
    let mut per_project = std::collections::HashMap::new();
    let mut total = 0;
    for (project, slots) in running {
        let held = slots.min(i64::from(claim.workers)).max(1);
        total += held;
        *per_project.entry(project).or_insert(0) += held;
    }
    (total, per_project)
}

/// Whether a queued job of `project` holding `slots` fits beside the `busy` slots of its
/// project and the `total` of all.
pub(crate) fn fits(claim: &Claim<'_>, project: &str, slots: i64, busy: i64, total: i64) -> bool {
    let concurrency = (claim.concurrency)(project);
    let need = effective_slots(slots, concurrency, claim.workers);
    busy + need <= i64::from(concurrency) && total + need <= i64::from(claim.workers)
}

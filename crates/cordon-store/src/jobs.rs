//! The job service's persistent state: the queue, attempts, live events, API tokens and the
//! audit trail.
//!
//! The store moves rows; the server decides (policy, limits, retry rules). Every method is one
//! short transaction. The claim ([`Store::claim_job`]) is the one place that enforces the
//! global and per-project limits: it runs in a `BEGIN IMMEDIATE` transaction on SQLite (one
//! writer at a time), so two claimers can never both take the last slot. A PostgreSQL
//! backend implements the same methods with `FOR UPDATE SKIP LOCKED` and leases; callers do
//! not change.

use std::str::FromStr;

use crate::backend::{AuditEntry, NewToken, dispatch};
use crate::error::{StoreError, StoreErrorKind};
use crate::store::{Store, now_ms};

/// A job's id: `j-` and 10 lowercase base32 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(String);

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

fn random_name(prefix: &str) -> String {
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
    },
    /// The job goes back to the queue for another attempt after `not_before_ms`.
    Retry {
        /// When it may be claimed again.
        not_before_ms: i64,
        /// Why this attempt failed.
        failure: serde_json::Value,
    },
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
}

/// What a restart did with the jobs its previous process left running.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Jobs put back in the queue for another attempt.
    pub requeued: Vec<JobId>,
    /// Jobs marked `interrupted` (no attempt left).
    pub interrupted: Vec<JobId>,
}

impl Store {
    /// Enqueues a job. With an idempotency key already used in the project, returns the
    /// existing job and `false` (nothing new is queued); else the new job and `true`.
    pub fn insert_job(&self, job: &NewJob) -> Result<(JobRow, bool), StoreError> {
        self.call("enqueue a job", || {
            dispatch!(self.backend(), JobBackend::insert_job(job, now_ms()))
        })
    }

    /// The job an idempotency key names in a project, or `None`.
    pub fn find_job_by_key(&self, project: &str, key: &str) -> Result<Option<JobRow>, StoreError> {
        self.call("find a job by its key", || {
            dispatch!(self.backend(), JobBackend::find_job_by_key(project, key))
        })
    }

    /// One job, or `None`.
    pub fn get_job(&self, id: &JobId) -> Result<Option<JobRow>, StoreError> {
        self.call("read a job", || {
            dispatch!(self.backend(), JobBackend::get_job(id))
        })
    }

    /// Jobs matching `filter`, newest first.
    pub fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>, StoreError> {
        self.call("list jobs", || {
            dispatch!(self.backend(), JobBackend::list_jobs(filter))
        })
    }

    /// Claims the next job to run, if the limits allow one: never more than `workers`
    /// running in all, never more than `concurrency(project)` in a project; among the
    /// projects with room, the one with the fewest running jobs goes first (then the oldest
    /// waiting job), so one busy project cannot starve the others; within a project, higher
    /// priority first, then oldest. The job becomes `running` with `attempt + 1`, and the
    /// attempt is recorded.
    pub fn claim_job(
        &self,
        workers: u32,
        concurrency: &(dyn Fn(&str) -> u32 + Sync),
    ) -> Result<Option<JobRow>, StoreError> {
        self.call("claim a job", || {
            dispatch!(
                self.backend(),
                JobBackend::claim_job(workers, concurrency, now_ms())
            )
        })
    }

    /// Ends attempt `attempt` of a running job. Fenced: `false` (nothing written) when the
    /// job is not running that attempt any more.
    pub fn end_attempt(
        &self,
        id: &JobId,
        attempt: u32,
        end: &AttemptEnd,
    ) -> Result<bool, StoreError> {
        self.call("end a job attempt", || {
            dispatch!(
                self.backend(),
                JobBackend::end_attempt(id, attempt, end, now_ms())
            )
        })
    }

    /// Cancels a job: a queued one at once (`Some(Cancelled)`); a running one is flagged
    /// (its worker ends it) and stays `running`. Returns the state after, `None` when there
    /// is no such job.
    pub fn cancel_job(&self, id: &JobId) -> Result<Option<JobState>, StoreError> {
        self.call("cancel a job", || {
            dispatch!(self.backend(), JobBackend::cancel_job(id, now_ms()))
        })
    }

    /// After a restart: every job left `running` by the previous process is requeued when
    /// it has an attempt left (its attempt recorded as interrupted), else marked
    /// `interrupted`. Nothing accepted is lost; nothing runs twice at once.
    pub fn recover_jobs(&self) -> Result<Recovered, StoreError> {
        self.call("recover running jobs", || {
            dispatch!(self.backend(), JobBackend::recover_jobs(now_ms()))
        })
    }

    /// Appends an event to a job's log; returns its seq.
    pub fn append_job_event(
        &self,
        id: &JobId,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        self.call("log a job event", || {
            dispatch!(
                self.backend(),
                JobBackend::append_job_event(id, kind, data, now_ms())
            )
        })
    }

    /// Up to `limit` events of a job after `after_seq`, in order.
    pub fn job_events(
        &self,
        id: &JobId,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreError> {
        self.call("read job events", || {
            dispatch!(self.backend(), JobBackend::job_events(id, after_seq, limit))
        })
    }

    /// The wall-clock milliseconds a project's attempts used since `since_ms` (running ones
    /// counted up to now).
    pub fn project_wall_ms(&self, project: &str, since_ms: i64) -> Result<u64, StoreError> {
        self.call("sum a project's usage", || {
            dispatch!(
                self.backend(),
                JobBackend::project_wall_ms(project, since_ms, now_ms())
            )
        })
    }

    /// Running jobs per project.
    pub fn running_per_project(&self) -> Result<Vec<(String, u32)>, StoreError> {
        self.call("count running jobs", || {
            dispatch!(self.backend(), JobBackend::running_per_project())
        })
    }

    /// Jobs per state.
    pub fn jobs_per_state(&self) -> Result<Vec<(JobState, u64)>, StoreError> {
        self.call("count jobs", || {
            dispatch!(self.backend(), JobBackend::jobs_per_state())
        })
    }

    /// Stores a token's hash; returns the token's id.
    pub fn create_token(
        &self,
        hash: &str,
        project: &str,
        scopes: &[String],
        expires_at_ms: Option<i64>,
    ) -> Result<String, StoreError> {
        let id = random_name("t-");
        self.call("create a token", || {
            let token = NewToken {
                id: &id,
                hash,
                project,
                scopes,
                now: now_ms(),
                expires: expires_at_ms,
            };
            dispatch!(self.backend(), JobBackend::create_token(&token))
        })?;
        Ok(id)
    }

    /// The live (not revoked, not expired) token with this hash.
    pub fn find_token(&self, hash: &str) -> Result<Option<TokenRow>, StoreError> {
        self.call("look a token up", || {
            dispatch!(self.backend(), JobBackend::find_token(hash, now_ms()))
        })
    }

    /// Every token, newest first.
    pub fn list_tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.call("list tokens", || {
            dispatch!(self.backend(), JobBackend::list_tokens())
        })
    }

    /// Revokes a token; `false` when there is no such live token.
    pub fn revoke_token(&self, id: &str) -> Result<bool, StoreError> {
        self.call("revoke a token", || {
            dispatch!(self.backend(), JobBackend::revoke_token(id, now_ms()))
        })
    }

    /// Records who did what to what.
    pub fn audit(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        detail: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.call("audit", || {
            let entry = AuditEntry {
                actor,
                action,
                target,
                detail,
                now: now_ms(),
            };
            dispatch!(self.backend(), JobBackend::audit(&entry))
        })
    }

    /// The audit trail, oldest first: `(at_ms, actor, action, target)`.
    pub fn audit_log(&self) -> Result<Vec<(i64, String, String, String)>, StoreError> {
        self.call("read the audit trail", || {
            dispatch!(self.backend(), JobBackend::audit_log())
        })
    }
}

pub(crate) fn corrupt(what: impl Into<String>) -> StoreErrorKind {
    StoreErrorKind::Corrupt { what: what.into() }
}

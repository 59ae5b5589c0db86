//! The job service's persistent state on [`Store`]: the queue with leases, attempts, live
//! events, budgets' usage, metrics, API tokens and the audit trail.
//!
//! The store moves rows; the server decides (policy, limits, retry rules). Every method is one
//! short transaction. The claim ([`Store::claim_job`]) is the one place that enforces the
//! global and per-project limits, for everything sharing the store (all workers, on every
//! machine): on SQLite it runs in a `BEGIN IMMEDIATE` transaction (one writer at a time); on
//! PostgreSQL under a transaction-scoped advisory lock (see ARCHITECTURE.md, "The queue is our
//! own SQL").
//!
//! **Leases and fencing.** A claimed job belongs to the claiming worker until its lease ends;
//! the worker renews it ([`Store::renew_lease`]) while the job runs. A job whose lease
//! expired is reclaimed (the next claim does it, or [`Store::expire_leases`]): back to the
//! queue with its attempt recorded as `lost`, or `interrupted` when no attempt is left. Every
//! write of an attempt ([`Store::end_attempt`], [`Store::append_attempt_event`]) names the
//! attempt and is refused once the job no longer runs it, so a worker that was paused past its
//! lease can never overwrite the next attempt's result.

use std::time::Duration;

use crate::backend::{AuditEntry, NewToken, dispatch};
use crate::error::StoreError;
use crate::jobs::{
    AttemptEnd, AttemptHistogram, AttemptTiming, Claim, Claimed, JobEvent, JobFilter, JobId,
    JobRow, JobState, NewJob, QueueDepth, Recovered, RunningJobs, TokenRow, Usage, random_name,
};
use crate::store::{Store, now_ms};

/// Milliseconds of a duration, saturated.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
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

    /// Claims the next job to run for `claim.worker`, if the limits allow one: never more
    /// than `claim.workers` running in all, never more than `concurrency(project)` in a
    /// project — counted across every worker sharing the store, in slots: a job holds
    /// [`JobRow::slots`] (within those limits, see [`crate::effective_slots`]), and the head
    /// of a project's queue waits until it fits (the jobs behind it wait too). Among the
    /// projects with room, the one with the fewest running slots goes first (then the oldest
    /// waiting job), so one busy project cannot starve the others; within a project, higher
    /// priority first, then
    /// oldest; a retry waits for its `not_before_ms`. The job becomes `running` with
    /// `attempt + 1`, leased to the worker until now + `claim.lease`, and the attempt is
    /// recorded. In the same transaction, before choosing, expired leases are reclaimed (as
    /// [`Store::expire_leases`] does; they are returned in [`Claimed::expired`]).
    pub fn claim_job(&self, claim: &Claim<'_>) -> Result<Claimed, StoreError> {
        self.call("claim a job", || {
            dispatch!(self.backend(), JobBackend::claim_job(claim, now_ms()))
        })
    }

    /// Extends the lease of a running attempt to now + `lease`. `false` when `worker` no
    /// longer runs that attempt (reclaimed after its lease expired, ended, or claimed by
    /// another worker): the worker must then kill the job's process tree and write nothing.
    pub fn renew_lease(
        &self,
        id: &JobId,
        attempt: u32,
        worker: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let until = now_ms().saturating_add(millis(lease));
        self.call("renew a lease", || {
            dispatch!(
                self.backend(),
                JobBackend::renew_lease(id, attempt, worker, until)
            )
        })
    }

    /// Reclaims every running job whose lease has expired: requeued (its attempt ended as
    /// `lost`) when it has an attempt left, else `interrupted`. Returns which, so the caller
    /// can log their events.
    pub fn expire_leases(&self) -> Result<Recovered, StoreError> {
        self.call("expire leases", || {
            dispatch!(self.backend(), JobBackend::expire_leases(now_ms()))
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
        self.end_attempt_at(id, attempt, end, now_ms())
    }

    /// [`Store::end_attempt`], recording that the attempt ended at `finished_at_ms` (by the
    /// worker's own clock, when the work ended) rather than when the store took the write: an
    /// end retried while the store was unreachable keeps the attempt's true duration.
    pub fn end_attempt_at(
        &self,
        id: &JobId,
        attempt: u32,
        end: &AttemptEnd,
        finished_at_ms: i64,
    ) -> Result<bool, StoreError> {
        self.call("end a job attempt", || {
            dispatch!(
                self.backend(),
                JobBackend::end_attempt(id, attempt, end, finished_at_ms)
            )
        })
    }

    /// Appends an event of attempt `attempt` to the job's log; returns its seq. Fenced:
    /// `None` (nothing written) when the job is not running that attempt any more.
    pub fn append_attempt_event(
        &self,
        id: &JobId,
        attempt: u32,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<Option<u64>, StoreError> {
        let seq = self.call("log a job event", || {
            dispatch!(
                self.backend(),
                JobBackend::append_attempt_event(id, Some(attempt), kind, data, now_ms())
            )
        })?;
        if seq.is_some() {
            self.event_recorded(id);
        }
        Ok(seq)
    }

    /// The running jobs of `worker` whose cancellation was asked for, with their attempt
    /// (the worker polls this, so a cancel reaches it on any machine).
    pub fn cancel_requests(&self, worker: &str) -> Result<Vec<(JobId, u32)>, StoreError> {
        self.call("read cancel requests", || {
            dispatch!(self.backend(), JobBackend::cancel_requests(worker))
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

    /// After a restart of the worker named `worker`: its jobs left `running` (and those of a
    /// store of version 3, which had no worker names) are treated as expired leases at once —
    /// requeued when they have an attempt left (the attempt ended as `lost`), else
    /// `interrupted`. Other workers' jobs are left alone. Nothing accepted is lost; nothing
    /// runs twice at once.
    pub fn recover_jobs(&self, worker: &str) -> Result<Recovered, StoreError> {
        self.call("recover running jobs", || {
            dispatch!(self.backend(), JobBackend::recover_jobs(worker, now_ms()))
        })
    }

    /// Appends a server-side event (a submission, the cancel of a queued job, a recovery) to
    /// a job's log, unfenced; returns its seq. A worker's events go through
    /// [`Store::append_attempt_event`].
    pub fn append_job_event(
        &self,
        id: &JobId,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        let seq = self.call("log a job event", || {
            dispatch!(
                self.backend(),
                JobBackend::append_attempt_event(id, None, kind, data, now_ms())
            )
        })?;
        self.event_recorded(id);
        Ok(seq.unwrap_or(0))
    }

    /// Up to `limit` events of a job after `after_seq`, in order.
    pub fn job_events(
        &self,
        id: &JobId,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreError> {
        self.call("read job events", || {
            dispatch!(
                self.backend(),
                JobBackend::job_events(id, None, after_seq, limit)
            )
        })
    }

    /// Up to `limit` events of one attempt of a job after `after_seq`, in order: the
    /// attempt's own log (its events keep their numbers in the job's log).
    pub fn attempt_events(
        &self,
        id: &JobId,
        attempt: u32,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreError> {
        self.call("read an attempt's events", || {
            dispatch!(
                self.backend(),
                JobBackend::job_events(id, Some(attempt), after_seq, limit)
            )
        })
    }

    /// What a project's attempts used since `since_ms`: wall-clock time (running attempts
    /// counted up to now, attempts that began earlier only from `since_ms`) and the CPU time
    /// of the attempts that ended since then.
    pub fn project_usage(&self, project: &str, since_ms: i64) -> Result<Usage, StoreError> {
        self.call("sum a project's usage", || {
            dispatch!(
                self.backend(),
                ServiceBackend::project_usage(project, since_ms, now_ms())
            )
        })
    }

    /// The wall-clock part of [`Store::project_usage`].
    pub fn project_wall_ms(&self, project: &str, since_ms: i64) -> Result<u64, StoreError> {
        Ok(self.project_usage(project, since_ms)?.wall_ms)
    }

    /// The attempts that ended since `since_ms` (oldest first, at most `limit`): durations
    /// and outcomes per project and type, for histograms.
    pub fn attempt_timings(
        &self,
        since_ms: i64,
        limit: u32,
    ) -> Result<Vec<AttemptTiming>, StoreError> {
        self.call("read attempt timings", || {
            dispatch!(
                self.backend(),
                ServiceBackend::attempt_timings(since_ms, limit)
            )
        })
    }

    /// The durations of every ended attempt, per project, job type and outcome, counted into
    /// buckets of at most `bounds_ms` each (one aggregate query, whatever the history).
    pub fn attempt_histogram(
        &self,
        bounds_ms: &[u64],
    ) -> Result<Vec<AttemptHistogram>, StoreError> {
        self.call("count attempt durations", || {
            dispatch!(self.backend(), ServiceBackend::attempt_histogram(bounds_ms))
        })
    }

    /// The queued jobs per project (with those a claim could take now), by project name.
    pub fn queue_depth(&self) -> Result<Vec<QueueDepth>, StoreError> {
        self.call("measure the queue", || {
            dispatch!(self.backend(), ServiceBackend::queue_depth(now_ms()))
        })
    }

    /// Running jobs per project.
    pub fn running_per_project(&self) -> Result<Vec<RunningJobs>, StoreError> {
        self.call("count running jobs", || {
            dispatch!(self.backend(), ServiceBackend::running_per_project())
        })
    }

    /// Jobs per state.
    pub fn jobs_per_state(&self) -> Result<Vec<(JobState, u64)>, StoreError> {
        self.call("count jobs", || {
            dispatch!(self.backend(), ServiceBackend::jobs_per_state())
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
        self.create_named_token(hash, project, scopes, expires_at_ms, None)
    }

    /// [`Store::create_token`] with a name for people (`ci`, `alice's laptop`).
    pub fn create_named_token(
        &self,
        hash: &str,
        project: &str,
        scopes: &[String],
        expires_at_ms: Option<i64>,
        name: Option<&str>,
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
                name,
            };
            dispatch!(self.backend(), ServiceBackend::create_token(&token))
        })?;
        Ok(id)
    }

    /// The live (not revoked, not expired) token with this hash.
    pub fn find_token(&self, hash: &str) -> Result<Option<TokenRow>, StoreError> {
        self.call("look a token up", || {
            dispatch!(self.backend(), ServiceBackend::find_token(hash, now_ms()))
        })
    }

    /// The token with this hash whatever its state (revoked, expired): to tell a client why
    /// its token no longer works.
    pub fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>, StoreError> {
        self.call("look a token up", || {
            dispatch!(self.backend(), ServiceBackend::token_by_hash(hash))
        })
    }

    /// Records that the token `id` was used now.
    pub fn touch_token(&self, id: &str) -> Result<(), StoreError> {
        self.call("record a token's use", || {
            dispatch!(self.backend(), ServiceBackend::touch_token(id, now_ms()))
        })
    }

    /// Every token, newest first.
    pub fn list_tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.call("list tokens", || {
            dispatch!(self.backend(), ServiceBackend::list_tokens())
        })
    }

    /// Revokes a token; `false` when there is no such live token.
    pub fn revoke_token(&self, id: &str) -> Result<bool, StoreError> {
        self.call("revoke a token", || {
            dispatch!(self.backend(), ServiceBackend::revoke_token(id, now_ms()))
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
            dispatch!(self.backend(), ServiceBackend::audit(&entry))
        })
    }

    /// The audit trail, oldest first: `(at_ms, actor, action, target)`.
    pub fn audit_log(&self) -> Result<Vec<(i64, String, String, String)>, StoreError> {
        self.call("read the audit trail", || {
            dispatch!(self.backend(), ServiceBackend::audit_log())
        })
    }
}

//! The job queue on PostgreSQL, shared by workers on many machines.
//!
//! **The claim holds the limits for the whole cluster.** `FOR UPDATE SKIP LOCKED` alone (what
//! most queue libraries do) lets two workers on two hosts each count the running jobs, each
//! see one free slot, and each take a different row: both run, and the limit is exceeded. So
//! the count and the claim run under one transaction-scoped advisory lock
//! (`pg_advisory_xact_lock`): claims are serialised cluster-wide (released at commit), and
//! under READ COMMITTED every statement after the lock sees every earlier claim. Inside it,
//! the chosen row is taken with `FOR UPDATE SKIP LOCKED`, so a row locked by a concurrent
//! cancel or lease renewal is passed over instead of waited for. A claim is a few short
//! statements, so the serialisation costs little (claims per second are measured in
//! BENCHMARKS.md); the alternative, SERIALIZABLE with retries, aborts claimers under
//! contention instead of queueing them.
//!
//! Per-job event numbers and every fenced write lock the job's row first (`FOR UPDATE`), so a
//! reclaim and a late write of the dead attempt cannot interleave.

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Postgres, Transaction};

use crate::backend::JobBackend;
use crate::error::StoreErrorKind;
use crate::jobs::{
    AttemptEnd, Claim, Claimed, JobEvent, JobFilter, JobId, JobRow, JobState, NewJob, Recovered,
    corrupt,
};
use crate::postgres::{PostgresBackend, get};
use crate::reclaim::{Reclaim, reclaim_failure, reclaimed_state};
use crate::rows::json;

/// The advisory lock key that serialises claims (`'cordon:claim'` as an integer).
const CLAIM_LOCK: i64 = 0x636f_7264_6f6e_636c;

pub(crate) const JOB_COLUMNS: &str = "id, project, type, state, priority, attempt, max_attempts, \
     timeout_ms, idempotency_key, inputs, result, failure, cancel_requested, created_at_ms, \
     not_before_ms, started_at_ms, finished_at_ms, submitted_by, worker, lease_expires_at_ms, \
     rerun_of, slots";

fn job_row(row: &PgRow) -> Result<JobRow, StoreErrorKind> {
    let id: String = get(row, 0)?;
    let state: String = get(row, 3)?;
    Ok(JobRow {
        id: id.parse().map_err(|e| corrupt(format!("job id: {e}")))?,
        project: get(row, 1)?,
        job_type: get(row, 2)?,
        state: state.parse().map_err(corrupt)?,
        priority: get(row, 4)?,
        attempt: get::<i64>(row, 5)?.try_into().unwrap_or(0),
        max_attempts: get::<i64>(row, 6)?.try_into().unwrap_or(1),
        timeout_ms: get::<i64>(row, 7)?.try_into().unwrap_or(0),
        idempotency_key: get(row, 8)?,
        inputs: json(Some(get(row, 9)?), "job inputs")?.unwrap_or_default(),
        result: json(get(row, 10)?, "job result")?,
        failure: json(get(row, 11)?, "job failure")?,
        cancel_requested: get::<i64>(row, 12)? != 0,
        created_at_ms: get(row, 13)?,
        not_before_ms: get(row, 14)?,
        started_at_ms: get(row, 15)?,
        finished_at_ms: get(row, 16)?,
        submitted_by: get(row, 17)?,
        worker: get(row, 18)?,
        lease_expires_at_ms: get(row, 19)?,
        rerun_of: get::<Option<String>>(row, 20)?
            .map(|id| parse_job_id(&id))
            .transpose()?,
        slots: get::<i64>(row, 21)?.try_into().unwrap_or(1),
    })
}

fn parse_job_id(text: &str) -> Result<JobId, StoreErrorKind> {
    text.parse().map_err(|e| corrupt(format!("job id: {e}")))
}

async fn select_job(tx: &mut PgConnection, id: &str) -> Result<Option<JobRow>, StoreErrorKind> {
    let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1"))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    row.as_ref().map(job_row).transpose()
}

impl JobBackend for PostgresBackend {
    fn insert_job(&self, job: &NewJob, now: i64) -> Result<(JobRow, bool), StoreErrorKind> {
        self.run(async {
            let id = JobId::generate();
            // The unique (project, idempotency_key) index arbitrates racing submissions.
            let inserted = sqlx::query(&format!(
                "INSERT INTO jobs (id, project, type, state, priority, attempt, max_attempts, \
                 timeout_ms, idempotency_key, inputs, created_at_ms, not_before_ms, submitted_by, \
                 rerun_of, slots) \
                 VALUES ($1, $2, $3, 'queued', $4, 0, $5, $6, $7, $8, $9, $9, $10, $11, $12) \
                 ON CONFLICT (project, idempotency_key) WHERE idempotency_key IS NOT NULL \
                 DO NOTHING RETURNING {JOB_COLUMNS}"
            ))
            .bind(id.as_str())
            .bind(&job.project)
            .bind(&job.job_type)
            .bind(job.priority)
            .bind(i64::from(job.max_attempts))
            .bind(i64::try_from(job.timeout_ms).unwrap_or(i64::MAX))
            .bind(&job.idempotency_key)
            .bind(job.inputs.to_string())
            .bind(now)
            .bind(&job.submitted_by)
            .bind(job.rerun_of.as_ref().map(JobId::as_str))
            .bind(i64::from(job.slots.max(1)))
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = inserted {
                return Ok((job_row(&row)?, true));
            }
            let key = job.idempotency_key.as_deref().unwrap_or_default();
            let existing = sqlx::query(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE project = $1 AND idempotency_key = $2"
            ))
            .bind(&job.project)
            .bind(key)
            .fetch_one(&self.pool)
            .await?;
            Ok((job_row(&existing)?, false))
        })
    }

    fn find_job_by_key(&self, project: &str, key: &str) -> Result<Option<JobRow>, StoreErrorKind> {
        self.run(async {
            let row = sqlx::query(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE project = $1 AND idempotency_key = $2"
            ))
            .bind(project)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
            row.as_ref().map(job_row).transpose()
        })
    }

    fn get_job(&self, id: &JobId) -> Result<Option<JobRow>, StoreErrorKind> {
        self.run(async {
            let mut connection = self.pool.acquire().await?;
            select_job(&mut connection, id.as_str()).await
        })
    }

    fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>, StoreErrorKind> {
        self.run(async {
            let (before_at, before_id) = filter
                .before
                .as_ref()
                .map_or((None, None), |(at, id)| (Some(*at), Some(id.as_str())));
            let rows = sqlx::query(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE (cardinality($1::text[]) = 0 \
                 OR project = ANY($1)) AND ($2::text IS NULL OR state = $2) \
                 AND ($3::bigint IS NULL OR created_at_ms < $3 \
                      OR (created_at_ms = $3 AND id < $4)) \
                 ORDER BY created_at_ms DESC, id DESC LIMIT $5"
            ))
            .bind(&filter.projects)
            .bind(filter.state.map(JobState::as_str))
            .bind(before_at)
            .bind(before_id)
            .bind(i64::from(filter.limit))
            .fetch_all(&self.pool)
            .await?;
            rows.iter().map(job_row).collect()
        })
    }

    fn claim_job(&self, claim: &Claim<'_>, now: i64) -> Result<Claimed, StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            // A claim never queues for long behind a stalled client's row or lock: it fails
            // and the worker tries again.
            sqlx::query("SET LOCAL lock_timeout = '5s'")
                .execute(&mut *tx)
                .await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(CLAIM_LOCK)
                .execute(&mut *tx)
                .await?;
            // The time the claim really happens: after the wait for the lock (an attempt
            // recorded as started before the slot it took was freed would look like one job
            // too many).
            let now = now.max(crate::store::now_ms());
            let expired = reclaim(&mut tx, Reclaim::Expired, now).await?;
            let job = choose_and_claim(&mut tx, claim, now).await?;
            tx.commit().await?;
            Ok(Claimed { job, expired })
        })
    }

    fn renew_lease(
        &self,
        id: &JobId,
        attempt: u32,
        worker: &str,
        until: i64,
    ) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query(
                "UPDATE jobs SET lease_expires_at_ms = $1 WHERE id = $2 AND attempt = $3 \
                 AND worker = $4 AND state = 'running'",
            )
            .bind(until)
            .bind(id.as_str())
            .bind(i64::from(attempt))
            .bind(worker)
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    fn expire_leases(&self, now: i64) -> Result<Recovered, StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            let recovered = reclaim(&mut tx, Reclaim::Expired, now).await?;
            tx.commit().await?;
            Ok(recovered)
        })
    }

    fn cancel_requests(&self, worker: &str) -> Result<Vec<(JobId, u32)>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(
                "SELECT id, attempt FROM jobs WHERE worker = $1 AND state = 'running' \
                 AND cancel_requested = 1 ORDER BY id",
            )
            .bind(worker)
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|r| {
                    Ok((
                        parse_job_id(&get::<String>(r, 0)?)?,
                        get::<i64>(r, 1)?.try_into().unwrap_or(0),
                    ))
                })
                .collect()
        })
    }

    fn end_attempt(
        &self,
        id: &JobId,
        attempt: u32,
        end: &AttemptEnd,
        now: i64,
    ) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            let (outcome, failure, changed) = match end {
                AttemptEnd::Final {
                    state,
                    result,
                    failure,
                    ..
                } => {
                    let done = sqlx::query(
                        "UPDATE jobs SET state = $1, result = $2, failure = $3, \
                         finished_at_ms = $4, lease_expires_at_ms = NULL \
                         WHERE id = $5 AND state = 'running' AND attempt = $6",
                    )
                    .bind(state.as_str())
                    .bind(result.as_ref().map(ToString::to_string))
                    .bind(failure.as_ref().map(ToString::to_string))
                    .bind(now)
                    .bind(id.as_str())
                    .bind(i64::from(attempt))
                    .execute(&mut *tx)
                    .await?;
                    (state.as_str(), failure.clone(), done.rows_affected())
                }
                AttemptEnd::Retry {
                    not_before_ms,
                    failure,
                    ..
                } => {
                    let done = sqlx::query(
                        "UPDATE jobs SET state = 'queued', failure = $1, not_before_ms = $2, \
                         lease_expires_at_ms = NULL \
                         WHERE id = $3 AND state = 'running' AND attempt = $4",
                    )
                    .bind(failure.to_string())
                    .bind(not_before_ms)
                    .bind(id.as_str())
                    .bind(i64::from(attempt))
                    .execute(&mut *tx)
                    .await?;
                    ("retry", Some(failure.clone()), done.rows_affected())
                }
            };
            if changed == 0 {
                return Ok(false);
            }
            sqlx::query(
                "UPDATE job_attempts SET finished_at_ms = $1, outcome = $2, failure = $3, \
                 cpu_ms = $4 WHERE job_id = $5 AND attempt = $6",
            )
            .bind(now)
            .bind(outcome)
            .bind(failure.map(|f| f.to_string()))
            .bind(end.cpu_ms().map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))
            .bind(id.as_str())
            .bind(i64::from(attempt))
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(true)
        })
    }

    fn cancel_job(&self, id: &JobId, now: i64) -> Result<Option<JobState>, StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            let state: Option<String> =
                sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1 FOR UPDATE")
                    .bind(id.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
            let Some(state) = state else {
                return Ok(None);
            };
            let state: JobState = state.parse().map_err(corrupt)?;
            let after = match state {
                JobState::Queued => {
                    let failure = serde_json::json!({
                        "category": "cancelled",
                        "reason": "cancelled before it ran",
                    });
                    sqlx::query(
                        "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, \
                         finished_at_ms = $1, failure = $2 WHERE id = $3",
                    )
                    .bind(now)
                    .bind(failure.to_string())
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                    JobState::Cancelled
                }
                JobState::Running => {
                    sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = $1")
                        .bind(id.as_str())
                        .execute(&mut *tx)
                        .await?;
                    JobState::Running
                }
                other => other,
            };
            tx.commit().await?;
            Ok(Some(after))
        })
    }

    fn recover_jobs(&self, worker: &str, now: i64) -> Result<Recovered, StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            let recovered = reclaim(&mut tx, Reclaim::Worker(worker), now).await?;
            tx.commit().await?;
            Ok(recovered)
        })
    }

    fn append_attempt_event(
        &self,
        id: &JobId,
        attempt: Option<u32>,
        kind: &str,
        data: &serde_json::Value,
        now: i64,
    ) -> Result<Option<u64>, StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            // The job's row lock orders its events and fences them against a reclaim.
            let current: Option<(String, i64)> =
                sqlx::query_as("SELECT state, attempt FROM jobs WHERE id = $1 FOR UPDATE")
                    .bind(id.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
            if let Some(attempt) = attempt {
                let running = matches!(&current, Some((state, at))
                    if state == "running" && *at == i64::from(attempt));
                if !running {
                    return Ok(None);
                }
            }
            let labelled = attempt
                .map(i64::from)
                .or(current.as_ref().map(|c| c.1))
                .unwrap_or(0);
            let seq: i64 = sqlx::query_scalar(
                "INSERT INTO job_events (job_id, seq, at_ms, kind, data, attempt) VALUES ($1, \
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job_id = $1), \
                 $2, $3, $4, $5) RETURNING seq",
            )
            .bind(id.as_str())
            .bind(now)
            .bind(kind)
            .bind(data.to_string())
            .bind(labelled)
            .fetch_one(&mut *tx)
            .await?;
            // Every process listening (API replicas following the job's live log) hears of it
            // at commit.
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::postgres_listen::CHANNEL)
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Some(seq.try_into().unwrap_or(0)))
        })
    }

    fn job_events(
        &self,
        id: &JobId,
        attempt: Option<u32>,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreErrorKind> {
        self.run(async {
            let rows: Vec<(i64, i64, String, String, Option<i64>)> = sqlx::query_as(
                "SELECT seq, at_ms, kind, data, attempt FROM job_events WHERE job_id = $1 \
                 AND seq > $2 AND ($4::bigint IS NULL OR attempt = $4) ORDER BY seq LIMIT $3",
            )
            .bind(id.as_str())
            .bind(i64::try_from(after_seq).unwrap_or(i64::MAX))
            .bind(i64::from(limit))
            .bind(attempt.map(i64::from))
            .fetch_all(&self.pool)
            .await?;
            rows.into_iter()
                .map(|(seq, at_ms, kind, data, attempt)| {
                    Ok(JobEvent {
                        seq: seq.try_into().unwrap_or(0),
                        at_ms,
                        kind,
                        data: serde_json::from_str(&data)
                            .map_err(|e| corrupt(format!("job event: {e}")))?,
                        attempt: attempt.and_then(|a| a.try_into().ok()).unwrap_or(0),
                    })
                })
                .collect()
        })
    }
}

/// Chooses the next job within the limits and claims it for `claim.worker` (under the claim
/// lock, so the counts hold for the whole cluster).
async fn choose_and_claim(
    tx: &mut Transaction<'_, Postgres>,
    claim: &Claim<'_>,
    now: i64,
) -> Result<Option<JobRow>, StoreErrorKind> {
    let running: Vec<(String, i64)> =
        sqlx::query_as("SELECT project, slots FROM jobs WHERE state = 'running'")
            .fetch_all(&mut **tx)
            .await?;
    let (total, running) = crate::jobs::busy_slots(claim, running);
    if total >= i64::from(claim.workers) {
        return Ok(None);
    }
    // The head of each project's queue (highest priority, then oldest, then submission order).
    let heads: Vec<(String, String, i64, i64, i64)> = sqlx::query_as(
        "SELECT DISTINCT ON (project) project, id, created_at_ms, seq, slots FROM jobs \
         WHERE state = 'queued' AND not_before_ms <= $1 \
         ORDER BY project, priority DESC, created_at_ms, seq",
    )
    .bind(now)
    .fetch_all(&mut **tx)
    .await?;
    let mut candidates: Vec<(i64, i64, i64, String, String)> = heads
        .into_iter()
        .filter_map(|(project, id, created, order, slots)| {
            let busy = running.get(&project).copied().unwrap_or(0);
            crate::jobs::fits(claim, &project, slots, busy, total)
                .then_some((busy, created, order, id, project))
        })
        .collect();
    candidates.sort();
    // The attempt starts now, after the running jobs were counted: an attempt that ended
    // just before (its end recorded before it committed) never appears to overlap this one.
    let now = now.max(crate::store::now_ms());
    let lease_until =
        now.saturating_add(i64::try_from(claim.lease.as_millis()).unwrap_or(i64::MAX));
    for (_, _, _, id, project) in candidates {
        // A row locked by a concurrent cancel is passed over, not waited for.
        let taken = sqlx::query(&format!(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at_ms = $1, \
             worker = $2, lease_expires_at_ms = $3 WHERE id = (SELECT id FROM jobs \
             WHERE id = $4 AND state = 'queued' FOR UPDATE SKIP LOCKED) RETURNING {JOB_COLUMNS}"
        ))
        .bind(now)
        .bind(claim.worker)
        .bind(lease_until)
        .bind(&id)
        .fetch_optional(&mut **tx)
        .await?;
        let Some(row) = taken else {
            continue;
        };
        let job = job_row(&row)?;
        sqlx::query(
            "INSERT INTO job_attempts (job_id, attempt, project, started_at_ms, worker) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(i64::from(job.attempt))
        .bind(&project)
        .bind(now)
        .bind(claim.worker)
        .execute(&mut **tx)
        .await?;
        return Ok(Some(job));
    }
    Ok(None)
}

/// Reclaims the running jobs `which` names (see `reclaim.rs` for what becomes of them).
async fn reclaim(
    tx: &mut Transaction<'_, Postgres>,
    which: Reclaim<'_>,
    now: i64,
) -> Result<Recovered, StoreErrorKind> {
    let query = match which {
        Reclaim::Expired => sqlx::query_as(
            "SELECT id, attempt, max_attempts, cancel_requested, worker FROM jobs \
             WHERE state = 'running' \
             AND (lease_expires_at_ms IS NULL OR lease_expires_at_ms < $1) \
             ORDER BY id FOR UPDATE SKIP LOCKED",
        )
        .bind(now),
        Reclaim::Worker(worker) => sqlx::query_as(
            "SELECT id, attempt, max_attempts, cancel_requested, worker FROM jobs \
             WHERE state = 'running' AND (worker = $1 OR worker IS NULL) ORDER BY id FOR UPDATE",
        )
        .bind(worker),
    };
    let rows: Vec<(String, i64, i64, i64, Option<String>)> = query.fetch_all(&mut **tx).await?;
    let mut recovered = Recovered::default();
    for (id, attempt, max, cancel, worker) in rows {
        let job_id = parse_job_id(&id)?;
        let failure = reclaim_failure(which, worker.as_deref(), cancel != 0).to_string();
        let state = reclaimed_state(attempt, max, cancel != 0);
        sqlx::query(
            "UPDATE jobs SET state = $1, failure = $2, lease_expires_at_ms = NULL, \
             not_before_ms = CASE WHEN $1 = 'queued' THEN $3 ELSE not_before_ms END, \
             finished_at_ms = CASE WHEN $1 = 'queued' THEN finished_at_ms ELSE $3 END \
             WHERE id = $4",
        )
        .bind(state.as_str())
        .bind(&failure)
        .bind(now)
        .bind(&id)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "UPDATE job_attempts SET finished_at_ms = $1, outcome = 'lost', failure = $2 \
             WHERE job_id = $3 AND attempt = $4",
        )
        .bind(now)
        .bind(&failure)
        .bind(&id)
        .bind(attempt)
        .execute(&mut **tx)
        .await?;
        recovered.add(state, job_id);
    }
    Ok(recovered)
}

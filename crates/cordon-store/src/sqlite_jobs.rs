//! The job queue on SQLite: short transactions; the claim in `BEGIN IMMEDIATE` (one writer at
//! a time, so two claimers can never both take the last slot).

use rusqlite::{Row, Transaction};

use crate::backend::JobBackend;
use crate::error::StoreErrorKind;
use crate::jobs::{
    AttemptEnd, Claim, Claimed, JobEvent, JobFilter, JobId, JobRow, JobState, NewJob, Recovered,
    TokenRow, corrupt,
};
use crate::reclaim::{Reclaim, reclaim_failure, reclaimed_state};
use crate::rows::json;
use crate::sqlite::{SqliteBackend, optional};

const JOB_COLUMNS: &str = "id, project, type, state, priority, attempt, max_attempts, timeout_ms, \
     idempotency_key, inputs, result, failure, cancel_requested, created_at_ms, not_before_ms, \
     started_at_ms, finished_at_ms, submitted_by, worker, lease_expires_at_ms, rerun_of, slots";

fn job_row(row: &Row<'_>) -> Result<JobRow, StoreErrorKind> {
    let id: String = row.get("id")?;
    let state: String = row.get("state")?;
    Ok(JobRow {
        id: id.parse().map_err(|e| corrupt(format!("job id: {e}")))?,
        project: row.get("project")?,
        job_type: row.get("type")?,
        state: state.parse().map_err(corrupt)?,
        priority: row.get("priority")?,
        attempt: row.get::<_, i64>("attempt")?.try_into().unwrap_or(0),
        max_attempts: row.get::<_, i64>("max_attempts")?.try_into().unwrap_or(1),
        timeout_ms: row.get::<_, i64>("timeout_ms")?.try_into().unwrap_or(0),
        idempotency_key: row.get("idempotency_key")?,
        inputs: json(Some(row.get("inputs")?), "job inputs")?.unwrap_or_default(),
        result: json(row.get("result")?, "job result")?,
        failure: json(row.get("failure")?, "job failure")?,
        cancel_requested: row.get::<_, i64>("cancel_requested")? != 0,
        created_at_ms: row.get("created_at_ms")?,
        not_before_ms: row.get("not_before_ms")?,
        started_at_ms: row.get("started_at_ms")?,
        finished_at_ms: row.get("finished_at_ms")?,
        submitted_by: row.get("submitted_by")?,
        worker: row.get("worker")?,
        lease_expires_at_ms: row.get("lease_expires_at_ms")?,
        rerun_of: row
            .get::<_, Option<String>>("rerun_of")?
            .map(|id| id.parse().map_err(|e| corrupt(format!("job id: {e}"))))
            .transpose()?,
        slots: row.get::<_, i64>("slots")?.try_into().unwrap_or(1),
    })
}

pub(crate) fn token_row(row: &Row<'_>) -> Result<TokenRow, StoreErrorKind> {
    let scopes: String = row.get("scopes")?;
    Ok(TokenRow {
        id: row.get("id")?,
        project: row.get("project")?,
        scopes: scopes
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        created_at_ms: row.get("created_at_ms")?,
        expires_at_ms: row.get("expires_at_ms")?,
        revoked_at_ms: row.get("revoked_at_ms")?,
        name: row.get("name")?,
        last_used_at_ms: row.get("last_used_at_ms")?,
    })
}

/// Every row of a query, mapped.
pub(crate) fn collect<T>(
    rows: &mut rusqlite::Rows<'_>,
    map: impl Fn(&Row<'_>) -> Result<T, StoreErrorKind>,
) -> Result<Vec<T>, StoreErrorKind> {
    let mut all = Vec::new();
    while let Some(row) = rows.next()? {
        all.push(map(row)?);
    }
    Ok(all)
}

fn select_job(tx: &Transaction<'_>, id: &str) -> Result<Option<JobRow>, StoreErrorKind> {
    let mut statement =
        tx.prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?;
    let mut rows = statement.query([id])?;
    rows.next()?.map(job_row).transpose()
}

impl JobBackend for SqliteBackend {
    fn insert_job(&self, job: &NewJob, now: i64) -> Result<(JobRow, bool), StoreErrorKind> {
        self.write(|tx| {
            if let Some(key) = &job.idempotency_key {
                let mut statement = tx.prepare_cached(&format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE project = ?1 AND idempotency_key = ?2"
                ))?;
                let mut rows = statement.query((&job.project, key))?;
                if let Some(row) = rows.next()? {
                    return Ok((job_row(row)?, false));
                }
            }
            let id = JobId::generate();
            tx.prepare_cached(
                "INSERT INTO jobs (id, project, type, state, priority, attempt, max_attempts, \
                 timeout_ms, idempotency_key, inputs, created_at_ms, not_before_ms, submitted_by, \
                 rerun_of, slots) \
                 VALUES (?1, ?2, ?3, 'queued', ?4, 0, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12)",
            )?
            .execute(rusqlite::params![
                id.as_str(),
                &job.project,
                &job.job_type,
                job.priority,
                i64::from(job.max_attempts),
                i64::try_from(job.timeout_ms).unwrap_or(i64::MAX),
                &job.idempotency_key,
                job.inputs.to_string(),
                now,
                &job.submitted_by,
                job.rerun_of.as_ref().map(JobId::as_str),
                i64::from(job.slots.max(1)),
            ])?;
            let row = select_job(tx, id.as_str())?
                .ok_or_else(|| corrupt("the inserted job is missing"))?;
            Ok((row, true))
        })
    }

    fn find_job_by_key(&self, project: &str, key: &str) -> Result<Option<JobRow>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE project = ?1 AND idempotency_key = ?2"
            ))?;
            let mut rows = statement.query((project, key))?;
            rows.next()?.map(job_row).transpose()
        })
    }

    fn get_job(&self, id: &JobId) -> Result<Option<JobRow>, StoreErrorKind> {
        self.with(|c| {
            let mut statement =
                c.prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?;
            let mut rows = statement.query([id.as_str()])?;
            rows.next()?.map(job_row).transpose()
        })
    }

    fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>, StoreErrorKind> {
        let mut sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE 1 = 1");
        let mut params: Vec<rusqlite::types::Value> = Vec::new();
        if !filter.projects.is_empty() {
            sql.push_str(" AND project IN (");
            sql.push_str(&vec!["?"; filter.projects.len()].join(", "));
            sql.push(')');
            params.extend(filter.projects.iter().cloned().map(Into::into));
        }
        if let Some(state) = filter.state {
            sql.push_str(" AND state = ?");
            params.push(state.as_str().to_owned().into());
        }
        if let Some((at, id)) = &filter.before {
            sql.push_str(" AND (created_at_ms < ? OR (created_at_ms = ? AND id < ?))");
            params.extend([(*at).into(), (*at).into(), id.clone().into()]);
        }
        sql.push_str(" ORDER BY created_at_ms DESC, id DESC LIMIT ?");
        params.push(i64::from(filter.limit).into());
        self.with(|c| {
            let mut statement = c.prepare_cached(&sql)?;
            let mut rows = statement.query(rusqlite::params_from_iter(params))?;
            collect(&mut rows, job_row)
        })
    }

    fn claim_job(&self, claim: &Claim<'_>, now: i64) -> Result<Claimed, StoreErrorKind> {
        self.write(|tx| {
            // The time the claim really happens: once the write lock is held.
            let now = now.max(crate::store::now_ms());
            let expired = reclaim(tx, Reclaim::Expired, now)?;
            let job = choose_and_claim(tx, claim, now)?;
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
        self.with(|c| {
            let changed = c
                .prepare_cached(
                    "UPDATE jobs SET lease_expires_at_ms = ?1 WHERE id = ?2 AND attempt = ?3 \
                     AND worker = ?4 AND state = 'running'",
                )?
                .execute((until, id.as_str(), i64::from(attempt), worker))?;
            Ok(changed == 1)
        })
    }

    fn expire_leases(&self, now: i64) -> Result<Recovered, StoreErrorKind> {
        self.write(|tx| reclaim(tx, Reclaim::Expired, now))
    }

    fn cancel_requests(&self, worker: &str) -> Result<Vec<(JobId, u32)>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT id, attempt FROM jobs WHERE worker = ?1 AND state = 'running' \
                 AND cancel_requested = 1 ORDER BY id",
            )?;
            let mut rows = statement.query([worker])?;
            collect(&mut rows, |r| {
                let id: String = r.get(0)?;
                Ok((
                    id.parse().map_err(|e| corrupt(format!("job id: {e}")))?,
                    r.get::<_, i64>(1)?.try_into().unwrap_or(0),
                ))
            })
        })
    }

    fn end_attempt(
        &self,
        id: &JobId,
        attempt: u32,
        end: &AttemptEnd,
        now: i64,
    ) -> Result<bool, StoreErrorKind> {
        self.write(|tx| {
            let (outcome, failure) = match end {
                AttemptEnd::Final {
                    state,
                    result,
                    failure,
                    ..
                } => {
                    let changed = tx
                        .prepare_cached(
                            "UPDATE jobs SET state = ?1, result = ?2, failure = ?3, \
                             finished_at_ms = ?4, lease_expires_at_ms = NULL \
                             WHERE id = ?5 AND state = 'running' AND attempt = ?6",
                        )?
                        .execute((
                            state.as_str(),
                            result.as_ref().map(ToString::to_string),
                            failure.as_ref().map(ToString::to_string),
                            now,
                            id.as_str(),
                            i64::from(attempt),
                        ))?;
                    if changed == 0 {
                        return Ok(false);
                    }
                    (state.as_str(), failure.clone())
                }
                AttemptEnd::Retry {
                    not_before_ms,
                    failure,
                    ..
                } => {
                    let changed = tx
                        .prepare_cached(
                            "UPDATE jobs SET state = 'queued', failure = ?1, not_before_ms = ?2, \
                             lease_expires_at_ms = NULL \
                             WHERE id = ?3 AND state = 'running' AND attempt = ?4",
                        )?
                        .execute((
                            failure.to_string(),
                            not_before_ms,
                            id.as_str(),
                            i64::from(attempt),
                        ))?;
                    if changed == 0 {
                        return Ok(false);
                    }
                    ("retry", Some(failure.clone()))
                }
            };
            tx.prepare_cached(
                "UPDATE job_attempts SET finished_at_ms = ?1, outcome = ?2, failure = ?3, \
                 cpu_ms = ?4 WHERE job_id = ?5 AND attempt = ?6",
            )?
            .execute((
                now,
                outcome,
                failure.map(|f| f.to_string()),
                end.cpu_ms().map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
                id.as_str(),
                i64::from(attempt),
            ))?;
            Ok(true)
        })
    }

    fn cancel_job(&self, id: &JobId, now: i64) -> Result<Option<JobState>, StoreErrorKind> {
        self.write(|tx| {
            let state: Option<String> = optional(
                tx.prepare_cached("SELECT state FROM jobs WHERE id = ?1")?
                    .query_row([id.as_str()], |r| r.get(0)),
            )?;
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
                    tx.prepare_cached(
                        "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, \
                         finished_at_ms = ?1, failure = ?2 WHERE id = ?3",
                    )?
                    .execute((now, failure.to_string(), id.as_str()))?;
                    JobState::Cancelled
                }
                JobState::Running => {
                    tx.prepare_cached("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1")?
                        .execute([id.as_str()])?;
                    JobState::Running
                }
                other => other,
            };
            Ok(Some(after))
        })
    }

    fn recover_jobs(&self, worker: &str, now: i64) -> Result<Recovered, StoreErrorKind> {
        self.write(|tx| reclaim(tx, Reclaim::Worker(worker), now))
    }

    fn append_attempt_event(
        &self,
        id: &JobId,
        attempt: Option<u32>,
        kind: &str,
        data: &serde_json::Value,
        now: i64,
    ) -> Result<Option<u64>, StoreErrorKind> {
        self.with(|c| {
            let seq: Option<i64> = optional(
                c.prepare_cached(
                    "INSERT INTO job_events (job_id, seq, at_ms, kind, data, attempt) SELECT ?1, \
                     (SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job_id = ?1), \
                     ?2, ?3, ?4, COALESCE(?5, (SELECT attempt FROM jobs WHERE id = ?1), 0) \
                     WHERE ?5 IS NULL OR EXISTS (SELECT 1 FROM jobs \
                     WHERE id = ?1 AND state = 'running' AND attempt = ?5) RETURNING seq",
                )?
                .query_row(
                    (
                        id.as_str(),
                        now,
                        kind,
                        data.to_string(),
                        attempt.map(i64::from),
                    ),
                    |r| r.get(0),
                ),
            )?;
            Ok(seq.map(|s| s.try_into().unwrap_or(0)))
        })
    }

    fn job_events(
        &self,
        id: &JobId,
        attempt: Option<u32>,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT seq, at_ms, kind, data, attempt FROM job_events WHERE job_id = ?1 \
                 AND seq > ?2 AND (?4 IS NULL OR attempt = ?4) ORDER BY seq LIMIT ?3",
            )?;
            let mut rows = statement.query((
                id.as_str(),
                i64::try_from(after_seq).unwrap_or(i64::MAX),
                i64::from(limit),
                attempt.map(i64::from),
            ))?;
            collect(&mut rows, |r| {
                let data: String = r.get(3)?;
                Ok(JobEvent {
                    seq: r.get::<_, i64>(0)?.try_into().unwrap_or(0),
                    at_ms: r.get(1)?,
                    kind: r.get(2)?,
                    data: serde_json::from_str(&data)
                        .map_err(|e| corrupt(format!("job event: {e}")))?,
                    attempt: r
                        .get::<_, Option<i64>>(4)?
                        .and_then(|a| a.try_into().ok())
                        .unwrap_or(0),
                })
            })
        })
    }
}

/// Chooses the next job within the limits and claims it for `claim.worker`.
fn choose_and_claim(
    tx: &Transaction<'_>,
    claim: &Claim<'_>,
    now: i64,
) -> Result<Option<JobRow>, StoreErrorKind> {
    let running: Vec<(String, i64)> = {
        let mut statement =
            tx.prepare_cached("SELECT project, slots FROM jobs WHERE state = 'running'")?;
        let mut rows = statement.query([])?;
        collect(&mut rows, |r| Ok((r.get(0)?, r.get(1)?)))?
    };
    let (total, running) = crate::jobs::busy_slots(claim, running);
    if total >= i64::from(claim.workers) {
        return Ok(None);
    }
    // The head of each project's queue (highest priority, then oldest; equal times in the
    // order of submission).
    let heads: Vec<(String, String, i64, i64, i64)> = {
        let mut statement = tx.prepare_cached(
            "SELECT project, id, created_at_ms, rowid, slots FROM (SELECT project, id, \
             created_at_ms, rowid, slots, ROW_NUMBER() OVER (PARTITION BY project \
             ORDER BY priority DESC, created_at_ms, rowid) AS n \
             FROM jobs WHERE state = 'queued' AND not_before_ms <= ?1) WHERE n = 1",
        )?;
        let mut rows = statement.query([now])?;
        collect(&mut rows, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
    };
    let chosen = heads
        .into_iter()
        .filter_map(|(project, id, created, order, slots)| {
            let busy = running.get(&project).copied().unwrap_or(0);
            crate::jobs::fits(claim, &project, slots, busy, total)
                .then_some((busy, created, order, id, project))
        })
        .min();
    let Some((_, _, _, id, project)) = chosen else {
        return Ok(None);
    };
    // The attempt starts now, after the running jobs were counted: an attempt that ended
    // just before (its end recorded before it committed) never appears to overlap this one.
    let now = now.max(crate::store::now_ms());
    let lease_until =
        now.saturating_add(i64::try_from(claim.lease.as_millis()).unwrap_or(i64::MAX));
    tx.prepare_cached(
        "UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at_ms = ?1, \
         worker = ?2, lease_expires_at_ms = ?3 WHERE id = ?4 AND state = 'queued'",
    )?
    .execute((now, claim.worker, lease_until, &id))?;
    let job = select_job(tx, &id)?.ok_or_else(|| corrupt("the claimed job is missing"))?;
    tx.prepare_cached(
        "INSERT INTO job_attempts (job_id, attempt, project, started_at_ms, worker) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute((&id, i64::from(job.attempt), &project, now, claim.worker))?;
    Ok(Some(job))
}

/// Reclaims the running jobs `which` names: requeued with their attempt ended as `lost`,
/// `interrupted` when no attempt is left, `cancelled` when a cancel was asked for.
fn reclaim(
    tx: &Transaction<'_>,
    which: Reclaim<'_>,
    now: i64,
) -> Result<Recovered, StoreErrorKind> {
    let rows: Vec<(String, i64, i64, bool, Option<String>)> = {
        let (sql, param): (&str, rusqlite::types::Value) = match which {
            Reclaim::Expired => (
                "SELECT id, attempt, max_attempts, cancel_requested, worker FROM jobs \
                 WHERE state = 'running' \
                 AND (lease_expires_at_ms IS NULL OR lease_expires_at_ms < ?1) ORDER BY id",
                now.into(),
            ),
            Reclaim::Worker(worker) => (
                "SELECT id, attempt, max_attempts, cancel_requested, worker FROM jobs \
                 WHERE state = 'running' AND (worker = ?1 OR worker IS NULL) ORDER BY id",
                worker.to_owned().into(),
            ),
        };
        let mut statement = tx.prepare_cached(sql)?;
        let mut rows = statement.query([param])?;
        collect(&mut rows, |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get::<_, i64>(3)? != 0,
                r.get(4)?,
            ))
        })?
    };
    let mut recovered = Recovered::default();
    for (id, attempt, max, cancel, worker) in rows {
        let job_id: JobId = id.parse().map_err(|e| corrupt(format!("job id: {e}")))?;
        let failure = reclaim_failure(which, worker.as_deref(), cancel).to_string();
        let state = reclaimed_state(attempt, max, cancel);
        tx.prepare_cached(
            "UPDATE jobs SET state = ?1, failure = ?2, lease_expires_at_ms = NULL, \
             not_before_ms = CASE WHEN ?1 = 'queued' THEN ?3 ELSE not_before_ms END, \
             finished_at_ms = CASE WHEN ?1 = 'queued' THEN finished_at_ms ELSE ?3 END \
             WHERE id = ?4",
        )?
        .execute((state.as_str(), &failure, now, &id))?;
        tx.prepare_cached(
            "UPDATE job_attempts SET finished_at_ms = ?1, outcome = 'lost', failure = ?2 \
             WHERE job_id = ?3 AND attempt = ?4",
        )?
        .execute((now, &failure, &id, attempt))?;
        recovered.add(state, job_id);
    }
    Ok(recovered)
}

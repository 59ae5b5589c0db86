//! The job queue on SQLite: short transactions; the claim in `BEGIN IMMEDIATE` (one writer at
//! a time, so two claimers can never both take the last slot).

use std::collections::HashMap;

use rusqlite::{Row, Transaction};

use crate::backend::{AuditEntry, JobBackend, NewToken};
use crate::error::StoreErrorKind;
use crate::jobs::{
    AttemptEnd, JobEvent, JobFilter, JobId, JobRow, JobState, NewJob, Recovered, TokenRow, corrupt,
};
use crate::sqlite::{SqliteBackend, optional};

const JOB_COLUMNS: &str = "id, project, type, state, priority, attempt, max_attempts, timeout_ms, \
     idempotency_key, inputs, result, failure, cancel_requested, created_at_ms, not_before_ms, \
     started_at_ms, finished_at_ms, submitted_by";

fn json(text: Option<String>, what: &str) -> Result<Option<serde_json::Value>, StoreErrorKind> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(format!("{what}: {e}"))))
        .transpose()
}

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
    })
}

fn token_row(row: &Row<'_>) -> Result<TokenRow, StoreErrorKind> {
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
    })
}

/// Every row of a query, mapped.
fn collect<T>(
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
                 timeout_ms, idempotency_key, inputs, created_at_ms, not_before_ms, submitted_by) \
                 VALUES (?1, ?2, ?3, 'queued', ?4, 0, ?5, ?6, ?7, ?8, ?9, ?9, ?10)",
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

    fn claim_job(
        &self,
        workers: u32,
        concurrency: &(dyn Fn(&str) -> u32 + Sync),
        now: i64,
    ) -> Result<Option<JobRow>, StoreErrorKind> {
        self.write(|tx| {
            let running: Vec<(String, i64)> = {
                let mut statement = tx.prepare_cached(
                    "SELECT project, COUNT(*) FROM jobs WHERE state = 'running' GROUP BY project",
                )?;
                let mut rows = statement.query([])?;
                collect(&mut rows, |r| Ok((r.get(0)?, r.get(1)?)))?
            };
            let total: i64 = running.iter().map(|r| r.1).sum();
            if total >= i64::from(workers) {
                return Ok(None);
            }
            let running: HashMap<String, i64> = running.into_iter().collect();
            // The head of each project's queue (highest priority, then oldest).
            let heads: Vec<(String, String, i64)> = {
                let mut statement = tx.prepare_cached(
                    "SELECT project, id, created_at_ms FROM (SELECT project, id, created_at_ms, \
                     ROW_NUMBER() OVER (PARTITION BY project \
                     ORDER BY priority DESC, created_at_ms, id) AS n \
                     FROM jobs WHERE state = 'queued' AND not_before_ms <= ?1) WHERE n = 1",
                )?;
                let mut rows = statement.query([now])?;
                collect(&mut rows, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            };
            let chosen = heads
                .into_iter()
                .filter_map(|(project, id, created)| {
                    let busy = running.get(&project).copied().unwrap_or(0);
                    (busy < i64::from(concurrency(&project)))
                        .then_some((busy, created, id, project))
                })
                .min();
            let Some((_, _, id, project)) = chosen else {
                return Ok(None);
            };
            tx.prepare_cached(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at_ms = ?1 \
                 WHERE id = ?2 AND state = 'queued'",
            )?
            .execute((now, &id))?;
            let job = select_job(tx, &id)?.ok_or_else(|| corrupt("the claimed job is missing"))?;
            tx.prepare_cached(
                "INSERT INTO job_attempts (job_id, attempt, project, started_at_ms) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute((&id, i64::from(job.attempt), &project, now))?;
            Ok(Some(job))
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
                } => {
                    let changed = tx
                        .prepare_cached(
                            "UPDATE jobs SET state = ?1, result = ?2, failure = ?3, \
                             finished_at_ms = ?4 \
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
                } => {
                    let changed = tx
                        .prepare_cached(
                            "UPDATE jobs SET state = 'queued', failure = ?1, not_before_ms = ?2 \
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
                "UPDATE job_attempts SET finished_at_ms = ?1, outcome = ?2, failure = ?3 \
                 WHERE job_id = ?4 AND attempt = ?5",
            )?
            .execute((
                now,
                outcome,
                failure.map(|f| f.to_string()),
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

    fn recover_jobs(&self, now: i64) -> Result<Recovered, StoreErrorKind> {
        self.write(|tx| {
            let rows: Vec<(String, i64, i64)> = {
                let mut statement = tx.prepare_cached(
                    "SELECT id, attempt, max_attempts FROM jobs WHERE state = 'running' ORDER BY id",
                )?;
                let mut rows = statement.query([])?;
                collect(&mut rows, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            };
            let failure = serde_json::json!({
                "category": "infra",
                "reason": "the server stopped while the job ran",
            })
            .to_string();
            let mut recovered = Recovered::default();
            for (id, attempt, max) in rows {
                let job_id: JobId = id.parse().map_err(|e| corrupt(format!("job id: {e}")))?;
                if attempt < max {
                    tx.prepare_cached(
                        "UPDATE jobs SET state = 'queued', failure = ?1, not_before_ms = ?2 \
                         WHERE id = ?3",
                    )?
                    .execute((&failure, now, &id))?;
                    recovered.requeued.push(job_id);
                } else {
                    tx.prepare_cached(
                        "UPDATE jobs SET state = 'interrupted', failure = ?1, finished_at_ms = ?2 \
                         WHERE id = ?3",
                    )?
                    .execute((&failure, now, &id))?;
                    recovered.interrupted.push(job_id);
                }
                tx.prepare_cached(
                    "UPDATE job_attempts SET finished_at_ms = ?1, outcome = 'interrupted', \
                     failure = ?2 WHERE job_id = ?3 AND attempt = ?4",
                )?
                .execute((now, &failure, &id, attempt))?;
            }
            Ok(recovered)
        })
    }

    fn append_job_event(
        &self,
        id: &JobId,
        kind: &str,
        data: &serde_json::Value,
        now: i64,
    ) -> Result<u64, StoreErrorKind> {
        self.with(|c| {
            let seq: i64 = c
                .prepare_cached(
                    "INSERT INTO job_events (job_id, seq, at_ms, kind, data) VALUES (?1, \
                     (SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job_id = ?1), \
                     ?2, ?3, ?4) RETURNING seq",
                )?
                .query_row((id.as_str(), now, kind, data.to_string()), |r| r.get(0))?;
            Ok(seq.try_into().unwrap_or(0))
        })
    }

    fn job_events(
        &self,
        id: &JobId,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT seq, at_ms, kind, data FROM job_events WHERE job_id = ?1 AND seq > ?2 \
                 ORDER BY seq LIMIT ?3",
            )?;
            let mut rows = statement.query((
                id.as_str(),
                i64::try_from(after_seq).unwrap_or(i64::MAX),
                i64::from(limit),
            ))?;
            collect(&mut rows, |r| {
                let data: String = r.get(3)?;
                Ok(JobEvent {
                    seq: r.get::<_, i64>(0)?.try_into().unwrap_or(0),
                    at_ms: r.get(1)?,
                    kind: r.get(2)?,
                    data: serde_json::from_str(&data)
                        .map_err(|e| corrupt(format!("job event: {e}")))?,
                })
            })
        })
    }

    fn project_wall_ms(&self, project: &str, since: i64, now: i64) -> Result<u64, StoreErrorKind> {
        self.with(|c| {
            let total: Option<i64> = c
                .prepare_cached(
                    "SELECT SUM(COALESCE(finished_at_ms, ?1) - MAX(started_at_ms, ?2)) \
                     FROM job_attempts WHERE project = ?3 AND COALESCE(finished_at_ms, ?1) > ?2",
                )?
                .query_row((now, since, project), |r| r.get(0))?;
            Ok(total.unwrap_or(0).max(0).try_into().unwrap_or(0))
        })
    }

    fn running_per_project(&self) -> Result<Vec<(String, u32)>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT project, COUNT(*) FROM jobs WHERE state = 'running' GROUP BY project \
                 ORDER BY project",
            )?;
            let mut rows = statement.query([])?;
            collect(&mut rows, |r| {
                Ok((r.get(0)?, r.get::<_, i64>(1)?.try_into().unwrap_or(0)))
            })
        })
    }

    fn jobs_per_state(&self) -> Result<Vec<(JobState, u64)>, StoreErrorKind> {
        self.with(|c| {
            let mut statement =
                c.prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state")?;
            let mut rows = statement.query([])?;
            collect(&mut rows, |r| {
                let state: String = r.get(0)?;
                Ok((
                    state.parse().map_err(corrupt)?,
                    r.get::<_, i64>(1)?.try_into().unwrap_or(0),
                ))
            })
        })
    }

    fn create_token(&self, token: &NewToken<'_>) -> Result<(), StoreErrorKind> {
        self.with(|c| {
            c.prepare_cached(
                "INSERT INTO api_tokens (id, hash, project, scopes, created_at_ms, expires_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute((
                token.id,
                token.hash,
                token.project,
                token.scopes.join(","),
                token.now,
                token.expires,
            ))?;
            Ok(())
        })
    }

    fn find_token(&self, hash: &str, now: i64) -> Result<Option<TokenRow>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT * FROM api_tokens WHERE hash = ?1 AND revoked_at_ms IS NULL \
                 AND (expires_at_ms IS NULL OR expires_at_ms > ?2)",
            )?;
            let mut rows = statement.query((hash, now))?;
            rows.next()?.map(token_row).transpose()
        })
    }

    fn list_tokens(&self) -> Result<Vec<TokenRow>, StoreErrorKind> {
        self.with(|c| {
            let mut statement =
                c.prepare_cached("SELECT * FROM api_tokens ORDER BY created_at_ms DESC, id")?;
            let mut rows = statement.query([])?;
            collect(&mut rows, token_row)
        })
    }

    fn revoke_token(&self, id: &str, now: i64) -> Result<bool, StoreErrorKind> {
        self.with(|c| {
            let changed = c
                .prepare_cached(
                    "UPDATE api_tokens SET revoked_at_ms = ?1 \
                     WHERE id = ?2 AND revoked_at_ms IS NULL",
                )?
                .execute((now, id))?;
            Ok(changed > 0)
        })
    }

    fn audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreErrorKind> {
        self.with(|c| {
            c.prepare_cached(
                "INSERT INTO audit (at_ms, actor, action, target, detail) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute((
                entry.now,
                entry.actor,
                entry.action,
                entry.target,
                entry.detail.to_string(),
            ))?;
            Ok(())
        })
    }

    fn audit_log(&self) -> Result<Vec<(i64, String, String, String)>, StoreErrorKind> {
        self.with(|c| {
            let mut statement =
                c.prepare_cached("SELECT at_ms, actor, action, target FROM audit ORDER BY seq")?;
            let mut rows = statement.query([])?;
            collect(&mut rows, |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
        })
    }
}

//! The job queue on SQLite: short transactions; the claim in `BEGIN IMMEDIATE`.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::error::StoreErrorKind;
use crate::jobs::{
    AttemptEnd, JobEvent, JobFilter, JobId, JobRow, JobState, NewJob, Recovered, TokenRow, corrupt,
};
use crate::sqlite::SqliteBackend;

const JOB_COLUMNS: &str = "id, project, type, state, priority, attempt, max_attempts, timeout_ms, \
     idempotency_key, inputs, result, failure, cancel_requested, created_at_ms, not_before_ms, \
     started_at_ms, finished_at_ms, submitted_by";

fn json(text: Option<String>, what: &str) -> Result<Option<serde_json::Value>, StoreErrorKind> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(format!("{what}: {e}"))))
        .transpose()
}

fn job_row(row: &SqliteRow) -> Result<JobRow, StoreErrorKind> {
    let id: String = row.try_get("id")?;
    let state: String = row.try_get("state")?;
    Ok(JobRow {
        id: id.parse().map_err(|e| corrupt(format!("job id: {e}")))?,
        project: row.try_get("project")?,
        job_type: row.try_get("type")?,
        state: state.parse().map_err(corrupt)?,
        priority: row.try_get("priority")?,
        attempt: row.try_get::<i64, _>("attempt")?.try_into().unwrap_or(0),
        max_attempts: row
            .try_get::<i64, _>("max_attempts")?
            .try_into()
            .unwrap_or(1),
        timeout_ms: row.try_get::<i64, _>("timeout_ms")?.try_into().unwrap_or(0),
        idempotency_key: row.try_get("idempotency_key")?,
        inputs: json(Some(row.try_get("inputs")?), "job inputs")?.unwrap_or_default(),
        result: json(row.try_get("result")?, "job result")?,
        failure: json(row.try_get("failure")?, "job failure")?,
        cancel_requested: row.try_get::<i64, _>("cancel_requested")? != 0,
        created_at_ms: row.try_get("created_at_ms")?,
        not_before_ms: row.try_get("not_before_ms")?,
        started_at_ms: row.try_get("started_at_ms")?,
        finished_at_ms: row.try_get("finished_at_ms")?,
        submitted_by: row.try_get("submitted_by")?,
    })
}

fn token_row(row: &SqliteRow) -> Result<TokenRow, StoreErrorKind> {
    let scopes: String = row.try_get("scopes")?;
    Ok(TokenRow {
        id: row.try_get("id")?,
        project: row.try_get("project")?,
        scopes: scopes
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        created_at_ms: row.try_get("created_at_ms")?,
        expires_at_ms: row.try_get("expires_at_ms")?,
        revoked_at_ms: row.try_get("revoked_at_ms")?,
    })
}

impl SqliteBackend {
    pub(crate) async fn insert_job(
        &self,
        job: &NewJob,
        now: i64,
    ) -> Result<(JobRow, bool), StoreErrorKind> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        if let Some(key) = &job.idempotency_key {
            let existing = sqlx::query(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE project = ? AND idempotency_key = ?"
            ))
            .bind(&job.project)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(row) = existing {
                return Ok((job_row(&row)?, false));
            }
        }
        let id = JobId::generate();
        sqlx::query(
            "INSERT INTO jobs (id, project, type, state, priority, attempt, max_attempts, \
             timeout_ms, idempotency_key, inputs, created_at_ms, not_before_ms, submitted_by) \
             VALUES (?, ?, ?, 'queued', ?, 0, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.as_str())
        .bind(&job.project)
        .bind(&job.job_type)
        .bind(job.priority)
        .bind(i64::from(job.max_attempts))
        .bind(i64::try_from(job.timeout_ms).unwrap_or(i64::MAX))
        .bind(&job.idempotency_key)
        .bind(job.inputs.to_string())
        .bind(now)
        .bind(now)
        .bind(&job.submitted_by)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?"))
            .bind(id.as_str())
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((job_row(&row)?, true))
    }

    pub(crate) async fn find_job_by_key(
        &self,
        project: &str,
        key: &str,
    ) -> Result<Option<JobRow>, StoreErrorKind> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE project = ? AND idempotency_key = ?"
        ))
        .bind(project)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    pub(crate) async fn get_job(&self, id: &JobId) -> Result<Option<JobRow>, StoreErrorKind> {
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?"))
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    pub(crate) async fn list_jobs(
        &self,
        filter: &JobFilter,
    ) -> Result<Vec<JobRow>, StoreErrorKind> {
        let mut sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE 1 = 1");
        if !filter.projects.is_empty() {
            sql.push_str(" AND project IN (");
            sql.push_str(&vec!["?"; filter.projects.len()].join(", "));
            sql.push(')');
        }
        if filter.state.is_some() {
            sql.push_str(" AND state = ?");
        }
        if filter.before.is_some() {
            sql.push_str(" AND (created_at_ms < ? OR (created_at_ms = ? AND id < ?))");
        }
        sql.push_str(" ORDER BY created_at_ms DESC, id DESC LIMIT ?");
        let mut query = sqlx::query(&sql);
        for project in &filter.projects {
            query = query.bind(project);
        }
        if let Some(state) = filter.state {
            query = query.bind(state.as_str());
        }
        if let Some((at, id)) = &filter.before {
            query = query.bind(*at).bind(*at).bind(id);
        }
        let rows = query
            .bind(i64::from(filter.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_row).collect()
    }

    pub(crate) async fn claim_job(
        &self,
        workers: u32,
        concurrency: &(dyn Fn(&str) -> u32 + Sync),
        now: i64,
    ) -> Result<Option<JobRow>, StoreErrorKind> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let running: Vec<(String, i64)> = sqlx::query_as(
            "SELECT project, COUNT(*) FROM jobs WHERE state = 'running' GROUP BY project",
        )
        .fetch_all(&mut *tx)
        .await?;
        let total: i64 = running.iter().map(|r| r.1).sum();
        if total >= i64::from(workers) {
            return Ok(None);
        }
        let running: HashMap<String, i64> = running.into_iter().collect();
        // The head of each project's queue (highest priority, then oldest).
        let heads: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT project, id, created_at_ms FROM (SELECT project, id, created_at_ms, \
             ROW_NUMBER() OVER (PARTITION BY project ORDER BY priority DESC, created_at_ms, id) \
             AS n FROM jobs WHERE state = 'queued' AND not_before_ms <= ?) WHERE n = 1",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let chosen = heads
            .into_iter()
            .filter_map(|(project, id, created)| {
                let busy = running.get(&project).copied().unwrap_or(0);
                (busy < i64::from(concurrency(&project))).then_some((busy, created, id, project))
            })
            .min();
        let Some((_, _, id, project)) = chosen else {
            return Ok(None);
        };
        let row = sqlx::query(&format!(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at_ms = ? \
             WHERE id = ? AND state = 'queued' RETURNING {JOB_COLUMNS}"
        ))
        .bind(now)
        .bind(&id)
        .fetch_one(&mut *tx)
        .await?;
        let job = job_row(&row)?;
        sqlx::query(
            "INSERT INTO job_attempts (job_id, attempt, project, started_at_ms) VALUES (?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(i64::from(job.attempt))
        .bind(&project)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(job))
    }

    pub(crate) async fn end_attempt(
        &self,
        id: &JobId,
        attempt: u32,
        end: &AttemptEnd,
        now: i64,
    ) -> Result<bool, StoreErrorKind> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (outcome, failure) = match end {
            AttemptEnd::Final {
                state,
                result,
                failure,
            } => {
                let changed = sqlx::query(
                    "UPDATE jobs SET state = ?, result = ?, failure = ?, finished_at_ms = ? \
                     WHERE id = ? AND state = 'running' AND attempt = ?",
                )
                .bind(state.as_str())
                .bind(result.as_ref().map(ToString::to_string))
                .bind(failure.as_ref().map(ToString::to_string))
                .bind(now)
                .bind(id.as_str())
                .bind(i64::from(attempt))
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if changed == 0 {
                    return Ok(false);
                }
                (state.as_str(), failure.clone())
            }
            AttemptEnd::Retry {
                not_before_ms,
                failure,
            } => {
                let changed = sqlx::query(
                    "UPDATE jobs SET state = 'queued', failure = ?, not_before_ms = ? \
                     WHERE id = ? AND state = 'running' AND attempt = ?",
                )
                .bind(failure.to_string())
                .bind(not_before_ms)
                .bind(id.as_str())
                .bind(i64::from(attempt))
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if changed == 0 {
                    return Ok(false);
                }
                ("retry", Some(failure.clone()))
            }
        };
        sqlx::query(
            "UPDATE job_attempts SET finished_at_ms = ?, outcome = ?, failure = ? \
             WHERE job_id = ? AND attempt = ?",
        )
        .bind(now)
        .bind(outcome)
        .bind(failure.map(|f| f.to_string()))
        .bind(id.as_str())
        .bind(i64::from(attempt))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(crate) async fn cancel_job(
        &self,
        id: &JobId,
        now: i64,
    ) -> Result<Option<JobState>, StoreErrorKind> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let state: Option<String> = sqlx::query_scalar("SELECT state FROM jobs WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(state) = state else {
            return Ok(None);
        };
        let state: JobState = state.parse().map_err(corrupt)?;
        let after = match state {
            JobState::Queued => {
                sqlx::query(
                    "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, \
                     finished_at_ms = ?, failure = ? WHERE id = ?",
                )
                .bind(now)
                .bind(
                    serde_json::json!({"category": "cancelled", "reason": "cancelled before it ran"})
                        .to_string(),
                )
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?;
                JobState::Cancelled
            }
            JobState::Running => {
                sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = ?")
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                JobState::Running
            }
            other => other,
        };
        tx.commit().await?;
        Ok(Some(after))
    }

    pub(crate) async fn recover_jobs(&self, now: i64) -> Result<Recovered, StoreErrorKind> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT id, attempt, max_attempts FROM jobs WHERE state = 'running' ORDER BY id",
        )
        .fetch_all(&mut *tx)
        .await?;
        let failure = serde_json::json!({
            "category": "infra",
            "reason": "the server stopped while the job ran",
        })
        .to_string();
        let mut recovered = Recovered::default();
        for (id, attempt, max) in rows {
            let job_id: JobId = id.parse().map_err(|e| corrupt(format!("job id: {e}")))?;
            let requeue = attempt < max;
            if requeue {
                sqlx::query(
                    "UPDATE jobs SET state = 'queued', failure = ?, not_before_ms = ? WHERE id = ?",
                )
                .bind(&failure)
                .bind(now)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
                recovered.requeued.push(job_id);
            } else {
                sqlx::query(
                    "UPDATE jobs SET state = 'interrupted', failure = ?, finished_at_ms = ? \
                     WHERE id = ?",
                )
                .bind(&failure)
                .bind(now)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
                recovered.interrupted.push(job_id);
            }
            sqlx::query(
                "UPDATE job_attempts SET finished_at_ms = ?, outcome = 'interrupted', failure = ? \
                 WHERE job_id = ? AND attempt = ?",
            )
            .bind(now)
            .bind(&failure)
            .bind(&id)
            .bind(attempt)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(recovered)
    }

    pub(crate) async fn append_job_event(
        &self,
        id: &JobId,
        kind: &str,
        data: &serde_json::Value,
        now: i64,
    ) -> Result<u64, StoreErrorKind> {
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO job_events (job_id, seq, at_ms, kind, data) VALUES (?1, \
             (SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job_id = ?1), ?2, ?3, ?4) \
             RETURNING seq",
        )
        .bind(id.as_str())
        .bind(now)
        .bind(kind)
        .bind(data.to_string())
        .fetch_one(&self.pool)
        .await?;
        Ok(seq.try_into().unwrap_or(0))
    }

    pub(crate) async fn job_events(
        &self,
        id: &JobId,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, StoreErrorKind> {
        let rows: Vec<(i64, i64, String, String)> = sqlx::query_as(
            "SELECT seq, at_ms, kind, data FROM job_events WHERE job_id = ? AND seq > ? \
             ORDER BY seq LIMIT ?",
        )
        .bind(id.as_str())
        .bind(i64::try_from(after_seq).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(seq, at_ms, kind, data)| {
                Ok(JobEvent {
                    seq: seq.try_into().unwrap_or(0),
                    at_ms,
                    kind,
                    data: serde_json::from_str(&data)
                        .map_err(|e| corrupt(format!("job event: {e}")))?,
                })
            })
            .collect()
    }

    pub(crate) async fn project_wall_ms(
        &self,
        project: &str,
        since: i64,
        now: i64,
    ) -> Result<u64, StoreErrorKind> {
        let total: Option<i64> = sqlx::query_scalar(
            "SELECT SUM(COALESCE(finished_at_ms, ?) - MAX(started_at_ms, ?)) FROM job_attempts \
             WHERE project = ? AND COALESCE(finished_at_ms, ?) > ?",
        )
        .bind(now)
        .bind(since)
        .bind(project)
        .bind(now)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(total.unwrap_or(0).max(0).try_into().unwrap_or(0))
    }

    pub(crate) async fn running_per_project(&self) -> Result<Vec<(String, u32)>, StoreErrorKind> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT project, COUNT(*) FROM jobs WHERE state = 'running' GROUP BY project \
             ORDER BY project",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(p, n)| (p, n.try_into().unwrap_or(0)))
            .collect())
    }

    pub(crate) async fn jobs_per_state(&self) -> Result<Vec<(JobState, u64)>, StoreErrorKind> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state")
                .fetch_all(&self.pool)
                .await?;
        rows.into_iter()
            .map(|(s, n)| Ok((s.parse().map_err(corrupt)?, n.try_into().unwrap_or(0))))
            .collect()
    }

    pub(crate) async fn create_token(
        &self,
        id: &str,
        hash: &str,
        project: &str,
        scopes: &[String],
        now: i64,
        expires: Option<i64>,
    ) -> Result<(), StoreErrorKind> {
        sqlx::query(
            "INSERT INTO api_tokens (id, hash, project, scopes, created_at_ms, expires_at_ms) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(hash)
        .bind(project)
        .bind(scopes.join(","))
        .bind(now)
        .bind(expires)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn find_token(
        &self,
        hash: &str,
        now: i64,
    ) -> Result<Option<TokenRow>, StoreErrorKind> {
        let row = sqlx::query(
            "SELECT * FROM api_tokens WHERE hash = ? AND revoked_at_ms IS NULL \
             AND (expires_at_ms IS NULL OR expires_at_ms > ?)",
        )
        .bind(hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(token_row).transpose()
    }

    pub(crate) async fn list_tokens(&self) -> Result<Vec<TokenRow>, StoreErrorKind> {
        let rows = sqlx::query("SELECT * FROM api_tokens ORDER BY created_at_ms DESC, id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(token_row).collect()
    }

    pub(crate) async fn revoke_token(&self, id: &str, now: i64) -> Result<bool, StoreErrorKind> {
        let changed = sqlx::query(
            "UPDATE api_tokens SET revoked_at_ms = ? WHERE id = ? AND revoked_at_ms IS NULL",
        )
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(changed > 0)
    }

    pub(crate) async fn audit(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        detail: &serde_json::Value,
        now: i64,
    ) -> Result<(), StoreErrorKind> {
        sqlx::query(
            "INSERT INTO audit (at_ms, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(now)
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(detail.to_string())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn audit_log(
        &self,
    ) -> Result<Vec<(i64, String, String, String)>, StoreErrorKind> {
        Ok(
            sqlx::query_as("SELECT at_ms, actor, action, target FROM audit ORDER BY seq")
                .fetch_all(&self.pool)
                .await?,
        )
    }
}

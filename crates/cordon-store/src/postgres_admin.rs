//! The service around the queue on PostgreSQL: usage for budgets, metrics, API tokens, audit.

use sqlx::postgres::PgRow;

use crate::backend::{AuditEntry, NewToken, ServiceBackend};
use crate::error::StoreErrorKind;
use crate::jobs::{
    AttemptHistogram, AttemptTiming, JobState, QueueDepth, RunningJobs, TokenRow, Usage, corrupt,
    histogram_sql,
};
use crate::postgres::{PostgresBackend, get};

/// A count or duration read back as unsigned (never negative in a sound store).
fn unsigned<T: TryFrom<i64> + Default>(value: i64) -> T {
    T::try_from(value).unwrap_or_default()
}

pub(crate) fn token_row(row: &PgRow) -> Result<TokenRow, StoreErrorKind> {
    let scopes: String = get(row, 3)?;
    Ok(TokenRow {
        id: get(row, 0)?,
        project: get(row, 2)?,
        scopes: scopes
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        created_at_ms: get(row, 4)?,
        expires_at_ms: get(row, 5)?,
        revoked_at_ms: get(row, 6)?,
        name: get(row, 7)?,
        last_used_at_ms: get(row, 8)?,
    })
}

pub(crate) const TOKEN_COLUMNS: &str =
    "id, hash, project, scopes, created_at_ms, expires_at_ms, revoked_at_ms, name, last_used_at_ms";

impl ServiceBackend for PostgresBackend {
    fn project_usage(&self, project: &str, since: i64, now: i64) -> Result<Usage, StoreErrorKind> {
        self.run(async {
            let (wall, cpu): (Option<i64>, Option<i64>) = sqlx::query_as(
                "SELECT SUM((COALESCE(a.finished_at_ms, $1) - GREATEST(a.started_at_ms, $2)) \
                 * COALESCE(j.slots, 1))::bigint, \
                 SUM(CASE WHEN a.finished_at_ms IS NOT NULL THEN a.cpu_ms END)::bigint \
                 FROM job_attempts a LEFT JOIN jobs j ON j.id = a.job_id \
                 WHERE a.project = $3 AND COALESCE(a.finished_at_ms, $1) > $2",
            )
            .bind(now)
            .bind(since)
            .bind(project)
            .fetch_one(&self.pool)
            .await?;
            Ok(Usage {
                wall_ms: unsigned(wall.unwrap_or(0)),
                cpu_ms: unsigned(cpu.unwrap_or(0)),
            })
        })
    }

    fn attempt_timings(
        &self,
        since: i64,
        limit: u32,
    ) -> Result<Vec<AttemptTiming>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(
                "SELECT a.job_id, a.attempt, a.project, j.type, a.worker, a.outcome, \
                 a.started_at_ms, a.finished_at_ms - a.started_at_ms, a.cpu_ms \
                 FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
                 WHERE a.finished_at_ms >= $1 \
                 ORDER BY a.finished_at_ms, a.job_id, a.attempt LIMIT $2",
            )
            .bind(since)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|r| {
                    let id: String = get(r, 0)?;
                    Ok(AttemptTiming {
                        job_id: id.parse().map_err(|e| corrupt(format!("job id: {e}")))?,
                        attempt: unsigned(get(r, 1)?),
                        project: get(r, 2)?,
                        job_type: get(r, 3)?,
                        worker: get(r, 4)?,
                        outcome: get::<Option<String>>(r, 5)?.unwrap_or_default(),
                        started_at_ms: get(r, 6)?,
                        duration_ms: unsigned(get(r, 7)?),
                        cpu_ms: get::<Option<i64>>(r, 8)?.map(unsigned),
                    })
                })
                .collect()
        })
    }

    fn attempt_histogram(
        &self,
        bounds_ms: &[u64],
    ) -> Result<Vec<AttemptHistogram>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(&histogram_sql(bounds_ms))
                .fetch_all(&self.pool)
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(AttemptHistogram {
                        project: get(r, 0)?,
                        job_type: get(r, 1)?,
                        outcome: get(r, 2)?,
                        count: unsigned(get(r, 3)?),
                        sum_ms: unsigned(get(r, 4)?),
                        at_most: (0..bounds_ms.len())
                            .map(|i| get::<i64>(r, 5 + i).map(unsigned))
                            .collect::<Result<_, _>>()?,
                    })
                })
                .collect()
        })
    }

    fn queue_depth(&self, now: i64) -> Result<Vec<QueueDepth>, StoreErrorKind> {
        self.run(async {
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(
                "SELECT project, COUNT(*), COUNT(*) FILTER (WHERE not_before_ms <= $1) \
                 FROM jobs WHERE state = 'queued' GROUP BY project ORDER BY project",
            )
            .bind(now)
            .fetch_all(&self.pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|(project, queued, ready)| QueueDepth {
                    project,
                    queued: unsigned(queued),
                    ready: unsigned(ready),
                })
                .collect())
        })
    }

    fn running_per_project(&self) -> Result<Vec<RunningJobs>, StoreErrorKind> {
        self.run(async {
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(
                "SELECT project, COUNT(*), SUM(GREATEST(slots, 1))::bigint FROM jobs \
                 WHERE state = 'running' GROUP BY project ORDER BY project",
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|(project, jobs, slots)| RunningJobs {
                    project,
                    jobs: unsigned(jobs),
                    slots: unsigned(slots),
                })
                .collect())
        })
    }

    fn jobs_per_state(&self) -> Result<Vec<(JobState, u64)>, StoreErrorKind> {
        self.run(async {
            let rows: Vec<(String, i64)> =
                sqlx::query_as("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state")
                    .fetch_all(&self.pool)
                    .await?;
            rows.into_iter()
                .map(|(s, n)| Ok((s.parse().map_err(corrupt)?, unsigned(n))))
                .collect()
        })
    }

    fn create_token(&self, token: &NewToken<'_>) -> Result<(), StoreErrorKind> {
        self.run(async {
            sqlx::query(
                "INSERT INTO api_tokens (id, hash, project, scopes, created_at_ms, expires_at_ms, \
                 name) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(token.id)
            .bind(token.hash)
            .bind(token.project)
            .bind(token.scopes.join(","))
            .bind(token.now)
            .bind(token.expires)
            .bind(token.name)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
    }

    fn find_token(&self, hash: &str, now: i64) -> Result<Option<TokenRow>, StoreErrorKind> {
        self.run(async {
            let row = sqlx::query(&format!(
                "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE hash = $1 \
                 AND revoked_at_ms IS NULL AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
            ))
            .bind(hash)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
            row.as_ref().map(token_row).transpose()
        })
    }

    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>, StoreErrorKind> {
        self.run(async {
            let row = sqlx::query(&format!(
                "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE hash = $1"
            ))
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
            row.as_ref().map(token_row).transpose()
        })
    }

    fn touch_token(&self, id: &str, at: i64) -> Result<(), StoreErrorKind> {
        self.run(async {
            sqlx::query("UPDATE api_tokens SET last_used_at_ms = $1 WHERE id = $2")
                .bind(at)
                .bind(id)
                .execute(&self.pool)
                .await?;
            Ok(())
        })
    }

    fn list_tokens(&self) -> Result<Vec<TokenRow>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(&format!(
                "SELECT {TOKEN_COLUMNS} FROM api_tokens ORDER BY created_at_ms DESC, id"
            ))
            .fetch_all(&self.pool)
            .await?;
            rows.iter().map(token_row).collect()
        })
    }

    fn revoke_token(&self, id: &str, now: i64) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query(
                "UPDATE api_tokens SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL",
            )
            .bind(now)
            .bind(id)
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
    }

    fn audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreErrorKind> {
        self.run(async {
            sqlx::query(
                "INSERT INTO audit (at_ms, actor, action, target, detail) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(entry.now)
            .bind(entry.actor)
            .bind(entry.action)
            .bind(entry.target)
            .bind(entry.detail.to_string())
            .execute(&self.pool)
            .await?;
            Ok(())
        })
    }

    fn audit_log(&self) -> Result<Vec<(i64, String, String, String)>, StoreErrorKind> {
        self.run(async {
            Ok(
                sqlx::query_as("SELECT at_ms, actor, action, target FROM audit ORDER BY seq")
                    .fetch_all(&self.pool)
                    .await?,
            )
        })
    }
}

//! The service around the queue on SQLite: usage for budgets, metrics, API tokens, audit.

use crate::backend::{AuditEntry, NewToken, ServiceBackend};
use crate::error::StoreErrorKind;
use crate::jobs::{
    AttemptHistogram, AttemptTiming, JobState, QueueDepth, RunningJobs, TokenRow, Usage, corrupt,
    histogram_sql,
};
use crate::sqlite::SqliteBackend;
use crate::sqlite_jobs::{collect, token_row};

/// A count or duration read back as unsigned (never negative in a sound store).
fn unsigned<T: TryFrom<i64> + Default>(value: i64) -> T {
    T::try_from(value).unwrap_or_default()
}

impl ServiceBackend for SqliteBackend {
    fn project_usage(&self, project: &str, since: i64, now: i64) -> Result<Usage, StoreErrorKind> {
        self.with(|c| {
            let (wall, cpu): (Option<i64>, Option<i64>) = c
                .prepare_cached(
                    "SELECT SUM((COALESCE(a.finished_at_ms, ?1) - MAX(a.started_at_ms, ?2)) \
                     * COALESCE(j.slots, 1)), \
                     SUM(CASE WHEN a.finished_at_ms IS NOT NULL THEN a.cpu_ms END) \
                     FROM job_attempts a LEFT JOIN jobs j ON j.id = a.job_id \
                     WHERE a.project = ?3 AND COALESCE(a.finished_at_ms, ?1) > ?2",
                )?
                .query_row((now, since, project), |r| Ok((r.get(0)?, r.get(1)?)))?;
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
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT a.job_id, a.attempt, a.project, j.type, a.worker, a.outcome, \
                 a.started_at_ms, a.finished_at_ms - a.started_at_ms, a.cpu_ms \
                 FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
                 WHERE a.finished_at_ms >= ?1 \
                 ORDER BY a.finished_at_ms, a.job_id, a.attempt LIMIT ?2",
            )?;
            let mut rows = statement.query((since, i64::from(limit)))?;
            collect(&mut rows, |r| {
                let id: String = r.get(0)?;
                Ok(AttemptTiming {
                    job_id: id.parse().map_err(|e| corrupt(format!("job id: {e}")))?,
                    attempt: unsigned(r.get(1)?),
                    project: r.get(2)?,
                    job_type: r.get(3)?,
                    worker: r.get(4)?,
                    outcome: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                    started_at_ms: r.get(6)?,
                    duration_ms: unsigned(r.get(7)?),
                    cpu_ms: r.get::<_, Option<i64>>(8)?.map(unsigned),
                })
            })
        })
    }

    fn attempt_histogram(
        &self,
        bounds_ms: &[u64],
    ) -> Result<Vec<AttemptHistogram>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare(&histogram_sql(bounds_ms))?;
            let mut rows = statement.query([])?;
            collect(&mut rows, |r| {
                Ok(AttemptHistogram {
                    project: r.get(0)?,
                    job_type: r.get(1)?,
                    outcome: r.get(2)?,
                    count: unsigned(r.get(3)?),
                    sum_ms: unsigned(r.get(4)?),
                    at_most: (0..bounds_ms.len())
                        .map(|i| r.get::<_, i64>(5 + i).map(unsigned))
                        .collect::<Result<_, _>>()?,
                })
            })
        })
    }

    fn queue_depth(&self, now: i64) -> Result<Vec<QueueDepth>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT project, COUNT(*), SUM(not_before_ms <= ?1) FROM jobs \
                 WHERE state = 'queued' GROUP BY project ORDER BY project",
            )?;
            let mut rows = statement.query([now])?;
            collect(&mut rows, |r| {
                Ok(QueueDepth {
                    project: r.get(0)?,
                    queued: unsigned(r.get(1)?),
                    ready: unsigned(r.get(2)?),
                })
            })
        })
    }

    fn running_per_project(&self) -> Result<Vec<RunningJobs>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT project, COUNT(*), SUM(MAX(slots, 1)) FROM jobs WHERE state = 'running' \
                 GROUP BY project ORDER BY project",
            )?;
            let mut rows = statement.query([])?;
            collect(&mut rows, |r| {
                Ok(RunningJobs {
                    project: r.get(0)?,
                    jobs: unsigned(r.get(1)?),
                    slots: unsigned(r.get(2)?),
                })
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
                Ok((state.parse().map_err(corrupt)?, unsigned(r.get(1)?)))
            })
        })
    }

    fn create_token(&self, token: &NewToken<'_>) -> Result<(), StoreErrorKind> {
        self.with(|c| {
            c.prepare_cached(
                "INSERT INTO api_tokens (id, hash, project, scopes, created_at_ms, expires_at_ms, \
                 name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute((
                token.id,
                token.hash,
                token.project,
                token.scopes.join(","),
                token.now,
                token.expires,
                token.name,
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

    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached("SELECT * FROM api_tokens WHERE hash = ?1")?;
            let mut rows = statement.query([hash])?;
            rows.next()?.map(token_row).transpose()
        })
    }

    fn touch_token(&self, id: &str, at: i64) -> Result<(), StoreErrorKind> {
        self.with(|c| {
            c.prepare_cached("UPDATE api_tokens SET last_used_at_ms = ?1 WHERE id = ?2")?
                .execute((at, id))?;
            Ok(())
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

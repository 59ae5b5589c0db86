//! What operators see, on PostgreSQL: workers and their heartbeats, a job's attempts, webhook
//! deliveries and their tries. A due delivery is taken with `FOR UPDATE SKIP LOCKED`, so
//! processes on many machines share the deliveries without sending one twice at once.

use std::collections::HashMap;

use sqlx::postgres::PgRow;

use crate::backend::{OpsBackend, QueuedDeliveries};
use crate::error::StoreErrorKind;
use crate::jobs::{AttemptRow, JobId, corrupt};
use crate::postgres::{PostgresBackend, get};
use crate::rows::json;
use crate::webhooks::{DeliveryRow, DeliveryState, DeliveryTry, TryVerdict};
use crate::workers::{WorkerInfo, WorkerRow};

/// A try of a webhook delivery as read: delivery id, try, at, duration, status, error.
type TryColumns = (String, i64, i64, i64, Option<i64>, Option<String>);

fn unsigned<T: TryFrom<i64> + Default>(value: i64) -> T {
    T::try_from(value).unwrap_or_default()
}

fn job_id(text: &str) -> Result<JobId, StoreErrorKind> {
    text.parse().map_err(|e| corrupt(format!("job id: {e}")))
}

const DELIVERY_COLUMNS: &str = "id, job_id, project, url, secret, body, state, tries, max_tries, \
     next_at_ms, created_at_ms, finished_at_ms";

fn delivery_row(row: &PgRow) -> Result<DeliveryRow, StoreErrorKind> {
    let state: String = get(row, 6)?;
    Ok(DeliveryRow {
        id: get(row, 0)?,
        job_id: job_id(&get::<String>(row, 1)?)?,
        project: get(row, 2)?,
        url: get(row, 3)?,
        secret: get(row, 4)?,
        body: get(row, 5)?,
        state: DeliveryState::parse(&state)
            .ok_or_else(|| corrupt(format!("delivery state {state:?}")))?,
        tries: unsigned(get(row, 7)?),
        max_tries: unsigned(get(row, 8)?),
        next_at_ms: get(row, 9)?,
        created_at_ms: get(row, 10)?,
        finished_at_ms: get(row, 11)?,
        try_log: Vec::new(),
    })
}

impl OpsBackend for PostgresBackend {
    fn register_worker(&self, worker: &WorkerInfo, now: i64) -> Result<(), StoreErrorKind> {
        self.run(async {
            sqlx::query(
                "INSERT INTO workers (name, host, version, pid, slots, lease_ms, started_at_ms, \
                 heartbeat_at_ms, draining) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, 0) \
                 ON CONFLICT (name) DO UPDATE SET host = $2, version = $3, pid = $4, slots = $5, \
                 lease_ms = $6, started_at_ms = $7, heartbeat_at_ms = $7, draining = 0",
            )
            .bind(&worker.name)
            .bind(&worker.host)
            .bind(&worker.version)
            .bind(i64::from(worker.pid))
            .bind(i64::from(worker.slots))
            .bind(i64::try_from(worker.lease.as_millis()).unwrap_or(i64::MAX))
            .bind(now)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
    }

    fn worker_heartbeat(&self, name: &str, now: i64) -> Result<Option<bool>, StoreErrorKind> {
        self.run(async {
            let draining: Option<i64> = sqlx::query_scalar(
                "UPDATE workers SET heartbeat_at_ms = $1 WHERE name = $2 RETURNING draining",
            )
            .bind(now)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
            Ok(draining.map(|d| d != 0))
        })
    }

    fn drain_worker(&self, name: &str) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query("UPDATE workers SET draining = 1 WHERE name = $1")
                .bind(name)
                .execute(&self.pool)
                .await?;
            Ok(done.rows_affected() > 0)
        })
    }

    fn remove_worker(&self, name: &str) -> Result<(), StoreErrorKind> {
        self.run(async {
            sqlx::query("DELETE FROM workers WHERE name = $1")
                .bind(name)
                .execute(&self.pool)
                .await?;
            Ok(())
        })
    }

    fn forget_lost_workers(&self, before: i64) -> Result<u64, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query("DELETE FROM workers WHERE heartbeat_at_ms + lease_ms < $1")
                .bind(before)
                .execute(&self.pool)
                .await?;
            Ok(done.rows_affected())
        })
    }

    fn list_workers(&self) -> Result<Vec<WorkerRow>, StoreErrorKind> {
        self.run(async {
            let jobs: Vec<(String, String)> = sqlx::query_as(
                "SELECT worker, id FROM jobs WHERE state = 'running' AND worker IS NOT NULL \
                 ORDER BY started_at_ms, id",
            )
            .fetch_all(&self.pool)
            .await?;
            let mut running: HashMap<String, Vec<JobId>> = HashMap::new();
            for (worker, id) in jobs {
                running.entry(worker).or_default().push(job_id(&id)?);
            }
            let rows = sqlx::query(
                "SELECT name, host, version, pid, slots, lease_ms, started_at_ms, \
                 heartbeat_at_ms, draining FROM workers ORDER BY name",
            )
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|r| {
                    let name: String = get(r, 0)?;
                    Ok(WorkerRow {
                        running: running.remove(&name).unwrap_or_default(),
                        name,
                        host: get(r, 1)?,
                        version: get(r, 2)?,
                        pid: unsigned(get(r, 3)?),
                        slots: unsigned(get(r, 4)?),
                        lease_ms: unsigned(get(r, 5)?),
                        started_at_ms: get(r, 6)?,
                        heartbeat_at_ms: get(r, 7)?,
                        draining: get::<i64>(r, 8)? != 0,
                    })
                })
                .collect()
        })
    }

    fn job_attempts(&self, id: &JobId) -> Result<Vec<AttemptRow>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(
                "SELECT attempt, worker, started_at_ms, finished_at_ms, outcome, failure, cpu_ms \
                 FROM job_attempts WHERE job_id = $1 ORDER BY attempt",
            )
            .bind(id.as_str())
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|r| {
                    Ok(AttemptRow {
                        attempt: unsigned(get(r, 0)?),
                        worker: get(r, 1)?,
                        started_at_ms: get(r, 2)?,
                        finished_at_ms: get(r, 3)?,
                        outcome: get(r, 4)?,
                        failure: json(get(r, 5)?, "attempt failure")?,
                        cpu_ms: get::<Option<i64>>(r, 6)?.map(unsigned),
                    })
                })
                .collect()
        })
    }

    fn enqueue_deliveries(&self, queued: &QueuedDeliveries<'_>) -> Result<(), StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            for (id, webhook) in queued.ids.iter().zip(queued.webhooks) {
                sqlx::query(
                    "INSERT INTO webhook_deliveries (id, job_id, project, url, secret, body, \
                     state, tries, max_tries, next_at_ms, created_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $8, $8)",
                )
                .bind(id)
                .bind(queued.job.as_str())
                .bind(queued.project)
                .bind(&webhook.url)
                .bind(&webhook.secret)
                .bind(queued.body)
                .bind(i64::from(queued.max_tries))
                .bind(queued.now)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn claim_delivery(&self, now: i64, until: i64) -> Result<Option<DeliveryRow>, StoreErrorKind> {
        self.run(async {
            let row = sqlx::query(&format!(
                "UPDATE webhook_deliveries SET locked_until_ms = $2 WHERE id = (SELECT id \
                 FROM webhook_deliveries WHERE state = 'pending' AND next_at_ms <= $1 \
                 AND (locked_until_ms IS NULL OR locked_until_ms < $1) \
                 ORDER BY next_at_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 RETURNING {DELIVERY_COLUMNS}"
            ))
            .bind(now)
            .bind(until)
            .fetch_optional(&self.pool)
            .await?;
            row.as_ref().map(delivery_row).transpose()
        })
    }

    fn record_delivery_try(
        &self,
        id: &str,
        attempt: &DeliveryTry,
        verdict: TryVerdict,
    ) -> Result<(), StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            sqlx::query(
                "INSERT INTO webhook_tries (delivery_id, try, at_ms, duration_ms, status, error) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (delivery_id, try) DO UPDATE \
                 SET at_ms = $3, duration_ms = $4, status = $5, error = $6",
            )
            .bind(id)
            .bind(i64::from(attempt.number))
            .bind(attempt.at_ms)
            .bind(i64::try_from(attempt.duration_ms).unwrap_or(i64::MAX))
            .bind(attempt.status.map(i64::from))
            .bind(&attempt.error)
            .execute(&mut *tx)
            .await?;
            let (state, next, finished) = match verdict {
                TryVerdict::Delivered => ("delivered", None, Some(attempt.at_ms)),
                TryVerdict::Retry { next_at_ms } => ("pending", Some(next_at_ms), None),
                TryVerdict::Failed => ("failed", None, Some(attempt.at_ms)),
            };
            sqlx::query(
                "UPDATE webhook_deliveries SET state = $1, tries = $2, \
                 next_at_ms = COALESCE($3, next_at_ms), finished_at_ms = $4, \
                 locked_until_ms = NULL WHERE id = $5",
            )
            .bind(state)
            .bind(i64::from(attempt.number))
            .bind(next)
            .bind(finished)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn next_delivery_at(&self) -> Result<Option<i64>, StoreErrorKind> {
        self.run(async {
            Ok(sqlx::query_scalar(
                "SELECT MIN(GREATEST(next_at_ms, COALESCE(locked_until_ms, 0))) \
                 FROM webhook_deliveries WHERE state = 'pending'",
            )
            .fetch_one(&self.pool)
            .await?)
        })
    }

    fn job_deliveries(&self, job: &JobId) -> Result<Vec<DeliveryRow>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(&format!(
                "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE job_id = $1 \
                 ORDER BY created_at_ms, url, id"
            ))
            .bind(job.as_str())
            .fetch_all(&self.pool)
            .await?;
            let mut deliveries = rows
                .iter()
                .map(delivery_row)
                .collect::<Result<Vec<_>, _>>()?;
            let tries: Vec<TryColumns> = sqlx::query_as(
                "SELECT t.delivery_id, t.try, t.at_ms, t.duration_ms, t.status, t.error \
                     FROM webhook_tries t JOIN webhook_deliveries d ON d.id = t.delivery_id \
                     WHERE d.job_id = $1 ORDER BY t.delivery_id, t.try",
            )
            .bind(job.as_str())
            .fetch_all(&self.pool)
            .await?;
            for (id, number, at_ms, duration, status, error) in tries {
                if let Some(delivery) = deliveries.iter_mut().find(|d| d.id == id) {
                    delivery.try_log.push(DeliveryTry {
                        number: unsigned(number),
                        at_ms,
                        duration_ms: unsigned(duration),
                        status: status.map(unsigned),
                        error,
                    });
                }
            }
            Ok(deliveries)
        })
    }

    fn ping(&self, timeout: std::time::Duration) -> Result<(), StoreErrorKind> {
        self.run(async {
            let query = sqlx::query("SELECT 1").execute(&self.pool);
            match tokio::time::timeout(timeout, query).await {
                Ok(done) => {
                    done?;
                    Ok(())
                }
                Err(_) => Err(StoreErrorKind::Postgres(sqlx::Error::PoolTimedOut)),
            }
        })
    }
}

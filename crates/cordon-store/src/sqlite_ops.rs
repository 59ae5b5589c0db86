//! What operators see, on SQLite: workers and their heartbeats, a job's attempts, webhook
//! deliveries and their tries.

use std::collections::HashMap;

use rusqlite::Row;

use crate::backend::{OpsBackend, QueuedDeliveries};
use crate::error::StoreErrorKind;
use crate::jobs::{AttemptRow, JobId, corrupt};
use crate::rows::json;
use crate::sqlite::{SqliteBackend, optional};
use crate::sqlite_jobs::collect;
use crate::webhooks::{DeliveryRow, DeliveryState, DeliveryTry, TryVerdict};
use crate::workers::{WorkerInfo, WorkerRow};

fn unsigned<T: TryFrom<i64> + Default>(value: i64) -> T {
    T::try_from(value).unwrap_or_default()
}

fn job_id(text: &str) -> Result<JobId, StoreErrorKind> {
    text.parse().map_err(|e| corrupt(format!("job id: {e}")))
}

const DELIVERY_COLUMNS: &str = "id, job_id, project, url, secret, body, state, tries, max_tries, \
     next_at_ms, created_at_ms, finished_at_ms";

fn delivery_row(row: &Row<'_>) -> Result<DeliveryRow, StoreErrorKind> {
    let state: String = row.get(6)?;
    Ok(DeliveryRow {
        id: row.get(0)?,
        job_id: job_id(&row.get::<_, String>(1)?)?,
        project: row.get(2)?,
        url: row.get(3)?,
        secret: row.get(4)?,
        body: row.get(5)?,
        state: DeliveryState::parse(&state)
            .ok_or_else(|| corrupt(format!("delivery state {state:?}")))?,
        tries: unsigned(row.get(7)?),
        max_tries: unsigned(row.get(8)?),
        next_at_ms: row.get(9)?,
        created_at_ms: row.get(10)?,
        finished_at_ms: row.get(11)?,
        try_log: Vec::new(),
    })
}

impl OpsBackend for SqliteBackend {
    fn register_worker(&self, worker: &WorkerInfo, now: i64) -> Result<(), StoreErrorKind> {
        self.with(|c| {
            c.prepare_cached(
                "INSERT OR REPLACE INTO workers (name, host, version, pid, slots, lease_ms, \
                 started_at_ms, heartbeat_at_ms, draining) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, 0)",
            )?
            .execute((
                &worker.name,
                &worker.host,
                &worker.version,
                i64::from(worker.pid),
                i64::from(worker.slots),
                i64::try_from(worker.lease.as_millis()).unwrap_or(i64::MAX),
                now,
            ))?;
            Ok(())
        })
    }

    fn worker_heartbeat(&self, name: &str, now: i64) -> Result<Option<bool>, StoreErrorKind> {
        self.with(|c| {
            let draining: Option<i64> = optional(
                c.prepare_cached(
                    "UPDATE workers SET heartbeat_at_ms = ?1 WHERE name = ?2 RETURNING draining",
                )?
                .query_row((now, name), |r| r.get(0)),
            )?;
            Ok(draining.map(|d| d != 0))
        })
    }

    fn drain_worker(&self, name: &str) -> Result<bool, StoreErrorKind> {
        self.with(|c| {
            let changed = c
                .prepare_cached("UPDATE workers SET draining = 1 WHERE name = ?1")?
                .execute([name])?;
            Ok(changed > 0)
        })
    }

    fn remove_worker(&self, name: &str) -> Result<(), StoreErrorKind> {
        self.with(|c| {
            c.prepare_cached("DELETE FROM workers WHERE name = ?1")?
                .execute([name])?;
            Ok(())
        })
    }

    fn forget_lost_workers(&self, before: i64) -> Result<u64, StoreErrorKind> {
        self.with(|c| {
            let removed = c
                .prepare_cached("DELETE FROM workers WHERE heartbeat_at_ms + lease_ms < ?1")?
                .execute([before])?;
            Ok(removed as u64)
        })
    }

    fn list_workers(&self) -> Result<Vec<WorkerRow>, StoreErrorKind> {
        self.with(|c| {
            let mut running: HashMap<String, Vec<JobId>> = HashMap::new();
            {
                let mut statement = c.prepare_cached(
                    "SELECT worker, id FROM jobs WHERE state = 'running' AND worker IS NOT NULL \
                     ORDER BY started_at_ms, id",
                )?;
                let mut rows = statement.query([])?;
                while let Some(row) = rows.next()? {
                    let id: String = row.get(1)?;
                    running.entry(row.get(0)?).or_default().push(job_id(&id)?);
                }
            }
            let mut statement = c.prepare_cached(
                "SELECT name, host, version, pid, slots, lease_ms, started_at_ms, \
                 heartbeat_at_ms, draining FROM workers ORDER BY name",
            )?;
            let mut rows = statement.query([])?;
            let mut workers = collect(&mut rows, |r| {
                Ok(WorkerRow {
                    running: Vec::new(),
                    name: r.get(0)?,
                    host: r.get(1)?,
                    version: r.get(2)?,
                    pid: unsigned(r.get(3)?),
                    slots: unsigned(r.get(4)?),
                    lease_ms: unsigned(r.get(5)?),
                    started_at_ms: r.get(6)?,
                    heartbeat_at_ms: r.get(7)?,
                    draining: r.get::<_, i64>(8)? != 0,
                })
            })?;
            for worker in &mut workers {
                worker.running = running.remove(&worker.name).unwrap_or_default();
            }
            Ok(workers)
        })
    }

    fn job_attempts(&self, id: &JobId) -> Result<Vec<AttemptRow>, StoreErrorKind> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT attempt, worker, started_at_ms, finished_at_ms, outcome, failure, cpu_ms \
                 FROM job_attempts WHERE job_id = ?1 ORDER BY attempt",
            )?;
            let mut rows = statement.query([id.as_str()])?;
            collect(&mut rows, |r| {
                Ok(AttemptRow {
                    attempt: unsigned(r.get(0)?),
                    worker: r.get(1)?,
                    started_at_ms: r.get(2)?,
                    finished_at_ms: r.get(3)?,
                    outcome: r.get(4)?,
                    failure: json(r.get(5)?, "attempt failure")?,
                    cpu_ms: r.get::<_, Option<i64>>(6)?.map(unsigned),
                })
            })
        })
    }

    fn enqueue_deliveries(&self, queued: &QueuedDeliveries<'_>) -> Result<(), StoreErrorKind> {
        self.write(|tx| {
            let mut insert = tx.prepare_cached(
                "INSERT INTO webhook_deliveries (id, job_id, project, url, secret, body, state, \
                 tries, max_tries, next_at_ms, created_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?7, ?8, ?8)",
            )?;
            for (id, webhook) in queued.ids.iter().zip(queued.webhooks) {
                insert.execute((
                    id,
                    queued.job.as_str(),
                    queued.project,
                    &webhook.url,
                    &webhook.secret,
                    queued.body,
                    i64::from(queued.max_tries),
                    queued.now,
                ))?;
            }
            Ok(())
        })
    }

    fn claim_delivery(&self, now: i64, until: i64) -> Result<Option<DeliveryRow>, StoreErrorKind> {
        self.write(|tx| {
            let mut statement = tx.prepare_cached(&format!(
                "UPDATE webhook_deliveries SET locked_until_ms = ?2 WHERE id = (SELECT id \
                 FROM webhook_deliveries WHERE state = 'pending' AND next_at_ms <= ?1 \
                 AND (locked_until_ms IS NULL OR locked_until_ms < ?1) \
                 ORDER BY next_at_ms, id LIMIT 1) RETURNING {DELIVERY_COLUMNS}"
            ))?;
            let mut rows = statement.query((now, until))?;
            rows.next()?.map(delivery_row).transpose()
        })
    }

    fn record_delivery_try(
        &self,
        id: &str,
        attempt: &DeliveryTry,
        verdict: TryVerdict,
    ) -> Result<(), StoreErrorKind> {
        self.write(|tx| {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO webhook_tries (delivery_id, try, at_ms, duration_ms, \
                 status, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute((
                id,
                i64::from(attempt.number),
                attempt.at_ms,
                i64::try_from(attempt.duration_ms).unwrap_or(i64::MAX),
                attempt.status.map(i64::from),
                &attempt.error,
            ))?;
            let (state, next, finished) = match verdict {
                TryVerdict::Delivered => ("delivered", None, Some(attempt.at_ms)),
                TryVerdict::Retry { next_at_ms } => ("pending", Some(next_at_ms), None),
                TryVerdict::Failed => ("failed", None, Some(attempt.at_ms)),
            };
            tx.prepare_cached(
                "UPDATE webhook_deliveries SET state = ?1, tries = ?2, \
                 next_at_ms = COALESCE(?3, next_at_ms), finished_at_ms = ?4, \
                 locked_until_ms = NULL WHERE id = ?5",
            )?
            .execute((state, i64::from(attempt.number), next, finished, id))?;
            Ok(())
        })
    }

    fn next_delivery_at(&self) -> Result<Option<i64>, StoreErrorKind> {
        self.with(|c| {
            Ok(c.prepare_cached(
                "SELECT MIN(MAX(next_at_ms, COALESCE(locked_until_ms, 0))) \
                 FROM webhook_deliveries WHERE state = 'pending'",
            )?
            .query_row([], |r| r.get(0))?)
        })
    }

    fn job_deliveries(&self, job: &JobId) -> Result<Vec<DeliveryRow>, StoreErrorKind> {
        self.with(|c| {
            let mut deliveries = {
                let mut statement = c.prepare_cached(&format!(
                    "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE job_id = ?1 \
                     ORDER BY created_at_ms, url, id"
                ))?;
                let mut rows = statement.query([job.as_str()])?;
                collect(&mut rows, delivery_row)?
            };
            let mut statement = c.prepare_cached(
                "SELECT t.delivery_id, t.try, t.at_ms, t.duration_ms, t.status, t.error \
                 FROM webhook_tries t JOIN webhook_deliveries d ON d.id = t.delivery_id \
                 WHERE d.job_id = ?1 ORDER BY t.delivery_id, t.try",
            )?;
            let mut rows = statement.query([job.as_str()])?;
            while let Some(r) = rows.next()? {
                let id: String = r.get(0)?;
                let attempt = DeliveryTry {
                    number: unsigned(r.get(1)?),
                    at_ms: r.get(2)?,
                    duration_ms: unsigned(r.get(3)?),
                    status: r.get::<_, Option<i64>>(4)?.map(unsigned),
                    error: r.get(5)?,
                };
                if let Some(delivery) = deliveries.iter_mut().find(|d| d.id == id) {
                    delivery.try_log.push(attempt);
                }
            }
            Ok(deliveries)
        })
    }

    fn ping(&self, _timeout: std::time::Duration) -> Result<(), StoreErrorKind> {
        self.with(|c| {
            c.prepare_cached("SELECT 1")?.query_row([], |_| Ok(()))?;
            Ok(())
        })
    }
}

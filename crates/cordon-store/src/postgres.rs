//! The PostgreSQL backend: one database shared by many workers and API servers, on many
//! machines, behind the same [`crate::Store`] methods as SQLite.
//!
//! `sqlx` (postgres only: runtime queries, no compile-time macros, no TLS) drives a small
//! connection pool on a tokio runtime that this backend alone creates, with one worker thread:
//! opening an SQLite store never starts it. Every method is one short transaction, run with
//! `block_on` from the caller's (plain) thread.
//!
//! Migrations are the embedded `migrations/postgres/`, with the same version numbers as
//! SQLite's, applied at open under a session advisory lock (concurrent first opens from many
//! machines apply them once). Transcripts are chunked and LZ4-compressed as on SQLite
//! (`BYTEA`). The claim's cluster-wide limits are explained in `postgres_jobs.rs`.

use std::future::Future;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Row};

use crate::error::StoreErrorKind;

/// The migrations of the PostgreSQL backend, embedded: (version, description, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "runs, stages, transcript chunks",
        include_str!("../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "runs carry their session",
        include_str!("../migrations/postgres/0002_runs_session.sql"),
    ),
    (
        3,
        "jobs, attempts, job events, api tokens, audit",
        include_str!("../migrations/postgres/0003_jobs.sql"),
    ),
    (
        4,
        "leases of named workers, CPU per attempt",
        include_str!("../migrations/postgres/0004_leases.sql"),
    ),
    (
        5,
        "runs of the review watcher say so",
        include_str!("../migrations/postgres/0005_runs_role.sql"),
    ),
    (
        6,
        "workers, attempts' own logs, re-runs, token names, webhook deliveries",
        include_str!("../migrations/postgres/0006_operators.sql"),
    ),
    (
        7,
        "jobs hold slots of the concurrency limits",
        include_str!("../migrations/postgres/0007_job_slots.sql"),
    ),
];

/// The tables a cordon PostgreSQL store may hold (in its schema).
const OUR_TABLES: &[&str] = &[
    "api_tokens",
    "audit",
    "cordon_migrations",
    "job_attempts",
    "job_events",
    "jobs",
    "runs",
    "stages",
    "transcript_chunks",
    "webhook_deliveries",
    "webhook_tries",
    "workers",
];

/// The advisory lock key that serialises migrations (`'cordon:migrate'` as an integer).
const MIGRATE_LOCK: i64 = 0x636f_7264_6f6e_6d31;

/// Connections per store handle: a worker's few threads, an API server's handlers.
const MAX_CONNECTIONS: u32 = 8;

/// A cordon store in a PostgreSQL database.
#[derive(Debug)]
pub(crate) struct PostgresBackend {
    pub(crate) pool: PgPool,
    runtime: tokio::runtime::Runtime,
}

impl PostgresBackend {
    /// Connects to `url` and brings the schema up to date.
    pub(crate) fn open(url: &str) -> Result<Self, StoreErrorKind> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cordon-store-pg")
            .enable_all()
            .build()
            .map_err(StoreErrorKind::Runtime)?;
        let options: PgConnectOptions = url.parse().map_err(StoreErrorKind::Postgres)?;
        // A client that stalls inside a transaction (a paused worker, a lost host) is cut
        // off after 10 s, releasing its row locks, instead of blocking every claim.
        let options = options
            .application_name("cordon")
            .options([("idle_in_transaction_session_timeout", "10s")]);
        let pool = runtime.block_on(async {
            PgPoolOptions::new()
                .min_connections(0)
                .max_connections(MAX_CONNECTIONS)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(options)
                .await
        })?;
        let backend = Self { pool, runtime };
        backend.run(migrate(&backend.pool))?;
        Ok(backend)
    }

    /// Runs `work` on the backend's runtime, from a plain thread.
    pub(crate) fn run<T>(
        &self,
        work: impl Future<Output = Result<T, StoreErrorKind>>,
    ) -> Result<T, StoreErrorKind> {
        self.runtime.block_on(work)
    }

    /// Runs `work` in the background on the backend's runtime, for as long as it lives.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.runtime.spawn(work);
    }
}

impl Drop for PostgresBackend {
    fn drop(&mut self) {
        // Say goodbye to the server instead of dropping sockets.
        let pool = self.pool.clone();
        self.runtime.block_on(async move { pool.close().await });
    }
}

/// Refuses a database that holds other tables without our ledger, or a newer schema, then
/// applies the missing migrations, each in its own transaction, under an advisory lock.
async fn migrate(pool: &PgPool) -> Result<(), StoreErrorKind> {
    let mut connection = pool.acquire().await?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *connection)
        .await?;
    let outcome = migrate_locked(&mut connection).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *connection)
        .await;
    outcome?;
    unlocked?;
    Ok(())
}

async fn migrate_locked(connection: &mut sqlx::PgConnection) -> Result<(), StoreErrorKind> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' \
         ORDER BY table_name",
    )
    .fetch_all(&mut *connection)
    .await?;
    let has_ledger = tables.iter().any(|t| t == "cordon_migrations");
    if !has_ledger && !tables.is_empty() {
        return Err(StoreErrorKind::Foreign {
            tables: tables.join(", "),
        });
    }
    let applied: Vec<i64> = if has_ledger {
        sqlx::query_scalar("SELECT version FROM cordon_migrations ORDER BY version")
            .fetch_all(&mut *connection)
            .await?
    } else {
        connection
            .execute(
                "CREATE TABLE cordon_migrations (version BIGINT PRIMARY KEY NOT NULL, \
                 description TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)",
            )
            .await?;
        Vec::new()
    };
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if let Some(&found) = applied.last().filter(|&&v| v > known) {
        return Err(StoreErrorKind::TooNew { found, known });
    }
    let foreign: Vec<&str> = tables
        .iter()
        .map(String::as_str)
        .filter(|t| !OUR_TABLES.contains(t))
        .collect();
    if !foreign.is_empty() {
        return Err(StoreErrorKind::Foreign {
            tables: foreign.join(", "),
        });
    }
    for &(version, description, sql) in MIGRATIONS {
        if applied.contains(&version) {
            continue;
        }
        let mut tx = connection.begin().await?;
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO cordon_migrations (version, description, applied_at_ms) \
             VALUES ($1, $2, $3)",
        )
        .bind(version)
        .bind(description)
        .bind(crate::store::now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// Reads column `index` of `row`.
pub(crate) fn get<'r, T>(row: &'r sqlx::postgres::PgRow, index: usize) -> Result<T, StoreErrorKind>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    Ok(row.try_get(index)?)
}

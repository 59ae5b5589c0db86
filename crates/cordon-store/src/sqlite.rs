//! The embedded SQLite backend: one file, WAL, busy timeout, short transactions.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use crate::backend::{Backend, EncodedChunk, EncodedData, TranscriptCursor};
use crate::error::StoreErrorKind;
use crate::model::{
    Chunk, ChunkBody, ChunkFilter, NewRun, RunFilter, RunId, RunKind, RunRecord, RunRecordTag,
    RunState, RunSummary, StageRecord, Stream,
};
use crate::owner::Owner;

/// The migrations of the SQLite backend, embedded: (version, description, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "runs, stages, transcript chunks",
        include_str!("../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "runs carry their session",
        include_str!("../migrations/sqlite/0002_runs_session.sql"),
    ),
    (
        3,
        "jobs, attempts, job events, api tokens, audit",
        include_str!("../migrations/sqlite/0003_jobs.sql"),
    ),
];

/// The tables a cordon SQLite store may hold.
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
];

/// What an SQLite database file starts with.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// How long an open keeps retrying while other processes hold the file busy.
const OPEN_PATIENCE: Duration = Duration::from_secs(10);

/// A cordon store in one SQLite file.
#[derive(Debug)]
pub(crate) struct SqliteBackend {
    pub(crate) pool: SqlitePool,
}

impl SqliteBackend {
    /// Opens (creating it when missing) the store at `path` and brings its tables up to date.
    ///
    /// Concurrent first opens race to switch the file to WAL and to recover its index; SQLite
    /// answers some of those races with "busy" without consulting the busy timeout. Such an
    /// open is retried (with growing, jittered pauses) for up to [`OPEN_PATIENCE`].
    pub(crate) async fn open(path: &Path) -> Result<Self, StoreErrorKind> {
        let deadline = std::time::Instant::now() + OPEN_PATIENCE;
        let mut pause = Duration::from_millis(5);
        loop {
            match Self::open_once(path).await {
                Err(error) if error.is_busy() && std::time::Instant::now() < deadline => {
                    let jitter = Duration::from_micros(u64::from(std::process::id() % 997) * 5);
                    tokio::time::sleep(pause + jitter).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                result => return result,
            }
        }
    }

    async fn open_once(path: &Path) -> Result<Self, StoreErrorKind> {
        check_magic(path)?;
        create_private_file(path)?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .min_connections(0)
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .map_err(StoreErrorKind::classify)?;
        let backend = Self { pool };
        backend.migrate().await?;
        Ok(backend)
    }

    /// Closes every connection (the last one checkpoints the WAL).
    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }

    /// Whether the store holds only cordon's tables and every known migration, no other.
    async fn is_current(&self) -> Result<bool, StoreErrorKind> {
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )
        .fetch_all(&self.pool)
        .await?;
        if !tables.iter().any(|t| t == "cordon_migrations")
            || tables.iter().any(|t| !OUR_TABLES.contains(&t.as_str()))
        {
            return Ok(false);
        }
        let applied: Vec<i64> =
            sqlx::query_scalar("SELECT version FROM cordon_migrations ORDER BY version")
                .fetch_all(&self.pool)
                .await?;
        let known: Vec<i64> = MIGRATIONS.iter().map(|m| m.0).collect();
        Ok(applied == known)
    }

    /// Refuses foreign databases and newer schemas, then applies the missing migrations in
    /// one `BEGIN IMMEDIATE` transaction (so concurrent first opens apply them once).
    async fn migrate(&self) -> Result<(), StoreErrorKind> {
        // The common case, checked without the write lock that migrating needs: the store is
        // current (its ledger lists exactly the known migrations and it holds only our tables).
        if self.is_current().await.unwrap_or(false) {
            return Ok(());
        }
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreErrorKind::classify)?;
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name",
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreErrorKind::classify)?;
        let has_ledger = tables.iter().any(|t| t == "cordon_migrations");
        let foreign: Vec<&str> = tables
            .iter()
            .map(String::as_str)
            .filter(|t| !OUR_TABLES.contains(t))
            .collect();
        if !has_ledger && !tables.is_empty() {
            return Err(StoreErrorKind::Foreign {
                tables: tables.join(", "),
            });
        }
        let known = MIGRATIONS.last().map_or(0, |m| m.0);
        let applied: Vec<i64> = if has_ledger {
            sqlx::query_scalar("SELECT version FROM cordon_migrations ORDER BY version")
                .fetch_all(&mut *tx)
                .await?
        } else {
            sqlx::query(
                "CREATE TABLE cordon_migrations (version INTEGER PRIMARY KEY NOT NULL, \
                 description TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)",
            )
            .execute(&mut *tx)
            .await?;
            Vec::new()
        };
        if let Some(&found) = applied.last().filter(|&&v| v > known) {
            return Err(StoreErrorKind::TooNew { found, known });
        }
        if !foreign.is_empty() {
            return Err(StoreErrorKind::Foreign {
                tables: foreign.join(", "),
            });
        }
        for &(version, description, sql) in MIGRATIONS {
            if applied.contains(&version) {
                continue;
            }
            sqlx::raw_sql(sql).execute(&mut *tx).await?;
            sqlx::query(
                "INSERT INTO cordon_migrations (version, description, applied_at_ms) \
                 VALUES (?, ?, ?)",
            )
            .bind(version)
            .bind(description)
            .bind(crate::store::now_ms())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Creates a missing database file readable by its owner only; SQLite gives its `-wal` and
/// `-shm` files the same mode. An existing file is left as it is.
fn create_private_file(path: &Path) -> Result<(), StoreErrorKind> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreErrorKind::File {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Fails with [`StoreErrorKind::NotADatabase`] when `path` exists, is not empty, and does not
/// start like an SQLite database (SQLite would only notice at the first query).
fn check_magic(path: &Path) -> Result<(), StoreErrorKind> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(());
    };
    let mut head = Vec::with_capacity(16);
    if file.by_ref().take(16).read_to_end(&mut head).is_err() {
        return Err(StoreErrorKind::NotADatabase);
    }
    if head.is_empty() || head == SQLITE_MAGIC {
        Ok(())
    } else {
        Err(StoreErrorKind::NotADatabase)
    }
}

impl Backend for SqliteBackend {
    async fn insert_run(
        &self,
        id: &RunId,
        run: &NewRun,
        owner: &Owner,
        started_at_ms: i64,
    ) -> Result<bool, StoreErrorKind> {
        let result = sqlx::query(
            "INSERT INTO runs (id, kind, status, repo, command, started_at_ms, owner_pid, \
             owner_start_time, owner_boot_id, host, session) \
             VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        )
        .bind(id.as_str())
        .bind(kind_str(run.kind))
        .bind(run.repo.as_deref())
        .bind(run.command.to_string())
        .bind(started_at_ms)
        .bind(owner.pid)
        .bind(owner.start_time)
        .bind(owner.boot_id.as_deref())
        .bind(&owner.host)
        .bind(run.session.as_deref())
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn record_stage(&self, id: &RunId, stage: &StageRecord) -> Result<bool, StoreErrorKind> {
        let status = serde_json::to_value(stage.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let result = sqlx::query(
            "INSERT INTO stages (run_id, idx, name, status, document) \
             SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?1) \
             ON CONFLICT (run_id, idx) DO UPDATE SET name = excluded.name, \
             status = excluded.status, document = excluded.document",
        )
        .bind(id.as_str())
        .bind(i64::from(stage.index))
        .bind(&stage.name)
        .bind(status)
        .bind(stage.document.to_string())
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn finish_run(
        &self,
        id: &RunId,
        state: RunState,
        document: Option<(&str, &serde_json::Value)>,
        finished_at_ms: i64,
    ) -> Result<bool, StoreErrorKind> {
        let result = sqlx::query(
            "UPDATE runs SET status = ?2, finished_at_ms = ?3, \
             duration_ms = MAX(0, ?3 - started_at_ms), document_schema = ?4, document = ?5 \
             WHERE id = ?1",
        )
        .bind(id.as_str())
        .bind(state.as_str())
        .bind(finished_at_ms)
        .bind(document.map(|d| d.0))
        .bind(document.map(|d| d.1.to_string()))
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn transcript_cursor(&self, id: &RunId) -> Result<TranscriptCursor, StoreErrorKind> {
        let next_seq: Option<i64> =
            sqlx::query_scalar("SELECT MAX(seq) + 1 FROM transcript_chunks WHERE run_id = ?")
                .bind(id.as_str())
                .fetch_one(&self.pool)
                .await?;
        let rows = sqlx::query(
            "SELECT stage, stream, MAX(offset + raw_len) AS next FROM transcript_chunks \
             WHERE run_id = ? GROUP BY stage, stream",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await?;
        let mut offsets = Vec::with_capacity(rows.len());
        for row in rows {
            let stage: Option<String> = row.try_get("stage")?;
            let stream = parse_stream(&row.try_get::<String, _>("stream")?)?;
            let next: i64 = row.try_get("next")?;
            offsets.push(((stage, stream), to_u64(next)));
        }
        Ok(TranscriptCursor {
            next_seq: to_u64(next_seq.unwrap_or(0)),
            offsets,
        })
    }

    async fn append_chunks(
        &self,
        id: &RunId,
        chunks: &[EncodedChunk],
    ) -> Result<(), StoreErrorKind> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        for chunk in chunks {
            let (encoding, raw_len, data): (&str, u64, &[u8]) = match &chunk.data {
                EncodedData::Lz4 { raw_len, bytes } => ("lz4", *raw_len, bytes),
                EncodedData::Raw(bytes) => ("raw", bytes.len() as u64, bytes),
                EncodedData::Lost(bytes) => ("lost", *bytes, &[]),
            };
            sqlx::query(
                "INSERT INTO transcript_chunks (run_id, seq, stage, stream, offset, at_ms, \
                 encoding, raw_len, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id.as_str())
            .bind(to_i64(chunk.seq))
            .bind(chunk.stage.as_deref())
            .bind(chunk.stream.as_str())
            .bind(to_i64(chunk.offset))
            .bind(chunk.at_ms)
            .bind(encoding)
            .bind(to_i64(raw_len))
            .bind(data)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreErrorKind> {
        let rows = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM runs WHERE (?1 IS NULL OR status = ?1) \
             AND (?2 IS NULL OR repo = ?2) AND (?4 IS NULL OR session = ?4) \
             ORDER BY started_at_ms DESC, rowid DESC LIMIT ?3"
        ))
        .bind(filter.status.map(RunState::as_str))
        .bind(filter.repo.as_deref())
        .bind(i64::from(filter.limit))
        .bind(filter.session.as_deref())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(summary_from_row).collect()
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreErrorKind> {
        let Some(row) = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS}, document_schema, document FROM runs WHERE id = ?"
        ))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let run = summary_from_row(&row)?;
        let document_schema: Option<String> = row.try_get("document_schema")?;
        let document = row
            .try_get::<Option<String>, _>("document")?
            .map(|text| parse_json(&text, "document"))
            .transpose()?;
        let stage_rows = sqlx::query(
            "SELECT idx, name, status, document FROM stages WHERE run_id = ? ORDER BY idx",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await?;
        let mut stages = Vec::with_capacity(stage_rows.len());
        for row in stage_rows {
            let status: String = row.try_get("status")?;
            stages.push(StageRecord {
                index: u32::try_from(row.try_get::<i64, _>("idx")?).unwrap_or(u32::MAX),
                name: row.try_get("name")?,
                status: serde_json::from_value(serde_json::Value::String(status.clone()))
                    .map_err(|_| corrupt(format!("stage status {status:?}")))?,
                document: parse_json(&row.try_get::<String, _>("document")?, "stage document")?,
            });
        }
        Ok(Some(RunRecord {
            schema: RunRecordTag,
            run,
            stages,
            document_schema,
            document,
        }))
    }

    async fn read_chunks(
        &self,
        id: &RunId,
        filter: &ChunkFilter,
        after_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<Chunk>, StoreErrorKind> {
        let rows = sqlx::query(
            "SELECT seq, stage, stream, offset, at_ms, encoding, raw_len, data \
             FROM transcript_chunks WHERE run_id = ?1 AND seq > ?2 \
             AND (?3 IS NULL OR stage = ?3) AND (?4 IS NULL OR stream = ?4) \
             ORDER BY seq LIMIT ?5",
        )
        .bind(id.as_str())
        .bind(after_seq.map_or(-1, to_i64))
        .bind(filter.stage.as_deref())
        .bind(filter.stream.map(Stream::as_str))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(chunk_from_row).collect()
    }

    async fn run_owner(&self, id: &RunId) -> Result<Option<(RunState, Owner)>, StoreErrorKind> {
        let row = sqlx::query(
            "SELECT status, owner_pid, owner_start_time, owner_boot_id, host FROM runs \
             WHERE id = ?",
        )
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok((
                parse_state(&row.try_get::<String, _>("status")?)?,
                owner_from_row(&row)?,
            ))
        })
        .transpose()
    }

    async fn running_runs(&self, host: &str) -> Result<Vec<(RunId, Owner)>, StoreErrorKind> {
        let rows = sqlx::query(
            "SELECT id, owner_pid, owner_start_time, owner_boot_id, host FROM runs \
             WHERE status = 'running' AND host = ?",
        )
        .bind(host)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    parse_id(&row.try_get::<String, _>("id")?)?,
                    owner_from_row(row)?,
                ))
            })
            .collect()
    }

    async fn interrupt(&self, id: &RunId) -> Result<bool, StoreErrorKind> {
        let result = sqlx::query(
            "UPDATE runs SET status = 'interrupted', \
             finished_at_ms = COALESCE((SELECT MAX(at_ms) FROM transcript_chunks \
                                        WHERE run_id = runs.id), started_at_ms), \
             duration_ms = MAX(0, COALESCE((SELECT MAX(at_ms) FROM transcript_chunks \
                                        WHERE run_id = runs.id), started_at_ms) - started_at_ms) \
             WHERE id = ? AND status = 'running'",
        )
        .bind(id.as_str())
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn delete_started_before(&self, cutoff_ms: i64) -> Result<u64, StoreErrorKind> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // Chunks and stages go with their runs (ON DELETE CASCADE); running runs are kept.
        let result =
            sqlx::query("DELETE FROM runs WHERE started_at_ms < ? AND status != 'running'")
                .bind(cutoff_ms)
                .execute(&mut *tx)
                .await?;
        tx.commit().await?;
        Ok(result.rows_affected())
    }
}

const SUMMARY_COLUMNS: &str = "id, kind, status, repo, session, command, started_at_ms, \
                               finished_at_ms, duration_ms, host, owner_pid";

fn summary_from_row(row: &SqliteRow) -> Result<RunSummary, StoreErrorKind> {
    let kind: String = row.try_get("kind")?;
    Ok(RunSummary {
        id: parse_id(&row.try_get::<String, _>("id")?)?,
        kind: match kind.as_str() {
            "run" => RunKind::Run,
            "verify" => RunKind::Verify,
            other => return Err(corrupt(format!("run kind {other:?}"))),
        },
        status: parse_state(&row.try_get::<String, _>("status")?)?,
        repo: row.try_get("repo")?,
        session: row.try_get("session")?,
        command: parse_json(&row.try_get::<String, _>("command")?, "command")?,
        started_at_ms: row.try_get("started_at_ms")?,
        finished_at_ms: row.try_get("finished_at_ms")?,
        duration_ms: row.try_get("duration_ms")?,
        host: row.try_get("host")?,
        owner_pid: row.try_get("owner_pid")?,
    })
}

fn chunk_from_row(row: &SqliteRow) -> Result<Chunk, StoreErrorKind> {
    let seq = to_u64(row.try_get("seq")?);
    let encoding: String = row.try_get("encoding")?;
    let raw_len = to_u64(row.try_get("raw_len")?);
    let data: Vec<u8> = row.try_get("data")?;
    let body = match encoding.as_str() {
        "lz4" => {
            let len =
                usize::try_from(raw_len).map_err(|_| corrupt(format!("chunk {seq} length")))?;
            let bytes = lz4_flex::block::decompress(&data, len)
                .map_err(|e| corrupt(format!("chunk {seq}: {e}")))?;
            if bytes.len() != len {
                return Err(corrupt(format!(
                    "chunk {seq}: length {} != {len}",
                    bytes.len()
                )));
            }
            ChunkBody::Data(bytes)
        }
        "raw" => ChunkBody::Data(data),
        "lost" => ChunkBody::Lost { bytes: raw_len },
        other => return Err(corrupt(format!("chunk {seq} encoding {other:?}"))),
    };
    Ok(Chunk {
        seq,
        stage: row.try_get("stage")?,
        stream: parse_stream(&row.try_get::<String, _>("stream")?)?,
        offset: to_u64(row.try_get("offset")?),
        at_ms: row.try_get("at_ms")?,
        body,
    })
}

fn owner_from_row(row: &SqliteRow) -> Result<Owner, StoreErrorKind> {
    Ok(Owner {
        pid: row.try_get("owner_pid")?,
        start_time: row.try_get("owner_start_time")?,
        boot_id: row.try_get("owner_boot_id")?,
        host: row.try_get("host")?,
    })
}

fn kind_str(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Run => "run",
        RunKind::Verify => "verify",
    }
}

fn parse_id(text: &str) -> Result<RunId, StoreErrorKind> {
    RunId::from_str(text).map_err(|e| corrupt(e.to_string()))
}

fn parse_state(text: &str) -> Result<RunState, StoreErrorKind> {
    RunState::from_str(text).map_err(corrupt)
}

fn parse_stream(text: &str) -> Result<Stream, StoreErrorKind> {
    Stream::from_str(text).map_err(corrupt)
}

fn parse_json(text: &str, what: &str) -> Result<serde_json::Value, StoreErrorKind> {
    serde_json::from_str(text).map_err(|e| corrupt(format!("{what} is not JSON: {e}")))
}

fn corrupt(what: String) -> StoreErrorKind {
    StoreErrorKind::Corrupt { what }
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

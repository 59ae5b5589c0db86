//! The embedded SQLite backend: one file, WAL, busy timeout, short transactions — called
//! synchronously on the caller's thread through `rusqlite` (no runtime, no worker thread).
//!
//! What makes recording a local run cheap (figures in BENCHMARKS.md, "Recording"):
//! - Statements run on the calling thread; each connection keeps its prepared statements
//!   (`prepare_cached`).
//! - An up-to-date store costs one query at open (the migration ledger and the table names,
//!   read together); migrating takes the write lock only when something is missing.
//! - Closing does not checkpoint (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`): SQLite's default is to
//!   copy the WAL into the database, with two fsyncs, whenever the last connection closes —
//!   i.e. at the end of every `cordon run`. Instead the WAL stays bounded by the automatic
//!   checkpoint every [`AUTOCHECKPOINT_PAGES`] pages (done by whichever commit crosses it) and
//!   truncated to [`JOURNAL_SIZE_LIMIT`] after it; the next opener re-reads what is in the WAL.
//!
//! Short-lived recorders do not open the database at all: they append to the run log
//! (`runlog`), which [`SqliteBackend::ingest_runlog`] moves into the database before every
//! read of the run history.
//!
//! Crash safety is WAL's: with `synchronous=NORMAL` a commit is durable against the crash of
//! the process (the WAL is written before the commit returns; it is fsynced at checkpoints),
//! and the database is never corrupted by a power loss (the last commits may be lost then).
//!
//! SQLite itself is the crate's bundled amalgamation (compiled from the `libsqlite3-sys`
//! crate, nothing downloaded), linked statically: measured against Debian's shared
//! `libsqlite3` it starts faster (no shared library to map and relocate), builds on a machine
//! without `libsqlite3-dev`, and gives every host the same SQLite (BENCHMARKS.md).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::error::StoreErrorKind;
use crate::model::RunId;
use crate::runlog::{self, RunLog};

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
    (
        4,
        "leases of named workers, CPU per attempt",
        include_str!("../migrations/sqlite/0004_leases.sql"),
    ),
    (
        5,
        "runs of the review watcher say so",
        include_str!("../migrations/sqlite/0005_runs_role.sql"),
    ),
    (
        6,
        "workers, attempts' own logs, re-runs, token names, webhook deliveries",
        include_str!("../migrations/sqlite/0006_operators.sql"),
    ),
    (
        7,
        "jobs hold slots of the concurrency limits",
        include_str!("../migrations/sqlite/0007_job_slots.sql"),
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
    "webhook_deliveries",
    "webhook_tries",
    "workers",
];

/// What an SQLite database file starts with.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// How long an open keeps retrying while other processes hold the file busy.
const OPEN_PATIENCE: Duration = Duration::from_secs(10);

/// How long a statement waits for another connection's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// WAL pages after which a commit checkpoints: 512 KiB of 4 KiB pages, about 16 recorded
/// short runs (a `cordon run` of `/bin/true` adds 8 pages). The trade-off, measured
/// (BENCHMARKS.md, "Recording"): every open re-reads and checksums what the WAL holds (about
/// 3,000 instructions and one `pread` a page), while a checkpoint costs four fsyncs (0.1 ms
/// each on the benchmark VM when it is quiet, 4 ms under a heavy build).
pub(crate) const AUTOCHECKPOINT_PAGES: u32 = 128;

/// Bytes the WAL file is truncated to after a checkpoint.
pub(crate) const JOURNAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// Idle connections kept for reuse; a thread that finds none opens another.
const MAX_IDLE: usize = 4;

/// A cordon store in one SQLite file, with its run log (`runlog`).
#[derive(Debug)]
pub(crate) struct SqliteBackend {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// Whether the file was checked and migrated (a deferred store does it at first use).
    ready: AtomicBool,
    /// The run log next to the file.
    runlog: RunLog,
    /// Whether runs are recorded in the run log instead of the database.
    defer_runs: bool,
    /// The runs this handle began in the run log: only their later records go there too (a
    /// stage or an end of any other run is written to the database, which says whether the
    /// run exists).
    logged_runs: Mutex<HashSet<RunId>>,
}

impl SqliteBackend {
    /// Opens (creating it when missing) the store at `path` and brings its tables up to date.
    ///
    /// Concurrent first opens race to switch the file to WAL and to recover its index; SQLite
    /// answers some of those races with "busy" without consulting the busy timeout. Such an
    /// open is retried (with growing, jittered pauses) for up to [`OPEN_PATIENCE`].
    pub(crate) fn open(path: &Path) -> Result<Self, StoreErrorKind> {
        let connection = open_checked(path)?;
        // Created only once the file proved to be a cordon store: a recorder finds a run log
        // only next to one (see `open_deferred`).
        let runlog = RunLog::open(&runlog::path_for(path), true)?
            .expect("a run log opened with create exists");
        Ok(Self {
            path: path.to_owned(),
            idle: Mutex::new(vec![connection]),
            ready: AtomicBool::new(true),
            runlog,
            defer_runs: false,
            logged_runs: Mutex::new(HashSet::new()),
        })
    }

    /// Opens the store at `path` for a short-lived recorder: its runs go to the run log, and
    /// the database is opened only if something else is asked of it. Where the run log is
    /// missing (a new store, or one an older cordon made), the store is opened as by
    /// [`SqliteBackend::open`] first, which checks and migrates it and creates the log.
    pub(crate) fn open_deferred(path: &Path) -> Result<Self, StoreErrorKind> {
        if check_magic(path)?
            && let Some(runlog) = RunLog::open(&runlog::path_for(path), false)?
        {
            return Ok(Self {
                path: path.to_owned(),
                idle: Mutex::new(Vec::new()),
                ready: AtomicBool::new(false),
                runlog,
                defer_runs: true,
                logged_runs: Mutex::new(HashSet::new()),
            });
        }
        let mut backend = Self::open(path)?;
        backend.defer_runs = true;
        Ok(backend)
    }

    /// The run log, when this handle records runs there.
    pub(crate) fn deferred_log(&self) -> Option<&RunLog> {
        self.defer_runs.then_some(&self.runlog)
    }

    /// The run log, when `id` is a run this handle began there.
    pub(crate) fn log_of(&self, id: &RunId) -> Option<&RunLog> {
        let logged = self
            .logged_runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id);
        logged.then_some(&self.runlog)
    }

    /// Appends `record` to the run log; moves the log into the database when it grew past
    /// [`runlog::INGEST_AT_BYTES`]. The record is safe in the log once this returns: a failed
    /// move only leaves the work to the next reader, so its error is not the caller's.
    pub(crate) fn append_logged(&self, log: &RunLog, record: &[u8]) -> Result<(), StoreErrorKind> {
        if log.append(record)? >= runlog::INGEST_AT_BYTES {
            let _ = self.ingest_runlog();
        }
        Ok(())
    }

    /// Notes that `id` was begun in the run log.
    pub(crate) fn note_logged(&self, id: &RunId) {
        self.logged_runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone());
    }

    /// Whether runs are recorded in the run log.
    pub(crate) fn defers_runs(&self) -> bool {
        self.defer_runs
    }

    /// Moves what the run log holds into the database, in one transaction. Every read of the
    /// run history calls this first; when the log is empty it costs one `fstat`. The
    /// database's write lock is taken before the log's exclusive lock, so recorders appending
    /// to the log never wait while this waits for the database.
    pub(crate) fn ingest_runlog(&self) -> Result<(), StoreErrorKind> {
        if self.runlog.is_empty()? {
            return Ok(());
        }
        self.with(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            self.runlog.drain(move |records| {
                for entry in records {
                    crate::sqlite_runs::apply_entry(&tx, &entry)?;
                }
                tx.commit()?;
                Ok(())
            })?;
            Ok(())
        })
    }

    /// [`SqliteBackend::ingest_runlog`] for a read: when another process holds the database's
    /// write lock past the busy timeout, the read goes on with what the database holds (the
    /// log's runs appear at the next read) instead of failing.
    pub(crate) fn ingest_runlog_for_read(&self) -> Result<(), StoreErrorKind> {
        match self.ingest_runlog() {
            Err(error) if error.is_busy() => Ok(()),
            other => other,
        }
    }

    /// Runs `work` on an idle connection (opening another when all are in use, e.g. while
    /// the transcript thread writes), then keeps the connection for the next call.
    pub(crate) fn with<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreErrorKind>,
    ) -> Result<T, StoreErrorKind> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut connection = match idle {
            Some(connection) => connection,
            None if self.ready.load(Ordering::Acquire) => connect(&self.path)?,
            None => {
                let connection = open_checked(&self.path)?;
                self.ready.store(true, Ordering::Release);
                connection
            }
        };
        let result = work(&mut connection);
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(connection);
        }
        result
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction (the write lock taken first, so two
    /// writers never deadlock on a lock upgrade), committed when `work` succeeds.
    pub(crate) fn write<T>(
        &self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, StoreErrorKind>,
    ) -> Result<T, StoreErrorKind> {
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = work(&tx)?;
            tx.commit()?;
            Ok(value)
        })
    }
}

/// Opens a connection to the store at `path`, creating the file when missing, refusing what
/// is not a cordon store, and migrating it; retried while concurrent first opens report busy
/// (see [`SqliteBackend::open`]).
fn open_checked(path: &Path) -> Result<Connection, StoreErrorKind> {
    let deadline = Instant::now() + OPEN_PATIENCE;
    let mut pause = Duration::from_millis(5);
    loop {
        match open_once(path) {
            Err(error) if error.is_busy() && Instant::now() < deadline => {
                let jitter = Duration::from_micros(u64::from(std::process::id() % 997) * 5);
                std::thread::sleep(pause + jitter);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            result => return result,
        }
    }
}

fn open_once(path: &Path) -> Result<Connection, StoreErrorKind> {
    if !check_magic(path)? {
        create_private_file(path)?;
    }
    let mut connection = connect(path)?;
    migrate(&mut connection)?;
    Ok(connection)
}

/// Opens one connection with the store's settings.
fn connect(path: &Path) -> Result<Connection, StoreErrorKind> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = Connection::open_with_flags(path, flags).map_err(StoreErrorKind::classify)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    connection.set_prepared_statement_cache_capacity(32);
    // `journal_mode` is stored in the file: switching needs the write lock once, then reading
    // it back is all a later open does.
    let mode: String = connection
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .map_err(StoreErrorKind::classify)?;
    if !mode.eq_ignore_ascii_case("wal") {
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(StoreErrorKind::classify)?;
        if !mode.eq_ignore_ascii_case("wal") {
            // WAL cannot be enabled (another process holds the file in rollback mode): busy.
            return Err(StoreErrorKind::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                Some(format!("journal mode stayed {mode}")),
            )));
        }
    }
    connection
        .execute_batch(&format!(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; \
             PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}; \
             PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT};"
        ))
        .map_err(StoreErrorKind::classify)?;
    Ok(connection)
}

/// The ledger and the foreign tables, in one query: `None` when there is no ledger.
fn schema_state(connection: &Connection) -> Result<Option<(String, i64)>, StoreErrorKind> {
    let our_tables = OUR_TABLES
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT (SELECT COALESCE(group_concat(version, ','), '') FROM \
         (SELECT version FROM cordon_migrations ORDER BY version)), \
         (SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' \
          AND name NOT LIKE 'sqlite_%' AND name NOT IN ({our_tables}))"
    );
    match connection.query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?))) {
        Ok(state) => Ok(Some(state)),
        // No ledger yet (a new or foreign file): the full check under the write lock says which.
        Err(error) => match StoreErrorKind::classify(error) {
            kind @ StoreErrorKind::NotADatabase => Err(kind),
            kind if kind.is_busy() => Err(kind),
            _ => Ok(None),
        },
    }
}

/// The versions this build knows, as the ledger query renders them.
fn known_versions() -> String {
    MIGRATIONS
        .iter()
        .map(|m| m.0.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Refuses foreign databases and newer schemas, then applies the missing migrations in one
/// `BEGIN IMMEDIATE` transaction (so concurrent first opens apply them once).
fn migrate(connection: &mut Connection) -> Result<(), StoreErrorKind> {
    // The common case, checked with one query and without the write lock: the store is
    // current (its ledger lists exactly the known migrations and it holds only our tables).
    if let Some((applied, 0)) = schema_state(connection)?
        && applied == known_versions()
    {
        return Ok(());
    }
    let tx = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreErrorKind::classify)?;
    let tables: Vec<String> = {
        let mut statement = tx
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite_%' ORDER BY name",
            )
            .map_err(StoreErrorKind::classify)?;
        let rows = statement.query_map([], |row| row.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
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
        let mut statement = tx.prepare("SELECT version FROM cordon_migrations ORDER BY version")?;
        let rows = statement.query_map([], |row| row.get(0))?;
        rows.collect::<Result<_, _>>()?
    } else {
        tx.execute_batch(
            "CREATE TABLE cordon_migrations (version INTEGER PRIMARY KEY NOT NULL, \
             description TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)",
        )?;
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
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO cordon_migrations (version, description, applied_at_ms) \
             VALUES (?1, ?2, ?3)",
            (version, description, crate::store::now_ms()),
        )?;
    }
    tx.commit()?;
    Ok(())
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
/// start like an SQLite database (SQLite would only notice at the first query). `true` when it
/// is one (there is no file to create then), `false` when it is missing or empty.
fn check_magic(path: &Path) -> Result<bool, StoreErrorKind> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(false);
    };
    let mut head = Vec::with_capacity(16);
    if file.by_ref().take(16).read_to_end(&mut head).is_err() {
        return Err(StoreErrorKind::NotADatabase);
    }
    if head.is_empty() {
        Ok(false)
    } else if head == SQLITE_MAGIC {
        Ok(true)
    } else {
        Err(StoreErrorKind::NotADatabase)
    }
}

/// `Some(row)` or `None` for a query of at most one row.
pub(crate) fn optional<T>(result: rusqlite::Result<T>) -> Result<Option<T>, StoreErrorKind> {
    Ok(result.optional()?)
}

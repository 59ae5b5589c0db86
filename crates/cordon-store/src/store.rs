//! [`Store`]: the synchronous, backend-neutral face of the run history.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::backend::{AnyBackend, TranscriptCursor, dispatch};
use crate::error::{StoreError, StoreErrorKind};
use crate::model::{
    Chunk, ChunkFilter, NewRun, RunExport, RunExportTag, RunFilter, RunId, RunRecord, RunState,
    RunSummary, StageRecord,
};
use crate::owner::Owner;
use crate::sqlite::SqliteBackend;
use crate::transcript::TranscriptWriter;

/// The file name of the SQLite store inside the cordon home.
pub const DATABASE_FILE: &str = "cordon.db";

/// The variable that names the store: a `postgres://`/`postgresql://` URL or a file path.
pub const STORE_ENV: &str = "CORDON_STORE";

/// Where a store lives.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreLocation {
    /// An SQLite database file (created when missing).
    Sqlite(PathBuf),
    /// A PostgreSQL database, by URL (`postgres://user:password@host:port/db`, or
    /// `postgres://user@/db?host=/run/postgresql` for a Unix socket); its schema is created
    /// when missing. Opening one needs the `postgres` feature: a build without it refuses it
    /// ([`StoreErrorKind::NoPostgres`]).
    Postgres(String),
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StoreLocation::Postgres(url) => f
                .debug_tuple("Postgres")
                .field(&crate::redacted_url::redact_url(url))
                .finish(),
        }
    }
}

impl std::str::FromStr for StoreLocation {
    type Err = std::convert::Infallible;

    /// A `postgres://` or `postgresql://` URL names a PostgreSQL database; anything else is
    /// the path of an SQLite file.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Ok(StoreLocation::Postgres(text.to_owned()))
        } else {
            Ok(StoreLocation::Sqlite(PathBuf::from(text)))
        }
    }
}

impl StoreLocation {
    /// Where the store is: `$CORDON_STORE` when set (a URL or a path), else `cordon.db` in
    /// `$CORDON_HOME`, else in `$XDG_DATA_HOME/cordon`, else in `~/.local/share/cordon`.
    pub fn from_env() -> Result<Self, StoreError> {
        if let Some(text) = std::env::var_os(STORE_ENV).filter(|t| !t.is_empty()) {
            let text = text.to_str().ok_or_else(|| {
                StoreError::new(
                    &text.to_string_lossy(),
                    "find the store",
                    StoreErrorKind::NotUtf8,
                )
            })?;
            let Ok(location) = text.parse();
            return Ok(location);
        }
        let home = cordon_types::cordon_home().map_err(|e| {
            StoreError::new("(unknown)", "find the store", StoreErrorKind::NoHome(e))
        })?;
        Ok(StoreLocation::Sqlite(home.join(DATABASE_FILE)))
    }

    /// How messages name this location (a URL without its password).
    pub fn display(&self) -> String {
        match self {
            StoreLocation::Sqlite(path) => path.display().to_string(),
            StoreLocation::Postgres(url) => crate::redacted_url::redact_url(url),
        }
    }
}

/// The run history: runs, their stages and documents, and their transcripts.
///
/// Cheap to clone (shared); usable from several threads. Its methods block: call them from
/// plain threads, not from inside an async runtime. Everything handed to it must already be
/// redacted: the store writes what it is given, byte for byte.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    location: String,
    backend: AnyBackend,
    here: Owner,
    /// The run this handle began last, until its transcript is opened (it has none yet).
    fresh: std::sync::Mutex<Option<RunId>>,
    /// Who is told of recorded job events and of outages.
    observers: crate::observe::Observers,
}

fn lock_fresh(fresh: &std::sync::Mutex<Option<RunId>>) -> std::sync::MutexGuard<'_, Option<RunId>> {
    fresh
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Store {
    /// Opens the store at its default location (see [`StoreLocation::from_env`]).
    pub fn open_default() -> Result<Self, StoreError> {
        Self::open(&StoreLocation::from_env()?)
    }

    /// Opens (creating it when missing) an SQLite store at `path`.
    pub fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
        Self::open(&StoreLocation::Sqlite(path.to_owned()))
    }

    /// Opens a store, creating and migrating it as needed. A file or database that is not a
    /// cordon store (another database, random bytes, a newer schema) is refused with an error
    /// that says so. Only a PostgreSQL store starts an async runtime (its client's); a build
    /// without the `postgres` feature refuses one ([`StoreErrorKind::NoPostgres`]).
    pub fn open(location: &StoreLocation) -> Result<Self, StoreError> {
        Self::open_as(location, false)
    }

    /// Opens a store for a short-lived process that records runs (`cordon run`, `cordon
    /// verify`): on SQLite, runs are appended to the store's run log (`cordon.db-runlog`)
    /// instead of being written to the database, which every reader of the run history
    /// ingests first (module `runlog`: a recorded run costs two appends instead of opening
    /// SQLite, and is as crash-safe). The database itself is opened only when something else
    /// is asked of this handle. A PostgreSQL store is opened as by [`Store::open`].
    pub fn open_for_recording(location: &StoreLocation) -> Result<Self, StoreError> {
        Self::open_as(location, true)
    }

    /// [`Store::open_for_recording`] at the default location.
    pub fn open_default_for_recording() -> Result<Self, StoreError> {
        Self::open_for_recording(&StoreLocation::from_env()?)
    }

    /// Whether this handle records runs in the run log (see [`Store::open_for_recording`]);
    /// runs whose owner died are then marked `interrupted` by readers, not by recorders.
    pub fn defers_runs(&self) -> bool {
        match &self.inner.backend {
            AnyBackend::Sqlite(backend) => backend.defers_runs(),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(_) => false,
        }
    }

    fn open_as(location: &StoreLocation, recording: bool) -> Result<Self, StoreError> {
        let name = location.display();
        let fail = |kind| StoreError::new(&name, "open", kind);
        let backend = match location {
            StoreLocation::Sqlite(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    create_private_dir(dir).map_err(|source| {
                        fail(StoreErrorKind::Directory {
                            path: dir.to_owned(),
                            source,
                        })
                    })?;
                }
                let backend = if recording {
                    SqliteBackend::open_deferred(path)
                } else {
                    SqliteBackend::open(path)
                };
                AnyBackend::Sqlite(backend.map_err(fail)?)
            }
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => {
                AnyBackend::Postgres(crate::postgres::PostgresBackend::open(url).map_err(fail)?)
            }
            #[cfg(not(feature = "postgres"))]
            StoreLocation::Postgres(_) => return Err(fail(StoreErrorKind::NoPostgres)),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                location: name,
                backend,
                here: Owner::current(),
                fresh: std::sync::Mutex::new(None),
                observers: crate::observe::Observers::default(),
            }),
        })
    }

    /// Where this store is (for messages).
    pub fn location(&self) -> &str {
        &self.inner.location
    }

    /// Records the start of a run, owned by this process, in state `running`.
    pub fn begin_run(&self, run: &NewRun) -> Result<RunId, StoreError> {
        let here = &self.inner.here;
        loop {
            let id = RunId::generate();
            let inserted = self.call("begin a run", || {
                dispatch!(
                    &self.inner.backend,
                    Backend::insert_run(&id, run, here, now_ms())
                )
            })?;
            if inserted {
                *lock_fresh(&self.inner.fresh) = Some(id.clone());
                return Ok(id);
            }
        }
    }

    /// Records (or replaces) one stage of a run. `false` when there is no such run.
    pub fn record_stage(&self, id: &RunId, stage: &StageRecord) -> Result<bool, StoreError> {
        self.call("record a stage", || {
            dispatch!(&self.inner.backend, Backend::record_stage(id, stage))
        })
    }

    /// A writer that appends to the run's transcript in the background.
    pub fn transcript(&self, id: &RunId) -> Result<TranscriptWriter, StoreError> {
        // The run this handle just began has no transcript yet: no need to ask the database.
        let fresh = lock_fresh(&self.inner.fresh).take_if(|fresh| fresh == id);
        let cursor = match fresh {
            Some(_) => TranscriptCursor::default(),
            None => self.call("open a transcript", || {
                dispatch!(&self.inner.backend, Backend::transcript_cursor(id))
            })?,
        };
        Ok(TranscriptWriter::start(self.clone(), id.clone(), cursor))
    }

    /// Records how a run ended and its final document (stored as given; its `schema` field,
    /// when present, is kept alongside). `false` when there is no such run.
    pub fn finish_run(
        &self,
        id: &RunId,
        state: RunState,
        document: Option<&serde_json::Value>,
    ) -> Result<bool, StoreError> {
        let schema = document.map(|d| d.get("schema").and_then(|s| s.as_str()).unwrap_or(""));
        let document = document.zip(schema).map(|(d, s)| (s, d));
        self.call("finish a run", || {
            dispatch!(
                &self.inner.backend,
                Backend::finish_run(id, state, document, now_ms())
            )
        })
    }

    /// The runs matching `filter`, newest first.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        self.call("list runs", || {
            dispatch!(&self.inner.backend, Backend::list_runs(filter))
        })
    }

    /// One run with its stages and document, or `None` when there is no such run.
    pub fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.call("read a run", || {
            dispatch!(&self.inner.backend, Backend::get_run(id))
        })
    }

    /// Up to `limit` transcript chunks after `after_seq` (from the start when `None`), in
    /// the order they were written.
    pub fn read_chunks(
        &self,
        id: &RunId,
        filter: &ChunkFilter,
        after_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<Chunk>, StoreError> {
        self.call("read a transcript", || {
            dispatch!(
                &self.inner.backend,
                Backend::read_chunks(id, filter, after_seq, limit)
            )
        })
    }

    /// The whole transcript (or the filtered part of it), in the order it was written:
    /// stdout and stderr interleaved by sequence number.
    pub fn logs(&self, id: &RunId, filter: &ChunkFilter) -> Result<Vec<Chunk>, StoreError> {
        let mut all = Vec::new();
        let _complete = self.for_each_chunk(id, filter, None, &mut |chunk| {
            all.push(chunk);
            ControlFlow::Continue(())
        })?;
        Ok(all)
    }

    /// Feeds the chunks after `after_seq` (from the start when `None`) to `sink` in order,
    /// reading them in pages (memory stays bounded for long transcripts). Returns the last
    /// seq fed and whether `sink` asked to stop.
    pub fn for_each_chunk(
        &self,
        id: &RunId,
        filter: &ChunkFilter,
        mut after_seq: Option<u64>,
        sink: &mut dyn FnMut(Chunk) -> ControlFlow<()>,
    ) -> Result<(Option<u64>, ControlFlow<()>), StoreError> {
        const PAGE: u32 = 512;
        loop {
            let page = self.read_chunks(id, filter, after_seq, PAGE)?;
            let full = page.len() == PAGE as usize;
            for chunk in page {
                after_seq = Some(chunk.seq);
                if sink(chunk).is_break() {
                    return Ok((after_seq, ControlFlow::Break(())));
                }
            }
            if !full {
                return Ok((after_seq, ControlFlow::Continue(())));
            }
        }
    }

    /// Feeds the transcript to `sink` as it grows, polling every `poll`, until the run is no
    /// longer `running` (a run whose owner died is marked `interrupted` on the way) or `sink`
    /// breaks. Returns the run's final state, or `None` when there is no such run.
    pub fn follow(
        &self,
        id: &RunId,
        filter: &ChunkFilter,
        poll: Duration,
        sink: &mut dyn FnMut(Chunk) -> ControlFlow<()>,
    ) -> Result<Option<RunState>, StoreError> {
        let mut after_seq = None;
        loop {
            let Some((state, owner)) = self.call("follow a run", || {
                dispatch!(&self.inner.backend, Backend::run_owner(id))
            })?
            else {
                return Ok(None);
            };
            // Read after reading the state: once it is final, this read sees every chunk.
            let (last, flow) = self.for_each_chunk(id, filter, after_seq, sink)?;
            after_seq = last;
            if flow.is_break() {
                return Ok(Some(state));
            }
            if state != RunState::Running {
                return Ok(Some(state));
            }
            if !owner.is_alive(&self.inner.here) {
                self.call("mark a run interrupted", || {
                    dispatch!(&self.inner.backend, Backend::interrupt(id))
                })?;
                continue;
            }
            std::thread::sleep(poll);
        }
    }

    /// The run with its whole transcript, or `None` when there is no such run.
    pub fn export(&self, id: &RunId) -> Result<Option<RunExport>, StoreError> {
        let Some(record) = self.get_run(id)? else {
            return Ok(None);
        };
        let transcript = self
            .logs(id, &ChunkFilter::default())?
            .into_iter()
            .map(Into::into)
            .collect();
        Ok(Some(RunExport {
            schema: RunExportTag,
            record,
            transcript,
        }))
    }

    /// Marks `interrupted` every `running` run of this host whose owning process is gone
    /// (pid reuse is detected by the process start time). Cheap; returns how many.
    pub fn mark_interrupted(&self) -> Result<usize, StoreError> {
        let here = &self.inner.here;
        let running = self.call("find running runs", || {
            dispatch!(&self.inner.backend, Backend::running_runs(&here.host))
        })?;
        let mut marked = 0;
        for (id, owner) in running {
            if owner.is_alive(here) {
                continue;
            }
            let changed = self.call("mark a run interrupted", || {
                dispatch!(&self.inner.backend, Backend::interrupt(&id))
            })?;
            marked += usize::from(changed);
        }
        Ok(marked)
    }

    /// Deletes the runs (with their stages and transcripts) started more than `age` ago,
    /// except those still `running`. Returns how many runs were deleted.
    pub fn delete_older_than(&self, age: Duration) -> Result<usize, StoreError> {
        let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        let cutoff = now_ms().saturating_sub(age_ms);
        let deleted = self.call("delete old runs", || {
            dispatch!(&self.inner.backend, Backend::delete_started_before(cutoff))
        })?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    /// Runs `work` against the backend and names the operation in its error.
    pub(crate) fn call<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce() -> Result<T, StoreErrorKind>,
    ) -> Result<T, StoreError> {
        match work() {
            Ok(value) => {
                self.inner.observers.succeeded();
                Ok(value)
            }
            Err(kind) => {
                let error = StoreError::new(&self.inner.location, operation, kind);
                self.inner.observers.failed(&error);
                Err(error)
            }
        }
    }

    /// Who is told of recorded job events and of outages.
    pub(crate) fn observers(&self) -> &crate::observe::Observers {
        &self.inner.observers
    }

    /// The backend (for the job queue's methods).
    pub(crate) fn backend(&self) -> &AnyBackend {
        &self.inner.backend
    }

    /// Appends encoded chunks (for the transcript writer).
    pub(crate) fn append_chunks(
        &self,
        id: &RunId,
        chunks: &[crate::backend::EncodedChunk],
    ) -> Result<(), StoreError> {
        self.call("write a transcript", || {
            dispatch!(&self.inner.backend, Backend::append_chunks(id, chunks))
        })
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

//! The run history of cordon: every `cordon run` and `cordon verify`, its stages, its final
//! document, and the transcript of what its programs printed.
//!
//! - [`Store`]: the synchronous, backend-neutral API callers use. [`Store::open_default`]
//!   opens `$CORDON_HOME/cordon.db` (else `$XDG_DATA_HOME/cordon/cordon.db`, else
//!   `~/.local/share/cordon/cordon.db`): SQLite in WAL mode with a 5 s busy timeout, foreign
//!   keys on, `synchronous=NORMAL`, tables migrated from the embedded
//!   `migrations/sqlite/` on open. SQLite is called synchronously on the caller's thread
//!   (`rusqlite`: no async runtime, no worker thread), and closing does not checkpoint. A file
//!   that is not a cordon store is refused with a [`StoreError`] that names it and says what
//!   to do. [`Store::open_for_recording`] is for short-lived recorders: their runs are
//!   appended to a run log next to the database (a recorded short run costs two appends, about
//!   0.1 ms), which every reader moves into the database before it reads.
//! - [`TranscriptWriter`]: appends output while a program runs, from a plain thread, without
//!   ever waiting for the database; a background thread writes a batch every 250 ms.
//! - [`RunId`], [`NewRun`], [`RunState`], [`RunSummary`], [`RunRecord`], [`Chunk`],
//!   [`RunExport`]: what goes in and comes out; the documents printed by `cordon runs` carry
//!   `schema` tags (`cordon.run-list/v1`, `cordon.run-record/v1`, `cordon.run-export/v1`).
//!
//! **The store never sees raw output.** Callers pass text that `cordon-redact` has already
//! redacted; the store writes exactly the bytes it is given and returns exactly those bytes
//! (compressed with LZ4 on disk, which is lossless).
//!
//! Backends: SQLite (the default: one file, embedded, no runtime) and PostgreSQL (one database
//! shared by many workers and API servers on many machines: [`StoreLocation::Postgres`], a
//! `postgres://` URL in `CORDON_STORE`), behind the same [`Store`] methods and the same
//! migration versions (`migrations/sqlite/`, `migrations/postgres/`). PostgreSQL is the
//! `postgres` feature (sqlx on a tokio runtime), off by default: a build without it links no
//! async runtime, and refuses a PostgreSQL store with [`StoreErrorKind::NoPostgres`] rather
//! than record anywhere else.
//!
//! ```no_run
//! use cordon_store::{NewRun, RunKind, RunState, Store, Stream};
//!
//! let store = Store::open_default()?;
//! store.mark_interrupted()?;
//! let id = store.begin_run(&NewRun {
//!     kind: RunKind::Run,
//!     repo: None,
//!     session: None,
//!     command: serde_json::json!(["cargo", "test"]),
//! })?;
//! let transcript = store.transcript(&id)?;
//! transcript.write(None, Stream::Stdout, b"running 3 tests\n");
//! transcript.finish()?;
//! store.finish_run(&id, RunState::Pass, Some(&serde_json::json!({"schema": "cordon.run-result/v1"})))?;
//! # Ok::<(), cordon_store::StoreError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod error;
mod jobs;
mod model;
mod observe;
mod owner;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_admin;
#[cfg(feature = "postgres")]
mod postgres_jobs;
#[cfg(feature = "postgres")]
mod postgres_listen;
#[cfg(feature = "postgres")]
mod postgres_ops;
#[cfg(feature = "postgres")]
mod postgres_runs;
mod queue;
mod reclaim;
mod redacted_url;
mod rows;
mod runlog;
mod sqlite;
mod sqlite_admin;
mod sqlite_jobs;
mod sqlite_ops;
mod sqlite_runs;
mod store;
mod transcript;
mod webhooks;
mod workers;

pub use error::{StoreError, StoreErrorKind};
pub use jobs::{
    AttemptEnd, AttemptHistogram, AttemptRow, AttemptTiming, Claim, Claimed, InvalidJobId,
    JobEvent, JobFilter, JobId, JobRow, JobState, NewJob, QueueDepth, Recovered, RunningJobs,
    TokenRow, Usage, effective_slots,
};
pub use model::{
    Chunk, ChunkBody, ChunkFilter, ExportedBody, ExportedChunk, InvalidRunId, NewRun, RunExport,
    RunExportTag, RunFilter, RunId, RunKind, RunList, RunListTag, RunRecord, RunRecordTag,
    RunState, RunSummary, StageRecord, Stream,
};
pub use observe::{EventObserver, OutageObserver};
pub use store::{DATABASE_FILE, Store, StoreLocation};
pub use transcript::{
    FLUSH_BYTES, FLUSH_INTERVAL, MAX_BUFFERED, MAX_CHUNK, TranscriptStats, TranscriptWriter,
};
pub use webhooks::{DeliveryRow, DeliveryState, DeliveryTry, NewDelivery, TryVerdict};
pub use workers::{WorkerInfo, WorkerRow, WorkerState};

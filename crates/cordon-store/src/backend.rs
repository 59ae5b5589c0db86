//! The contract every storage backend fulfils, and the enum that picks one at run time.
//!
//! Callers never see a backend: they use [`crate::Store`], whose methods dispatch through
//! [`AnyBackend`]. Adding PostgreSQL means: a `postgres.rs` implementing [`Backend`] with its
//! own migrations under `migrations/postgres/` (same tables; `BYTEA` for chunk data, an
//! advisory lock around migrations instead of `BEGIN IMMEDIATE`), a `Postgres` variant here,
//! and a `StoreLocation::Postgres(url)` accepted by `Store::open` — no caller changes.

use crate::error::StoreErrorKind;
use crate::model::{
    Chunk, ChunkFilter, NewRun, RunFilter, RunId, RunRecord, RunState, RunSummary, StageRecord,
    Stream,
};
use crate::owner::Owner;
use crate::sqlite::SqliteBackend;

/// A transcript chunk ready to be written: numbered, placed, compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncodedChunk {
    pub(crate) seq: u64,
    pub(crate) stage: Option<String>,
    pub(crate) stream: Stream,
    pub(crate) offset: u64,
    pub(crate) at_ms: i64,
    pub(crate) data: EncodedData,
}

/// How a chunk's bytes are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EncodedData {
    /// LZ4 block compression of `raw_len` bytes.
    Lz4 { raw_len: u64, bytes: Vec<u8> },
    /// The bytes themselves (when compression would not make them smaller).
    Raw(Vec<u8>),
    /// A marker: this many bytes were lost.
    Lost(u64),
}

impl EncodedData {
    /// Compresses `bytes` when that makes them smaller.
    pub(crate) fn encode(bytes: &[u8]) -> Self {
        let compressed = lz4_flex::block::compress(bytes);
        if compressed.len() < bytes.len() {
            EncodedData::Lz4 {
                raw_len: bytes.len() as u64,
                bytes: compressed,
            }
        } else {
            EncodedData::Raw(bytes.to_vec())
        }
    }
}

/// Where a run's transcript continues: the next sequence number and, per (stage, stream),
/// the next byte offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TranscriptCursor {
    pub(crate) next_seq: u64,
    pub(crate) offsets: Vec<((Option<String>, Stream), u64)>,
}

/// What a backend does. Each method is one short statement or transaction; the owner checks
/// and time keeping stay in [`crate::Store`], so backends only move rows.
pub(crate) trait Backend {
    /// Inserts a `running` run; `false` when the id is taken.
    async fn insert_run(
        &self,
        id: &RunId,
        run: &NewRun,
        owner: &Owner,
        started_at_ms: i64,
    ) -> Result<bool, StoreErrorKind>;
    /// Inserts or replaces a stage; `false` when the run does not exist.
    async fn record_stage(&self, id: &RunId, stage: &StageRecord) -> Result<bool, StoreErrorKind>;
    /// Records the outcome and document; `false` when the run does not exist.
    async fn finish_run(
        &self,
        id: &RunId,
        state: RunState,
        document: Option<(&str, &serde_json::Value)>,
        finished_at_ms: i64,
    ) -> Result<bool, StoreErrorKind>;
    /// Where the run's transcript continues.
    async fn transcript_cursor(&self, id: &RunId) -> Result<TranscriptCursor, StoreErrorKind>;
    /// Appends chunks in one transaction.
    async fn append_chunks(
        &self,
        id: &RunId,
        chunks: &[EncodedChunk],
    ) -> Result<(), StoreErrorKind>;
    /// Runs matching the filter, newest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreErrorKind>;
    /// One run with its stages and document.
    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreErrorKind>;
    /// Up to `limit` chunks after `after_seq`, in order.
    async fn read_chunks(
        &self,
        id: &RunId,
        filter: &ChunkFilter,
        after_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<Chunk>, StoreErrorKind>;
    /// A run's state and owner.
    async fn run_owner(&self, id: &RunId) -> Result<Option<(RunState, Owner)>, StoreErrorKind>;
    /// The `running` runs started on `host`, with their owners.
    async fn running_runs(&self, host: &str) -> Result<Vec<(RunId, Owner)>, StoreErrorKind>;
    /// Marks a `running` run `interrupted`; `false` when it is not running any more.
    async fn interrupt(&self, id: &RunId) -> Result<bool, StoreErrorKind>;
    /// Deletes the finished runs started before `cutoff_ms`, with their stages and chunks.
    async fn delete_started_before(&self, cutoff_ms: i64) -> Result<u64, StoreErrorKind>;
}

/// The backend a store uses.
#[derive(Debug)]
pub(crate) enum AnyBackend {
    /// One SQLite file.
    Sqlite(SqliteBackend),
}

/// Calls `$method` on whichever backend `$backend` holds.
macro_rules! dispatch {
    ($backend:expr, $method:ident ( $($arg:expr),* )) => {
        match $backend {
            $crate::backend::AnyBackend::Sqlite(b) => {
                $crate::backend::Backend::$method(b, $($arg),*).await
            }
        }
    };
}
pub(crate) use dispatch;

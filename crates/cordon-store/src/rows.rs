//! What every backend shares to turn stored columns into values: the text forms of kinds,
//! states and streams, JSON columns, and transcript chunks (LZ4 decoded and checked).

use std::str::FromStr;

use crate::backend::EncodedData;
use crate::error::StoreErrorKind;
use crate::jobs::corrupt as corrupt_job;
use crate::model::{Chunk, ChunkBody, RunId, RunKind, RunState, StageRecord, Stream};

/// A JSON column that may be NULL.
pub(crate) fn json(
    text: Option<String>,
    what: &str,
) -> Result<Option<serde_json::Value>, StoreErrorKind> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(format!("{what}: {e}"))))
        .transpose()
}

/// A stage's status as stored (`pass`, `fail`, ...).
pub(crate) fn stage_status(stage: &StageRecord) -> String {
    serde_json::to_value(stage.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl EncodedData {
    /// The stored columns: `(encoding, raw_len, data)`.
    pub(crate) fn columns(&self) -> (&'static str, u64, &[u8]) {
        match self {
            EncodedData::Lz4 { raw_len, bytes } => ("lz4", *raw_len, bytes),
            EncodedData::Raw(bytes) => ("raw", bytes.len() as u64, bytes),
            EncodedData::Lost(bytes) => ("lost", *bytes, &[]),
        }
    }
}

/// A transcript chunk's columns as read from any backend.
pub(crate) struct RawChunk {
    pub(crate) seq: i64,
    pub(crate) stage: Option<String>,
    pub(crate) stream: String,
    pub(crate) offset: i64,
    pub(crate) at_ms: i64,
    pub(crate) encoding: String,
    pub(crate) raw_len: i64,
    pub(crate) data: Vec<u8>,
}

/// Decodes (decompresses, checks) a stored chunk.
pub(crate) fn decode_chunk(raw: RawChunk) -> Result<Chunk, StoreErrorKind> {
    let seq = to_u64(raw.seq);
    let raw_len = to_u64(raw.raw_len);
    let body = match raw.encoding.as_str() {
        "lz4" => {
            let len =
                usize::try_from(raw_len).map_err(|_| corrupt(format!("chunk {seq} length")))?;
            let bytes = lz4_flex::block::decompress(&raw.data, len)
                .map_err(|e| corrupt(format!("chunk {seq}: {e}")))?;
            if bytes.len() != len {
                return Err(corrupt(format!(
                    "chunk {seq}: length {} != {len}",
                    bytes.len()
                )));
            }
            ChunkBody::Data(bytes)
        }
        "raw" => ChunkBody::Data(raw.data),
        "lost" => ChunkBody::Lost { bytes: raw_len },
        other => return Err(corrupt(format!("chunk {seq} encoding {other:?}"))),
    };
    Ok(Chunk {
        seq,
        stage: raw.stage,
        stream: parse_stream(&raw.stream)?,
        offset: to_u64(raw.offset),
        at_ms: raw.at_ms,
        body,
    })
}

/// A run kind as stored: the `kind` column (`run`, `verify`) and the `role` column (`watch`
/// for the review watcher's runs, which are `run`s; NULL otherwise).
pub(crate) fn kind_str(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Run | RunKind::Watch => "run",
        RunKind::Verify => "verify",
    }
}

/// The `role` column of a run of `kind`.
pub(crate) fn role_str(kind: RunKind) -> Option<&'static str> {
    (kind == RunKind::Watch).then_some("watch")
}

/// The columns `kind` and `role` a filter on `kind` asks for (`role` as `''` for NULL).
pub(crate) fn kind_filter(kind: Option<RunKind>) -> (Option<&'static str>, Option<&'static str>) {
    match kind {
        None => (None, None),
        Some(kind) => (Some(kind_str(kind)), Some(role_str(kind).unwrap_or(""))),
    }
}

pub(crate) fn parse_kind(text: &str, role: Option<&str>) -> Result<RunKind, StoreErrorKind> {
    match (text, role) {
        ("run", Some("watch")) => Ok(RunKind::Watch),
        ("run", _) => Ok(RunKind::Run),
        ("verify", _) => Ok(RunKind::Verify),
        (other, _) => Err(corrupt(format!("run kind {other:?}"))),
    }
}

pub(crate) fn parse_id(text: &str) -> Result<RunId, StoreErrorKind> {
    RunId::from_str(text).map_err(|e| corrupt(e.to_string()))
}

pub(crate) fn parse_state(text: &str) -> Result<RunState, StoreErrorKind> {
    RunState::from_str(text).map_err(corrupt)
}

pub(crate) fn parse_stream(text: &str) -> Result<Stream, StoreErrorKind> {
    Stream::from_str(text).map_err(corrupt)
}

pub(crate) fn parse_json(text: &str, what: &str) -> Result<serde_json::Value, StoreErrorKind> {
    serde_json::from_str(text).map_err(|e| corrupt(format!("{what} is not JSON: {e}")))
}

fn corrupt(what: String) -> StoreErrorKind {
    corrupt_job(what)
}

pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

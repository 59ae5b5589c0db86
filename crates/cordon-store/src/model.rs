//! The data the store keeps and returns: runs, stages, transcript chunks, and the documents
//! printed by `cordon runs`.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

cordon_types::schema_tag!(
    /// The tag of [`RunList`]: `cordon.run-list/v1`.
    RunListTag,
    "cordon.run-list/v1"
);
cordon_types::schema_tag!(
    /// The tag of [`RunRecord`]: `cordon.run-record/v1`.
    RunRecordTag,
    "cordon.run-record/v1"
);
cordon_types::schema_tag!(
    /// The tag of [`RunExport`]: `cordon.run-export/v1`.
    RunExportTag,
    "cordon.run-export/v1"
);

/// The id of a recorded run: `r-` followed by 10 lowercase base32 characters.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    const ALPHABET: &'static [u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

    /// A fresh random id (50 bits from the kernel's random source).
    pub fn generate() -> Self {
        let mut bits = random_u64();
        let mut id = String::with_capacity(12);
        id.push_str("r-");
        for _ in 0..10 {
            id.push(char::from(Self::ALPHABET[(bits & 31) as usize]));
            bits >>= 5;
        }
        Self(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for RunId {
    type Err = InvalidRunId;

    /// Accepts any `r-` id of 10 base32 characters; the store then says whether it exists.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let valid = text.len() == 12
            && text.starts_with("r-")
            && text.bytes().skip(2).all(|b| Self::ALPHABET.contains(&b));
        if valid {
            Ok(Self(text.to_owned()))
        } else {
            Err(InvalidRunId(text.to_owned()))
        }
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// A text that is not a run id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a run id (expected `r-` and 10 characters of a-z, 2-7)")]
pub struct InvalidRunId(pub String);

fn random_u64() -> u64 {
    match getrandom::u64() {
        Ok(n) => n,
        Err(_) => {
            // No random source: fall back to time, pid and a counter (ids stay unique per host).
            use std::sync::atomic::{AtomicU64, Ordering};
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nanos
                ^ (u64::from(std::process::id()) << 40)
                ^ COUNTER
                    .fetch_add(1, Ordering::Relaxed)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        }
    }
}

/// What kind of command a run recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// `cordon run`: one program.
    Run,
    /// `cordon verify`: a pipeline of stages.
    Verify,
    /// A run of a session's review watcher (`cordon session watch`): its source polls,
    /// reviewers, fixer and `--on-timeout`.
    Watch,
}

impl RunKind {
    /// Every kind, in the order `cordon runs list --kind` names them.
    pub const ALL: [RunKind; 3] = [RunKind::Run, RunKind::Verify, RunKind::Watch];

    /// The kind's name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Run => "run",
            RunKind::Verify => "verify",
            RunKind::Watch => "watch",
        }
    }
}

/// Where a recorded run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Its cordon process is (or was last seen) working on it.
    Running,
    /// It passed.
    Pass,
    /// It failed.
    Fail,
    /// Its timeout fired.
    Timeout,
    /// cordon could not run it.
    Error,
    /// cordon was asked to stop and ended it.
    Cancelled,
    /// Its cordon process died before recording an outcome (found by `mark_interrupted`).
    Interrupted,
}

impl RunState {
    /// Every state, in a stable order.
    pub const ALL: [RunState; 7] = [
        RunState::Running,
        RunState::Pass,
        RunState::Fail,
        RunState::Timeout,
        RunState::Error,
        RunState::Cancelled,
        RunState::Interrupted,
    ];

    /// The state's name as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Pass => "pass",
            RunState::Fail => "fail",
            RunState::Timeout => "timeout",
            RunState::Error => "error",
            RunState::Cancelled => "cancelled",
            RunState::Interrupted => "interrupted",
        }
    }
}

impl FromStr for RunState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        RunState::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| format!("unknown run status {text:?}"))
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl From<cordon_types::RunStatus> for RunState {
    fn from(status: cordon_types::RunStatus) -> Self {
        match status {
            cordon_types::RunStatus::Pass => RunState::Pass,
            cordon_types::RunStatus::Fail => RunState::Fail,
            cordon_types::RunStatus::Timeout => RunState::Timeout,
            cordon_types::RunStatus::Error => RunState::Error,
            cordon_types::RunStatus::Cancelled => RunState::Cancelled,
        }
    }
}

pub use cordon_types::Stream;

/// What the caller knows when a run begins.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// `run` or `verify`.
    pub kind: RunKind,
    /// The repository or directory the run is about (canonical path), if any.
    pub repo: Option<String>,
    /// The session it ran in, if any.
    pub session: Option<String>,
    /// The command line (already redacted), as JSON (usually an array of strings).
    pub command: serde_json::Value,
}

/// One run as listed: everything but its document, stages and transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-revision" = 2))]
pub struct RunSummary {
    /// The run's id.
    pub id: RunId,
    /// `run` or `verify`.
    pub kind: RunKind,
    /// Where it stands.
    pub status: RunState,
    /// The repository or directory it was about.
    pub repo: Option<String>,
    /// The session it ran in (`cordon session exec`), if any.
    #[serde(default)]
    pub session: Option<String>,
    /// The command line, as given when it began.
    pub command: serde_json::Value,
    /// When it began (milliseconds since the Unix epoch).
    pub started_at_ms: i64,
    /// When it ended (milliseconds since the Unix epoch), once it has.
    pub finished_at_ms: Option<i64>,
    /// How long it took, once it ended.
    pub duration_ms: Option<i64>,
    /// The host that ran it.
    pub host: String,
    /// The process id of the cordon that ran it.
    pub owner_pid: i64,
}

/// A filter for [`crate::Store::list_runs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    /// At most this many runs (newest first).
    pub limit: u32,
    /// Only runs in this state.
    pub status: Option<RunState>,
    /// Only runs about this repository (compared as text: pass the canonical path).
    pub repo: Option<String>,
    /// Only runs made in this session.
    pub session: Option<String>,
    /// Only runs of this kind.
    pub kind: Option<RunKind>,
}

impl Default for RunFilter {
    fn default() -> Self {
        Self {
            limit: 20,
            status: None,
            repo: None,
            session: None,
            kind: None,
        }
    }
}

/// The document `cordon runs list --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunList {
    /// Always `cordon.run-list/v1`.
    pub schema: RunListTag,
    /// The runs, newest first.
    pub runs: Vec<RunSummary>,
}

/// One stage of a recorded run (a `cordon verify` stage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageRecord {
    /// Its position in the pipeline, from 0.
    pub index: u32,
    /// Its name (`lint`, `test`, ...).
    pub name: String,
    /// How it ended.
    pub status: cordon_types::StageStatus,
    /// Its result as JSON (usually a `StageResult`), stored as given.
    pub document: serde_json::Value,
}

/// A run with its stages and its final document: what `cordon runs show --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    /// Always `cordon.run-record/v1`.
    pub schema: RunRecordTag,
    /// The run.
    pub run: RunSummary,
    /// Its stages, in pipeline order.
    pub stages: Vec<StageRecord>,
    /// The schema tag of its final document (`cordon.run-result/v1`, `cordon.run-report/v1`).
    pub document_schema: Option<String>,
    /// Its final document, stored as given; absent while it runs or when it was interrupted.
    pub document: Option<serde_json::Value>,
}

/// A piece of a transcript, in the order the program wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Its position in the run's transcript (all stages and streams), from 0.
    pub seq: u64,
    /// The stage that wrote it (`None` for `cordon run`).
    pub stage: Option<String>,
    /// The stream it was written to.
    pub stream: Stream,
    /// The byte offset of its first byte within its (stage, stream).
    pub offset: u64,
    /// When it was received (milliseconds since the Unix epoch).
    pub at_ms: i64,
    /// Its content.
    pub body: ChunkBody,
}

/// What a transcript chunk holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkBody {
    /// Bytes the program wrote (already redacted), exactly as they were handed to the store.
    Data(Vec<u8>),
    /// A marker: this many bytes could not be kept (the store could not keep up).
    Lost {
        /// How many bytes are missing here.
        bytes: u64,
    },
}

/// Which chunks [`crate::Store::logs`] and [`crate::Store::follow`] return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkFilter {
    /// Only this stage's chunks.
    pub stage: Option<String>,
    /// Only this stream's chunks.
    pub stream: Option<Stream>,
}

/// A run with its transcript: what `cordon runs export` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunExport {
    /// Always `cordon.run-export/v1`.
    pub schema: RunExportTag,
    /// The run, its stages and its document.
    pub record: RunRecord,
    /// Its transcript, in order.
    pub transcript: Vec<ExportedChunk>,
}

/// A transcript chunk in an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedChunk {
    /// Its position in the transcript.
    pub seq: u64,
    /// The stage that wrote it.
    pub stage: Option<String>,
    /// The stream it was written to.
    pub stream: Stream,
    /// The byte offset of its first byte within its (stage, stream).
    pub offset: u64,
    /// When it was received (milliseconds since the Unix epoch).
    pub at_ms: i64,
    /// Its content.
    pub body: ExportedBody,
}

/// The content of an exported chunk: text when it is UTF-8, base64 otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExportedBody {
    /// The bytes, which are valid UTF-8.
    Text {
        /// The bytes as text.
        text: String,
    },
    /// The bytes, which are not valid UTF-8, in standard base64 with padding.
    Base64 {
        /// The bytes in base64.
        base64: String,
    },
    /// Bytes that could not be kept.
    Lost {
        /// How many bytes are missing here.
        lost_bytes: u64,
    },
}

impl From<Chunk> for ExportedChunk {
    fn from(chunk: Chunk) -> Self {
        let body = match chunk.body {
            ChunkBody::Data(bytes) => match String::from_utf8(bytes) {
                Ok(text) => ExportedBody::Text { text },
                Err(error) => ExportedBody::Base64 {
                    base64: base64_encode(error.as_bytes()),
                },
            },
            ChunkBody::Lost { bytes } => ExportedBody::Lost { lost_bytes: bytes },
        };
        Self {
            seq: chunk.seq,
            stage: chunk.stage,
            stream: chunk.stream,
            offset: chunk.offset,
            at_ms: chunk.at_ms,
            body,
        }
    }
}

/// Standard base64 (RFC 4648) with padding.
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (raw, encoded) in vectors {
            assert_eq!(base64_encode(raw.as_bytes()), encoded, "{raw:?}");
        }
        assert_eq!(base64_encode(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn generated_ids_parse_and_differ() {
        let a = RunId::generate();
        let b = RunId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().parse::<RunId>(), Ok(a.clone()));
        assert!("r-ABCDEFGHIJ".parse::<RunId>().is_err());
        assert!("r-abc".parse::<RunId>().is_err());
        assert!("x-abcdefghij".parse::<RunId>().is_err());
    }

    #[test]
    fn states_round_trip_through_text() {
        for state in RunState::ALL {
            assert_eq!(state.as_str().parse::<RunState>(), Ok(state));
            let json = serde_json::to_string(&state).expect("serializes");
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
    }
}

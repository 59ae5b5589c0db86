//! JSON documents the CLI composes from several libraries (each with a committed schema).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

cordon_types::schema_tag!(
    /// The `schema` tag of `cordon gc --json`: `"cordon.gc/v1"`.
    GcSummaryTag,
    "cordon.gc/v1"
);

/// What `cordon gc` did (`cordon gc --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GcSummary {
    /// Always `cordon.gc/v1`.
    pub schema: GcSummaryTag,
    /// Workspaces removed, kept and failed.
    pub workspaces: cordon_workspace::GcReport,
    /// Sessions ended (idle, owner gone, abandoned) or deleted, kept and failed.
    pub sessions: cordon_session::SessionGcReport,
    /// The run history.
    pub runs: GcRuns,
}

/// What `cordon gc` did to the run history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GcRuns {
    /// Runs whose cordon died, now marked `interrupted`.
    pub marked_interrupted: usize,
    /// Runs older than `--older-than` deleted with their transcripts.
    pub deleted: usize,
}

cordon_types::schema_tag!(
    /// The `schema` tag of the error document: `"cordon.error/v1"`.
    ErrorDocumentTag,
    "cordon.error/v1"
);

/// What every command given `--json` (or `--json-events`) prints on stdout, as one line, when
/// it fails: `cordon.error/v1`, the same for every command and every failure — usage errors
/// clap refused included. The human rendering (`error:`, `Caused by:`, `hint:`) goes to stderr
/// as without `--json`, and the exit code is the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDocument {
    /// Always `cordon.error/v1`.
    pub schema: ErrorDocumentTag,
    /// cordon's exit code: 1 the operation failed, 2 usage, 124 a wait ran out, 125 cordon
    /// itself failed.
    pub code: u8,
    /// What kind of error it is (stable, for scripts).
    pub kind: ErrorKind,
    /// What went wrong (the `error:` line).
    pub message: String,
    /// Why, outermost first (the `Caused by:` lines), each said once.
    pub causes: Vec<String>,
    /// How to fix it, when cordon knows (the `hint:` lines).
    pub hints: Vec<String>,
    /// The configuration file at fault (`cordon.toml`, `cordon-server.toml`), for kind
    /// `config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The 1-based line of `file` at fault, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The HTTP status the job service answered (`cordon jobs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The job service's own error document (`cordon.api-error/v1`), as it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_error: Option<cordon_types::ApiError>,
}

/// What kind of error a `cordon.error/v1` document reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The command line is wrong: an unknown flag, a bad value, a missing argument, options
    /// that cannot be combined (exit 2).
    Usage,
    /// A configuration file is invalid or unreadable; `file` and `line` say where (exit 2).
    Config,
    /// An id names nothing: a workspace, session, run, token or job (exit 2).
    NotFound,
    /// cordon or the job service refused on purpose: a patch that leaves the workspace, a
    /// hostile bundle, a credential directory to bind, a policy rule, a spent budget (exit 2
    /// when the input is at fault, else 1).
    Refused,
    /// Someone else holds what was asked for, or it moved on: another writer in the session,
    /// another watcher, diverged branches, a dirty checkout (exit 1; `session exec`: 125).
    Conflict,
    /// A bounded wait ran out (exit 124).
    Timeout,
    /// This host cannot do what was asked: a protection it cannot enforce, overlays it cannot
    /// mount (exit 125).
    Unsupported,
    /// The job service cannot be reached, or is too busy to answer (exit 125 / 1).
    Unavailable,
    /// cordon itself failed: the file system, the run history, git, supervision (exit 125).
    Internal,
}

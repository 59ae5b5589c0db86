//! The documents of the tools whose answer no other command prints: a workspace's patch
//! (`cordon.workspace-patch/v1`) and a bounded piece of a run's transcript
//! (`cordon.run-logs/v1`). Every other tool answers with cordon's own documents (run result,
//! run report, workspace and session records and reports, run records).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

cordon_types::schema_tag!(
    /// The tag of a workspace's patch: `cordon.workspace-patch/v1`.
    WorkspacePatchTag,
    "cordon.workspace-patch/v1"
);

cordon_types::schema_tag!(
    /// The tag of a piece of a run's transcript: `cordon.run-logs/v1`.
    RunLogsTag,
    "cordon.run-logs/v1"
);

/// What changed in a workspace against the commit it was created from, with the patch:
/// `cordon.workspace-patch/v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspacePatch {
    /// Always `cordon.workspace-patch/v1`.
    pub schema: WorkspacePatchTag,
    /// The changed paths and their statuses (`cordon.workspace-diff/v1`).
    pub diff: cordon_workspace::WorkspaceDiff,
    /// The patch (`git diff --binary`, new files included), at most the bytes asked for.
    pub patch: String,
    /// The patch's whole size.
    pub patch_bytes: u64,
    /// Whether `patch` stops before the end (it is then no patch to apply).
    pub truncated: bool,
}

/// A piece of a run's transcript, redacted when it was recorded: `cordon.run-logs/v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunLogs {
    /// Always `cordon.run-logs/v1`.
    pub schema: RunLogsTag,
    /// The run.
    pub run_id: String,
    /// The output, in the order it was written (both streams unless one was asked for),
    /// as text (invalid UTF-8 replaced).
    pub text: String,
    /// Bytes of the transcript (of the asked stage and stream).
    pub bytes: u64,
    /// Whether `text` is only its head or its tail.
    pub truncated: bool,
    /// Bytes of output the recording did not keep (past its limit, or lost).
    pub lost_bytes: u64,
}

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
    /// The `schema` tag of `cordon verify --json` when there is no report: `"cordon.verify-error/v1"`.
    VerifyErrorTag,
    "cordon.verify-error/v1"
);

/// What `cordon verify --json` prints on stdout when it could not verify at all (the plan
/// could not be built, the patch was refused, the host failed): stdout always holds a
/// document. The exit code is the same as without `--json` (2 usage, 3 infrastructure).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyError {
    /// Always `cordon.verify-error/v1`.
    pub schema: VerifyErrorTag,
    /// Always `error`: no verdict was reached.
    pub overall: cordon_types::Overall,
    /// Why.
    pub failure: VerifyErrorFailure,
}

/// Why `cordon verify` could not reach a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyErrorFailure {
    /// `usage` (bad input or config, a refused patch: exit 2) or `infra` (exit 3).
    pub category: VerifyErrorCategory,
    /// What went wrong, with its causes (each said once).
    pub reason: String,
    /// How to fix it, when cordon knows.
    pub hints: Vec<String>,
}

/// Who must act on a verification that could not be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerifyErrorCategory {
    /// The request, the configuration or the patch (exit 2).
    Usage,
    /// cordon or the host (exit 3).
    Infra,
}

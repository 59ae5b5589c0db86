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

// The error document is every door's (the CLI's `--json`, `cordon mcp`'s tool errors): it
// lives with the other contracts.
pub use cordon_types::{ErrorDocument, ErrorDocumentTag, ErrorKind};

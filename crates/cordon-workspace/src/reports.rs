//! The JSON documents workspace operations return.

use std::path::PathBuf;

use cordon_git::{ChangedFile, CommitId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::id::WorkspaceId;
use crate::record::WorkspaceRecord;
use crate::state::Liveness;

cordon_types::schema_tag!(
    /// The `schema` tag of a workspace listing entry: `"cordon.workspace-info/v1"`.
    WorkspaceInfoTag,
    "cordon.workspace-info/v1"
);
cordon_types::schema_tag!(
    /// The `schema` tag of an apply report: `"cordon.workspace-apply/v1"`.
    ApplyReportTag,
    "cordon.workspace-apply/v1"
);
cordon_types::schema_tag!(
    /// The `schema` tag of a workspace diff: `"cordon.workspace-diff/v1"`.
    WorkspaceDiffTag,
    "cordon.workspace-diff/v1"
);
cordon_types::schema_tag!(
    /// The `schema` tag of a workspace listing: `"cordon.workspace-list/v1"`.
    WorkspaceListTag,
    "cordon.workspace-list/v1"
);
cordon_types::schema_tag!(
    /// The `schema` tag of a gc report: `"cordon.workspace-gc/v1"`.
    GcReportTag,
    "cordon.workspace-gc/v1"
);

/// A workspace as `list` and `show` describe it: its record and its current condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceInfo {
    /// Always `cordon.workspace-info/v1`.
    pub schema: WorkspaceInfoTag,
    /// The record.
    pub record: WorkspaceRecord,
    /// Disk space the workspace's directory takes, in bytes (symlinks not followed).
    pub size_bytes: u64,
    /// Whether the size walk stopped at its bound (`size_bytes` is then a lower bound).
    pub size_truncated: bool,
    /// Whether the workspace's directory exists.
    pub path_exists: bool,
    /// Whether the owner process still runs.
    pub owner: Liveness,
    /// When the workspace was last created, changed or diffed (RFC 3339, UTC).
    pub last_used_at: Option<String>,
}

/// Every workspace (`cordon workspace list --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceList {
    /// Always `cordon.workspace-list/v1`.
    pub schema: WorkspaceListTag,
    /// The workspaces, oldest first.
    pub workspaces: Vec<WorkspaceInfo>,
}

/// What `apply` changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyReport {
    /// Always `cordon.workspace-apply/v1`.
    pub schema: ApplyReportTag,
    /// The workspace.
    pub id: WorkspaceId,
    /// The files the patch changed, in patch order.
    pub files: Vec<ChangedFile>,
}

/// What differs between a workspace and the commit it was created from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceDiff {
    /// Always `cordon.workspace-diff/v1`.
    pub schema: WorkspaceDiffTag,
    /// The workspace.
    pub id: WorkspaceId,
    /// The commit compared against.
    pub base_commit: CommitId,
    /// Every changed path, new untracked files included (ignored ones excluded).
    pub files: Vec<ChangedFile>,
    /// Untracked directories that are git repositories themselves, left out of `files` and
    /// of the patch.
    pub nested_repositories: Vec<cordon_git::RepoPath>,
    /// The patch (`git diff --binary` format), unless only names were asked for. Not part of
    /// the JSON document: it is bytes, printed as they are.
    #[serde(skip)]
    #[schemars(skip)]
    pub patch: Option<Vec<u8>>,
}

/// Why gc removed something.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum GcReason {
    /// A transient workspace whose owner process is gone.
    OwnerGone,
    /// A workspace whose creation was interrupted (its creator is gone).
    CreationAbandoned,
    /// A workspace whose removal was interrupted.
    RemovalInterrupted,
    /// Not used for longer than `older_than`.
    Idle,
    /// A record whose directory is gone.
    MissingDirectory,
    /// A directory without a record.
    OrphanDirectory,
    /// A record file that is not JSON (cut short by a power loss).
    UnreadableRecord,
}

impl std::fmt::Display for GcReason {
    /// Why, in words (for `cordon gc`'s lines).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GcReason::OwnerGone => "transient, its creator ended",
            GcReason::CreationAbandoned => "its creation was interrupted",
            GcReason::RemovalInterrupted => "its removal was interrupted",
            GcReason::Idle => "unused for longer than its idle timeout",
            GcReason::MissingDirectory => "its directory was gone",
            GcReason::OrphanDirectory => "a directory without a record",
            GcReason::UnreadableRecord => "an unreadable record",
        })
    }
}

/// One thing gc removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GcRemoval {
    /// The workspace id.
    pub id: WorkspaceId,
    /// Why it was removed.
    pub reason: GcReason,
    /// The source repository, when known.
    pub repo: Option<PathBuf>,
}

/// Something gc could not remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GcFailure {
    /// The workspace id.
    pub id: WorkspaceId,
    /// The error, rendered.
    pub message: String,
}

/// What a gc run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-revision" = 2))]
pub struct GcReport {
    /// Always `cordon.workspace-gc/v1`.
    pub schema: GcReportTag,
    /// What was removed.
    pub removed: Vec<GcRemoval>,
    /// How many workspaces were left alone (in use, live owner, persistent and not idle).
    pub kept: usize,
    /// Repositories from which a removed workspace's worktree entry was forgotten (only
    /// cordon's own entries; the user's worktrees are never pruned).
    pub pruned_repos: Vec<PathBuf>,
    /// What could not be removed (gc goes on with the rest).
    pub failures: Vec<GcFailure>,
    /// Base trees removed because nothing held them any more (full gc only).
    #[serde(default)]
    pub bases_removed: Vec<crate::bases::BaseRemoval>,
    /// Base trees that could not be removed, with the reason.
    #[serde(default)]
    pub base_failures: Vec<String>,
    /// Trusted build caches removed: unused for longer than `older_than` (two weeks by
    /// default) or of a repository that is gone (full gc only).
    #[serde(default)]
    pub caches_removed: Vec<crate::caches::CacheRemoval>,
    /// Caches and cache layers that could not be removed, with the reason.
    #[serde(default)]
    pub cache_failures: Vec<String>,
    /// Frozen layers (a forked session's shared state) removed because nothing held them
    /// any more (full gc only).
    #[serde(default)]
    pub layers_removed: Vec<crate::frozen::LayerRemoval>,
    /// Frozen layers that could not be removed, with the reason.
    #[serde(default)]
    pub layer_failures: Vec<String>,
}

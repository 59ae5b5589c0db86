//! The JSON documents session operations return (besides the record itself).

use cordon_git::CommitId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::id::SessionId;
use crate::record::{EndReason, KeptCommits, SessionRecord};

cordon_types::schema_tag!(
    /// The `schema` tag of `cordon session list --json`: `"cordon.session-list/v1"`.
    SessionListTag,
    "cordon.session-list/v1"
);
cordon_types::schema_tag!(
    /// The `schema` tag of a pull report: `"cordon.session-pull/v1"`.
    PullReportTag,
    "cordon.session-pull/v1"
);
cordon_types::schema_tag!(
    /// The `schema` tag of a push report: `"cordon.session-push/v1"`.
    PushReportTag,
    "cordon.session-push/v1"
);

/// Every session (`cordon session list --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionList {
    /// Always `cordon.session-list/v1`.
    pub schema: SessionListTag,
    /// The sessions, oldest first.
    pub sessions: Vec<SessionRecord>,
}

/// What a pull did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PullOutcome {
    /// The host branch was fast-forwarded (or created) to the session's commits.
    Merged,
    /// The host branch already had everything the session has.
    UpToDate,
}

/// The result of `cordon session pull` (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PullReport {
    /// Always `cordon.session-pull/v1`.
    pub schema: PullReportTag,
    /// The session.
    pub id: SessionId,
    /// What happened.
    pub outcome: PullOutcome,
    /// The host branch (`refs/heads/...` short name).
    pub into: String,
    /// Where the host branch was before (`None`: it did not exist).
    pub from: Option<CommitId>,
    /// Where it is now.
    pub to: Option<CommitId>,
    /// New commits the host branch received.
    pub commits: u64,
    /// The host ref holding the session's commits (`refs/cordon/sessions/<id>`), when any
    /// were fetched.
    pub session_ref: Option<String>,
    /// Whether the branch was checked out (and so merged with `git merge --ff-only`).
    pub checked_out: bool,
}

/// The result of `cordon session push` (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PushReport {
    /// Always `cordon.session-push/v1`.
    pub schema: PushReportTag,
    /// The session after the push.
    pub session: SessionRecord,
    /// Whether the session was created by this push.
    pub created: bool,
    /// The commit pushed.
    pub commit: CommitId,
    /// The size of the bundle that crossed the boundary, in bytes (0 when nothing was new).
    pub bundle_bytes: u64,
}

/// One session gc ended or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionGcEntry {
    /// The session.
    pub id: SessionId,
    /// Why it ended (`None`: it had ended before; its record was deleted).
    pub reason: Option<EndReason>,
    /// The commits the host branch lacked, kept in the host repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptCommits>,
}

/// One session gc could not collect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionGcFailure {
    /// The session.
    pub id: SessionId,
    /// What went wrong.
    pub message: String,
}

/// What gc did to the sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionGcReport {
    /// Sessions ended now (tree deleted, record kept).
    pub ended: Vec<SessionGcEntry>,
    /// Ended sessions whose records were deleted (older than `--older-than`), and
    /// directories without a record.
    pub deleted: Vec<SessionId>,
    /// Sessions left as they are.
    pub kept: usize,
    /// Sessions that could not be collected.
    pub failures: Vec<SessionGcFailure>,
}

//! The wire contract: what clients send and what the service answers, every document tagged
//! with its schema.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use cordon_store::{JobRow, JobState};
// The error answer is also part of the CLI's error document (`cordon.error/v1`), in builds
// without the service too: it lives in cordon-types.
pub use cordon_types::{ApiError, ApiErrorTag};

cordon_types::schema_tag!(
    /// The tag of a job document: `cordon.job/v1`.
    JobTag,
    "cordon.job/v1"
);
cordon_types::schema_tag!(
    /// The tag of a job listing: `cordon.job-list/v1`.
    JobListTag,
    "cordon.job-list/v1"
);
cordon_types::schema_tag!(
    /// The tag of an API token's description: `cordon.token/v1`.
    TokenTag,
    "cordon.token/v1"
);
cordon_types::schema_tag!(
    /// The tag of a list of API tokens: `cordon.token-list/v1`.
    TokenListTag,
    "cordon.token-list/v1"
);
cordon_types::schema_tag!(
    /// The tag of a job submission: `cordon.job-request/v1` (optional on input).
    JobRequestTag,
    "cordon.job-request/v1"
);

/// A job type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum JobType {
    /// One program in the sandbox; the result is a `cordon.run-result/v1`.
    #[serde(rename = "run")]
    Run,
    /// A staged verification; the result is a `cordon.run-report/v1`.
    #[serde(rename = "verify")]
    Verify,
    /// A clone of a repository into a server-side workspace; the result is
    /// `{workspace, commit, branch}`.
    #[serde(rename = "repo.clone")]
    RepoClone,
    /// A patch applied (all or nothing, paths confined) and committed in an earlier job's
    /// workspace; the result is `{workspace, commit, applied_files, diff, patch_id}`.
    #[serde(rename = "repo.applyPatch")]
    RepoApplyPatch,
    /// A session of an earlier job's workspace (its branch, as a checked bundle); the result
    /// is the session's `cordon.session/v1` record.
    #[serde(rename = "session.create")]
    SessionCreate,
    /// The workspace branch's new commits pushed into the session (fast-forward); the result
    /// is a `cordon.session-push/v1` report.
    #[serde(rename = "session.push")]
    SessionPush,
    /// One program in the session (writable, or read-only for a reviewer); the result is a
    /// `cordon.run-result/v1`.
    #[serde(rename = "session.exec")]
    SessionExec,
    /// The session's commits pulled back into the workspace's branch, fast-forward only; the
    /// result is a `cordon.session-pull/v1` report.
    #[serde(rename = "session.pull")]
    SessionPull,
    /// The session ended and removed; the result is its last record.
    #[serde(rename = "session.remove")]
    SessionRemove,
    /// New sessions with a session's exact state (`cordon session fork`); the result is a
    /// `cordon.session-fork/v1` report listing them.
    #[serde(rename = "session.fork")]
    SessionFork,
    /// Sessions verified and ranked (`cordon session compare`), several verifications at
    /// once, each holding a slot of the concurrency limits; the result is a
    /// `cordon.session-compare/v1` report with every candidate's report.
    #[serde(rename = "session.compare")]
    SessionCompare,
}

impl JobType {
    /// Every job type.
    pub const ALL: [JobType; 11] = [
        JobType::Run,
        JobType::Verify,
        JobType::RepoClone,
        JobType::RepoApplyPatch,
        JobType::SessionCreate,
        JobType::SessionPush,
        JobType::SessionExec,
        JobType::SessionPull,
        JobType::SessionRemove,
        JobType::SessionFork,
        JobType::SessionCompare,
    ];

    /// The type's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            JobType::Run => "run",
            JobType::Verify => "verify",
            JobType::RepoClone => "repo.clone",
            JobType::RepoApplyPatch => "repo.applyPatch",
            JobType::SessionCreate => "session.create",
            JobType::SessionPush => "session.push",
            JobType::SessionExec => "session.exec",
            JobType::SessionPull => "session.pull",
            JobType::SessionRemove => "session.remove",
            JobType::SessionFork => "session.fork",
            JobType::SessionCompare => "session.compare",
        }
    }

    /// Parses a stored type name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }

    /// The job types whose output names a workspace that later jobs may use.
    pub fn makes_workspace(self) -> bool {
        matches!(self, JobType::RepoClone | JobType::RepoApplyPatch)
    }
}

/// `POST /v1/jobs`: a job to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// Optional tag `cordon.job-request/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<JobRequestTag>,
    /// The project (the token must belong to it).
    #[schemars(length(max = 200))]
    pub project: String,
    /// The job type.
    #[serde(rename = "type")]
    pub job_type: JobType,
    /// The type's inputs, an object (see [`RunInputs`], [`VerifyInputs`], [`CloneInputs`],
    /// [`ApplyPatchInputs`], [`SessionCreateInputs`], [`SessionInputs`],
    /// [`SessionExecInputs`], [`SessionForkInputs`], [`SessionCompareInputs`]).
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub inputs: serde_json::Value,
    /// Time limit per attempt (`"90s"`, `"10m"`); at most the project's `max_timeout`.
    #[serde(default)]
    pub timeout: Option<String>,
    /// The same key in the same project returns the existing job instead of a new one.
    #[serde(default)]
    #[schemars(length(max = 200))]
    pub idempotency_key: Option<String>,
    /// Names of secrets the job's programs get (values stay on the server, redacted).
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Names of variables of the server's environment passed on.
    #[serde(default)]
    pub env_keys: Vec<String>,
    /// Higher runs first within the project.
    #[serde(default, deserialize_with = "integer")]
    pub priority: i64,
}

/// An integer as JSON Schema counts them: `356` or `356.0` (a number with no fraction).
fn integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let number = serde_json::Number::deserialize(d)?;
    if let Some(n) = number.as_i64() {
        return Ok(n);
    }
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => Ok(f as i64),
        _ => Err(serde::de::Error::custom(format!(
            "{number} is not an integer within the 64-bit range"
        ))),
    }
}

/// A reference to an earlier job's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FromJob {
    /// The job (of the same project) whose `workspace` output is used.
    pub from_job: String,
}

/// How much network a program asks for: `"none"` (the default), `"registry"`, `"host"`, or
/// `{"allow": ["HOST[:PORT]", "*.example.org"]}`; at most what the project's policy allows
/// for the job type.
pub type NetworkRequest = crate::policy::NetworkRule;

/// Inputs of a `run` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunInputs {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Where it runs: an earlier `repo.clone` or `repo.applyPatch` job's workspace.
    #[serde(default)]
    pub workspace: Option<FromJob>,
    /// Or a repository the server can reach (checked against the policy like a
    /// `repo.clone`), cloned for this job alone at `ref`. Neither: a fresh empty directory.
    #[serde(default)]
    pub repo: Option<String>,
    /// The ref of `repo` (default `HEAD`).
    #[serde(default, rename = "ref")]
    pub rev: Option<String>,
    /// The network the program has (default none).
    #[serde(default)]
    pub network: Option<NetworkRequest>,
    /// Memory of the whole process tree (`"2GiB"`).
    #[serde(default)]
    pub memory: Option<String>,
    /// Processes and threads of the whole tree at most.
    #[serde(default)]
    pub pids: Option<u64>,
    /// Bytes of each stream kept in the result, head and tail (`"1MiB"`).
    #[serde(default)]
    pub output_limit: Option<String>,
}

/// Inputs of a `verify` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyInputs {
    /// The repository: an earlier `repo.clone` or `repo.applyPatch` job's workspace.
    #[serde(default)]
    pub workspace: Option<FromJob>,
    /// Or a repository the server can reach (checked against the policy like a
    /// `repo.clone`), cloned for this job alone. Exactly one of `workspace` and `repo`.
    #[serde(default)]
    pub repo: Option<String>,
    /// The ref to verify (default: the workspace's commit, or the repository's `HEAD`).
    #[serde(default, rename = "ref")]
    pub rev: Option<String>,
    /// A patch (unified diff) applied first, all or nothing.
    #[serde(default)]
    pub patch: Option<String>,
    /// Only these stages (the others count as not passed).
    #[serde(default)]
    pub stages: Option<Vec<String>>,
    /// Only the stages of these categories (`setup`, `lint`, `typecheck`, `compile`, `test`,
    /// `build`, `smoke`, `migrate`); the others count as not passed.
    #[serde(default)]
    pub categories: Option<Vec<String>>,
}

/// Inputs of a `repo.clone` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloneInputs {
    /// A local path or a git URL the server can reach.
    pub url: String,
    /// The ref to check out (default `HEAD`).
    #[serde(default, rename = "ref")]
    pub rev: Option<String>,
    /// A shallow clone of this depth.
    #[serde(default)]
    pub depth: Option<u32>,
}

/// Inputs of a `repo.applyPatch` job. The workspace must be clean (no change a job left
/// uncommitted, else `usage`, nothing applied); the commit holds the patch's paths alone, and
/// a failure after the apply puts back those paths only. One job writes a workspace at a
/// time (`repo.applyPatch`, `run`): others wait for it within their timeout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchInputs {
    /// The workspace: an earlier `repo.clone` or `repo.applyPatch` job's.
    pub workspace: FromJob,
    /// The patch (unified diff, or `git diff --binary`).
    pub patch: String,
    /// When given, the patch must change exactly these paths (else nothing is applied).
    #[serde(default)]
    pub expect_files: Option<Vec<String>>,
}

/// A reference to a session an earlier job of the same project made: a `session.create`
/// job's session, or one of a `session.fork` job's new sessions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRef {
    /// The `session.create` or `session.fork` job (of the same project).
    pub from_job: String,
    /// With a `session.fork` job, which of its new sessions: 0 for the first of its result's
    /// `sessions` (required then; not with a `session.create` job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<u32>,
}

/// The most sessions a `session.fork` job makes, and a `session.compare` job compares.
pub const MAX_SESSIONS: u32 = cordon_session::MAX_FORKS;

/// Inputs of a `session.fork` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionForkInputs {
    /// The session forked (it goes on as it was).
    pub session: SessionRef,
    /// How many new sessions (1 to 100; default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100))]
    pub count: u32,
}

fn one() -> u32 {
    1
}

/// Inputs of a `session.compare` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCompareInputs {
    /// The candidates (1 to 100, each once): each session's change is verified on its base
    /// commit with the base's plan, then all are ranked.
    #[schemars(length(min = 1, max = 100))]
    pub sessions: Vec<SessionRef>,
    /// Only these stages (the others count as not passed).
    #[serde(default)]
    pub stages: Option<Vec<String>>,
    /// Only the stages of these categories (as a `verify` job's).
    #[serde(default)]
    pub categories: Option<Vec<String>>,
}

/// Inputs of a `session.create` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCreateInputs {
    /// The host side: an earlier `repo.clone` or `repo.applyPatch` job's workspace, whose
    /// branch the session starts from and later pulls into.
    pub workspace: FromJob,
    /// Only this many commits of history.
    #[serde(default)]
    pub depth: Option<u32>,
    /// Idle this long, the session is ended by the server's gc (`"2h"`; default 24 h).
    #[serde(default)]
    pub idle_timeout: Option<String>,
}

/// Inputs of `session.push`, `session.pull` and `session.remove` jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionInputs {
    /// The session.
    pub session: SessionRef,
}

/// Inputs of a `session.exec` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionExecInputs {
    /// The session.
    pub session: SessionRef,
    /// The program and its arguments (checked against the project's allow rules).
    pub argv: Vec<String>,
    /// A reviewer: the whole session read-only, enforced by the kernel; never waits for
    /// the writer. Default: a writer (one at a time; waits up to the job's timeout).
    #[serde(default)]
    pub read_only: bool,
    /// The network the program has (default none).
    #[serde(default)]
    pub network: Option<NetworkRequest>,
    /// Memory of the whole process tree (`"2GiB"`).
    #[serde(default)]
    pub memory: Option<String>,
    /// Processes and threads of the whole tree at most.
    #[serde(default)]
    pub pids: Option<u64>,
}

/// Why a job failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobFailure {
    /// `timeout`, `infra`, `resource`, `setup` (retryable); `exit`, `test`, `compile`,
    /// `lint`, `policy`, `usage` (a refused patch too), `cancelled`, … (final).
    pub category: String,
    /// What happened.
    pub reason: String,
}

impl JobFailure {
    /// Whether another attempt may succeed.
    pub fn retryable(&self) -> bool {
        matches!(
            self.category.as_str(),
            "timeout" | "infra" | "resource" | "setup"
        )
    }
}

/// The state of a job, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireState {
    /// Waiting for a worker.
    Queued,
    /// Running.
    Running,
    /// Running, its cancel asked for: its process tree is being ended (a final state
    /// follows within moments).
    Cancelling,
    /// Did its work (a verify: the gate passed).
    Succeeded,
    /// Did not.
    Failed,
    /// Cancelled.
    Cancelled,
    /// Its server died while it ran and no attempt was left.
    Interrupted,
}

impl From<JobState> for WireState {
    fn from(state: JobState) -> Self {
        match state {
            JobState::Queued => WireState::Queued,
            JobState::Running => WireState::Running,
            JobState::Succeeded => WireState::Succeeded,
            JobState::Failed => WireState::Failed,
            JobState::Cancelled => WireState::Cancelled,
            JobState::Interrupted => WireState::Interrupted,
        }
    }
}

/// A job: `cordon.job/v1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobDocument {
    /// `cordon.job/v1`.
    pub schema: JobTag,
    /// The job's id (`j-…`).
    pub id: String,
    /// Its project.
    pub project: String,
    /// Its type.
    #[serde(rename = "type")]
    pub job_type: String,
    /// Its state.
    pub state: WireState,
    /// Attempts started.
    pub attempt: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Priority within the project.
    pub priority: i64,
    /// Time limit per attempt, milliseconds.
    pub timeout_ms: u64,
    /// The client's idempotency key.
    pub idempotency_key: Option<String>,
    /// Submitted (RFC 3339).
    pub created_at: String,
    /// Latest attempt started.
    pub started_at: Option<String>,
    /// Reached its final state.
    pub finished_at: Option<String>,
    /// The inputs as submitted, plus `secrets` and `env_keys` by name only.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub inputs: serde_json::Value,
    /// The type's output document.
    pub result: Option<serde_json::Value>,
    /// Why it failed (or why the last attempt failed, while a retry waits).
    pub failure: Option<JobFailure>,
    /// Why a queued job is not running yet, when something holds it back (`GET /v1/jobs/{id}`
    /// only): its project's daily budget is spent, or a retry waits for its backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// The job this one re-runs (`POST /v1/jobs/{id}/rerun`), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<String>,
    /// Slots of the concurrency limits the job holds while it runs, when more than one: a
    /// `session.compare` verifies this many candidates at once (its project's concurrency
    /// and the workers permitting), counts as this many running jobs, and its wall-clock
    /// time is charged to the daily budget this many times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2))]
    pub slots: Option<u32>,
}

pub(crate) fn rfc3339(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

impl From<&JobRow> for JobDocument {
    fn from(row: &JobRow) -> Self {
        JobDocument {
            schema: JobTag,
            id: row.id.to_string(),
            project: row.project.clone(),
            job_type: row.job_type.clone(),
            state: if row.state == JobState::Running && row.cancel_requested {
                WireState::Cancelling
            } else {
                row.state.into()
            },
            attempt: row.attempt,
            max_attempts: row.max_attempts,
            priority: row.priority,
            timeout_ms: row.timeout_ms,
            idempotency_key: row.idempotency_key.clone(),
            created_at: rfc3339(row.created_at_ms),
            started_at: row.started_at_ms.map(rfc3339),
            finished_at: row.finished_at_ms.map(rfc3339),
            inputs: row.inputs.clone(),
            result: row.result.clone(),
            failure: row
                .failure
                .clone()
                .and_then(|f| serde_json::from_value(f).ok()),
            waiting: None,
            rerun_of: row.rerun_of.as_ref().map(ToString::to_string),
            slots: (row.slots > 1).then_some(row.slots),
        }
    }
}

/// `GET /v1/jobs`: a page of jobs, newest first: `cordon.job-list/v1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobList {
    /// `cordon.job-list/v1`.
    pub schema: JobListTag,
    /// The jobs.
    pub jobs: Vec<JobDocument>,
    /// Pass as `cursor` for the next page; `None` on the last.
    pub next_cursor: Option<String>,
}

/// An API token as `cordon token create|revoke --json` prints it: `cordon.token/v1` (the
/// secret only when it was just created: the store keeps its hash alone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenDocument {
    /// `cordon.token/v1`.
    pub schema: TokenTag,
    /// Its id (`t-…`): what `cordon token revoke` takes.
    pub id: String,
    /// The project it acts for (`*`: every project, an operator token).
    pub project: String,
    /// What it may do: `submit`, `read`, `admin`.
    pub scopes: Vec<String>,
    /// `live`, `revoked` or `expired`.
    pub state: String,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it stops working (RFC 3339), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// When it was revoked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    /// What its creator called it (`cordon token create --name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When it was last used (RFC 3339, to the minute: uses are recorded at most once a
    /// minute), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<String>,
    /// The secret, shown this once (on creation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl TokenDocument {
    /// The description of a stored token (without its secret).
    pub fn of(row: &cordon_store::TokenRow, now_ms: i64) -> Self {
        let time = |ms: i64| {
            humantime::format_rfc3339_millis(
                std::time::UNIX_EPOCH
                    + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
            )
            .to_string()
        };
        let state = if row.revoked_at_ms.is_some() {
            "revoked"
        } else if row.expires_at_ms.is_some_and(|e| e <= now_ms) {
            "expired"
        } else {
            "live"
        };
        TokenDocument {
            schema: TokenTag,
            id: row.id.clone(),
            project: row.project.clone(),
            scopes: row.scopes.clone(),
            state: state.into(),
            created_at: time(row.created_at_ms),
            expires_at: row.expires_at_ms.map(time),
            revoked_at: row.revoked_at_ms.map(time),
            name: row.name.clone(),
            last_used_at: row.last_used_at_ms.map(time),
            secret: None,
        }
    }
}

/// `cordon token list --json`: every token, newest first: `cordon.token-list/v1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenList {
    /// `cordon.token-list/v1`.
    pub schema: TokenListTag,
    /// The tokens.
    pub tokens: Vec<TokenDocument>,
}

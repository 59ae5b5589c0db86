//! What an agent sends: one type per tool, whose JSON Schema (schemars) is the tool's
//! `inputSchema`. Unknown fields are refused; every bound is checked against the operator's
//! ([`crate::Bounds`]) before anything runs.

use std::collections::BTreeMap;

use cordon_types::NetworkRule;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::catalogue::ToolName;
use crate::failure::ToolFailure;

/// A tool's arguments as its input type; a mistake is the caller's (a tool error, never a
/// protocol one).
pub(crate) fn parse<T: DeserializeOwned>(
    name: ToolName,
    arguments: rmcp::model::JsonObject,
) -> Result<T, ToolFailure> {
    serde_json::from_value(serde_json::Value::Object(arguments)).map_err(|e| {
        ToolFailure::usage(format!("invalid arguments for {}: {e}", name.as_str()))
            .hint("tools/list gives each tool's input schema")
    })
}

/// What a program may use, as an agent asked for it in `run` or `session_exec` (each at most
/// the operator's bound).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramAsk {
    /// The wall-clock limit asked for.
    pub timeout: Option<String>,
    /// The network asked for.
    pub network: Option<NetworkRule>,
    /// The memory asked for.
    pub memory: Option<String>,
    /// The processes asked for.
    pub pids: Option<u64>,
    /// The variables.
    pub env: BTreeMap<String, String>,
    /// The output kept in the result.
    pub output_limit: Option<String>,
}

/// Defines `ask()` on an input with the program fields of [`ProgramAsk`].
macro_rules! program_ask {
    ($input:ty) => {
        impl $input {
            /// What the program may use, as asked.
            pub fn ask(&self) -> ProgramAsk {
                ProgramAsk {
                    timeout: self.timeout.clone(),
                    network: self.network.clone(),
                    memory: self.memory.clone(),
                    pids: self.pids,
                    env: self.env.clone(),
                    output_limit: self.output_limit.clone(),
                }
            }
        }
    };
}
program_ask!(RunInput);
program_ask!(SessionExecInput);

/// `run`: one program in the kernel sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunInput {
    /// The program and its arguments; no shell (`["sh", "-c", "..."]` for one).
    #[schemars(length(min = 1))]
    pub argv: Vec<String>,
    /// The directory to run in (writable to the program; default: the first repository this
    /// server may open). Inside a workspace, relative to its top.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run in this workspace (`workspace_create`'s id): its tree writable, the source
    /// repository's git data read-only.
    #[serde(default)]
    pub workspace: Option<String>,
    /// Run in this session (`session_create`'s id) as its writer; `session_exec` runs
    /// reviewers read-only.
    #[serde(default)]
    pub session: Option<String>,
    /// Run without the kernel sandbox: only the timeout and the tree kill hold. Refused
    /// unless the operator started the server with `--allow-no-sandbox`.
    #[serde(default)]
    pub no_sandbox: bool,
    /// Wall-clock limit, e.g. `"30s"`, `"5m"`; then the whole process tree is ended. At most
    /// the operator's `--max-timeout`, which is also the default.
    #[serde(default)]
    pub timeout: Option<String>,
    /// The network the program reaches: `"none"` (the default: loopback only),
    /// `"registry"` (the package registries, through cordon's proxy), `"host"`, or
    /// `{"allow": ["HOST[:PORT]", "*.example.org"]}`. At most the operator's
    /// `--allow-network`.
    #[serde(default)]
    pub network: Option<NetworkRule>,
    /// Memory of the whole process tree, e.g. `"512MiB"`. At most the operator's `--memory`,
    /// which is also the default.
    #[serde(default)]
    pub memory: Option<String>,
    /// Processes and threads of the whole tree at once, at most.
    #[serde(default)]
    pub pids: Option<u64>,
    /// Variables set in the program's environment (after cordon's allow-list).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Bytes of each output stream kept in the result, head and tail together (default
    /// `"64KiB"`, at most `"1MiB"`); the whole output is in the run's transcript
    /// (`runs_logs`).
    #[serde(default)]
    pub output_limit: Option<String>,
}

/// `session_exec`: one program in a session's tree.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionExecInput {
    /// The session's id.
    pub id: String,
    /// The program and its arguments; no shell (`["sh", "-c", "..."]` for one).
    #[schemars(length(min = 1))]
    pub argv: Vec<String>,
    /// A reviewer: the whole tree and its git data read-only, enforced by the kernel; never
    /// waits. Default: the writer (one at a time).
    #[serde(default)]
    pub read_only: bool,
    /// The directory to run in, relative to the session's top (default: the top).
    #[serde(default)]
    pub cwd: Option<String>,
    /// How long a writer waits for another writer, e.g. `"30s"` (default: refuse at once).
    #[serde(default)]
    pub wait: Option<String>,
    /// Wall-clock limit, e.g. `"30s"`, `"5m"`; then the whole process tree is ended. At most
    /// the operator's `--max-timeout`, which is also the default.
    #[serde(default)]
    pub timeout: Option<String>,
    /// The network the program reaches: `"none"` (the default: loopback only),
    /// `"registry"` (the package registries, through cordon's proxy), `"host"`, or
    /// `{"allow": ["HOST[:PORT]", "*.example.org"]}`. At most the operator's
    /// `--allow-network`.
    #[serde(default)]
    pub network: Option<NetworkRule>,
    /// Memory of the whole process tree, e.g. `"512MiB"`. At most the operator's `--memory`,
    /// which is also the default.
    #[serde(default)]
    pub memory: Option<String>,
    /// Processes and threads of the whole tree at once, at most.
    #[serde(default)]
    pub pids: Option<u64>,
    /// Variables set in the program's environment (after cordon's allow-list).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Bytes of each output stream kept in the result, head and tail together (default
    /// `"64KiB"`, at most `"1MiB"`); the whole output is in the run's transcript
    /// (`runs_logs`).
    #[serde(default)]
    pub output_limit: Option<String>,
}

/// `verify`: a change checked stage by stage, with a fail-closed gate.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyInput {
    /// The repository (any directory of its checkout; default: the first repository this
    /// server may open). Not with `session`.
    #[serde(default)]
    pub repo: Option<String>,
    /// Verify this session's change instead: its tree against the commit it started from,
    /// applied as a patch to that commit in a fresh workspace of the host repository.
    #[serde(default)]
    pub session: Option<String>,
    /// Verify this workspace's change instead (`workspace_create`'s id): what changed in it
    /// against the commit it was created from, applied to that commit.
    #[serde(default)]
    pub workspace: Option<String>,
    /// The ref whose committed content is verified (default `HEAD`; never the checkout's
    /// uncommitted edits).
    #[serde(default, rename = "ref")]
    pub rev: Option<String>,
    /// The base for changed files (targeting); default: the merge-base with the default
    /// branch.
    #[serde(default)]
    pub base: Option<String>,
    /// A patch (unified or `git diff` format) applied on top of the ref, all or nothing.
    #[serde(default)]
    pub patch: Option<String>,
    /// The project inside the repository (relative directory) whose `cordon.toml` or files
    /// define the stages.
    #[serde(default)]
    pub project: Option<String>,
    /// Run only these stages (the others count as not passed).
    #[serde(default)]
    pub stages: Option<Vec<String>>,
    /// Run every stage even after a required one failed (default: fail fast).
    #[serde(default)]
    pub keep_going: bool,
}

/// `workspace_create`: an isolated copy of a repository at a ref.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceCreateInput {
    /// The repository (default: the first repository this server may open).
    #[serde(default)]
    pub repo: Option<String>,
    /// The ref whose committed content the workspace gets (default `HEAD`).
    #[serde(default, rename = "ref")]
    pub rev: Option<String>,
    /// Keep it after this server ends (default: removed by `cordon gc` once it has).
    #[serde(default)]
    pub persistent: bool,
}

/// `workspace_apply`: a patch applied to a workspace, all or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceApplyInput {
    /// The workspace's id.
    pub id: String,
    /// The patch (unified or `git diff` format). Paths outside the workspace, under `.git`
    /// or through symlinks are refused and change nothing.
    pub patch: String,
}

/// `workspace_diff` and `session_diff`: what changed, against the commit it started from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffInput {
    /// The workspace's or session's id.
    pub id: String,
    /// Bytes of the patch returned at most (default and most: 192KiB).
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

/// `session_fork`: new sessions with a session's exact state.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionForkInput {
    /// The session to fork (over the job service: its `session_create` job's id, or
    /// `FORK_JOB:I` for a session a `session_fork` job made).
    pub id: String,
    /// How many sessions to make (1 to 100; default 1).
    #[serde(default)]
    pub count: Option<u32>,
}

/// `session_compare`: sessions verified and ranked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCompareInput {
    /// The sessions to compare (forks of one session, typically; over the job service,
    /// named as `session_fork`'s answer lists them: `FORK_JOB:I`).
    pub ids: Vec<String>,
    /// Run only these stages.
    #[serde(default)]
    pub stages: Option<Vec<String>>,
}

/// A workspace, session or run named by its id.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdInput {
    /// The id.
    pub id: String,
}

/// `session_create`: a persistent sandbox of a repository, with its own git history.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCreateInput {
    /// The host repository (default: the first repository this server may open).
    #[serde(default)]
    pub repo: Option<String>,
    /// Over the job service (`/mcp` of `cordon serve`): the workspace (`workspace_create`'s
    /// id) whose branch the session starts from and later pulls into.
    #[serde(default)]
    pub workspace: Option<String>,
    /// The branch to start from (default `HEAD`: the checked-out branch).
    #[serde(default, rename = "ref")]
    pub rev: Option<String>,
    /// The session's branch name (default: the host branch's).
    #[serde(default)]
    pub branch: Option<String>,
    /// Only the last N commits of history.
    #[serde(default)]
    pub depth: Option<u32>,
    /// Idle this long, `cordon gc` ends it, e.g. `"2h"` (default `"24h"`).
    #[serde(default)]
    pub idle_timeout: Option<String>,
}

/// `session_pull`: the session's branch brought back as a fast-forward of a host branch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionPullInput {
    /// The session's id.
    pub id: String,
    /// The host branch to fast-forward (default: the one the session started from).
    #[serde(default)]
    pub into: Option<String>,
}

/// `runs_logs`: a run's transcript, redacted and bounded.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsLogsInput {
    /// The run's id (`r-…`).
    pub id: String,
    /// Only this stage's output (a verification's).
    #[serde(default)]
    pub stage: Option<String>,
    /// Only this stream: `stdout` or `stderr`.
    #[serde(default)]
    pub stream: Option<StreamName>,
    /// Bytes returned at most (default 64KiB, at most 1MiB).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Which end to keep when the transcript is longer: `tail` (default) or `head`.
    #[serde(default)]
    pub from: LogEnd,
}

/// An output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StreamName {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Which end of a long transcript to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogEnd {
    /// The first bytes.
    Head,
    /// The last bytes.
    #[default]
    Tail,
}

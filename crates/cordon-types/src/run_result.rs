//! `cordon.run-result/v1`: the outcome of one bounded program run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::network::NetworkReport;
use crate::sandbox::SandboxSummary;

/// The value of [`RunResult::schema`].
pub const RUN_RESULT_SCHEMA: &str = "cordon.run-result/v1";

crate::schema_tag!(
    /// The `schema` tag of a run result: always `"cordon.run-result/v1"`.
    RunResultTag,
    "cordon.run-result/v1"
);

/// What happened when one program ran under `cordon run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunResult {
    /// Always `cordon.run-result/v1`.
    pub schema: RunResultTag,
    /// The overall outcome.
    pub status: RunStatus,
    /// The program's exit code, when it exited by itself (not by a signal).
    pub exit_code: Option<i32>,
    /// The name of the signal that ended the program (`SIGKILL`, ...), if one did.
    pub signal: Option<String>,
    /// Wall-clock time from spawn until the program exited, in milliseconds.
    pub duration_ms: u64,
    /// Every limit that was reached during the run, in the order they were hit.
    pub limits_hit: Vec<LimitKind>,
    /// What the program wrote to standard output (bounded head and tail).
    pub stdout: CapturedOutput,
    /// What the program wrote to standard error (bounded head and tail).
    pub stderr: CapturedOutput,
    /// CPU and memory the program used.
    pub resource: ResourceUsage,
    /// Why the run did not pass; `null` when `status` is `pass`.
    pub failure: Option<Failure>,
    /// The program and its arguments, as requested.
    pub command: Vec<String>,
    /// The directory the program ran in.
    pub cwd: String,
    /// When the program was started, RFC 3339 in UTC with milliseconds.
    pub started_at: String,
    /// Processes and pipes the program left behind, which cordon cleaned up.
    pub leaked: LeakReport,
    /// Which isolation held for this run.
    pub sandbox: SandboxSummary,
    /// The run's id in the run history (`cordon runs show ID`), when it was recorded.
    #[serde(default)]
    pub run_id: Option<String>,
    /// What the program reached through cordon's filtering proxy and what it was refused;
    /// present when the network was an allowlist (`--network allow=...`).
    #[serde(default)]
    pub network: Option<NetworkReport>,
}

/// The overall outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The program exited with code 0 and no limit ended it.
    Pass,
    /// The program exited non-zero, died of a signal, or was ended by a resource limit.
    Fail,
    /// cordon's wall-clock timeout ended the program.
    Timeout,
    /// cordon could not run the program (not found, sandbox set-up failed, ...).
    Error,
    /// cordon was asked to stop (Ctrl-C, SIGTERM) and ended the program.
    Cancelled,
}

/// A limit that cordon enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The wall-clock timeout fired.
    Timeout,
    /// Output exceeded `--output-limit` and the middle was dropped from the result.
    Output,
    /// The memory limit was reached (the kernel's OOM counter says so).
    Memory,
    /// The process-count limit refused a fork.
    Pids,
    /// The CPU-time limit ended the program.
    Cpu,
    /// The file-size limit ended the program.
    FileSize,
    /// The working tree (a workspace, or the working directory) grew past the disk limit
    /// and cordon ended the program.
    Disk,
}

/// Bounded capture of one output stream: the first and last bytes, plus exact counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapturedOutput {
    /// Every byte the program wrote to this stream, kept or not.
    pub bytes_total: u64,
    /// Whether bytes were dropped between `head` and `tail`.
    pub truncated: bool,
    /// How many bytes were dropped between `head` and `tail`.
    pub omitted_bytes: u64,
    /// The first bytes (all of them when not truncated), decoded as UTF-8 with replacement.
    pub head: String,
    /// The last bytes when truncated (empty otherwise), decoded as UTF-8 with replacement.
    pub tail: String,
    /// Bytes of this stream that `cordon run` could not pass through to its own output before
    /// the run's deadline (whoever reads cordon's output stopped reading); they are still
    /// counted and captured here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undelivered_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Resource usage of the program and, where it can be measured exactly, of its whole tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceUsage {
    /// Peak resident set of the program's largest single process (`wait4`'s `ru_maxrss`).
    pub max_rss_bytes: Option<u64>,
    /// User CPU time of the program and the descendants it waited for (`wait4`).
    pub cpu_user_ms: Option<u64>,
    /// System CPU time of the program and the descendants it waited for (`wait4`).
    pub cpu_sys_ms: Option<u64>,
    /// User CPU time of the whole tree, orphans included, when measurable exactly.
    pub tree_cpu_user_ms: Option<u64>,
    /// System CPU time of the whole tree, orphans included, when measurable exactly.
    pub tree_cpu_sys_ms: Option<u64>,
    /// Peak memory of the whole tree together (from the cgroup), when measured.
    pub tree_peak_memory_bytes: Option<u64>,
}

/// Why a run did not pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// What kind of failure this is.
    pub category: FailureCategory,
    /// A human-readable explanation.
    pub reason: String,
}

/// The kind of a failure: what the author must fix versus what a retry may fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureCategory {
    /// The wall-clock timeout fired.
    Timeout,
    /// A resource limit (memory, pids, CPU, file size) ended the program.
    Resource,
    /// The program exited with a non-zero code.
    Exit,
    /// The program died of a signal it did not get from cordon.
    Signal,
    /// cordon could not do its job (spawn failed, sandbox could not be set up, ...).
    Infra,
    /// cordon was asked to stop and ended the program.
    Cancelled,
}

/// What the program left behind when it ended, and what cordon did about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeakReport {
    /// Descendant processes still alive after the program ended; cordon killed them.
    pub processes_killed: u32,
    /// Whether some process still held stdout or stderr open when the leak window closed.
    pub output_held_open: bool,
}

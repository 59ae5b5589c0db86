//! The private report a supervising helper sends back to the executor.
//!
//! When the executor runs a *supervisor* (the sandbox init) instead of the program itself, the
//! supervisor's own exit status says little. The supervisor therefore writes one JSON
//! [`ChildReport`] to the file descriptor [`CHILD_REPORT_FD`] it inherits, then exits; the
//! executor reads it and reports the program's true status and resource usage.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::run_result::LimitKind;

/// The descriptor number on which a supervisor finds its report pipe.
pub const CHILD_REPORT_FD: i32 = 3;

/// The descriptor number on which a supervisor finds the Unix socket that carries the
/// sandbox's proxy listener back to cordon (`--network allow=...`): the helper creates the
/// listening socket inside the sandbox's network namespace and sends it over this socket
/// (`SCM_RIGHTS`); cordon's proxy accepts on it.
pub const CHILD_NETWORK_FD: i32 = 4;

/// What a supervisor knows about the program it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChildReport {
    /// The program's exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// The signal number that ended the program, if one did.
    pub signal: Option<i32>,
    /// Resource usage of the program from `wait4`, when it was reaped.
    pub rusage: Option<ChildRusage>,
    /// Limits the supervisor saw hit (from cgroup counters or rlimit signals).
    pub limits_hit: Vec<LimitKind>,
    /// Peak memory of the whole tree, from the cgroup, when measured.
    pub tree_peak_memory_bytes: Option<u64>,
    /// Set when the supervisor could not start the program; the text says why and how to fix.
    pub setup_error: Option<String>,
    /// With `setup_error`: the conventional exit code for it — 127 when the program was not
    /// found, 126 when it could not be executed; `None` means a failure of the sandbox (125).
    #[serde(default)]
    pub setup_exit_code: Option<u8>,
    /// Processes still alive when the program ended, which the supervisor then killed (PID 1
    /// of the sandbox kills whatever is left in its PID namespace).
    #[serde(default)]
    pub processes_killed: u32,
    /// Landlock access rights the kernel did not enforce although the policy asked for them
    /// (`fs.resolve_unix`, `scope.signal`, ..., or `all`); only non-empty when the policy
    /// accepted a degraded Landlock, since otherwise the program does not run.
    #[serde(default)]
    pub landlock_unenforced: Vec<String>,
    /// CPU time of the whole sandbox up to the report: the supervisor's own and that of
    /// every process it reaped (the program, its descendants, what was killed). The executor
    /// uses it when it does not wait for the supervisor to finish exiting.
    #[serde(default)]
    pub tree_rusage: Option<ChildRusage>,
}

/// Resource usage of a reaped process, as `wait4` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChildRusage {
    /// User CPU time in microseconds.
    pub user_us: u64,
    /// System CPU time in microseconds.
    pub sys_us: u64,
    /// Peak resident set size in bytes.
    pub max_rss_bytes: u64,
}

//! The `sandbox` section of a run result: which isolation held, by which mechanism.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which isolation held for one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxSummary {
    /// Whether the program ran inside cordon's sandbox at all.
    pub enabled: bool,
    /// How it was isolated (`namespaces` or `landlock`), when it was.
    #[serde(default)]
    pub tier: Option<IsolationTier>,
    /// The Linux namespaces the program ran in (`user`, `mount`, `pid`, `net`, ...).
    pub namespaces: Vec<String>,
    /// The Landlock ABI version that was enforced, if any.
    pub landlock_abi: Option<u32>,
    /// Landlock access rights the kernel left unenforced although they were asked for
    /// (`fs.resolve_unix`, `scope.signal`, ..., or `all`). Empty when the ruleset was fully
    /// enforced; a run only goes on with a non-empty list under `--allow-degraded landlock`.
    #[serde(default)]
    pub landlock_unenforced: Vec<String>,
    /// Whether a seccomp filter was installed.
    pub seccomp: bool,
    /// The network the program could reach.
    pub network: NetworkMode,
    /// Which mechanism enforced each resource limit.
    pub enforcement: EnforcementSummary,
    /// Git data under the writable trees that was kept read-only (`.git` directories and
    /// worktrees' `.git` files), so that the program cannot plant hooks or `core.fsmonitor`
    /// for the user's next git command.
    #[serde(default)]
    pub read_only_git: Vec<String>,
    /// What the sandbox did not protect in this run and the user should know (for example
    /// a working directory that is the home directory: its dotfiles are writable).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Protections of the namespace tier that this run's tier does not give (the `landlock`
    /// tier: a private `/proc`, a private PID space, ...), each said in a few words. Empty
    /// in the `namespaces` tier.
    #[serde(default)]
    pub not_enforced: Vec<String>,
}

/// How a sandbox isolates its program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IsolationTier {
    /// New user, mount, PID, IPC, UTS, cgroup (and network) namespaces with a constructed
    /// root, plus Landlock, seccomp and cgroups: the default.
    #[default]
    Namespaces,
    /// No namespace at all: Landlock confines the files and TCP, seccomp the system calls
    /// and socket families, with a private home and temporary directory given by the
    /// environment. For hosts (containers, some distributions) and places (inside a cordon
    /// sandbox) where user namespaces cannot be created.
    Landlock,
}

impl IsolationTier {
    /// The tier's name as the command line and the documents write it.
    pub fn name(self) -> &'static str {
        match self {
            IsolationTier::Namespaces => "namespaces",
            IsolationTier::Landlock => "landlock",
        }
    }
}

/// The network a sandboxed program can reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// A private network namespace with only loopback.
    None,
    /// The host's network, unrestricted.
    #[default]
    Host,
    /// A private network namespace with only loopback, where the one way out is cordon's
    /// filtering proxy (HTTP CONNECT and plain HTTP to the allowed host names only).
    Allowlist,
}

/// Which mechanism enforced each limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnforcementSummary {
    /// How the memory limit was enforced.
    pub memory: Enforcement,
    /// How the process-count limit was enforced.
    pub pids: Enforcement,
    /// How the CPU-time limit was enforced.
    pub cpu: Enforcement,
}

/// A mechanism that enforces a limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    /// A cgroup v2 controller.
    CgroupV2,
    /// A cgroup v1 controller.
    CgroupV1,
    /// A per-process rlimit (weaker: per process, not per tree).
    Rlimit,
    /// Not enforced (no limit was asked for, or nothing could enforce it).
    #[default]
    None,
}

//! What a caller asks for: the program, where, within which bounds, with which isolation.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_exec::StdinMode;
use cordon_proxy::ProxySettings;
use cordon_sandbox::{Bind, CacheLayer, Degradation, Limits};
use cordon_types::NetworkMode;

use crate::redaction::RedactRules;

/// One program to run for someone.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The program and its arguments (the program is a path, or a name looked up in `PATH`).
    pub argv: Vec<OsString>,
    /// The working directory (absolute). Sandboxed, the one writable place besides the
    /// workspace, `/tmp` and the home.
    pub cwd: PathBuf,
    /// The workspace the program runs in, if any: its tree writable, its shared git data
    /// read-only; `cwd` must stay inside its tree.
    pub workspace: Option<WorkspaceMount>,
    /// Sandboxed (the default) or bounds only.
    pub isolation: Isolation,
    /// Variables to set in the program's environment (after the allow-list).
    pub env: Vec<(String, String)>,
    /// Names of variables whose values come from `secret_values`, else from cordon's
    /// environment, and are redacted.
    pub secrets: Vec<String>,
    /// Secret values the caller holds (the job service's secrets file): looked up before
    /// cordon's environment for a name in `secrets`, and every one of them redacted from
    /// the output whether or not the program receives it.
    pub secret_values: Vec<(String, String)>,
    /// Time and output bounds.
    pub bounds: Bounds,
    /// What the program reads.
    pub stdin: StdinMode,
    /// Redaction beyond the defaults.
    pub redact: RedactRules,
    /// Every child of this process that cordon did not start for another run belongs to this
    /// run (true for the CLI, which runs one program per process).
    pub exclusive_children: bool,
}

impl RunRequest {
    /// A sandboxed request with the default bounds, reading an empty standard input.
    pub fn new<I, S>(argv: I, cwd: impl Into<PathBuf>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        RunRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            workspace: None,
            isolation: Isolation::Sandboxed(SandboxOptions::default()),
            env: Vec::new(),
            secrets: Vec::new(),
            secret_values: Vec::new(),
            bounds: Bounds::default(),
            stdin: StdinMode::Null,
            redact: RedactRules::default(),
            exclusive_children: false,
        }
    }
}

/// A workspace's places: its tree and the git data it shares with the live checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceMount {
    /// The workspace's tree (writable unless `read_only`).
    pub root: PathBuf,
    /// The repository's git common directory (read-only inside: hooks, config, refs and
    /// objects belong to the live checkout); `None` when the workspace's git data is its
    /// own, inside its tree (a session's repository).
    pub git_common_dir: Option<PathBuf>,
    /// The whole tree read-only, enforced by the kernel (a session's reviewer).
    pub read_only: bool,
    /// An overlay workspace's layers: the tree is then mounted from them, inside the sandbox
    /// only, at [`cordon_sandbox::SANDBOX_WORKSPACE`] (`root` is its empty host directory;
    /// paths under it, such as the working directory, are translated).
    pub overlay: Option<OverlayMount>,
}

/// The layers of an overlay workspace (see [`WorkspaceMount::overlay`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayMount {
    /// The read-only layers, topmost first (the commit's base tree).
    pub lowers: Vec<PathBuf>,
    /// cordon's directory holding the writable layer (`upper/`, `work/`).
    pub layer: PathBuf,
    /// The workspace's git directory (`HEAD`, `commondir`, `index`), shown read-only; `None`
    /// when its git data is in the tree itself (a session's repository).
    pub git_dir: Option<PathBuf>,
    /// The `.git` file shown, read-only, at the top of the tree (with `git_dir`).
    pub dot_git: Option<PathBuf>,
    /// Copy-on-write trees over directories of the workspace (build caches).
    pub caches: Vec<TreeCache>,
}

/// A build cache over a directory of an overlay workspace (`target/`, `node_modules/`): its
/// trusted layers read-only underneath, and a private layer taking the program's writes
/// (`None`: read-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeCache {
    /// The directory, relative to the workspace's top (or absolute inside the sandbox, such
    /// as a cache in the sandbox's home).
    pub dir: PathBuf,
    /// The trusted layers, topmost first (read-only; never written).
    pub lowers: Vec<PathBuf>,
    /// cordon's private directory taking the writes (`upper/`, `work/`).
    pub layer: Option<PathBuf>,
    /// Whether `layer` is thrown away after the run (a candidate's layer, never promoted):
    /// mounted without overlayfs's syncs ([`cordon_sandbox::LayeredTree::volatile`]).
    pub volatile: bool,
}

impl WorkspaceMount {
    /// Where a host path under the workspace's tree is inside the sandbox.
    pub fn inside(&self, host: &Path) -> Option<PathBuf> {
        match &self.overlay {
            None => Some(host.to_owned()),
            Some(_) => {
                let rel = host.strip_prefix(&self.root).ok()?;
                let plain = rel
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
                plain.then(|| Path::new(cordon_sandbox::SANDBOX_WORKSPACE).join(rel))
            }
        }
    }
}

/// The kernel sandbox, or bounds only.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, never stored in bulk"
)]
pub enum Isolation {
    /// Namespaces, a constructed root, Landlock, seccomp, limits.
    Sandboxed(SandboxOptions),
    /// No sandbox: only the timeout, the tree kill and the output bounds hold. The program
    /// sees and can change everything cordon can.
    Unsandboxed,
}

/// What differs between sandboxed runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxOptions {
    /// Extra host paths made visible (credentials under them stay hidden).
    pub binds: Vec<Bind>,
    /// Whether toolchain homes are bound read-only.
    pub toolchains: bool,
    /// The network the program reaches.
    pub network: NetworkMode,
    /// With [`NetworkMode::Allowlist`]: what cordon's proxy allows, and its bounds.
    pub proxy: ProxySettings,
    /// When non-empty, only these executables may run (Landlock), and only files may be
    /// mapped executable unless [`Self::allow_jit`].
    pub allow_exec: Vec<PathBuf>,
    /// With `allow_exec`: anonymous executable memory is allowed too (JIT compilers).
    pub allow_jit: bool,
    /// How to isolate the program; `None`: as [`cordon_sandbox::tier_for`] decides.
    pub isolation: Option<cordon_types::IsolationTier>,
    /// Resource limits.
    pub limits: Limits,
    /// Protections given up explicitly when the host lacks them.
    pub allow_degraded: Vec<Degradation>,
    /// Host caches shown through private layers (never writable themselves).
    pub caches: Vec<CacheLayer>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            binds: Vec::new(),
            toolchains: true,
            network: NetworkMode::None,
            proxy: ProxySettings::default(),
            allow_exec: Vec::new(),
            allow_jit: false,
            isolation: None,
            limits: Limits::default(),
            allow_degraded: Vec::new(),
            caches: Vec::new(),
        }
    }
}

impl SandboxOptions {
    /// The default sandbox with the network of `rule`: none, the host's, or an allowlist
    /// through cordon's proxy (`registry`: the package registries the user's cargo, npm, pip
    /// and Go clients are configured to use, read from `HOME` and the environment). Returns
    /// the options and the registry entries left out (each with why), for a warning.
    pub fn with_network(
        rule: &cordon_types::NetworkRule,
    ) -> Result<(SandboxOptions, Vec<String>), cordon_proxy::AllowlistError> {
        use cordon_types::NetworkRule;
        let mut options = SandboxOptions::default();
        let mut skipped = Vec::new();
        match rule {
            NetworkRule::None => options.network = NetworkMode::None,
            NetworkRule::Host => options.network = NetworkMode::Host,
            NetworkRule::Registry => {
                options.network = NetworkMode::Allowlist;
                let home = std::env::var_os("HOME").map(PathBuf::from);
                let env = |name: &str| std::env::var(name).ok();
                let config = cordon_proxy::ClientConfig {
                    home: home.as_deref(),
                    env: &env,
                };
                (options.proxy.allow, skipped) =
                    cordon_proxy::registry_allowlist(&cordon_proxy::Ecosystem::ALL, &config);
            }
            NetworkRule::Allow(hosts) => {
                options.network = NetworkMode::Allowlist;
                options.proxy.allow = cordon_proxy::Allowlist::parse(hosts)?;
            }
        }
        Ok((options, skipped))
    }
}

/// Time and output bounds of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Wall-clock limit; then SIGTERM to the whole tree, SIGKILL after `grace`.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Bytes of each stream kept in the result (head and tail).
    pub output_limit: usize,
    /// How long a leftover process may hold the output open after the program exited.
    pub leak_window: Duration,
    /// The most the working tree (the workspace, or the working directory) may hold before
    /// the program is ended with a `disk` limit hit; `None`: not watched.
    pub disk: Option<u64>,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            timeout: cordon_exec::DEFAULT_TIMEOUT,
            grace: cordon_exec::DEFAULT_GRACE,
            output_limit: cordon_exec::DEFAULT_OUTPUT_LIMIT,
            leak_window: cordon_exec::DEFAULT_LEAK_WINDOW,
            disk: Some(cordon_exec::DEFAULT_DISK_LIMIT),
        }
    }
}

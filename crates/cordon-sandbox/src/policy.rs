//! The sandbox policy: what a sandboxed program may see, change, reach and use, as data.

use std::path::{Path, PathBuf};

use cordon_types::NetworkMode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Everything cordon enforces around one sandboxed program.
///
/// Paths are absolute host paths; they appear at the same path inside the sandbox. Build one
/// with [`SandboxPolicy::new`] and adjust the fields; [`crate::prepare`] validates it against
/// the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    /// The working directory: the program starts here and may write here.
    pub workdir: PathBuf,
    /// Extra host paths made visible, read-only or read-write.
    pub binds: Vec<Bind>,
    /// Whether toolchain homes (rustup, cargo, npm, Go, pyenv) are bound read-only.
    pub toolchains: bool,
    /// The network the program can reach.
    pub network: NetworkMode,
    /// When non-empty, only these executables (plus their dynamic loader) may be executed,
    /// and only files may be mapped executable (no JIT) unless [`Self::allow_jit`].
    pub allow_exec: Vec<PathBuf>,
    /// With [`Self::allow_exec`]: the program may also make anonymous memory executable (what
    /// a JIT compiler such as node's or the JVM's needs). An allowed program can then run
    /// code it generates itself.
    #[serde(default)]
    pub allow_jit: bool,
    /// Resource limits.
    pub limits: Limits,
    /// The program's complete environment (cordon's own environment does not leak in).
    pub env: Vec<EnvVar>,
    /// The host home directory whose secrets are masked and whose toolchains may be bound.
    pub host_home: Option<PathBuf>,
    /// Protections the user explicitly agreed to run without when the host lacks them.
    pub allow_degraded: Vec<Degradation>,
    /// Host paths masked like secrets whenever something visible contains them — cordon's own
    /// state (run history, workspace records, locks), which a program must neither read nor
    /// forge — but which, unlike secrets, may contain a bound directory (a workspace).
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// When set, the working directory and every read-write bind must lie inside this
    /// directory once symlinks are resolved (a workspace's tree): checked when the sandbox is
    /// prepared, and the helper binds exactly the objects checked (a path swapped for a
    /// symlink in between is refused, never followed).
    #[serde(default)]
    pub writable_within: Option<PathBuf>,
    /// Host caches shown through a private layer (see [`CacheLayer`]).
    #[serde(default)]
    pub caches: Vec<CacheLayer>,
    /// Whether the working directory is bound read-only (a session's reviewer): then the
    /// program may write only its private `/tmp`, its home and read-write binds.
    #[serde(default)]
    pub workdir_read_only: bool,
    /// Visible host files shown with other content (see [`Replacement`]).
    #[serde(default)]
    pub replacements: Vec<Replacement>,
    /// Copy-on-write trees mounted inside (see [`LayeredTree`]): an overlay workspace at its
    /// fixed path, build caches over its directories, host caches with trusted layers.
    #[serde(default)]
    pub trees: Vec<LayeredTree>,
    /// cordon's own directory for what sandboxes reuse from run to run: the snapshot of
    /// `/etc`'s allowlisted files, bound read-only instead of copied into every sandbox.
    /// Masked like [`SandboxPolicy::hidden`]; binds into it are refused. `None`: the files
    /// are copied at every start.
    #[serde(default)]
    pub host_cache: Option<PathBuf>,
    /// How to isolate the program. `None`: the namespace tier, except inside a cordon
    /// sandbox (which holds the namespaces already, and refuses new ones), where the
    /// landlock tier is used, and where user namespaces cannot be made when
    /// [`Degradation::Namespaces`] is allowed. See [`crate::resolve_tier`].
    #[serde(default)]
    pub isolation: Option<cordon_types::IsolationTier>,
    /// The landlock tier's proxy: the port on the host's loopback where cordon's proxy
    /// listens (`--network allow=...`; cordon binds it before the run).
    #[serde(default)]
    pub proxy_listen_port: Option<u16>,
    /// Where the landlock tier makes each run's private home and temporary directory
    /// (cordon's own state; removed after the run). `None`: the system's temporary directory.
    #[serde(default)]
    pub scratch_root: Option<PathBuf>,
    /// A PEM file of certificate authorities the program must trust (the network proxy's
    /// per-run authority beside the host's roots, `--credential`): shown read-only at
    /// [`crate::SANDBOX_CA_BUNDLE`] (namespace tier) or in the run's private directory
    /// (landlock tier), with `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`, `NODE_EXTRA_CA_CERTS`,
    /// `CURL_CA_BUNDLE`, `GIT_SSL_CAINFO`, `CARGO_HTTP_CAINFO` and `PIP_CERT` pointing at it.
    /// The file must stay until the helper has started.
    #[serde(default)]
    pub ca_bundle: Option<PathBuf>,
}

/// A copy-on-write tree shown at `at`, a path inside the sandbox that need not exist on the
/// host: overlayfs of read-only `lowers` (host directories, topmost first) and, with `layer`,
/// a private layer of cordon's taking every write (`layer/upper`, `layer/work`; created by
/// [`crate::prepare`]). The `workdir`, `writable_within`, replaced files and other trees may
/// lie inside `at`: such paths are the sandbox's, not the host's. Where overlayfs cannot be
/// mounted the set-up fails: a tree is never replaced by something weaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LayeredTree {
    /// Where the tree appears inside (absolute, normalized).
    pub at: PathBuf,
    /// The read-only layers, topmost first (absolute host directories).
    pub lowers: Vec<PathBuf>,
    /// cordon's private directory taking the writes; `None`: the tree is read-only.
    pub layer: Option<PathBuf>,
    /// Whether `layer` is thrown away after the run (a candidate's build cache, never
    /// kept): it is mounted `volatile`, without overlayfs's syncs, which a crash would make
    /// untrustworthy. Leave it `false` for a layer that is kept (a workspace, a trusted
    /// build's cache).
    #[serde(default)]
    pub volatile: bool,
}

impl SandboxPolicy {
    /// The tree whose inside path holds `path`, if any (the innermost).
    pub fn tree_holding(&self, path: &Path) -> Option<&LayeredTree> {
        self.trees
            .iter()
            .filter(|t| path.starts_with(&t.at))
            .max_by_key(|t| t.at.components().count())
    }
}

/// A visible host file shown, read-only, with the content of another file: a repository's
/// `config` without its credentials, its `packed-refs` without the stash. The file must lie
/// under something visible; the replacement is bound over it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Replacement {
    /// The host file (absolute) whose content is replaced.
    pub path: PathBuf,
    /// The file whose content the program sees instead (cordon's own, private).
    pub with: PathBuf,
}

/// A host cache (e.g. `~/.cargo/registry`) shown at its own path through a private layer:
/// the program sees the cache's content, but whatever it writes goes into `layer`, cordon's
/// own directory for this run or verification — never into the host's cache, which the
/// user's next build would trust. (An overlay: the host cache is the read-only lower layer.
/// Where overlayfs cannot be mounted, the program gets an empty private cache instead.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheLayer {
    /// The host cache (absolute); it appears at the same path.
    pub path: PathBuf,
    /// cordon's private directory holding what the program wrote (`upper/`, `work/`);
    /// shared by the stages of one verification, removed with it.
    pub layer: PathBuf,
    /// Whether the program may write (setup stages); otherwise it sees the cache with what
    /// earlier writable stages added, read-only.
    pub writable: bool,
}

/// One extra bind of a host path into the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bind {
    /// The absolute host path, visible at the same path inside.
    pub path: PathBuf,
    /// Whether the program may change it.
    pub access: Access,
}

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Visible, not changeable.
    ReadOnly,
    /// Visible and changeable.
    ReadWrite,
}

/// Resource limits; `None` means no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Memory of the whole tree, in bytes (cgroup; `RLIMIT_AS` per process as a fallback).
    pub memory_bytes: Option<u64>,
    /// Number of processes and threads of the whole tree (cgroup `pids.max`).
    pub pids: Option<u64>,
    /// CPU time per process, in milliseconds (`RLIMIT_CPU`, rounded up to whole seconds).
    pub cpu_time_ms: Option<u64>,
    /// Largest file a process may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size_bytes: Option<u64>,
    /// Open file descriptors per process (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Size of the sandbox's private `/tmp` (a tmpfs, counted against memory); its home gets
    /// half as much and `/dev/shm` a quarter. `None`: [`DEFAULT_TMPFS_BYTES`].
    #[serde(default)]
    pub tmpfs_bytes: Option<u64>,
}

/// The default size of the sandbox's `/tmp`: 2 GiB (home 1 GiB, `/dev/shm` 512 MiB). Without
/// a size, a tmpfs may take half of the machine's memory — each of them.
pub const DEFAULT_TMPFS_BYTES: u64 = 2 << 30;

impl Limits {
    /// The sizes of the sandbox's `/tmp`, home and `/dev/shm`, in bytes.
    pub fn tmpfs_sizes(&self) -> (u64, u64, u64) {
        let tmp = self.tmpfs_bytes.unwrap_or(DEFAULT_TMPFS_BYTES);
        (tmp, tmp / 2, tmp / 4)
    }

    /// Whether a limit that needs a cgroup (memory or pids) is asked for.
    pub fn wants_cgroup(&self) -> bool {
        self.memory_bytes.is_some() || self.pids.is_some()
    }
}

/// One environment variable of the program. Its `Debug` form hides secret values.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
    /// Whether the value is a secret (to be redacted from output).
    pub secret: bool,
}

impl std::fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value: &dyn std::fmt::Debug = if self.secret {
            &"<secret>"
        } else {
            &self.value
        };
        f.debug_struct("EnvVar")
            .field("name", &self.name)
            .field("value", value)
            .field("secret", &self.secret)
            .finish()
    }
}

/// A protection the user agreed to do without when the host cannot provide it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Degradation {
    /// Run without Landlock when the kernel lacks it (mount isolation still holds).
    Landlock,
    /// Run without the seccomp filter when the kernel lacks seccomp.
    Seccomp,
    /// Enforce memory and pids limits with per-process rlimits when no cgroup is writable.
    Cgroup,
    /// Use the landlock tier when user namespaces cannot be made here (a container's seccomp
    /// profile, AppArmor's restriction): weaker isolation, said in every result.
    Namespaces,
    /// In the landlock tier on a kernel whose Landlock cannot confine Unix sockets (ABI < 9):
    /// let the program create them anyway (it can then connect to any socket file it can
    /// reach, such as a container engine's). Refused otherwise.
    #[serde(rename = "unix-sockets")]
    UnixSockets,
}

impl Degradation {
    /// Every degradation, for help texts.
    pub const ALL: [Degradation; 5] = [
        Self::Landlock,
        Self::Seccomp,
        Self::Cgroup,
        Self::Namespaces,
        Self::UnixSockets,
    ];

    /// The flag value naming this degradation.
    pub fn name(self) -> &'static str {
        match self {
            Self::Landlock => "landlock",
            Self::Seccomp => "seccomp",
            Self::Cgroup => "cgroup",
            Self::Namespaces => "namespaces",
            Self::UnixSockets => "unix-sockets",
        }
    }
}

impl SandboxPolicy {
    /// The default policy for a working directory: no extra binds, toolchains on, no
    /// network, no exec allowlist, no limits, an empty environment.
    pub fn new(workdir: impl Into<PathBuf>) -> Self {
        Self {
            workdir: workdir.into(),
            binds: Vec::new(),
            toolchains: true,
            network: NetworkMode::None,
            allow_exec: Vec::new(),
            allow_jit: false,
            limits: Limits::default(),
            env: Vec::new(),
            host_home: None,
            allow_degraded: Vec::new(),
            hidden: Vec::new(),
            writable_within: None,
            caches: Vec::new(),
            workdir_read_only: false,
            replacements: Vec::new(),
            trees: Vec::new(),
            host_cache: None,
            isolation: None,
            proxy_listen_port: None,
            scratch_root: None,
            ca_bundle: None,
        }
    }

    /// Whether the user agreed to run without `what` when the host lacks it.
    pub fn allows_degraded(&self, what: Degradation) -> bool {
        self.allow_degraded.contains(&what)
    }

    /// Whether `path` (absolute, without `..`) lies in a place the program may write:
    /// the working directory, a read-write bind, or the sandbox's private `/tmp` and home.
    /// Secret paths are never writable.
    pub fn can_write_path(&self, path: &Path) -> bool {
        if crate::secrets::is_secret_path(path, self.host_home.as_deref()) {
            return false;
        }
        (path.starts_with(&self.workdir) && !self.workdir_read_only)
            || self.tree_holding(path).is_some_and(|t| t.layer.is_some())
            || path.starts_with(crate::SANDBOX_TMP)
            || path.starts_with(crate::SANDBOX_HOME)
            || self
                .binds
                .iter()
                .any(|b| b.access == Access::ReadWrite && path.starts_with(&b.path))
    }

    /// Whether `path` may be executed (subject to also being visible).
    pub fn can_exec_path(&self, path: &Path) -> bool {
        self.allow_exec.is_empty() || self.allow_exec.iter().any(|p| p == path)
    }

    /// The value of an environment variable of the program.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|v| v.name == name)
            .map(|v| v.value.as_str())
    }

    /// The names of the variables marked secret.
    pub fn secret_names(&self) -> impl Iterator<Item = &str> {
        self.env
            .iter()
            .filter(|v| v.secret)
            .map(|v| v.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_access_follows_workdir_binds_and_secrets() {
        let mut p = SandboxPolicy::new("/work/proj");
        p.host_home = Some("/home/u".into());
        p.binds.push(Bind {
            path: "/home/u".into(),
            access: Access::ReadWrite,
        });
        p.binds.push(Bind {
            path: "/data".into(),
            access: Access::ReadOnly,
        });
        assert!(p.can_write_path(Path::new("/work/proj/src/main.rs")));
        assert!(p.can_write_path(Path::new("/tmp/x")));
        assert!(p.can_write_path(Path::new("/home/u/notes")));
        assert!(!p.can_write_path(Path::new("/home/u/.ssh/id_ed25519")));
        assert!(!p.can_write_path(Path::new("/data/x")));
        assert!(!p.can_write_path(Path::new("/work/other")));
        assert!(!p.can_write_path(Path::new("/etc/passwd")));
    }

    #[test]
    fn exec_allowlist_is_open_when_empty() {
        let mut p = SandboxPolicy::new("/w");
        assert!(p.can_exec_path(Path::new("/usr/bin/cat")));
        p.allow_exec.push("/usr/bin/echo".into());
        assert!(p.can_exec_path(Path::new("/usr/bin/echo")));
        assert!(!p.can_exec_path(Path::new("/usr/bin/cat")));
    }

    #[test]
    fn debug_output_hides_secret_values() {
        let v = EnvVar {
            name: "TOKEN".into(),
            value: "hunter2".into(),
            secret: true,
        };
        assert!(!format!("{v:?}").contains("hunter2"));
        let v = EnvVar {
            name: "LANG".into(),
            value: "C".into(),
            secret: false,
        };
        assert!(format!("{v:?}").contains("\"C\""));
    }

    #[test]
    fn policy_round_trips_as_json() {
        let mut p = SandboxPolicy::new("/w");
        p.limits.memory_bytes = Some(64 << 20);
        p.allow_degraded.push(Degradation::Cgroup);
        let text = serde_json::to_string(&p).unwrap();
        let back: SandboxPolicy = serde_json::from_str(&text).unwrap();
        pretty_assertions::assert_eq!(p, back);
    }
}

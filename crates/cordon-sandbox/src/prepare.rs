//! `prepare`: a policy and a command become the command that runs the sandbox helper.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use cordon_sandbox_init::{
    BUILD_ENV, CgroupPlan, HELPER_BUILD, INIT_ARG, InitPlan, PLAN_ENV, Rlimit,
    RlimitResource as Resource,
};
use cordon_types::{Enforcement, EnforcementSummary, IsolationTier, NetworkMode, SandboxSummary};

use crate::error::{SandboxError, SandboxErrorKind};
use crate::etc_snapshot::{self, SnapshotLease};
use crate::host::{HostSupport, host, host_without_cgroups};
use crate::plan;
use crate::policy::{Access, Degradation, SandboxPolicy};
use crate::scratch::Scratch;
use crate::secrets;

/// The command that runs a program under a policy: the sandbox helper executable.
/// Its `Debug` form lists the environment's names only (values may be secrets).
#[derive(Clone, PartialEq, Eq)]
pub struct PreparedCommand {
    /// The helper executable ([`crate::helper_executable`]).
    pub program: PathBuf,
    /// `["__sandbox-init", "--", PROGRAM, ARGS...]`.
    pub args: Vec<OsString>,
    /// The helper's complete environment (the program's environment plus the plan).
    pub env: Vec<(OsString, OsString)>,
    /// Keeps what the sandbox shows from cordon's cache (the `/etc` snapshot) from being
    /// removed: hold it until the run ends.
    pub lease: Option<SnapshotLease>,
    /// The landlock tier's private home and temporary directory, removed when the last
    /// clone is dropped: hold it until the run ends.
    pub scratch: Option<Scratch>,
    /// What will hold, for the run result.
    pub summary: SandboxSummary,
}

impl std::fmt::Debug for PreparedCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&OsString> = self.env.iter().map(|(k, _)| k).collect();
        f.debug_struct("PreparedCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_names", &names)
            .field("summary", &self.summary)
            .finish()
    }
}

/// Turns a policy and a command into the helper command that enforces the policy.
///
/// Fails when the host cannot enforce a part of the policy that the policy did not
/// explicitly give up ([`SandboxPolicy::allow_degraded`]); the error names the fix.
pub fn prepare(
    policy: &SandboxPolicy,
    program: &OsStr,
    args: &[OsString],
) -> Result<PreparedCommand, SandboxError> {
    let helper = crate::helper::helper_executable()?;
    // Where cgroups could be made is read (the mount table, our memberships) only for a
    // policy that asks for cgroup limits.
    let host = if policy.limits.wants_cgroup() {
        host()
    } else {
        host_without_cgroups()
    };
    prepare_with(host, &helper, policy, program, args)
}

pub(crate) fn prepare_with(
    host: &HostSupport,
    helper: &Path,
    policy: &SandboxPolicy,
    program: &OsStr,
    args: &[OsString],
) -> Result<PreparedCommand, SandboxError> {
    let tier = crate::tier::resolve(policy, host);
    match tier {
        IsolationTier::Namespaces => check_host(host, policy)?,
        IsolationTier::Landlock => crate::tier::check_host(host, policy)?,
    }
    let policy = canonical(policy)?;
    let home = policy.host_home.as_deref();
    let toolchains = if policy.toolchains {
        plan::find_toolchains(home, &|k| std::env::var(k).ok())
    } else {
        plan::Toolchains::default()
    };
    let exec_only = if policy.allow_exec.is_empty() {
        None
    } else {
        Some(
            plan::exec_allowlist(&policy.allow_exec)
                .map_err(|source| path_err(&policy.allow_exec[0], source))?,
        )
    };
    let (mounts, copied) = plan::plan_mounts(&policy, &toolchains.binds);
    let limits = limits_plan(host, &policy)?;
    let planned = Planned {
        policy: &policy,
        toolchains: &toolchains,
        exec_only,
        mounts,
        copied,
        limits,
    };
    let built = match tier {
        IsolationTier::Namespaces => namespace_tier(host, planned)?,
        IsolationTier::Landlock => landlock_tier(host, planned)?,
    };
    let mut env = built.env;
    let plan_json = serde_json::to_string(&built.init).expect("the plan serializes");
    env.push((PLAN_ENV.into(), plan_json.into()));
    // The helper checks that it is of this build, and refuses the plan when it is not.
    env.push((BUILD_ENV.into(), HELPER_BUILD.into()));
    let mut argv: Vec<OsString> = vec![INIT_ARG.into(), "--".into(), program.to_owned()];
    argv.extend(args.iter().cloned());
    Ok(PreparedCommand {
        program: helper.to_owned(),
        args: argv,
        env,
        lease: built.lease,
        scratch: built.scratch,
        summary: built.summary,
    })
}

/// What both tiers start from: the canonical policy, the toolchains, the executables
/// allowed, the namespace tier's mount steps and the limits.
struct Planned<'a> {
    policy: &'a SandboxPolicy,
    toolchains: &'a plan::Toolchains,
    exec_only: Option<Vec<PathBuf>>,
    mounts: Vec<cordon_sandbox_init::MountOp>,
    copied: Vec<crate::etc_snapshot::Copied>,
    limits: LimitsPlan,
}

/// A tier's plan, environment and what the run must hold on to.
struct Built {
    init: InitPlan,
    env: Vec<(OsString, OsString)>,
    lease: Option<SnapshotLease>,
    scratch: Option<Scratch>,
    summary: SandboxSummary,
}

/// The namespace tier: new namespaces and a constructed root.
fn namespace_tier(host: &HostSupport, p: Planned<'_>) -> Result<Built, SandboxError> {
    let Planned {
        policy,
        toolchains,
        exec_only,
        mut mounts,
        copied,
        limits: (cgroup, enforcement, rlimits),
    } = p;
    // The /etc copies come from the snapshot in cordon's cache when there is one: one bind
    // instead of twenty copies in every sandbox. Without a usable cache they are copied.
    let lease = policy
        .host_cache
        .as_ref()
        .and_then(|cache| etc_snapshot::substitute(&mut mounts, &copied, cache).ok());
    if let Some(bundle) = &policy.ca_bundle {
        // Copied into the constructed root (read-only with it), outside /etc (whose snapshot
        // is shared by runs).
        let dst = Path::new(plan::SANDBOX_CA_BUNDLE);
        let at = mounts.partition_point(|op| op.dst() <= dst);
        mounts.insert(
            at,
            cordon_sandbox_init::MountOp::CopyFile {
                src: bundle.clone(),
                dst: dst.into(),
            },
        );
    }
    let noexec = match &exec_only {
        Some(allowed) => plan::confine_exec(&mut mounts, allowed, &toolchains.binds),
        None => Vec::new(),
    };
    if let Some(src) = plan::unpinned(&mounts) {
        return Err(path_err(
            src,
            std::io::Error::other(
                "it changed while the sandbox was being prepared (removed, or swapped for a symlink)",
            ),
        ));
    }
    let landlock = (host.landlock_abi > 0)
        .then(|| plan::landlock_plan(host.landlock_abi, policy, &mounts, exec_only.clone()));
    let init = InitPlan {
        mounts,
        workdir: policy.workdir.clone(),
        private_network: policy.network != NetworkMode::Host,
        landlock,
        seccomp: host.seccomp,
        rlimits,
        cgroup,
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
        noexec,
        proxy_port: (policy.network == NetworkMode::Allowlist).then_some(PROXY_PORT),
        deny_exec_memory: exec_only.is_some() && !policy.allow_jit,
        tier: IsolationTier::Namespaces,
        sockets: None,
    };
    let mut namespaces: Vec<String> = ["user", "mount", "pid", "ipc", "uts", "cgroup"]
        .map(String::from)
        .to_vec();
    if init.private_network {
        namespaces.push("net".into());
    }
    let env = program_env(
        policy,
        &toolchains.env,
        (plan::SANDBOX_HOME.as_ref(), plan::SANDBOX_TMP.as_ref()),
        PROXY_PORT,
        policy
            .ca_bundle
            .as_ref()
            .map(|_| Path::new(plan::SANDBOX_CA_BUNDLE)),
    );
    let summary = SandboxSummary {
        enabled: true,
        tier: Some(IsolationTier::Namespaces),
        namespaces,
        landlock_abi: init.landlock.as_ref().map(|l| l.abi),
        landlock_unenforced: Vec::new(),
        seccomp: init.seccomp,
        network: policy.network,
        enforcement,
        read_only_git: plan::protected_git_data(policy)
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        warnings: warnings(policy),
        not_enforced: Vec::new(),
    };
    Ok(Built {
        init,
        env,
        lease,
        scratch: None,
        summary,
    })
}

/// The landlock tier: no namespaces; the same view as Landlock rules on the host's paths, a
/// private home and temporary directory of cordon's, sockets confined by seccomp.
fn landlock_tier(host: &HostSupport, p: Planned<'_>) -> Result<Built, SandboxError> {
    let Planned {
        policy,
        toolchains,
        exec_only,
        mounts,
        limits: (cgroup, enforcement, rlimits),
        ..
    } = p;
    let root = policy.scratch_root.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("cordon-{}", rustix::process::getuid().as_raw()))
    });
    let scratch = Scratch::make(&root).map_err(|e| path_err(&root, e))?;
    let mut rules = crate::landlock_tier::rules(&mounts, &scratch.home(), &scratch.tmp())?;
    let ca_bundle = match &policy.ca_bundle {
        Some(bundle) => {
            // A copy of its own in the run's private directory, read-only.
            let shown = scratch.ca_bundle();
            std::fs::copy(bundle, &shown).map_err(|e| path_err(bundle, e))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&shown, std::fs::Permissions::from_mode(0o444))
                .map_err(|e| path_err(&shown, e))?;
            rules.read.push(shown.clone());
            Some(shown)
        }
        None => None,
    };
    let abi = host.landlock_abi;
    let (sockets, socket_note) = crate::landlock_tier::sockets(policy, abi);
    let proxy_port = match policy.network {
        NetworkMode::Allowlist => Some(policy.proxy_listen_port.ok_or_else(|| {
            SandboxError::new(
                SandboxErrorKind::Unenforceable {
                    what: "the network allowlist",
                    reason: "the landlock tier's proxy has no port (the caller binds one)".into(),
                },
                None,
            )
        })?),
        NetworkMode::None | NetworkMode::Host => None,
    };
    let landlock = cordon_sandbox_init::LandlockPlan {
        abi,
        read: rules.read,
        write: rules.write,
        devices: rules.devices,
        exec_only: exec_only.clone(),
        allow_partial: policy.allows_degraded(Degradation::Landlock),
        net_connect: (policy.network != NetworkMode::Host)
            .then(|| proxy_port.into_iter().collect()),
        list_all_dirs: false,
    };
    let mut not_enforced = crate::landlock_tier::always_not_enforced(policy, abi);
    not_enforced.extend(rules.not_enforced);
    not_enforced.extend(socket_note);
    let init = InitPlan {
        mounts: Vec::new(),
        workdir: policy.workdir.clone(),
        private_network: false,
        landlock: Some(landlock),
        seccomp: host.seccomp,
        rlimits,
        cgroup,
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
        noexec: Vec::new(),
        proxy_port: None,
        deny_exec_memory: exec_only.is_some() && !policy.allow_jit,
        tier: IsolationTier::Landlock,
        sockets,
    };
    let env = program_env(
        policy,
        &toolchains.env,
        (&scratch.home(), &scratch.tmp()),
        proxy_port.unwrap_or(PROXY_PORT),
        ca_bundle.as_deref(),
    );
    let summary = SandboxSummary {
        enabled: true,
        tier: Some(IsolationTier::Landlock),
        namespaces: Vec::new(),
        landlock_abi: Some(abi),
        landlock_unenforced: Vec::new(),
        seccomp: init.seccomp,
        network: policy.network,
        enforcement,
        read_only_git: Vec::new(),
        warnings: warnings(policy),
        not_enforced,
    };
    Ok(Built {
        init,
        env,
        lease: None,
        scratch: Some(scratch),
        summary,
    })
}

/// What the policy leaves open that the user should be told about.
fn warnings(policy: &SandboxPolicy) -> Vec<String> {
    let mut out = Vec::new();
    let writable = policy
        .binds
        .iter()
        .filter(|b| b.access == Access::ReadWrite)
        .map(|b| b.path.as_path())
        .chain(std::iter::once(policy.workdir.as_path()));
    if let Some(home) = &policy.host_home {
        let home = home.canonicalize().unwrap_or_else(|_| home.clone());
        for tree in writable {
            if home.starts_with(tree) {
                out.push(format!(
                    "{} is writable and holds your home directory: the program can change \
                     your dotfiles (shell start-up files, git and tool configuration); run in \
                     a project directory instead",
                    tree.display()
                ));
            }
        }
    }
    out
}

/// The program's environment: toolchain variables, the private `HOME` and `TMPDIR` (`dirs`),
/// then the policy's variables (which win, except over `HOME`), then the proxy's (on
/// `proxy_port` of loopback) when the network is an allowlist, and the CA bundle's where it is
/// shown (`ca_bundle`, inside).
fn program_env(
    policy: &SandboxPolicy,
    toolchain_env: &[(String, String)],
    dirs: (&Path, &Path),
    proxy_port: u16,
    ca_bundle: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: &OsStr| {
        if let Some(slot) = env.iter_mut().find(|(n, _)| n == k) {
            slot.1 = v.into();
        } else {
            env.push((k.into(), v.into()));
        }
    };
    for (k, v) in toolchain_env {
        set(k, v.as_ref());
    }
    set("HOME", dirs.0.as_os_str());
    set("TMPDIR", dirs.1.as_os_str());
    for var in &policy.env {
        if var.name != "HOME" {
            set(&var.name, var.value.as_ref());
        }
    }
    let proxy = (policy.network == NetworkMode::Allowlist).then(|| proxy_env_on(proxy_port));
    // git's own settings in one list: its automatic maintenance in the foreground (unless the
    // caller sets git configuration itself), and the proxy when there is one.
    let caller_git = policy.env.iter().any(|v| v.name == "GIT_CONFIG_COUNT");
    let mut git = if caller_git {
        Vec::new()
    } else {
        GIT_CONFIG.to_vec()
    };
    let proxy_url = proxy
        .as_ref()
        .and_then(|p| p.iter().find(|(k, _)| k == "HTTP_PROXY"))
        .map(|(_, url)| url.clone());
    if let Some(url) = &proxy_url {
        git.push(("http.proxy", url));
    }
    if !git.is_empty() {
        for (k, v) in git_config_env(&git) {
            set(&k, v.as_ref());
        }
    }
    if let Some(proxy) = proxy {
        // Last: the program's own settings cannot route around the proxy (there is no other
        // way out anyway; this only spares tools a failing direct attempt).
        for (k, v) in proxy {
            if !k.starts_with("GIT_CONFIG_") {
                set(&k, v.as_ref());
            }
        }
    }
    if let Some(bundle) = ca_bundle {
        for name in CA_BUNDLE_VARIABLES {
            set(name, bundle.as_os_str());
        }
    }
    env
}

/// git configuration every program cordon runs gets: git's automatic maintenance (after a
/// `git commit`) runs in the foreground, not as a detached process that would outlive the
/// program and be killed as a leftover (and reported as one).
pub const GIT_CONFIG: &[(&str, &str)] = &[
    ("maintenance.autoDetach", "false"),
    ("gc.autoDetach", "false"),
];

/// `config` as git reads it from the environment: `GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_n`,
/// `GIT_CONFIG_VALUE_n`.
pub fn git_config_env(config: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = vec![("GIT_CONFIG_COUNT".to_owned(), config.len().to_string())];
    for (n, (key, value)) in config.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{n}"), (*key).to_owned()));
        env.push((format!("GIT_CONFIG_VALUE_{n}"), (*value).to_owned()));
    }
    env
}

/// The variables that point programs at the CA bundle ([`SandboxPolicy::ca_bundle`]): OpenSSL
/// (curl, git, Python's `ssl`), Python's requests, node, curl, git, cargo and pip.
pub const CA_BUNDLE_VARIABLES: [&str; 7] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
    "PIP_CERT",
];

/// The loopback port, inside the sandbox's private network namespace, where cordon's
/// filtering proxy listens (`--network allow=...`); a fresh namespace has nothing bound.
pub const PROXY_PORT: u16 = 3128;

/// The variables that point programs at the proxy: the conventional `HTTP_PROXY`,
/// `HTTPS_PROXY`, `ALL_PROXY` (both cases) and the tools' own settings (cargo, npm, pip,
/// git); `NO_PROXY` is cleared so that no destination is exempt.
pub fn proxy_env() -> Vec<(String, String)> {
    proxy_env_on(PROXY_PORT)
}

/// [`proxy_env`] for a proxy on `port` of loopback.
fn proxy_env_on(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut env: Vec<(String, String)> = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        env.push((name.into(), url.clone()));
        env.push((name.to_ascii_lowercase(), url.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.push((name.into(), String::new()));
    }
    for name in [
        "CARGO_HTTP_PROXY",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "PIP_PROXY",
    ] {
        env.push((name.into(), url.clone()));
    }
    // git reads `http.proxy` from these (in addition to any configuration file).
    env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
    env.push(("GIT_CONFIG_KEY_0".into(), "http.proxy".into()));
    env.push(("GIT_CONFIG_VALUE_0".into(), url));
    env
}

fn check_host(host: &HostSupport, policy: &SandboxPolicy) -> Result<(), SandboxError> {
    if let Some((reason, hint)) = &host.userns_blocker {
        return Err(SandboxError::new(
            SandboxErrorKind::UserNamespaces {
                reason: reason.clone(),
            },
            Some(format!(
                "{hint}; or run without isolation with --no-sandbox"
            )),
        ));
    }
    if !host.mount_setattr {
        return Err(unenforceable(
            "read-only binds",
            "the kernel lacks mount_setattr (Linux 5.12 or later is needed)".into(),
            "upgrade the kernel, or run with --no-sandbox".into(),
        ));
    }
    if host.landlock_abi == 0 {
        if !policy.allow_exec.is_empty() {
            return Err(unenforceable(
                "--allow-exec",
                "the kernel has no Landlock, which enforces the executable allowlist".into(),
                "boot with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and `lsm=landlock,...` on the kernel command line)".into(),
            ));
        }
        if !policy.allows_degraded(Degradation::Landlock) {
            return Err(unenforceable(
                "landlock",
                "the kernel has no Landlock".into(),
                "boot with Landlock enabled (`lsm=landlock,...`), or accept mount isolation alone with --allow-degraded landlock".into(),
            ));
        }
    }
    if !host.seccomp && !policy.allows_degraded(Degradation::Seccomp) {
        return Err(unenforceable(
            "seccomp",
            "the kernel has no seccomp filters".into(),
            "use a kernel built with CONFIG_SECCOMP_FILTER, or accept it with --allow-degraded seccomp".into(),
        ));
    }
    Ok(())
}

fn unenforceable(what: &'static str, reason: String, hint: String) -> SandboxError {
    SandboxError::new(SandboxErrorKind::Unenforceable { what, reason }, Some(hint))
}

fn path_err(path: &Path, source: std::io::Error) -> SandboxError {
    SandboxError::new(
        SandboxErrorKind::Path {
            path: path.to_owned(),
            source,
        },
        None,
    )
}

/// The policy with every path made canonical, and binds of secrets refused.
fn canonical(policy: &SandboxPolicy) -> Result<SandboxPolicy, SandboxError> {
    let mut p = policy.clone();
    let canon = |path: &Path| path.canonicalize().map_err(|e| path_err(path, e));
    p.trees = canonical_trees(policy)?;
    // A path inside a copy-on-write tree is the sandbox's own: checked lexically, never
    // looked up on the host.
    let inside = |path: &Path| policy.tree_holding(path).is_some();
    p.workdir = if inside(&policy.workdir) {
        lexical(&policy.workdir)?
    } else {
        canon(&policy.workdir)?
    };
    if let Some(home) = &policy.host_home {
        p.host_home = Some(home.canonicalize().unwrap_or_else(|_| home.clone()));
    }
    for b in &mut p.binds {
        b.path = canon(&b.path)?;
    }
    if let Some(cache) = &policy.host_cache {
        let cache = cache.canonicalize().unwrap_or_else(|_| cache.clone());
        for path in std::iter::once(&p.workdir).chain(p.binds.iter().map(|b| &b.path)) {
            if path.starts_with(&cache) {
                return Err(SandboxError::new(
                    SandboxErrorKind::Forbidden {
                        path: path.clone(),
                        reason: "it is cordon's own cache, which sandboxes reuse",
                    },
                    None,
                ));
            }
        }
        p.host_cache = Some(cache);
    }
    for path in std::iter::once(&p.workdir).chain(p.binds.iter().map(|b| &b.path)) {
        let secret = secrets::is_secret_path(path, p.host_home.as_deref())
            || secrets::is_secret_path(path, policy.host_home.as_deref());
        if secret {
            return Err(SandboxError::new(
                SandboxErrorKind::Forbidden {
                    path: path.clone(),
                    reason: "it holds credentials and is never visible in the sandbox",
                },
                Some("pass the one value the program needs with --secret NAME instead".into()),
            ));
        }
        if path == Path::new("/") {
            return Err(SandboxError::new(
                SandboxErrorKind::Forbidden {
                    path: path.clone(),
                    reason: "binding the whole host root defeats the sandbox",
                },
                Some("bind the directories the program needs, or use --no-sandbox".into()),
            ));
        }
    }
    for replacement in &mut p.replacements {
        replacement.path = if inside(&replacement.path) {
            lexical(&replacement.path)?
        } else {
            canon(&replacement.path)?
        };
        replacement.with = canon(&replacement.with)?;
    }
    p.caches.clear();
    for cache in &policy.caches {
        // A cache that does not exist has nothing to show; the program makes its own.
        let Ok(path) = cache.path.canonicalize() else {
            continue;
        };
        if secrets::is_secret_path(&path, p.host_home.as_deref()) {
            return Err(SandboxError::new(
                SandboxErrorKind::Forbidden {
                    path,
                    reason: "it holds credentials and is never visible in the sandbox",
                },
                None,
            ));
        }
        for dir in ["upper", "work"] {
            let dir = cache.layer.join(dir);
            std::fs::create_dir_all(&dir).map_err(|e| path_err(&dir, e))?;
        }
        p.caches.push(crate::policy::CacheLayer {
            path,
            layer: canon(&cache.layer)?,
            writable: cache.writable,
        });
    }
    if let Some(within) = &policy.writable_within {
        let within = if inside(within) {
            lexical(within)?
        } else {
            canon(within)?
        };
        p.writable_within = Some(within.clone());
        let writable = std::iter::once(&p.workdir).chain(
            p.binds
                .iter()
                .filter(|b| b.access == Access::ReadWrite)
                .map(|b| &b.path),
        );
        for path in writable {
            if !path.starts_with(&within) {
                return Err(SandboxError::new(
                    SandboxErrorKind::Forbidden {
                        path: path.clone(),
                        reason: "it leads out of the workspace (through a symlink)",
                    },
                    None,
                ));
            }
        }
    }
    Ok(p)
}

/// `path` when it is absolute and normalized (no `.`, `..` or empty component).
fn lexical(path: &Path) -> Result<PathBuf, SandboxError> {
    use std::path::Component;
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if plain {
        Ok(path.to_owned())
    } else {
        Err(path_err(
            path,
            std::io::Error::other("a path inside the sandbox must be absolute and normalized"),
        ))
    }
}

/// The copy-on-write trees with their layers canonical (the private layer's directories
/// created); a layer holding credentials, or a tree over the whole root, is refused.
fn canonical_trees(
    policy: &SandboxPolicy,
) -> Result<Vec<crate::policy::LayeredTree>, SandboxError> {
    let home = policy.host_home.as_deref();
    let mut trees = Vec::with_capacity(policy.trees.len());
    for tree in &policy.trees {
        let at = lexical(&tree.at)?;
        if at == Path::new("/") || tree.lowers.is_empty() {
            return Err(SandboxError::new(
                SandboxErrorKind::Forbidden {
                    path: at,
                    reason: "a copy-on-write tree needs a directory of its own and a layer",
                },
                None,
            ));
        }
        let mut lowers = Vec::with_capacity(tree.lowers.len());
        for lower in &tree.lowers {
            let lower = lower.canonicalize().map_err(|e| path_err(lower, e))?;
            let secrets = secrets::secret_paths(home);
            let holds_secret = secrets::is_secret_path(&lower, home)
                || secrets::secrets_under(&secrets, std::slice::from_ref(&lower))
                    .next()
                    .is_some();
            if holds_secret {
                return Err(SandboxError::new(
                    SandboxErrorKind::Forbidden {
                        path: lower,
                        reason: "it holds credentials and is never visible in the sandbox",
                    },
                    None,
                ));
            }
            lowers.push(lower);
        }
        let layer = match &tree.layer {
            Some(layer) => {
                for dir in ["upper", "work"] {
                    let dir = layer.join(dir);
                    std::fs::create_dir_all(&dir).map_err(|e| path_err(&dir, e))?;
                }
                Some(layer.canonicalize().map_err(|e| path_err(layer, e))?)
            }
            None => None,
        };
        trees.push(crate::policy::LayeredTree {
            at,
            lowers,
            layer,
            volatile: tree.volatile,
        });
    }
    Ok(trees)
}

type LimitsPlan = (Option<CgroupPlan>, EnforcementSummary, Vec<Rlimit>);

fn limits_plan(host: &HostSupport, policy: &SandboxPolicy) -> Result<LimitsPlan, SandboxError> {
    let l = policy.limits;
    let mut enforcement = EnforcementSummary::default();
    let mut rlimits = vec![Rlimit {
        resource: Resource::Core,
        soft: 0,
        hard: 0,
    }];
    let rl = |resource: Resource, soft: u64, hard: u64| Rlimit {
        resource,
        soft,
        hard,
    };
    if let Some(ms) = l.cpu_time_ms {
        let secs = ms.div_ceil(1000).max(1);
        rlimits.push(rl(Resource::Cpu, secs, secs + 1));
        enforcement.cpu = Enforcement::Rlimit;
    }
    if let Some(b) = l.file_size_bytes {
        rlimits.push(rl(Resource::FileSize, b, b));
    }
    if let Some(n) = l.open_files {
        rlimits.push(rl(Resource::OpenFiles, n, n));
    }
    if !l.wants_cgroup() {
        return Ok((None, enforcement, rlimits));
    }
    let cg = &host.cgroup;
    let mark = |e: &mut EnforcementSummary, how: Enforcement| {
        if l.memory_bytes.is_some() {
            e.memory = how;
        }
        if l.pids.is_some() {
            e.pids = how;
        }
    };
    if cg.v2_usable() {
        mark(&mut enforcement, Enforcement::CgroupV2);
        let parent = cg.v2_own.clone().expect("usable v2 has a group");
        return Ok((
            Some(CgroupPlan::V2 {
                parent,
                memory_bytes: l.memory_bytes,
                pids: l.pids,
            }),
            enforcement,
            rlimits,
        ));
    }
    let v1_ok = (l.memory_bytes.is_none() || cg.v1_memory.is_some())
        && (l.pids.is_none() || cg.v1_pids.is_some());
    if v1_ok {
        mark(&mut enforcement, Enforcement::CgroupV1);
        let plan = CgroupPlan::V1 {
            memory_parent: l.memory_bytes.and(cg.v1_memory.clone()),
            pids_parent: l.pids.and(cg.v1_pids.clone()),
            memory_bytes: l.memory_bytes,
            pids: l.pids,
        };
        return Ok((Some(plan), enforcement, rlimits));
    }
    if !policy.allows_degraded(Degradation::Cgroup) {
        return Err(unenforceable(
            "cgroup limits",
            "no writable cgroup with the memory and pids controllers (neither delegated cgroup v2 nor cgroup v1)".into(),
            "make cgroup v1 memory and pids writable, or run cordon in a cgroup v2 group whose cgroup.subtree_control enables memory and pids (see `cordon doctor`); or accept weaker per-process rlimits with --allow-degraded cgroup".into(),
        ));
    }
    if let Some(b) = l.memory_bytes {
        rlimits.push(rl(Resource::AddressSpace, b, b));
        enforcement.memory = Enforcement::Rlimit;
    }
    if let Some(n) = l.pids {
        rlimits.push(rl(Resource::Processes, n, n));
        enforcement.pids = Enforcement::Rlimit;
    }
    Ok((None, enforcement, rlimits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::CgroupSupport;

    fn host_with(landlock_abi: u32, cgroup: CgroupSupport) -> HostSupport {
        HostSupport {
            userns_blocker: None,
            landlock_abi,
            seccomp: true,
            mount_setattr: true,
            cgroup,
        }
    }

    fn policy() -> SandboxPolicy {
        let mut p = SandboxPolicy::new(std::env::temp_dir());
        p.toolchains = false;
        p
    }

    #[test]
    fn missing_landlock_fails_unless_given_up() {
        let h = host_with(0, CgroupSupport::default());
        let mut p = policy();
        let err = prepare_with(&h, Path::new("/c"), &p, "true".as_ref(), &[]).unwrap_err();
        assert!(err.to_string().contains("landlock"), "{err}");
        assert!(err.hint.unwrap().contains("--allow-degraded landlock"));
        p.allow_degraded.push(Degradation::Landlock);
        let ok = prepare_with(&h, Path::new("/c"), &p, "true".as_ref(), &[]).unwrap();
        assert_eq!(ok.summary.landlock_abi, None);
    }

    #[test]
    fn userns_blocker_names_the_sysctl() {
        let mut h = host_with(7, CgroupSupport::default());
        h.userns_blocker = Some((
            "disabled (user.max_user_namespaces = 0)".into(),
            "sysctl -w user.max_user_namespaces=15000".into(),
        ));
        let err = prepare_with(&h, Path::new("/c"), &policy(), "true".as_ref(), &[]).unwrap_err();
        assert!(err.to_string().contains("user namespaces"));
        assert!(err.hint.unwrap().contains("sysctl"));
    }

    #[test]
    fn limits_without_cgroup_fail_unless_rlimits_accepted() {
        let h = host_with(7, CgroupSupport::default());
        let mut p = policy();
        p.limits.memory_bytes = Some(64 << 20);
        assert!(prepare_with(&h, Path::new("/c"), &p, "true".as_ref(), &[]).is_err());
        p.allow_degraded.push(Degradation::Cgroup);
        let ok = prepare_with(&h, Path::new("/c"), &p, "true".as_ref(), &[]).unwrap();
        assert_eq!(ok.summary.enforcement.memory, Enforcement::Rlimit);
    }

    #[test]
    fn v1_cgroups_enforce_memory_and_pids() {
        let cg = CgroupSupport {
            v1_memory: Some("/m".into()),
            v1_pids: Some("/p".into()),
            ..Default::default()
        };
        let h = host_with(7, cg);
        let mut p = policy();
        p.limits.memory_bytes = Some(1 << 30);
        p.limits.pids = Some(64);
        let ok = prepare_with(
            &h,
            Path::new("/c"),
            &p,
            "sh".as_ref(),
            &["-c".into(), "true".into()],
        )
        .unwrap();
        assert_eq!(ok.summary.enforcement.memory, Enforcement::CgroupV1);
        assert_eq!(ok.summary.enforcement.pids, Enforcement::CgroupV1);
        assert_eq!(
            ok.args,
            ["__sandbox-init", "--", "sh", "-c", "true"].map(OsString::from)
        );
        assert!(ok.summary.namespaces.contains(&"net".to_string()));
        let home = ok.env.iter().find(|(k, _)| k == "HOME").unwrap();
        assert_eq!(home.1, plan::SANDBOX_HOME);
    }

    #[test]
    fn a_partly_enforced_landlock_is_accepted_only_when_landlock_may_degrade() {
        let h = host_with(7, CgroupSupport::default());
        let plan_of = |p: &SandboxPolicy| -> InitPlan {
            let cmd = prepare_with(&h, Path::new("/c"), p, "true".as_ref(), &[]).unwrap();
            let (_, json) = cmd.env.iter().find(|(k, _)| k == PLAN_ENV).unwrap();
            serde_json::from_str(json.to_str().unwrap()).unwrap()
        };
        let mut p = policy();
        let strict = plan_of(&p).landlock.expect("landlock is planned");
        assert!(!strict.allow_partial);
        p.allow_degraded.push(Degradation::Landlock);
        let lenient = plan_of(&p).landlock.expect("landlock is planned");
        assert!(lenient.allow_partial);
    }

    #[test]
    fn binding_a_secret_is_refused() {
        let h = host_with(7, CgroupSupport::default());
        let mut p = policy();
        p.binds.push(crate::policy::Bind {
            path: "/etc/ssh".into(),
            access: crate::policy::Access::ReadOnly,
        });
        if Path::new("/etc/ssh").exists() {
            let err = prepare_with(&h, Path::new("/c"), &p, "true".as_ref(), &[]).unwrap_err();
            assert!(err.to_string().contains("credentials"), "{err}");
        }
    }
}

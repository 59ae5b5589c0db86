//! The chain every run goes through: checks, environment, policy, redaction, supervised
//! spawn, redacted result.

use std::path::{Path, PathBuf};

use cordon_exec::{CancelHandle, EnvSpec, OutputSink, ReadyProbe, RunIo, RunSpec, Stream};
use cordon_proxy::ProxySettings;
use cordon_redact::Redactor;
use cordon_sandbox::{Access, Bind, EnvVar, Replacement, SandboxPolicy};
use cordon_types::{
    DeniedConnection, HomeError, NetworkMode, NetworkReport, RunResult, SandboxSummary,
};

use crate::credentials::{self, RunCredentials};
use crate::env::{host_env, program_env};
use crate::error::{RunError, RunErrorKind};
use crate::record::RunRecorder;
use crate::redaction::build_redactor;
use crate::request::{Isolation, RunRequest, SandboxOptions, WorkspaceMount};
use crate::run_files::RunFiles;

/// The optional companions of a run.
#[derive(Default)]
pub struct Hooks<'a> {
    /// Receives all output live, already redacted (a terminal, a live log).
    pub sink: Option<&'a mut dyn OutputSink>,
    /// Ends the run early (Ctrl-C, a cancelled job); the result says `cancelled`.
    pub cancel: Option<&'a CancelHandle>,
    /// Ends the run with a pass once the program is ready (startup smoke tests).
    pub ready: Option<&'a mut dyn ReadyProbe>,
    /// Where the transcript goes in the run history.
    pub transcript: Option<TranscriptTarget<'a>>,
    /// Told of every connection the network proxy refuses, as it happens (already
    /// redacted): the terminal's notice line. Called from the proxy's threads.
    pub network_notice: Option<&'a (dyn Fn(&DeniedConnection) + Sync)>,
}

/// A recorded run's transcript: the run's own output, or one stage's of a verification.
#[derive(Clone, Copy)]
pub struct TranscriptTarget<'a> {
    /// The run's recording.
    pub recorder: &'a dyn RunRecorder,
    /// The stage the output belongs to (`None`: the run itself).
    pub stage: Option<&'a str>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// The result document, redacted, with the sandbox summary and the run id.
    pub result: RunResult,
    /// The conventional exit code (the program's own, 124 timeout, 125 cordon failed,
    /// 126/127 not executable/not found, 128+N signal N).
    pub exit_code: u8,
    /// Whether the readiness probe fired.
    pub ready: bool,
}

/// The landlock tier's proxy listener, when the network is an allowlist: with no private
/// network namespace to make it in, cordon listens on the host's loopback, and the sandbox
/// lets the program reach that port only (`policy` is told the port, and pinned to the tier).
fn landlock_proxy_listener(
    policy: &mut SandboxPolicy,
) -> Result<Option<std::net::TcpListener>, RunError> {
    if policy.network != NetworkMode::Allowlist
        || cordon_sandbox::tier_for(policy) != cordon_types::IsolationTier::Landlock
    {
        return Ok(None);
    }
    let failed = |what| move |source| RunError::from(cordon_proxy::ProxyError { what, source });
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(failed("listen on the host's loopback"))?;
    policy.proxy_listen_port = Some(
        listener
            .local_addr()
            .map_err(failed("read its port"))?
            .port(),
    );
    policy.isolation = Some(cordon_types::IsolationTier::Landlock);
    Ok(Some(listener))
}

/// A request checked and turned into what will be executed; nothing has run yet.
pub struct PreparedRun {
    spec: RunSpec,
    summary: SandboxSummary,
    redactor: Redactor,
    shown_command: Vec<String>,
    /// The credential-free copies of git data the sandbox shows; removed with the run.
    _scrubbed: Option<RunFiles>,
    /// Keeps the `/etc` snapshot the sandbox shows until the run ends.
    _lease: Option<cordon_sandbox::SnapshotLease>,
    /// The landlock tier's private home and temporary directory, removed with the run.
    _scratch: Option<cordon_sandbox::Scratch>,
    /// The landlock tier's proxy listener, bound on the host's loopback.
    bound_listener: Option<std::net::TcpListener>,
    /// The tree whose disk use is bounded, and the bound.
    disk: Option<(PathBuf, u64)>,
    /// The network proxy's settings, when the network is an allowlist.
    proxy: Option<ProxySettings>,
    /// The working directory to report when it is not the one the helper started in.
    shown_cwd: Option<String>,
    /// The credentials the proxy adds, the run's authority and the CA bundle shown.
    credentials: Option<RunCredentials>,
}

impl std::fmt::Debug for PreparedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedRun")
            .field("command", &self.shown_command)
            .field("sandbox", &self.summary)
            .finish_non_exhaustive()
    }
}

/// Prepares and runs `request` (see [`prepare`] and [`PreparedRun::run`]).
pub fn run(request: &RunRequest, hooks: Hooks<'_>) -> Result<Ran, RunError> {
    prepare(request)?.run(hooks)
}

/// Checks `request` and prepares everything that will run: the environment, the sandbox
/// policy (refused when the host cannot enforce it), the redactor. Fails before anything
/// runs or is recorded.
pub fn prepare(request: &RunRequest) -> Result<PreparedRun, RunError> {
    let (program, rest) = request.argv.split_first().ok_or(RunErrorKind::NoProgram)?;
    let overlay = request.workspace.as_ref().filter(|ws| ws.overlay.is_some());
    let home = check_cwd(request, overlay)?;
    let host = host_env();
    let credentials = run_credentials(request, &host)?;
    let mut set = request.env.clone();
    let mut held = request.secret_values.clone();
    let mut placeholders: &[(String, String)] = &[];
    if let Some(c) = &credentials {
        set.extend(c.placeholders.iter().cloned());
        held.extend(c.values.iter().cloned());
        placeholders = &c.placeholders;
    }
    let env = program_env(&host, &set, &request.secrets, &request.secret_values)?;
    // A placeholder sits in a variable named like a secret (`API_KEY`); it is none, and the
    // value it stands for is redacted instead (`held`).
    let not_placeholder = |v: &&EnvVar| {
        !placeholders
            .iter()
            .any(|(n, p)| *n == v.name && *p == v.value)
    };
    let shown_env: Vec<EnvVar> = env.iter().filter(not_placeholder).cloned().collect();
    let redactor = build_redactor(
        host.iter().map(|(name, value)| (name, value)),
        &shown_env,
        &held,
        &request.redact,
    )?;
    let shown_command: Vec<String> = request
        .argv
        .iter()
        .map(|a| String::from_utf8_lossy(&redactor.redact_all(a.as_encoded_bytes())).into_owned())
        .collect();
    let mut scrubbed = None;
    let mut lease = None;
    let mut scratch = None;
    let mut bound = None;
    let proxy = match &request.isolation {
        Isolation::Sandboxed(o) if o.network == NetworkMode::Allowlist => Some(o.proxy.clone()),
        Isolation::Sandboxed(_) | Isolation::Unsandboxed => None,
    };
    let (mut spec, summary) = match &request.isolation {
        Isolation::Unsandboxed => {
            let mut spec = RunSpec::new(program, rest);
            // The program inherits cordon's environment, plus what the caller sets; git's
            // maintenance in the foreground, unless git configuration is set already.
            let git_set = host
                .iter()
                .map(|(k, _)| k)
                .chain(request.env.iter().map(|(k, _)| k))
                .any(|k| k == "GIT_CONFIG_COUNT");
            let git = if git_set {
                Vec::new()
            } else {
                cordon_sandbox::git_config_env(cordon_sandbox::GIT_CONFIG)
            };
            spec.env = EnvSpec {
                clear: false,
                set: git
                    .iter()
                    .chain(&request.env)
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            };
            (spec, SandboxSummary::default())
        }
        Isolation::Sandboxed(options) => {
            // The home is masked only if it exists when the sandbox is built: make it now
            // (private), so that a first run cannot see the history its own cordon creates.
            if let Some(home) = &home {
                create_private_dir(home);
            }
            let mut policy =
                sandbox_policy(options, &request.cwd, request.workspace.as_ref(), home, env);
            if let Some(ws) = overlay {
                overlay_policy(&mut policy, ws, &request.cwd);
            }
            policy.ca_bundle = credentials.as_ref().map(|c| c.bundle.path().to_path_buf());
            scrubbed = scrub_git_data(&mut policy, request.workspace.as_ref())?;
            bound = landlock_proxy_listener(&mut policy)?;
            let mut prepared = cordon_sandbox::prepare(&policy, program, rest)?;
            lease = prepared.lease.take();
            scratch = prepared.scratch.take();
            let mut spec = RunSpec::new(&prepared.program, &prepared.args);
            // Under its bare name: the sandbox's `/proc/1/cmdline` names no host path.
            spec.arg0 = Some(cordon_sandbox::HELPER_NAME.into());
            spec.env = EnvSpec {
                clear: true,
                set: prepared.env,
            };
            spec.supervised = true;
            // The executor reports it, with what the helper observed (unenforced Landlock
            // rights).
            spec.sandbox = Some(prepared.summary.clone());
            (spec, prepared.summary)
        }
    };
    spec.display_command = Some(shown_command.clone());
    // The helper starts in a host directory; an overlay's subdirectories exist only inside.
    let spawn_cwd = overlay.map_or(&request.cwd, |ws| &ws.root);
    spec = spec
        .timeout(request.bounds.timeout)
        .grace(request.bounds.grace)
        .output_limit(request.bounds.output_limit)
        .cwd(spawn_cwd);
    spec.leak_window = request.bounds.leak_window;
    spec.stdin = request.stdin;
    spec.exclusive_children = request.exclusive_children;
    // An overlay's own disk use is its upper layer: what the program wrote.
    let disk_root = match &request.workspace {
        Some(WorkspaceMount {
            overlay: Some(layers),
            ..
        }) => layers.layer.join("upper"),
        Some(ws) => ws.root.clone(),
        None => request.cwd.clone(),
    };
    Ok(PreparedRun {
        credentials,
        shown_cwd: overlay.map(|_| request.cwd.display().to_string()),
        proxy,
        _scrubbed: scrubbed,
        _lease: lease,
        _scratch: scratch,
        bound_listener: bound,
        disk: request.bounds.disk.map(|limit| (disk_root, limit)),
        spec,
        summary,
        redactor,
        shown_command,
    })
}

/// Checks where the program starts: in the workspace when there is one (an overlay's
/// tree exists only inside the sandbox, so there it is checked by the helper), never in
/// `CORDON_HOME` outside the run's own workspace. The home, when there is one.
fn check_cwd(
    request: &RunRequest,
    overlay: Option<&WorkspaceMount>,
) -> Result<Option<PathBuf>, RunError> {
    // An overlay workspace's tree exists only inside the sandbox: its working directory is
    // checked there (the helper refuses to start in one that is not a directory).
    if let Some(ws) = overlay {
        if ws.inside(&request.cwd).is_none() {
            return Err(RunErrorKind::OutsideWorkspace {
                cwd: request.cwd.clone(),
                workspace: ws.root.clone(),
            }
            .into());
        }
    } else if !request.cwd.is_dir() {
        return Err(RunErrorKind::BadCwd(request.cwd.clone()).into());
    }
    let cwd = resolved(&request.cwd);
    if let Some(ws) = &request.workspace
        && !cwd.starts_with(resolved(&ws.root))
    {
        return Err(RunErrorKind::OutsideWorkspace {
            cwd: request.cwd.clone(),
            workspace: ws.root.clone(),
        }
        .into());
    }
    let home = match cordon_types::cordon_home() {
        Ok(home) => Some(home),
        Err(HomeError::Unset) => None,
        Err(e @ HomeError::Relative(_)) => return Err(e.into()),
    };
    if let Some(home) = &home {
        let in_own_workspace = request
            .workspace
            .as_ref()
            .is_some_and(|ws| cwd.starts_with(resolved(&ws.root)));
        if cwd.starts_with(resolved(home)) && !in_own_workspace {
            return Err(RunErrorKind::InsideCordonHome {
                cwd: request.cwd.clone(),
                home: home.clone(),
            }
            .into());
        }
    }
    Ok(home)
}

impl PreparedRun {
    /// Warnings about the set-up worth telling the user before the run (e.g. a secret too
    /// short to redact).
    pub fn warnings(&self) -> Vec<String> {
        self.redactor
            .warnings()
            .iter()
            .map(ToString::to_string)
            .chain(self.summary.warnings.iter().cloned())
            .collect()
    }

    /// The command line as it is shown and recorded: redacted.
    pub fn shown_command(&self) -> &[String] {
        &self.shown_command
    }

    /// What the sandbox will enforce.
    pub fn sandbox(&self) -> &SandboxSummary {
        &self.summary
    }

    /// Redacts `text` with this run's redactor (for messages about the run).
    pub fn redact(&self, text: &str) -> String {
        self.redact_bytes(text)
    }

    /// Runs the program to its end and reports what happened, redacted.
    pub fn run(mut self, hooks: Hooks<'_>) -> Result<Ran, RunError> {
        let bound = self.bound_listener.take();
        let Hooks {
            sink,
            cancel,
            ready,
            transcript,
            network_notice,
        } = hooks;
        let mut filter = cordon_redact::ExecFilter::new(&self.redactor);
        let mut tee = Tee { sink, transcript };
        let mut disk = self
            .disk
            .as_ref()
            .map(|(root, limit)| cordon_exec::DiskGuard::new(root, *limit));
        let mut io = RunIo {
            guard: disk.as_mut().map(|g| g as &mut dyn cordon_exec::LimitGuard),
            sink: Some(&mut tee),
            filter: (!self.redactor.is_empty())
                .then_some(&mut filter as &mut dyn cordon_exec::OutputFilter),
            cancel,
            ready: match ready {
                Some(probe) => Some(probe as &mut dyn ReadyProbe),
                None => None,
            },
            network_fd: None,
        };
        let (outcome, network) = match &self.proxy {
            None => (cordon_exec::run(&self.spec, io)?, None),
            Some(settings) => {
                let notice = |denied: &DeniedConnection| {
                    if let Some(notice) = network_notice {
                        notice(&self.redact_denial(denied));
                    }
                };
                let (outcome, report) = std::thread::scope(|scope| {
                    let listener = match bound {
                        Some(listener) => cordon_proxy::Listener::Bound(listener),
                        None => {
                            let (ours, theirs) = std::os::unix::net::UnixStream::pair()
                                .map_err(|source| cordon_proxy::ProxyError {
                                    what: "create the socket that carries its listener",
                                    source,
                                })
                                .map_err(RunError::from)?;
                            io.network_fd = Some(theirs.into());
                            cordon_proxy::Listener::FromSandbox(ours)
                        }
                    };
                    let companions = cordon_proxy::Companions {
                        notice: Some(&notice),
                        intercept: self.credentials.as_ref().map(|c| &c.interception),
                    };
                    let proxy = cordon_proxy::start(scope, settings, listener, companions)?;
                    let outcome = cordon_exec::run(&self.spec, io);
                    // The proxy lives exactly as long as the run.
                    let report = proxy.finish();
                    Ok::<_, RunError>((outcome?, report))
                })?;
                (outcome, Some(self.redact_report(report)))
            }
        };
        let mut result = outcome.result;
        result.network = network;
        result.command = self.shown_command.clone();
        // Reasons quote the program name, paths, set-up errors: redacted like everything else.
        if let Some(failure) = &mut result.failure {
            failure.reason = self.redact_bytes(&failure.reason);
        }
        if let Some(cwd) = &self.shown_cwd {
            result.cwd = cwd.clone();
        }
        result.cwd = self.redact_bytes(&result.cwd);
        result.run_id = transcript.map(|t| t.recorder.id().to_owned());
        Ok(Ran {
            result,
            exit_code: outcome.exit_code,
            ready: outcome.ready,
        })
    }

    /// A refusal as shown and kept: a host name can carry a secret (`TOKEN.evil.example`).
    fn redact_denial(&self, denied: &DeniedConnection) -> DeniedConnection {
        DeniedConnection {
            host: self.redact_bytes(&denied.host),
            port: denied.port,
            reason: self.redact_bytes(&denied.reason),
        }
    }

    fn redact_report(&self, mut report: NetworkReport) -> NetworkReport {
        report.denied = report
            .denied
            .iter()
            .map(|d| self.redact_denial(d))
            .collect();
        for t in &mut report.allowed {
            t.host = self.redact_bytes(&t.host);
        }
        report
    }

    fn redact_bytes(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.redactor.redact_all(text.as_bytes())).into_owned()
    }
}

/// The request's credentials, prepared: only a sandboxed run with an allowlisted network has
/// the proxy that adds them.
fn run_credentials(
    request: &RunRequest,
    host: &[(String, String)],
) -> Result<Option<RunCredentials>, RunError> {
    match &request.isolation {
        Isolation::Sandboxed(o) if o.network == NetworkMode::Allowlist => {
            credentials::prepare(&o.proxy, &request.secrets, &request.secret_values, host)
        }
        Isolation::Sandboxed(o) if !o.proxy.credentials.is_empty() => {
            Err(RunErrorKind::CredentialWithoutProxy.into())
        }
        Isolation::Sandboxed(_) | Isolation::Unsandboxed => Ok(None),
    }
}

/// Shows the sandbox the visible git directories (a workspace's repository, the `.git` of a
/// writable tree) without what a program must not read there: the configuration without
/// credentials ([`cordon_git::sanitized_config`]), `packed-refs` without the stash, and no
/// reflogs, `refs/stash` or per-worktree configuration. Returns the private copies, which must
/// live until the sandbox has bound them.
fn scrub_git_data(
    policy: &mut SandboxPolicy,
    workspace: Option<&WorkspaceMount>,
) -> Result<Option<RunFiles>, RunError> {
    let mut dirs: Vec<PathBuf> = cordon_sandbox::protected_git_data(policy)
        .into_iter()
        .filter(|p| p.is_dir())
        .chain(workspace.and_then(|ws| ws.git_common_dir.clone()))
        .map(|p| resolved(&p))
        .collect();
    dirs.sort();
    dirs.dedup();
    // The copies live under cordon's own state (masked in the sandbox), removed with the run
    // or by the next cordon when this one is killed; never in the shared /tmp.
    let mut copies: Option<RunFiles> = None;
    let mut made = 0usize;
    for dir in dirs {
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| {
            RunError::from(RunErrorKind::GitData {
                dir: dir.clone(),
                source,
            })
        };
        let mut replace = |path: PathBuf, content: &[u8]| -> Result<(), RunError> {
            if copies.is_none() {
                copies = Some(RunFiles::make("git").map_err(|e| fail(e.into()))?);
            }
            let dir = copies.as_ref().map(RunFiles::path).expect("made above");
            made += 1;
            let with = dir.join(format!(
                "{made}-{}",
                path.file_name()
                    .map_or_else(|| "file".into(), |n| n.to_string_lossy(),)
            ));
            std::fs::write(&with, content).map_err(|e| fail(e.into()))?;
            policy.replacements.push(Replacement { path, with });
            Ok(())
        };
        let config = dir.join("config");
        if config.is_file() {
            let clean = cordon_git::sanitized_config(&dir, &config).map_err(|e| fail(e.into()))?;
            replace(config, &clean)?;
        }
        let packed = dir.join("packed-refs");
        if let Ok(bytes) = std::fs::read(&packed) {
            let clean = cordon_git::packed_refs_without_stash(&bytes);
            if clean != bytes {
                replace(packed, &clean)?;
            }
        }
        policy.hidden.push(dir.join("logs"));
        policy.hidden.push(dir.join("refs/stash"));
        policy.hidden.push(dir.join("config.worktree"));
        for entry in std::fs::read_dir(dir.join("worktrees"))
            .into_iter()
            .flatten()
            .flatten()
        {
            policy.hidden.push(entry.path().join("logs"));
            policy.hidden.push(entry.path().join("config.worktree"));
        }
    }
    Ok(copies)
}

/// The sandbox policy of one run.
fn sandbox_policy(
    options: &SandboxOptions,
    cwd: &Path,
    workspace: Option<&WorkspaceMount>,
    home: Option<PathBuf>,
    env: Vec<EnvVar>,
) -> SandboxPolicy {
    let mut policy = SandboxPolicy::new(cwd);
    policy.binds = options.binds.clone();
    policy.toolchains = options.toolchains;
    policy.network = options.network;
    policy.allow_exec = options.allow_exec.clone();
    policy.allow_jit = options.allow_jit;
    policy.isolation = options.isolation;
    policy.limits = options.limits;
    policy.allow_degraded = options.allow_degraded.clone();
    policy.caches = options.caches.clone();
    policy.host_home = std::env::var_os("HOME").map(PathBuf::from);
    policy.env = env;
    // cordon's own state (run history, workspace records, locks) is never visible; what
    // sandboxes reuse from run to run (the /etc snapshot) lives in its cache.
    policy.host_cache = home.as_ref().map(|home| home.join("cache"));
    // The landlock tier's private home and temporary directory of each run.
    policy.scratch_root = home.as_ref().map(|home| home.join("run"));
    policy.hidden.extend(home);
    if let Some(ws) = workspace {
        // Whatever is writable stays inside the workspace, checked by the sandbox itself at
        // the moment it binds (a concurrent swap for a symlink is refused, not followed).
        policy.writable_within = Some(ws.root.clone());
        // The whole workspace is writable; the repository's git data (shared with the live
        // checkout: hooks, config, refs, objects) only readable.
        let access = if ws.read_only {
            Access::ReadOnly
        } else {
            Access::ReadWrite
        };
        policy.workdir_read_only = ws.read_only;
        if resolved(cwd) != resolved(&ws.root) {
            policy.binds.push(Bind {
                path: ws.root.clone(),
                access,
            });
        }
        policy
            .binds
            .extend(ws.git_common_dir.iter().map(|dir| Bind {
                path: dir.clone(),
                access: Access::ReadOnly,
            }));
        // A workspace whose git data is its own (a session's repository) commits there: its
        // `.git` stays as writable as the tree (it is not the user's, and cordon's own git
        // commands on it are hardened).
        let own_git = ws.root.join(".git");
        if ws.git_common_dir.is_none() && !ws.read_only && own_git.is_dir() {
            policy.binds.push(Bind {
                path: own_git,
                access: Access::ReadWrite,
            });
        }
    }
    policy
}

/// Shows an overlay workspace: its tree mounted from its layers at
/// [`cordon_sandbox::SANDBOX_WORKSPACE`] (writable through its private layer, or read-only),
/// its build caches over directories of it, its `.git` file and git directory read-only, and
/// everything under the tree's host directory translated to the inside.
fn overlay_policy(policy: &mut SandboxPolicy, ws: &WorkspaceMount, cwd: &Path) {
    let Some(layers) = &ws.overlay else { return };
    let inside = PathBuf::from(cordon_sandbox::SANDBOX_WORKSPACE);
    if let Some(workdir) = ws.inside(cwd) {
        policy.workdir = workdir;
    }
    policy.writable_within = Some(inside.clone());
    // The tree's own (empty) host directory and binds under it are replaced by the tree.
    policy.binds.retain(|b| !b.path.starts_with(&ws.root));
    let (lowers, layer) = if ws.read_only {
        let mut lowers = vec![layers.layer.join("upper")];
        lowers.extend(layers.lowers.iter().cloned());
        (lowers, None)
    } else {
        (layers.lowers.clone(), Some(layers.layer.clone()))
    };
    policy.trees.push(cordon_sandbox::LayeredTree {
        at: inside.clone(),
        lowers,
        layer,
        volatile: false,
    });
    for cache in &layers.caches {
        policy.trees.push(cordon_sandbox::LayeredTree {
            at: inside.join(&cache.dir),
            lowers: cache.lowers.clone(),
            layer: if ws.read_only {
                None
            } else {
                cache.layer.clone()
            },
            volatile: cache.volatile && !ws.read_only,
        });
    }
    if let (Some(git_dir), Some(dot_git)) = (&layers.git_dir, &layers.dot_git) {
        policy.binds.push(Bind {
            path: git_dir.clone(),
            access: Access::ReadOnly,
        });
        policy.replacements.push(Replacement {
            path: inside.join(".git"),
            with: dot_git.clone(),
        });
    }
}

/// Creates `dir` (and its parents) with mode 0700 when missing; failures are left to the
/// code that uses the directory, which reports them with context.
fn create_private_dir(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
}

/// `path` with symlinks resolved, or as given when it cannot be (it does not exist).
fn resolved(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_owned())
}

/// Sends output to the caller's sink and to the transcript.
struct Tee<'a, 'b> {
    sink: Option<&'a mut (dyn OutputSink + 'b)>,
    transcript: Option<TranscriptTarget<'a>>,
}

impl OutputSink for Tee<'_, '_> {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        if let Some(sink) = self.sink.as_deref_mut() {
            sink.write(stream, bytes);
        }
        if let Some(t) = self.transcript {
            t.recorder.write(t.stage, stream, bytes);
        }
    }

    fn wants_more(&self, stream: Stream) -> bool {
        self.sink.as_deref().is_none_or(|s| s.wants_more(stream))
    }

    fn accepts_more(&self, stream: Stream) -> bool {
        self.sink.as_deref().is_none_or(|s| s.accepts_more(stream))
    }
}

//! One stage in the sandbox: its policy, its redactor, its readiness probe, its result.

use std::path::{Path, PathBuf};

use cordon_exec::{CancelHandle, OutputSink, RunIo, RunSpec, StdinMode, Stream};
use cordon_sandbox::{Access, Bind, EnvVar, SandboxPolicy};
use cordon_types::{
    CapturedOutput, FailureCategory, LimitKind, NetworkMode, ResourceUsage, RunResult, RunStatus,
    StageCategory, StageFailure, StageFailureCategory, StageResult, StageStatus,
};

use crate::config::{
    DEFAULT_STAGE_TIMEOUT, NetworkSetting, ReadyConfig, RedactConfig, StageConfig,
};
use crate::pipeline::{VerifyObserver, VerifyRequest};
use crate::plan::PlannedStage;
use crate::smoke::{OutputMatches, TcpListening};

/// `path` resolved (symlinks followed), when it stays inside `root` (also resolved); `None`
/// when it leads out — e.g. through a symlink that a candidate patch added.
pub(crate) fn confined(root: &Path, path: &Path) -> Option<PathBuf> {
    let root = root.canonicalize().ok()?;
    let path = path.canonicalize().ok()?;
    path.starts_with(&root).then_some(path)
}

pub(crate) fn stage_cwd(planned: &PlannedStage, ws_path: &Path) -> PathBuf {
    match &planned.stage.cwd {
        Some(rel) => ws_path.join(rel),
        None => ws_path.to_owned(),
    }
}

pub(crate) fn skipped(planned: &PlannedStage, ws_path: &Path, reason: String) -> StageResult {
    StageResult {
        name: planned.stage.name.clone(),
        category: planned.stage.category,
        status: StageStatus::Skipped,
        required: planned.stage.required,
        command: planned.stage.run.clone(),
        cwd: stage_cwd(planned, ws_path).display().to_string(),
        exit_code: None,
        signal: None,
        duration_ms: 0,
        stdout: CapturedOutput::default(),
        stderr: CapturedOutput::default(),
        limits_hit: Vec::new(),
        resource: ResourceUsage::default(),
        failure: None,
        skip_reason: Some(reason),
        targeting: planned.targeting.clone(),
        tests: None,
    }
}

fn error_result(planned: &PlannedStage, ws_path: &Path, reason: String) -> StageResult {
    let mut r = skipped(planned, ws_path, String::new());
    r.status = StageStatus::Error;
    r.skip_reason = None;
    r.failure = Some(StageFailure {
        category: StageFailureCategory::Infra,
        reason,
    });
    r
}

/// Dependency caches a setup stage may write (only those that exist).
fn cache_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".cargo")));
    let mut dirs = Vec::new();
    if let Some(c) = &cargo_home {
        dirs.push(c.join("registry"));
        dirs.push(c.join("git"));
    }
    if let Some(h) = &home {
        for rel in [
            ".npm",
            ".cache/pnpm",
            ".local/share/pnpm",
            ".cache/yarn",
            "go/pkg/mod",
            ".cache/pip",
            ".bun/install/cache",
        ] {
            dirs.push(h.join(rel));
        }
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// The variables that pass from cordon's environment into a stage.
fn base_env() -> Vec<EnvVar> {
    const PASS: &[&str] = &["PATH", "LANG", "LANGUAGE", "TERM", "TZ", "RUSTUP_TOOLCHAIN"];
    std::env::vars()
        .filter(|(k, _)| PASS.contains(&k.as_str()) || k.starts_with("LC_"))
        .map(|(name, value)| EnvVar {
            name,
            value,
            secret: false,
        })
        .collect()
}

fn stage_policy(
    stage: &StageConfig,
    ws_path: &Path,
    cwd: &Path,
    common_dir: &Path,
) -> Result<SandboxPolicy, String> {
    let mut policy = SandboxPolicy::new(cwd);
    if cwd != ws_path {
        policy.binds.push(Bind {
            path: ws_path.to_owned(),
            access: Access::ReadWrite,
        });
    }
    // git log/diff/describe work inside; nothing inside can change the shared repository.
    policy.binds.push(Bind {
        path: common_dir.to_owned(),
        access: Access::ReadOnly,
    });
    let setup_like = stage.writable_caches;
    if setup_like {
        for dir in cache_dirs() {
            policy.binds.push(Bind {
                path: dir,
                access: Access::ReadWrite,
            });
        }
    }
    policy.network = match stage.network {
        Some(NetworkSetting::Host) => NetworkMode::Host,
        Some(NetworkSetting::None) | None => NetworkMode::None,
    };
    policy.limits.memory_bytes = stage.memory;
    policy.limits.pids = stage.pids;
    policy.host_home = std::env::var_os("HOME").map(PathBuf::from);
    // cordon's own state (run history, other workspaces' records) stays out of sight.
    policy.hidden.extend(cordon_workspace::cordon_home());
    let mut env = base_env();
    let mut set = |name: &str, value: String, secret: bool| {
        env.retain(|v| v.name != name);
        env.push(EnvVar {
            name: name.to_owned(),
            value,
            secret,
        });
    };
    for (k, v) in &stage.env {
        set(k, v.clone(), false);
    }
    for name in &stage.secrets {
        let value = std::env::var(name)
            .map_err(|_| format!("secret {name} is not set in cordon's environment"))?;
        set(name, value, true);
    }
    policy.env = env;
    Ok(policy)
}

/// The readiness probe of a smoke stage, if any.
enum Probe {
    None,
    Output(OutputMatches),
    Tcp(TcpListening),
}

struct ObserverSink<'a, 'o> {
    stage: &'a str,
    observer: &'a mut (dyn VerifyObserver + 'o),
}

impl OutputSink for ObserverSink<'_, '_> {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        self.observer.output(self.stage, stream, bytes);
    }
}

/// Where a stage runs: the project root, the workspace, the shared git directory.
pub(crate) struct StagePlace<'a> {
    pub(crate) root: &'a Path,
    pub(crate) ws_path: &'a Path,
    pub(crate) common_dir: &'a Path,
}

/// The redactor of one stage: its secrets, every secret-looking variable it receives, the
/// config's `redact.patterns`, and the built-in patterns.
fn stage_redactor(
    policy: &SandboxPolicy,
    config: &RedactConfig,
) -> Result<cordon_redact::Redactor, String> {
    let mut builder = cordon_redact::RedactorBuilder::new();
    for var in &policy.env {
        if var.secret {
            builder.add_secret(&var.name, &var.value);
        }
    }
    builder.add_env(policy.env.iter().map(|v| (&v.name, &v.value)));
    for (i, pattern) in config.patterns.iter().enumerate() {
        builder.add_pattern(format!("pattern-{}", i + 1), pattern);
    }
    for literal in &config.allow {
        builder.allow(literal);
    }
    builder
        .build()
        .map_err(|e| format!("cannot set up redaction: {e}"))
}

pub(crate) fn run_stage(
    planned: &PlannedStage,
    place: StagePlace<'_>,
    redact: &RedactConfig,
    request: &VerifyRequest,
    observer: &mut dyn VerifyObserver,
    cancel: Option<&CancelHandle>,
) -> StageResult {
    let StagePlace {
        root,
        ws_path,
        common_dir,
    } = place;
    let stage = &planned.stage;
    let cwd = stage_cwd(planned, root);
    if !cwd.is_dir() {
        return error_result(
            planned,
            root,
            format!(
                "the stage's cwd {} does not exist in the workspace",
                cwd.display()
            ),
        );
    }
    // The writable root must be inside the workspace, whatever symlinks the tree holds.
    let Some(cwd) = confined(ws_path, &cwd) else {
        return error_result(
            planned,
            root,
            format!(
                "the stage's cwd {} leads out of the workspace (a symlink); refused",
                cwd.display()
            ),
        );
    };
    let ws_path = &ws_path
        .canonicalize()
        .unwrap_or_else(|_| ws_path.to_owned());
    let policy = match stage_policy(stage, ws_path, &cwd, common_dir) {
        Ok(p) => p,
        Err(reason) => return error_result(planned, root, reason),
    };
    let redactor = match stage_redactor(&policy, redact) {
        Ok(r) => r,
        Err(reason) => return error_result(planned, root, reason),
    };
    let mut filter = cordon_redact::ExecFilter::new(&redactor);
    let argv: Vec<std::ffi::OsString> = stage.run.iter().map(Into::into).collect();
    let prepared = match cordon_sandbox::prepare(&policy, &argv[0], &argv[1..]) {
        Ok(p) => p,
        Err(e) => {
            let hint = e
                .hint
                .clone()
                .map(|h| format!(" (hint: {h})"))
                .unwrap_or_default();
            return error_result(
                planned,
                root,
                format!("the sandbox cannot be set up: {e}{hint}"),
            );
        }
    };
    let mut spec = RunSpec::new(&prepared.program, &prepared.args)
        .timeout(stage.timeout.unwrap_or(DEFAULT_STAGE_TIMEOUT))
        .output_limit(request.output_limit)
        .cwd(&cwd);
    spec.env.clear = true;
    spec.env.set = prepared.env;
    spec.supervised = true;
    spec.stdin = StdinMode::Null;
    spec.display_command = Some(stage.run.clone());
    spec.sandbox = Some(prepared.summary);
    let mut probe = match &stage.ready {
        Some(ReadyConfig::Stdout(re)) => match regex::bytes::Regex::new(re) {
            Ok(re) => Probe::Output(OutputMatches::new(re)),
            Err(e) => return error_result(planned, root, format!("bad ready regex: {e}")),
        },
        Some(ReadyConfig::Tcp(port)) => Probe::Tcp(TcpListening::new(*port)),
        None => Probe::None,
    };
    let mut sink = ObserverSink {
        stage: &stage.name,
        observer,
    };
    let io = RunIo {
        sink: Some(&mut sink),
        filter: Some(&mut filter),
        cancel,
        ready: match &mut probe {
            Probe::None => None,
            Probe::Output(p) => Some(p),
            Probe::Tcp(p) => Some(p),
        },
    };
    match cordon_exec::run(&spec, io) {
        Ok(outcome) => {
            let mut result = stage_result(planned, outcome.result, outcome.ready);
            for arg in &mut result.command {
                *arg = String::from_utf8_lossy(&redactor.redact_all(arg.as_bytes())).into_owned();
            }
            if let Some(failure) = &mut result.failure {
                failure.reason =
                    String::from_utf8_lossy(&redactor.redact_all(failure.reason.as_bytes()))
                        .into_owned();
            }
            result
        }
        Err(e) => error_result(planned, root, format!("cannot supervise the stage: {e}")),
    }
}

/// Maps a run result to a stage result with the stage's failure category.
fn stage_result(planned: &PlannedStage, run: RunResult, ready: bool) -> StageResult {
    let stage = &planned.stage;
    let author_category = match stage.category {
        StageCategory::Setup => StageFailureCategory::Setup,
        StageCategory::Lint => StageFailureCategory::Lint,
        StageCategory::Typecheck => StageFailureCategory::Typecheck,
        StageCategory::Compile => StageFailureCategory::Compile,
        StageCategory::Test => StageFailureCategory::Test,
        StageCategory::Build => StageFailureCategory::Build,
        StageCategory::Smoke => StageFailureCategory::Smoke,
        StageCategory::Migrate => StageFailureCategory::Migrate,
    };
    let smoke = stage.ready.is_some();
    let text = format!("{}{}{}", run.stdout.head, run.stdout.tail, run.stderr.tail);
    let tests = crate::counts::parse(&format!("{}\n{}", run.stdout.head, run.stdout.tail));
    let (mut status, failure) = match run.status {
        // A smoke stage passes only when it became ready; ending by itself is a failure.
        RunStatus::Pass if smoke && ready => (StageStatus::Pass, None),
        RunStatus::Pass if smoke => (
            StageStatus::Fail,
            Some(StageFailure {
                category: StageFailureCategory::Smoke,
                reason: "the program exited (code 0) before it was ready".into(),
            }),
        ),
        RunStatus::Pass => (StageStatus::Pass, None),
        RunStatus::Timeout if smoke => (
            StageStatus::Fail,
            Some(StageFailure {
                category: StageFailureCategory::Smoke,
                reason: format!(
                    "not ready within {}",
                    humantime::format_duration(stage.timeout.unwrap_or(DEFAULT_STAGE_TIMEOUT))
                ),
            }),
        ),
        RunStatus::Timeout => (
            StageStatus::Timeout,
            Some(StageFailure {
                category: StageFailureCategory::Timeout,
                reason: run.failure.map(|f| f.reason).unwrap_or_default(),
            }),
        ),
        RunStatus::Fail => {
            let f = run.failure.clone().expect("a failed run has a failure");
            let category = if f.category == FailureCategory::Resource {
                StageFailureCategory::Resource
            } else {
                author_category
            };
            let reason = if smoke {
                format!("the program ended before it was ready: {}", f.reason)
            } else {
                f.reason
            };
            (StageStatus::Fail, Some(StageFailure { category, reason }))
        }
        RunStatus::Error | RunStatus::Cancelled => (
            StageStatus::Error,
            Some(StageFailure {
                category: StageFailureCategory::Infra,
                reason: run.failure.map(|f| f.reason).unwrap_or_default(),
            }),
        ),
    };
    let mut skip_reason = None;
    let mut failure = failure;
    if planned.narrowed
        && status == StageStatus::Pass
        && tests.is_some_and(|t| t.passed + t.failed == 0)
        && !text.is_empty()
    {
        status = StageStatus::Skipped;
        skip_reason = Some("targeting selected zero tests".into());
        failure = None;
    }
    let mut limits_hit = run.limits_hit;
    limits_hit.retain(|l| *l != LimitKind::Output || run.stdout.truncated || run.stderr.truncated);
    StageResult {
        name: stage.name.clone(),
        category: stage.category,
        status,
        required: stage.required,
        command: stage.run.clone(),
        cwd: run.cwd,
        exit_code: run.exit_code,
        signal: run.signal,
        duration_ms: run.duration_ms,
        stdout: run.stdout,
        stderr: run.stderr,
        limits_hit,
        resource: run.resource,
        failure,
        skip_reason,
        targeting: planned.targeting.clone(),
        tests,
    }
}

//! One stage in the sandbox: its policy, its redactor, its readiness probe, its result.

use std::path::{Path, PathBuf};

use cordon_exec::{CancelHandle, OutputSink, StdinMode, Stream};
use cordon_runner::{
    Bounds, Hooks, Isolation, OverlayMount, Recorder, RedactRules, RunErrorClass, RunRequest,
    SandboxOptions, TranscriptTarget, TreeCache, WorkspaceMount,
};
use cordon_sandbox::CacheLayer;
use cordon_types::{
    CapturedOutput, FailureCategory, Finding, LimitKind, ResourceUsage, RunResult, RunStatus,
    Severity, StageCategory, StageFailure, StageFailureCategory, StageResult, StageStatus,
};
use cordon_workspace::CachePlace;

use crate::cache::CachePlan;
use crate::config::{
    DEFAULT_STAGE_TIMEOUT, NetworkSetting, ReadyConfig, RedactConfig, StageConfig,
};
use crate::findings::{self, PathContext, Tool};
use crate::judge::{self, Found};
use crate::pipeline::{VerifyObserver, VerifyRequest};
use crate::plan::PlannedStage;
use crate::smoke::{OutputMatches, TcpListening};
use crate::tree::Dir;

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
        findings: Vec::new(),
        findings_omitted: 0,
        network: None,
        isolation: None,
        baseline: None,
    }
}

pub(crate) fn error_result(planned: &PlannedStage, ws_path: &Path, reason: String) -> StageResult {
    let mut r = skipped(planned, ws_path, String::new());
    r.status = StageStatus::Error;
    r.skip_reason = None;
    r.failure = Some(StageFailure {
        category: StageFailureCategory::Infra,
        reason,
    });
    r
}

/// What differs for a stage's sandbox: its network and limits, and the caches of the
/// [`CachePlan`] — the build directories (trusted layers, or nothing yet) under the
/// verification's private layer in every stage; the host's dependency caches (with their
/// trusted layers) writable through a private layer in setup stages, read-only in the others.
/// The user's own caches and the trusted layers are never written: what a candidate's build
/// scripts or install hooks put there is discarded with its workspace. Returns the options and
/// the copy-on-write trees an overlay workspace mounts.
///
/// A verification that is not a trusted build never keeps its layers, so its copy-on-write
/// trees' layers are mounted volatile (without overlayfs's syncs: one `fsync` per file a build
/// rewrites, about 200 ms of a warm verification of semver; BENCHMARKS.md). A trusted build's
/// layers may become a cache: they are mounted with the syncs. (Host caches without trusted
/// layers go through [`CacheLayer`], which keeps the syncs: only setup stages write there.)
fn stage_sandbox(stage: &StageConfig, cache: &CachePlan) -> (SandboxOptions, Vec<TreeCache>) {
    let mut options = SandboxOptions::default();
    let mut trees = Vec::new();
    let volatile = !cache.trusted_build;
    for place in &cache.places {
        match &place.place {
            // The build directories: the trusted layers (or nothing yet) under the
            // verification's own layer, writable in every stage.
            CachePlace::Tree(dir) => trees.push(TreeCache {
                dir: dir.clone(),
                lowers: place.lowers.clone(),
                layer: Some(place.layer.clone()),
                volatile,
            }),
            CachePlace::Host(path) if place.trusted.is_empty() => options.caches.push(CacheLayer {
                layer: place.layer.clone(),
                path: path.clone(),
                writable: stage.writable_caches,
            }),
            // A host cache with trusted layers: writable through the private layer in setup
            // stages; read-only, with what setup stages added, in the others.
            CachePlace::Host(path) => {
                let upper = place.layer.join("upper");
                let _ = std::fs::create_dir_all(&upper);
                let _ = std::fs::create_dir_all(place.layer.join("work"));
                let (lowers, layer) = if stage.writable_caches {
                    (place.lowers.clone(), Some(place.layer.clone()))
                } else {
                    let mut lowers = vec![upper];
                    lowers.extend(place.lowers.iter().cloned());
                    (lowers, None)
                };
                trees.push(TreeCache {
                    dir: path.clone(),
                    lowers,
                    volatile: volatile && layer.is_some(),
                    layer,
                });
            }
        }
    }
    options.network = NetworkSetting::mode(stage.network.as_ref());
    match &stage.network {
        Some(NetworkSetting::Registry) => {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let env = |name: &str| std::env::var(name).ok();
            let config = cordon_proxy::ClientConfig {
                home: home.as_deref(),
                env: &env,
            };
            // Entries the allowlist cannot hold (an index given by IP address) stay out.
            (options.proxy.allow, _) =
                cordon_proxy::registry_allowlist(&stage_ecosystems(stage), &config);
        }
        Some(NetworkSetting::Allow(entries)) => {
            // Checked when the configuration was loaded.
            options.proxy.allow = cordon_proxy::Allowlist::parse(entries).unwrap_or_default();
        }
        Some(NetworkSetting::None | NetworkSetting::Host) | None => {}
    }
    options.proxy.credentials = stage.credential_rules();
    options.limits.memory_bytes = stage.memory;
    options.limits.pids = stage.pids;
    (options, trees)
}

/// The ecosystems whose registries a stage's `registry` network allows: the one its program
/// belongs to (`cargo`, `npm`/`pnpm`/`yarn`/`bun`, `pip`/`python3`, `go`), else all.
fn stage_ecosystems(stage: &StageConfig) -> Vec<cordon_proxy::Ecosystem> {
    use cordon_proxy::Ecosystem;
    let program = stage
        .run
        .first()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or_default();
    match program {
        "cargo" => vec![Ecosystem::Cargo],
        "npm" | "npx" | "pnpm" | "yarn" | "bun" => vec![Ecosystem::Npm],
        "pip" | "pip3" | "python" | "python3" | "uv" | "poetry" => vec![Ecosystem::Pip],
        "go" => vec![Ecosystem::Go],
        _ => Ecosystem::ALL.to_vec(),
    }
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
    /// The workspace's files as the host reads them (at `ws_path`'s top).
    pub(crate) tree: &'a Dir,
    /// An overlay workspace's layers.
    pub(crate) overlay: Option<&'a cordon_workspace::OverlayParts>,
    /// The build caches.
    pub(crate) cache: &'a CachePlan,
    /// A parallel stage's own directory (see [`StageConfig::parallel`]): its copy-on-write
    /// layers over the workspace's and the build directories' go there, and the shared ones
    /// become read-only layers beneath them. `None`: the stage writes the shared layers.
    pub(crate) private: Option<&'a Path>,
    /// What a lint stage's findings are compared with (`None`: not compared).
    pub(crate) baseline: Option<&'a crate::base_run::BaselineContext>,
    /// Where the time goes.
    pub(crate) timeline: &'a crate::timeline::Timeline,
}

/// The layers of a parallel stage: each writable layer the stages share (the workspace's,
/// each build directory's) becomes the topmost read-only layer under a layer of its own in
/// `private`, thrown away after it (the build directories' mounted without syncs). Shared
/// layers are never mounted writable twice at once: overlayfs leaves that undefined. A
/// shared layer no stage has mounted yet (the parallel stages come first, or the stages
/// before them were skipped) is made empty here: a missing lower layer fails the mount.
fn privatise(private: &Path, overlay: &mut OverlayMount) -> std::io::Result<()> {
    let shared = |layer: &Path| -> std::io::Result<PathBuf> {
        let upper = layer.join("upper");
        std::fs::create_dir_all(&upper)?;
        std::fs::create_dir_all(layer.join("work"))?;
        Ok(upper)
    };
    let mut lowers = vec![shared(&overlay.layer)?];
    lowers.append(&mut overlay.lowers);
    overlay.lowers = lowers;
    overlay.layer = private.join("workspace");
    for (i, cache) in overlay.caches.iter_mut().enumerate() {
        if let Some(layer) = cache.layer.take() {
            let mut lowers = vec![shared(&layer)?];
            lowers.append(&mut cache.lowers);
            cache.lowers = lowers;
            cache.layer = Some(private.join(format!("tree-{i}")));
            cache.volatile = true;
        }
    }
    Ok(())
}

/// What a stage reports to besides its result.
pub(crate) struct StageHooks<'a, 'o> {
    pub(crate) observer: &'a mut (dyn VerifyObserver + 'o),
    pub(crate) cancel: Option<&'a CancelHandle>,
    pub(crate) recorder: Option<&'a Recorder>,
}

/// Runs one stage in the sandbox and reports its result, its findings judged (a lint stage's
/// compared with the base commit's: see [`crate::baseline`]); a stage that cannot be set up
/// (a bad cwd, a bad ready regex, layers that cannot be made) ends in an error result.
pub(crate) fn run_stage(
    planned: &PlannedStage,
    place: StagePlace<'_>,
    redact: &RedactConfig,
    request: &VerifyRequest,
    hooks: StageHooks<'_, '_>,
) -> StageResult {
    let cancel = hooks.cancel;
    let Ran {
        mut result,
        found,
        paths,
    } = match run_sandboxed(planned, &place, redact, request, hooks) {
        Ok(ran) => ran,
        Err(result) => return *result,
    };
    let base = crate::base_run::base_findings(
        planned,
        &place,
        crate::base_run::Judged {
            redact,
            request,
            cancel,
            result: &result,
            found: &found,
        },
    );
    judge::judge(
        &mut result,
        found,
        base,
        planned.stage.block_existing,
        &paths,
    );
    result
}

/// A stage that ran: its result before its findings are judged, what its tools reported, and
/// how its paths read.
pub(crate) struct Ran {
    pub(crate) result: StageResult,
    pub(crate) found: Found,
    pub(crate) paths: PathContext,
}

/// Runs one stage in the sandbox: its result with what its tools reported, not yet judged;
/// `Err`: the error result of a stage that could not run.
pub(crate) fn run_sandboxed(
    planned: &PlannedStage,
    place: &StagePlace<'_>,
    redact: &RedactConfig,
    request: &VerifyRequest,
    hooks: StageHooks<'_, '_>,
) -> Result<Ran, Box<StageResult>> {
    let StageRun {
        run,
        mut probe,
        cwd,
        cwd_dir,
    } = stage_run(planned, place, redact, request)
        .map_err(|reason| Box::new(error_result(planned, place.root, reason)))?;
    let stage = &planned.stage;
    let StageHooks {
        observer,
        cancel,
        recorder,
    } = hooks;
    let mut sink = ObserverSink {
        stage: &stage.name,
        observer,
    };
    let hooks = Hooks {
        sink: Some(&mut sink),
        cancel,
        ready: match &mut probe {
            Probe::None => None,
            Probe::Output(p) => Some(p),
            Probe::Tcp(p) => Some(p),
        },
        transcript: recorder.map(|recorder| TranscriptTarget {
            recorder,
            stage: Some(&stage.name),
        }),
        network_notice: None,
    };
    match cordon_runner::run(&run, hooks) {
        Ok(ran) => {
            // The command as the run path shows it: redacted.
            let command = ran.result.command.clone();
            let mut paths = PathContext::new(place.ws_path, &cwd);
            if place.overlay.is_some() {
                paths.add_root(Path::new(cordon_sandbox::SANDBOX_WORKSPACE), &cwd_dir);
            }
            // 127: the program was not found (typed by the run path, not read from a message).
            let not_found = ran.exit_code == 127 && ran.result.status == RunStatus::Error;
            let mut result = stage_result(planned, ran.result, ran.ready, not_found);
            result.command = command;
            let tools = Tool::identify_all(&stage.run, &cwd_dir);
            let (findings, omitted) = findings::collect_at_most(
                crate::baseline::MAX_COMPARED,
                &tools,
                &result.stdout,
                &result.stderr,
                &paths,
            )
            .into_parts();
            if stage.fail_on_warnings {
                fail_on_warnings(&mut result, &findings, omitted);
            }
            // What each finding points at, to tell it from the base's after line shifts:
            // lint stages only (the others are not compared).
            let texts = if stage.category == StageCategory::Lint {
                crate::baseline::line_texts(place.tree, &findings)
            } else {
                Vec::new()
            };
            Ok(Ran {
                result,
                found: Found {
                    findings,
                    omitted,
                    texts,
                },
                paths,
            })
        }
        Err(e) => {
            let hint = e
                .hint()
                .map(|h| format!(" (hint: {h})"))
                .unwrap_or_default();
            let reason = match e.class() {
                RunErrorClass::Unenforceable => format!("the sandbox cannot be set up: {e}{hint}"),
                RunErrorClass::Usage | RunErrorClass::Infra => format!("{e}{hint}"),
            };
            Err(Box::new(error_result(planned, place.root, reason)))
        }
    }
}

/// A stage that passed although its tool reported warnings (or errors) fails as its category
/// fails (see [`StageConfig::fail_on_warnings`]); its reason until its findings are judged
/// (which name the first new one, or excuse the base's) is how many there were.
fn fail_on_warnings(result: &mut StageResult, findings: &[Finding], omitted: u64) {
    if result.status != StageStatus::Pass {
        return;
    }
    let warned = findings
        .iter()
        .filter(|f| matches!(f.severity, Severity::Error | Severity::Warning))
        .count() as u64
        // Those past the bound were not read: they may be warnings.
        + if findings.is_empty() { 0 } else { omitted };
    if warned == 0 {
        return;
    }
    result.status = StageStatus::Fail;
    result.failure = Some(StageFailure {
        category: author_category(result.category),
        reason: format!(
            "exited with code 0 but reported {warned} warning{} (the stage fails on warnings)",
            if warned == 1 { "" } else { "s" }
        ),
    });
}

/// A stage ready to run: the request, its readiness probe, and its working directory (as
/// the sandbox sees it, and as the host reads it).
struct StageRun {
    run: RunRequest,
    probe: Probe,
    cwd: PathBuf,
    cwd_dir: Dir,
}

/// The run request of a stage: its sandbox, its working directory inside the workspace, the
/// workspace's mount, its environment, bounds and redaction, its readiness probe. `Err`: why
/// the stage cannot run.
fn stage_run(
    planned: &PlannedStage,
    place: &StagePlace<'_>,
    redact: &RedactConfig,
    request: &VerifyRequest,
) -> Result<StageRun, String> {
    let (mut options, caches) = stage_sandbox(&planned.stage, place.cache);
    // A stage's own limits (from the repository's plan) never exceed the caller's.
    let at_most = |own: Option<u64>, most: Option<u64>| match (own, most) {
        (Some(own), Some(most)) => Some(own.min(most)),
        (own, None) => own,
        (None, most) => most,
    };
    options.limits.memory_bytes = at_most(options.limits.memory_bytes, request.max_memory);
    options.limits.pids = at_most(options.limits.pids, request.max_pids);
    options.allow_degraded = request.allow_degraded.clone();
    let stage = &planned.stage;
    let resolved = resolved_cwd(planned, place)?;
    let ws_path = match place.overlay {
        Some(parts) => parts.mount_point.clone(),
        None => place
            .ws_path
            .canonicalize()
            .unwrap_or_else(|_| place.ws_path.to_owned()),
    };
    let cwd = ws_path.join(&resolved);
    let cwd_dir = place.tree.join(&resolved);
    let mut run = RunRequest::new(&stage.run, &cwd);
    let overlay = overlay_mount(place, &mut options, caches)?;
    run.workspace = Some(WorkspaceMount {
        root: ws_path,
        git_common_dir: Some(place.common_dir.to_owned()),
        read_only: false,
        overlay,
    });
    run.isolation = Isolation::Sandboxed(options);
    run.env = stage
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain(request.env.iter().cloned())
        .collect();
    run.secrets = stage.secrets.clone();
    run.secret_values = request.secret_values.clone();
    run.bounds = Bounds {
        timeout: stage.timeout.unwrap_or(DEFAULT_STAGE_TIMEOUT),
        output_limit: request.output_limit,
        ..Bounds::default()
    };
    run.stdin = StdinMode::Null;
    run.redact = RedactRules {
        patterns: redact.patterns.clone(),
        allow: redact.allow.clone(),
    };
    let probe = match &stage.ready {
        Some(ReadyConfig::Stdout(re)) => match regex::bytes::Regex::new(re) {
            Ok(re) => Probe::Output(OutputMatches::new(re)),
            Err(e) => return Err(format!("bad ready regex: {e}")),
        },
        Some(ReadyConfig::Tcp(port)) => Probe::Tcp(TcpListening::new(*port)),
        None => Probe::None,
    };
    Ok(StageRun {
        run,
        probe,
        cwd,
        cwd_dir,
    })
}

/// The stage's working directory relative to the workspace's top, symlinks resolved: it
/// must exist, and (being the writable root) stay inside the workspace whatever symlinks the
/// tree holds.
fn resolved_cwd(planned: &PlannedStage, place: &StagePlace<'_>) -> Result<PathBuf, String> {
    let cwd = stage_cwd(planned, place.root);
    let rel = cwd.strip_prefix(place.ws_path).unwrap_or(Path::new(""));
    let cwd_dir = place.tree.join(rel);
    if !cwd_dir.is_dir() {
        return Err(format!(
            "the stage's cwd {} does not exist in the workspace",
            cwd.display()
        ));
    }
    cwd_dir.resolved().ok_or_else(|| {
        format!(
            "the stage's cwd {} leads out of the workspace (a symlink); refused",
            cwd.display()
        )
    })
}

/// The overlay the stage's sandbox mounts over an overlay workspace (`None` for a
/// worktree), with the build caches' `caches`. A parallel stage gets layers of its own
/// (see [`privatise`]) and sees the host caches read-only; it cannot run in a worktree.
fn overlay_mount(
    place: &StagePlace<'_>,
    options: &mut SandboxOptions,
    caches: Vec<TreeCache>,
) -> Result<Option<OverlayMount>, String> {
    let mut overlay_mount = place.overlay.map(|parts| OverlayMount {
        lowers: parts.lowers.clone(),
        layer: parts.layer.clone(),
        git_dir: Some(parts.git_dir.clone()),
        dot_git: Some(parts.dot_git.clone()),
        caches,
    });
    match (place.private, &mut overlay_mount) {
        (Some(private), Some(mount)) => {
            // Host caches stay read-only in a parallel stage, whatever its configuration
            // says (checked when it was loaded): their private layer is shared.
            for cache in &mut options.caches {
                cache.writable = false;
            }
            privatise(private, mount)
                .map_err(|e| format!("cannot make the parallel stage's layers: {e}"))?;
        }
        (Some(_), None) => {
            return Err(
                "a parallel stage needs an overlay workspace (its own layers); this one is a \
                 worktree"
                    .into(),
            );
        }
        (None, _) => {}
    }
    Ok(overlay_mount)
}

/// Maps a run result to a stage result with the stage's failure category.
/// The failure category of a stage of `category` whose author must act.
fn author_category(category: StageCategory) -> StageFailureCategory {
    match category {
        StageCategory::Setup => StageFailureCategory::Setup,
        StageCategory::Lint => StageFailureCategory::Lint,
        StageCategory::Typecheck => StageFailureCategory::Typecheck,
        StageCategory::Compile => StageFailureCategory::Compile,
        StageCategory::Test => StageFailureCategory::Test,
        StageCategory::Build => StageFailureCategory::Build,
        StageCategory::Smoke => StageFailureCategory::Smoke,
        StageCategory::Migrate => StageFailureCategory::Migrate,
    }
}

fn stage_result(
    planned: &PlannedStage,
    run: RunResult,
    ready: bool,
    not_found: bool,
) -> StageResult {
    let stage = &planned.stage;
    let author_category = author_category(stage.category);
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
        // The program could not be started because it is not there (127): say so in verify's
        // terms (the sandbox's own hint names `cordon run --ro`, which verify does not have).
        RunStatus::Error if not_found => (
            StageStatus::Error,
            Some(StageFailure {
                category: StageFailureCategory::Infra,
                reason: format!(
                    "{} is not installed on this host, or not where the sandbox can see it (the toolchains, /usr and the workspace)",
                    stage
                        .run
                        .first()
                        .map(String::as_str)
                        .unwrap_or("the program")
                ),
            }),
        ),
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
    let isolation = run.sandbox.tier.map(|tier| cordon_types::Isolation {
        tier,
        not_enforced: run.sandbox.not_enforced.clone(),
    });
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
        findings: Vec::new(),
        findings_omitted: 0,
        network: run.network,
        isolation,
        baseline: None,
    }
}

#[cfg(test)]
mod tests {
    use cordon_proxy::Ecosystem;
    use cordon_types::StageCategory;

    use super::stage_ecosystems;

    #[test]
    fn a_setup_stage_allows_its_own_ecosystems_registries() {
        let of = |run: &[&str]| {
            stage_ecosystems(&crate::detect::stage(
                "setup",
                StageCategory::Setup,
                run,
                true,
            ))
        };
        assert_eq!(of(&["cargo", "fetch"]), [Ecosystem::Cargo]);
        assert_eq!(of(&["/usr/bin/npm", "ci"]), [Ecosystem::Npm]);
        assert_eq!(of(&["pnpm", "install"]), [Ecosystem::Npm]);
        assert_eq!(
            of(&["python3", "-m", "pip", "install", "."]),
            [Ecosystem::Pip]
        );
        assert_eq!(of(&["go", "mod", "download"]), [Ecosystem::Go]);
        assert_eq!(of(&["sh", "-c", "make deps"]), Ecosystem::ALL);
    }
}

//! The verification pipeline: workspace, patch, plan, stages in the sandbox, report, gate.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use cordon_exec::{CancelHandle, Stream};
use cordon_types::{
    Overall, PlanInfo, Promotion, ReportFailure, RunReport, RunReportTag, StageFailureCategory,
    StageResult, StageStatus, WorkspaceInfo,
};
use cordon_workspace::Workspaces;

use crate::base_run::BaselineContext;
use crate::baseline::BaselineStore;
use crate::cache::{CacheInput, CachePlan};
use crate::checkout::{self, Changes, Uncommitted};
use crate::config::StageConfig;
use crate::error::VerifyError;
use crate::plan::{self, Plan, PlannedSkip};
use crate::stage::{StageHooks, StagePlace, run_stage, skipped};
use crate::timeline::Timeline;
use crate::tree::Dir;
use cordon_runner::Recorder;

/// What to verify.
#[derive(Debug, Clone, Default)]
pub struct VerifyRequest {
    /// The source repository (any directory of its checkout).
    pub repo: PathBuf,
    /// The ref to verify (`HEAD` by default).
    pub rev: String,
    /// The base for changed files; default: the merge-base with the default branch.
    pub base: Option<String>,
    /// A patch to apply on top of the ref, all or nothing.
    pub patch: Option<Vec<u8>>,
    /// A `cordon.toml` to use instead of the repository's.
    pub config: Option<PathBuf>,
    /// Run only these stages.
    pub only: Option<Vec<String>>,
    /// Run every stage even after a required one failed.
    pub keep_going: bool,
    /// Bytes of each stream kept per stage (head and tail together).
    pub output_limit: usize,
    /// The project inside the repository (relative path) whose `cordon.toml` or files
    /// define the plan and where stages run; default the repository root.
    pub project: Option<PathBuf>,
    /// The id to give the report (e.g. the run history's); generated when `None`.
    pub run_id: Option<String>,
    /// Use the ref's own `cordon.toml` even when it differs from the base's. Without it the
    /// base's plan judges the ref (a candidate must not choose its own checks).
    pub trust_ref_plan: bool,
    /// Variables set for every stage (after the stage's own `env`: these win).
    pub env: Vec<(String, String)>,
    /// Secret values the caller holds (the job service's secrets file): a stage's `secrets`
    /// names are looked up here before cordon's environment, and every value is redacted
    /// from every stage's output.
    pub secret_values: Vec<(String, String)>,
    /// Whether stages see a trusted build cache, and whether a trusted build makes one (see
    /// [`crate::CacheMode`]).
    pub cache: crate::cache::CacheMode,
    /// The most memory (bytes) any stage's process tree gets: the limit of a stage that sets
    /// none, and of one that asks for more (the job service's per-project limit).
    pub max_memory: Option<u64>,
    /// The most processes and threads any stage gets, likewise.
    pub max_pids: Option<u64>,
    /// Protections the caller accepts weaker where the host cannot enforce them (the job
    /// service's `allow_degraded`); a stage's result says what was enforced.
    pub allow_degraded: Vec<cordon_sandbox::Degradation>,
    /// The most parallel stages running at once (`None`: [`default_parallel_stages`]; 1 runs
    /// a group's stages one after another, still each on layers of its own).
    pub max_parallel_stages: Option<usize>,
    /// What to do with the checkout's uncommitted changes (default: not looked at).
    pub uncommitted: Uncommitted,
}

/// Live progress of a verification, for a terminal view or a transcript.
pub trait VerifyObserver {
    /// The plan is known; stages are about to run.
    fn planned(&mut self, plan: &Plan) {
        let _ = plan;
    }
    /// A stage started.
    fn stage_started(&mut self, index: usize, stage: &StageConfig) {
        let _ = (index, stage);
    }
    /// Output of the running stage (already filtered).
    fn output(&mut self, stage: &str, stream: Stream, bytes: &[u8]) {
        let _ = (stage, stream, bytes);
    }
    /// A stage ended (or was skipped).
    fn stage_finished(&mut self, index: usize, result: &StageResult) {
        let _ = (index, result);
    }
}

/// An observer that ignores everything.
pub struct Quiet;
impl VerifyObserver for Quiet {}

/// What a verification reports to besides its result.
pub struct VerifyHooks<'a, 'o> {
    /// Live progress (a terminal view).
    pub observer: &'a mut (dyn VerifyObserver + 'o),
    /// Ends the verification early (Ctrl-C): the running stage's tree dies, the rest is
    /// skipped, the report says so.
    pub cancel: Option<&'a CancelHandle>,
    /// The run history record: each stage's transcript and result go there.
    pub recorder: Option<&'a Recorder>,
}

/// Everything a finished verification produced.
#[derive(Debug)]
pub struct Verified {
    /// The report.
    pub report: RunReport,
    /// The plan that ran.
    pub plan: Plan,
    /// What went wrong on the side without changing the verdict (a stage not recorded).
    pub warnings: Vec<String>,
}

/// Plans a verification without running any stage (`--explain`): creates the workspace,
/// applies the patch, computes the changed files and the plan, removes the workspace.
pub fn explain(request: &VerifyRequest) -> Result<(Plan, Vec<String>), VerifyError> {
    let prepared = prepare(request, Timeline::new())?;
    let changed = prepared.changed.clone();
    Ok((prepared.plan, changed))
}

struct Prepared {
    workspaces: Workspaces,
    workspace: cordon_workspace::TransientWorkspace,
    repo: PathBuf,
    commit: String,
    common_dir: PathBuf,
    project_root: PathBuf,
    /// The workspace's files as read on the host (an overlay's layers, or the worktree).
    tree: Dir,
    /// An overlay workspace's layers, mounted by each stage's sandbox.
    overlay: Option<cordon_workspace::OverlayParts>,
    /// The build caches the stages see.
    cache: CachePlan,
    plan: Plan,
    changed: Vec<String>,
    /// What lint stages' findings are compared with.
    baseline: BaselineContext,
    /// Where the time goes.
    timeline: Timeline,
    /// What is verified.
    subject: cordon_types::Subject,
    /// The digest of the patch applied (the checkout's changes or `--patch`).
    patch_digest: Option<String>,
}

/// A refused patch; the checkout's own changes are refused as what they are, with what to do.
fn refused(e: cordon_workspace::WorkspaceError, own_changes: bool) -> VerifyError {
    if own_changes {
        VerifyError::Usage(format!(
            "the checkout's uncommitted changes cannot be verified as a patch ({e}); commit \
             them, add what should not be verified to .gitignore, or pass --committed to verify \
             HEAD alone"
        ))
    } else {
        VerifyError::PatchRefused(e)
    }
}

fn prepare(request: &VerifyRequest, timeline: Timeline) -> Result<Prepared, VerifyError> {
    // Python projects ask `python3` what it has: asked now, answered during the git work.
    let python = if looks_python(&request.repo, request.project.as_deref()) {
        crate::detect::PythonProbe::start()
    } else {
        crate::detect::PythonProbe::default()
    };
    let resolving = timeline.span("resolve", None);
    let (repo, git, checkout) =
        open_repo(&request.repo, request.uncommitted != Uncommitted::Ignored)?;
    let rev = if request.rev.is_empty() {
        "HEAD"
    } else {
        &request.rev
    };
    if request.uncommitted == Uncommitted::Included && (rev != "HEAD" || request.patch.is_some()) {
        return Err(VerifyError::Usage(
            "the checkout's uncommitted changes are verified on HEAD alone, without a patch".into(),
        ));
    }
    let (commit, base) = resolve_commits(&git, checkout.as_ref(), rev, request.base.as_deref())?;
    let project = relative_project(request.project.as_deref())?;
    resolving.end();
    let included = request.uncommitted == Uncommitted::Included;
    let mut snapshot = match &checkout {
        Some(checkout) => Some(timeline.time("snapshot", || {
            checkout::snapshot(checkout, &commit, included)
        })?),
        None => None,
    };
    // What the workspace gets on top of the commit: the checkout's changes (when they are
    // verified), else `--patch`.
    let changes = match snapshot.as_mut() {
        Some(s) if included => std::mem::take(&mut s.changes),
        _ => request.patch.clone().map_or(Changes::None, Changes::Patch),
    };
    let patch_digest = changes.digest();
    let subject = checkout::subject(
        rev,
        &commit,
        patch_digest.as_deref(),
        request.uncommitted,
        snapshot.as_ref(),
    );
    let creating = timeline.span("workspace", None);
    let workspaces = Workspaces::from_env()
        .map_err(|e| VerifyError::infra("cannot open the workspace store", e))?;
    let _ = workspaces.reconcile_on_start();
    let workspace = workspaces
        .create_transient(&repo, commit.as_str())
        .map_err(|e| VerifyError::infra("cannot create the workspace", e))?;
    let overlay = workspaces
        .overlay_parts(workspace.record())
        .map_err(|e| VerifyError::infra("cannot read the workspace's layers", e))?;
    // The files as the host reads them: an overlay's layers (never mounted on the host), or
    // the worktree's directory; symlinks followed only inside.
    let tree = match &overlay {
        Some(parts) => Dir::tree(
            parts.layers(),
            Some(PathBuf::from(cordon_sandbox::SANDBOX_WORKSPACE)),
        ),
        None => Dir::host(workspace.path()),
    };
    creating.end();
    let planning = timeline.span("plan", None);
    let project = project_in_tree(&tree, &project, rev)?;
    let project_dir = tree.join(&project);
    let project_root = workspace.path().join(&project);
    let host = crate::detect::Installed::from_host_probed(&python);
    let declared = trusted_plan(
        &git,
        &commit,
        base.as_ref(),
        (&project, &project_dir),
        request,
        &host,
    )?;
    // Only a cache needs the toolchains' versions (an overlay workspace, caching on): asked
    // while the patch applies.
    let toolchain = if overlay.is_some() && request.cache != crate::cache::CacheMode::Off {
        crate::cache::ToolchainProbe::start(&declared.stages, &python)
    } else {
        crate::cache::ToolchainProbe::unused()
    };
    planning.end();
    let patched = match &changes {
        Changes::Patch(bytes) => timeline.time("patch", || {
            workspaces
                .apply(workspace.id(), bytes)
                .map_err(|e| refused(e, included))
                .map(|report| report.files)
        })?,
        Changes::Files(files) => timeline.time("patch", || {
            workspaces
                .write_files(workspace.id(), files)
                .map_err(|e| refused(e, included))
                .map(|report| report.files)
        })?,
        Changes::None => Vec::new(),
    };
    let record = workspace.record().clone();
    let changed = changed_files(&git, &commit, base.as_ref(), changes.is_some(), patched)?;
    let in_project = changes_in_project(&changed, &project);
    let declared_stages = declared.stages.clone();
    let mut plan = plan::build(declared, request.only.as_deref(), &in_project)?;
    let deciding = timeline.span("cache", None);
    let cache = CachePlan::decide(&CacheInput {
        mode: request.cache,
        workspaces: &workspaces,
        common_dir: &record.git_common_dir,
        commit: &commit,
        base: base.as_ref(),
        patched: changes.is_some(),
        overlay: overlay.as_ref(),
        tree: &tree,
        project: &project,
        stages: &declared_stages,
        scratch: &workspaces.scratch_dir(&record.id),
        run_id: request.run_id.as_deref(),
        toolchain,
    });
    // The changed files are unknown without a base: then no declared setup stage is skipped.
    let known = base.is_some().then_some(changed.as_slice());
    skip_cached_setup(&mut plan, &cache, &tree, &project, known, &changed);
    serialize_parallel_stages(&mut plan, overlay.is_some(), cache.trusted_build);
    plan.cache = cache.lines();
    plan.cache_reasons = cache.reasons.clone();
    plan.cache_reasons.extend(cache.seed_lockfile(&changed));
    plan.subject = Some(subject.clone());
    deciding.end();
    let baseline = BaselineContext {
        pristine: !changes.is_some() && base.as_ref() == Some(&commit),
        store: cache.toolchain.as_deref().map(|toolchain| {
            BaselineStore::new(workspaces.home(), &record.git_common_dir, toolchain)
        }),
        base,
        repo: record.repo.clone(),
        workspaces: workspaces.clone(),
        project: project.clone(),
    };
    Ok(Prepared {
        baseline,
        timeline,
        subject,
        patch_digest,
        cache,
        workspaces,
        repo: record.repo.clone(),
        commit: commit.as_str().to_owned(),
        common_dir: record.git_common_dir.clone(),
        project_root,
        tree,
        overlay,
        workspace,
        plan,
        changed,
    })
}

/// Whether the checkout at `repo` (its `project`) looks like a Python project, or its
/// `cordon.toml` runs Python: a guess on the checkout's files, made before the commit's are
/// at hand, only to start asking `python3` early (detection asks anyway when it is wrong).
fn looks_python(repo: &Path, project: Option<&Path>) -> bool {
    let dir = project.map_or_else(|| repo.to_owned(), |p| repo.join(p));
    let marker = [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "pytest.ini",
        "tox.ini",
    ]
    .iter()
    .any(|m| dir.join(m).exists());
    let test_files = ["tests", "test"].iter().any(|d| {
        std::fs::read_dir(dir.join(d)).is_ok_and(|entries| {
            entries
                .take(1000)
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".py"))
        })
    });
    marker
        || test_files
        || std::fs::read_to_string(dir.join("cordon.toml"))
            .is_ok_and(|text| text.contains("python") || text.contains("pytest"))
}

/// The repository to verify (`--repo`): an existing directory of a git checkout, made
/// absolute.
fn open_repo(
    repo: &Path,
    checkout: bool,
) -> Result<(PathBuf, cordon_git::Repo, Option<cordon_git::Checkout>), VerifyError> {
    let repo = std::path::absolute(repo)
        .map_err(|e| VerifyError::Usage(format!("--repo {}: {e}", repo.display())))?;
    if !repo.is_dir() {
        return Err(VerifyError::Usage(format!(
            "--repo {} is not a directory",
            repo.display()
        )));
    }
    // The checkout, when its changes matter, tells the repository too (one git process).
    let checkout = if checkout {
        cordon_git::Checkout::open(&repo).ok().flatten()
    } else {
        None
    };
    let git = match &checkout {
        Some(checkout) => checkout.repo(),
        None => cordon_git::Repo::open(&repo).map_err(|e| {
            VerifyError::Usage(format!("{} is not a git repository: {e}", repo.display()))
        })?,
    };
    Ok((repo, git, checkout))
}

/// The commit to verify (`rev`, as `checkout` sees it when there is one) and the base its
/// changes are counted from: `--base`, else the merge-base with the default branch (`None`
/// when there is none).
fn resolve_commits(
    git: &cordon_git::Repo,
    checkout: Option<&cordon_git::Checkout>,
    rev: &str,
    base: Option<&str>,
) -> Result<(cordon_git::CommitId, Option<cordon_git::CommitId>), VerifyError> {
    // In a checkout, `HEAD` is the checkout's own (a linked worktree's).
    let commit = match checkout {
        Some(checkout) => checkout.resolve_commit(rev),
        None => git.resolve_commit(rev),
    }
    .map_err(|e| VerifyError::Usage(format!("cannot resolve --ref {rev}: {e}")))?;
    let base = match base {
        Some(base) => Some(
            git.resolve_commit(base)
                .map_err(|e| VerifyError::Usage(format!("cannot resolve --base {base}: {e}")))?,
        ),
        None => default_base(git, &commit),
    };
    Ok((commit, base))
}

/// `--project` as given: a relative path that stays inside the repository (default: its
/// root, the empty path).
fn relative_project(project: Option<&Path>) -> Result<PathBuf, VerifyError> {
    let project = project.map(Path::to_path_buf).unwrap_or_default();
    if project.is_absolute()
        || project
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(VerifyError::Usage(format!(
            "--project {} must be a relative path inside the repository",
            project.display()
        )));
    }
    Ok(project)
}

/// The project's directory in the workspace's files at `rev`, with symlinks resolved: it
/// must exist, and a symlink committed at the ref must not lead it out of the workspace.
fn project_in_tree(tree: &Dir, project: &Path, rev: &str) -> Result<PathBuf, VerifyError> {
    let project_dir = tree.join(project);
    if !project_dir.is_dir() {
        return Err(VerifyError::Usage(format!(
            "--project {}: no such directory at {rev}",
            project.display()
        )));
    }
    project_dir.resolved().ok_or_else(|| {
        VerifyError::Usage(format!(
            "--project {}: leads out of the workspace (a symlink)",
            project.display()
        ))
    })
}

/// The files the verification changes, sorted, relative to the repository: what the commits
/// since `base` changed plus what the patch changed (`patched`). Empty without a base, and
/// when nothing changes (the base is the commit and there is no patch).
///
/// The workspace is fresh (no program has run in it): git's history and the patch say what
/// changed, without reading its files.
fn changed_files(
    git: &cordon_git::Repo,
    commit: &cordon_git::CommitId,
    base: Option<&cordon_git::CommitId>,
    has_patch: bool,
    patched: Vec<cordon_git::ChangedFile>,
) -> Result<Vec<String>, VerifyError> {
    let pristine = !has_patch && base == Some(commit);
    if pristine {
        return Ok(Vec::new());
    }
    let mut files: Vec<cordon_git::ChangedFile> = match base {
        Some(base) if base != commit => git
            .diff_commits(base, commit)
            .map_err(|e| VerifyError::infra("cannot list the changed files", e))?,
        _ => Vec::new(),
    };
    files.extend(patched);
    let mut names: Vec<String> = files
        .iter()
        .flat_map(|f| {
            std::iter::once(f.path.to_string_lossy().into_owned())
                .chain(f.old_path.iter().map(|p| p.to_string_lossy().into_owned()))
        })
        .filter(|name| !name.is_empty())
        .collect();
    names.sort();
    names.dedup();
    Ok(if base.is_none() { Vec::new() } else { names })
}

/// The changes targeting sees: the project's, relative to the project. A change outside the
/// project may affect it in ways targeting cannot see: then none (nothing is narrowed).
fn changes_in_project(changed: &[String], project: &Path) -> Vec<String> {
    if project.as_os_str().is_empty() {
        return changed.to_vec();
    }
    let inside: Vec<String> = changed
        .iter()
        .filter_map(|f| {
            Path::new(f)
                .strip_prefix(project)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .collect();
    if inside.len() == changed.len() {
        inside
    } else {
        Vec::new()
    }
}

/// Skips the setup stages whose work the build cache already holds: a Node package
/// manager's install, declared setup stages with `outputs` and `inputs` (a Python `.venv`,
/// say; only when the changed files are `known`), `cargo fetch`. A stage skipped for
/// another reason keeps that reason.
fn skip_cached_setup(
    plan: &mut Plan,
    cache: &CachePlan,
    tree: &Dir,
    project: &Path,
    known: Option<&[String]>,
    changed: &[String],
) {
    let setup = |p: &plan::PlannedStage| {
        p.skip.is_none() && p.stage.category == cordon_types::StageCategory::Setup
    };
    if let Some(why) = cache.skips_install(tree, project) {
        for p in &mut plan.stages {
            let installs = p.stage.name.ends_with("-install")
                && p.stage.run.first().is_some_and(|r| {
                    matches!(r.rsplit('/').next(), Some("npm" | "pnpm" | "yarn" | "bun"))
                });
            if installs && setup(p) {
                p.skip = Some(PlannedSkip::Cached(why.clone()));
            }
        }
    }
    for p in &mut plan.stages {
        if setup(p)
            && let Some(why) = cache.skips_declared(&p.stage, project, known)
        {
            p.skip = Some(PlannedSkip::Cached(why));
        }
    }
    if let Some(why) = cache.skips_fetch(changed) {
        for p in &mut plan.stages {
            let fetches = p.stage.run.len() == 2
                && p.stage.run[0].rsplit('/').next() == Some("cargo")
                && p.stage.run[1] == "fetch";
            if fetches && setup(p) {
                p.skip = Some(PlannedSkip::Cached(why.clone()));
            }
        }
    }
}

/// Runs the plan's parallel stages one after another where they cannot run side by side,
/// saying why in the plan. Parallel stages need layers of their own over the shared ones:
/// a worktree (no `overlay`) has none, and a trusted build's writes become the cache, so its
/// stages all write the shared layers, one after another.
fn serialize_parallel_stages(plan: &mut Plan, overlay: bool, trusted_build: bool) {
    let why = if !overlay {
        "the workspace is a worktree, without layers of its own"
    } else if trusted_build {
        "this is a trusted build: what every stage writes becomes the build cache"
    } else {
        return;
    };
    let names: Vec<&str> = plan
        .stages
        .iter()
        .filter(|p| p.stage.parallel)
        .map(|p| p.stage.name.as_str())
        .collect();
    if !names.is_empty() {
        plan.reasons.push(format!(
            "parallel stages run one after another ({}): {why}",
            names.join(", ")
        ));
    }
    for p in &mut plan.stages {
        p.stage.parallel = false;
    }
}

/// The largest `cordon.toml` cordon reads out of git for the base's plan.
const MAX_PLAN_BYTES: usize = 1 << 20;

/// The plan that judges `commit`: `--config`; else the ref's `cordon.toml` when it is the
/// base's (or there is no base, or `--trust-ref-plan`); else the base's. A ref that adds a
/// `cordon.toml` its base lacks is refused without `--trust-ref-plan`: detection would judge
/// it by files it controls just the same.
fn trusted_plan(
    git: &cordon_git::Repo,
    commit: &cordon_git::CommitId,
    base: Option<&cordon_git::CommitId>,
    (project, project_root): (&Path, &Dir),
    request: &VerifyRequest,
    host: &crate::detect::Installed,
) -> Result<plan::Declared, VerifyError> {
    if request.config.is_some() {
        return plan::declared_on(project_root, request.config.as_deref(), host);
    }
    let from_ref = |reason: Option<String>| {
        let mut declared = plan::declared_on(project_root, None, host)?;
        declared.reasons.extend(reason);
        Ok(declared)
    };
    let Some(base) = base.filter(|b| *b != commit) else {
        return from_ref(
            base.is_none()
                .then(|| "no base to compare the plan with: the ref's plan is used".to_owned()),
        );
    };
    let path = project
        .join("cordon.toml")
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/");
    let lookup = |at: &cordon_git::CommitId| {
        git.blob_id_at(at, &path)
            .map_err(|e| VerifyError::infra("cannot read the plan from git", e))
    };
    let (at_ref, at_base) = (lookup(commit)?, lookup(base)?);
    let short = &base.as_str()[..12];
    if at_ref == at_base {
        return from_ref(
            at_ref
                .is_some()
                .then(|| format!("{path} is the same at the base ({short})")),
        );
    }
    if request.trust_ref_plan {
        return from_ref(Some(format!(
            "the ref changes {path}; its plan is used because of --trust-ref-plan"
        )));
    }
    let Some(base_blob) = at_base else {
        return Err(VerifyError::Usage(format!(
            "the ref adds {path}, which its base ({short}) does not have: a candidate must not \
             choose its own checks. Pass --trust-ref-plan to use it, or --config FILE"
        )));
    };
    let bytes = git
        .read_blob(&base_blob)
        .map_err(|e| VerifyError::infra("cannot read the base's plan from git", e))?;
    if bytes.len() > MAX_PLAN_BYTES {
        return Err(VerifyError::Usage(format!(
            "{path} at the base ({short}) is larger than {MAX_PLAN_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| VerifyError::Usage(format!("{path} at the base ({short}) is not UTF-8")))?;
    let shown = std::path::PathBuf::from(format!("{short}:{path}"));
    let config = crate::config::Config::parse(&shown, &text)?;
    Ok(plan::Declared {
        cargo_packages: crate::target::cargo_packages(project_root),
        node_packages: crate::target::node_packages(project_root),
        source: cordon_types::PlanSource::CordonToml,
        origin: cordon_types::PlanOrigin::Base,
        stages: config.stages,
        reasons: vec![format!(
            "the ref changes {path}: the base's ({short}) plan is used; pass --trust-ref-plan \
             to use the ref's"
        )],
        redact: config.redact,
        missing: Vec::new(),
    })
}

/// The merge-base of `commit` with the default branch (`origin/HEAD`, `main`, `master`, the
/// first that exists), found with one git process when the commit is the branch's tip.
fn default_base(
    git: &cordon_git::Repo,
    commit: &cordon_git::CommitId,
) -> Option<cordon_git::CommitId> {
    let branch = git
        .first_ref(&[
            "refs/remotes/origin/HEAD",
            "refs/heads/main",
            "refs/heads/master",
        ])
        .ok()
        .flatten()?;
    if branch == *commit {
        return Some(branch);
    }
    git.merge_base(&branch, commit).ok().flatten()
}

/// Runs a verification to its verdict.
pub fn verify(
    request: &VerifyRequest,
    hooks: VerifyHooks<'_, '_>,
) -> Result<Verified, VerifyError> {
    let VerifyHooks {
        observer,
        cancel,
        recorder,
    } = hooks;
    let mut warnings = Vec::new();
    let started_at = SystemTime::now();
    let t0 = Instant::now();
    let prepared = prepare(request, Timeline::since(t0))?;
    observer.planned(&prepared.plan);
    let progress = Progress {
        observer,
        recorder,
        warnings: &mut warnings,
        blocked_by: None,
        results: vec![None; prepared.plan.stages.len()],
    };
    let results = run_stages(&prepared, request, cancel, progress);
    let (report, plan) = conclude(
        prepared,
        request,
        results,
        Timing {
            started_at,
            started: t0,
        },
        cancel,
        &mut warnings,
    );
    Ok(Verified {
        report,
        plan,
        warnings,
    })
}

/// Runs the plan's stages in order, a parallel group's stages side by side, and returns
/// every stage's result (skipped ones included), in the plan's order.
fn run_stages(
    prepared: &Prepared,
    request: &VerifyRequest,
    cancel: Option<&CancelHandle>,
    mut progress: Progress<'_, '_, '_>,
) -> Vec<StageResult> {
    let ws_path = prepared.workspace.path();
    let root = prepared.project_root.as_path();
    let stages = &prepared.plan.stages;
    let scratch = prepared
        .workspaces
        .scratch_dir(&prepared.workspace.record().id);
    let mut index = 0;
    while index < stages.len() {
        let group = if stages[index].stage.parallel {
            stages[index..]
                .iter()
                .take_while(|p| p.stage.parallel)
                .count()
        } else {
            1
        };
        let members = index..index + group;
        index += group;
        if !stages[members.start].stage.parallel {
            let i = members.start;
            let result = match progress.skip_reason(&stages[i], cancel, request.keep_going) {
                Some(reason) => skipped(&stages[i], root, reason),
                None => {
                    progress.observer.stage_started(i, &stages[i].stage);
                    let _span = prepared.timeline.span("stage", Some(&stages[i].stage.name));
                    run_stage(
                        &stages[i],
                        stage_place(prepared, root, ws_path, None),
                        &prepared.plan.redact,
                        request,
                        StageHooks {
                            observer: &mut *progress.observer,
                            cancel,
                            recorder: progress.recorder,
                        },
                    )
                }
            };
            progress.finish(i, result);
            continue;
        }
        run_group(
            members,
            Group {
                prepared,
                root,
                ws_path,
                scratch: &scratch,
                request,
                cancel,
                recorder: progress.recorder,
            },
            &mut progress,
        );
    }
    progress
        .results
        .into_iter()
        .zip(stages)
        .map(|(result, planned)| {
            // Every stage ends with a result; a thread that died without one is an error.
            result.unwrap_or_else(|| {
                crate::stage::error_result(
                    planned,
                    root,
                    "the stage's thread ended without a result".into(),
                )
            })
        })
        .collect()
}

/// When a verification started (its report's duration runs until its workspace is gone).
struct Timing {
    started_at: SystemTime,
    started: Instant,
}

/// Turns the stages' results into the report, keeps a passing trusted build as the build
/// cache of its commit, and removes the workspace. What goes wrong on the side (the cache
/// not kept, the workspace left behind) is a warning: it must not cost the verdict.
fn conclude(
    prepared: Prepared,
    request: &VerifyRequest,
    results: Vec<StageResult>,
    timing: Timing,
    cancel: Option<&CancelHandle>,
    warnings: &mut Vec<String>,
) -> (RunReport, Plan) {
    let Prepared {
        workspaces: _workspaces,
        workspace,
        repo,
        commit,
        plan,
        changed,
        cache,
        timeline,
        subject,
        patch_digest,
        ..
    } = prepared;
    let ws_path = workspace.path().to_owned();
    let strategy = workspace.record().strategy.name().to_owned();
    let strategy_note = workspace.record().strategy_note.clone();
    let mut report = assemble(
        AssembleInput {
            repo,
            rev: if request.rev.is_empty() {
                "HEAD".into()
            } else {
                request.rev.clone()
            },
            commit,
            patch: patch_digest,
            ws_path,
            strategy,
            started_at: timing.started_at,
            duration: timing.started.elapsed(),
            changed,
            cancelled: cancel.is_some_and(|c| c.is_cancelled()),
            run_id: request.run_id.clone(),
        },
        &plan,
        results,
    );
    report.workspace.strategy_note = strategy_note;
    report.subject = Some(subject);
    // A trusted build whose gate passed becomes the cache of its commit: before its
    // workspace (where its layers are) goes.
    let mut promoted = None;
    if report.overall == Overall::Pass && !cancel.is_some_and(|c| c.is_cancelled()) {
        match timeline.time("promote", || cache.promote()) {
            Ok(key) => promoted = key,
            Err(e) => warnings.push(format!("the build cache was not kept: {e}")),
        }
    }
    report.cache = Some(cordon_types::CacheInfo {
        used: cache.used.as_ref().map(|(key, _)| key.clone()),
        used_commit: cache.used.as_ref().map(|(_, commit)| commit.clone()),
        promoted,
        places: plan.cache.clone(),
        reasons: plan.cache_reasons.clone(),
    });
    let cleanup = timeline.span("cleanup", None);
    drop(cache);
    // A workspace that cannot be removed must not cost the verdict: the report is kept, the
    // workspace left for `cordon gc`, and the caller told.
    if let Err(e) = workspace.remove() {
        warnings.push(format!(
            "the workspace could not be removed ({e}); `cordon gc` will retry"
        ));
    }
    cleanup.end();
    report.timeline = timeline.phases();
    report.duration_ms = timing.started.elapsed().as_millis() as u64;
    (report, plan)
}

/// Where a stage of `prepared` runs; `private`: a parallel stage's own directory.
fn stage_place<'a>(
    prepared: &'a Prepared,
    root: &'a Path,
    ws_path: &'a Path,
    private: Option<&'a Path>,
) -> StagePlace<'a> {
    StagePlace {
        root,
        ws_path,
        common_dir: &prepared.common_dir,
        tree: &prepared.tree,
        overlay: prepared.overlay.as_ref(),
        cache: &prepared.cache,
        private,
        baseline: Some(&prepared.baseline),
        timeline: &prepared.timeline,
    }
}

/// The most parallel stages running at once by default: the CPU count, at most 4 (each
/// stage's limits apply to it alone, so a group may use that many times a stage's memory).
pub fn default_parallel_stages() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
}

/// What a parallel group's stages share.
struct Group<'a> {
    prepared: &'a Prepared,
    root: &'a Path,
    ws_path: &'a Path,
    scratch: &'a Path,
    request: &'a VerifyRequest,
    cancel: Option<&'a CancelHandle>,
    recorder: Option<&'a Recorder>,
}

/// Runs the parallel stages `members`: at most `max_parallel_stages` at once, one thread each,
/// each on layers of its own (removed when it ends). Whether a stage runs is decided when it
/// would start: a required sibling that failed first, or a cancel, skips it. The observer and
/// the run history are written here, as the stages' progress comes back.
fn run_group(
    members: std::ops::Range<usize>,
    group: Group<'_>,
    progress: &mut Progress<'_, '_, '_>,
) {
    let stages = &group.prepared.plan.stages;
    let most = group
        .request
        .max_parallel_stages
        .unwrap_or_else(default_parallel_stages)
        .max(1);
    let mut pending: std::collections::VecDeque<usize> = members.collect();
    std::thread::scope(|scope| {
        // Bounded: a stage printing faster than the observer takes it waits, as it would
        // outside a group (its pipe fills), instead of queueing in cordon's memory.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Event>(64);
        let mut running = 0;
        loop {
            while running < most
                && let Some(i) = pending.pop_front()
            {
                let planned = &stages[i];
                if let Some(reason) =
                    progress.skip_reason(planned, group.cancel, group.request.keep_going)
                {
                    progress.finish(i, skipped(planned, group.root, reason));
                    continue;
                }
                let dir = group.scratch.join(format!("parallel-{i}"));
                progress.observer.stage_started(i, &planned.stage);
                running += 1;
                let tx = tx.clone();
                let Group {
                    prepared,
                    root,
                    ws_path,
                    request,
                    cancel,
                    recorder,
                    ..
                } = group;
                scope.spawn(move || {
                    let _span = prepared.timeline.span("stage", Some(&planned.stage.name));
                    let run = || match std::fs::create_dir_all(&dir) {
                        Ok(()) => run_stage(
                            planned,
                            stage_place(prepared, root, ws_path, Some(&dir)),
                            &prepared.plan.redact,
                            request,
                            StageHooks {
                                observer: &mut Forward {
                                    index: i,
                                    tx: tx.clone(),
                                },
                                cancel,
                                recorder,
                            },
                        ),
                        Err(e) => crate::stage::error_result(
                            planned,
                            root,
                            format!("cannot make the stage's layers in {}: {e}", dir.display()),
                        ),
                    };
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                        .unwrap_or_else(|_| {
                            crate::stage::error_result(
                                planned,
                                root,
                                "cordon failed while running the stage (a panic; see its \
                                 message above)"
                                    .into(),
                            )
                        });
                    let _ = tx.send(Event::Finished(i, Box::new(result)));
                });
            }
            if running == 0 {
                break;
            }
            // This thread holds a sender: `recv` ends only with a message.
            match rx.recv() {
                Ok(Event::Output(i, stream, bytes)) => {
                    progress
                        .observer
                        .output(&stages[i].stage.name, stream, &bytes)
                }
                Ok(Event::Finished(i, result)) => {
                    running -= 1;
                    progress.finish(i, *result);
                    // Its sandbox has ended: its layers go now, not with the group (a
                    // `target/` layer can be large, and later stages of the group may wait).
                    let dir = group.scratch.join(format!("parallel-{i}"));
                    if let Err(e) = cordon_workspace::remove_tree(&dir) {
                        progress.warnings.push(format!(
                            "a parallel stage's layers ({}) could not be removed: {e}; they go \
                             with the workspace",
                            dir.display()
                        ));
                    }
                }
                Err(_) => break,
            }
        }
    });
}

/// A parallel stage's progress, sent to the verification's thread.
enum Event {
    Output(usize, Stream, Vec<u8>),
    Finished(usize, Box<StageResult>),
}

/// The observer of a parallel stage: forwards its output to the verification's thread.
struct Forward {
    index: usize,
    tx: std::sync::mpsc::SyncSender<Event>,
}

impl VerifyObserver for Forward {
    fn output(&mut self, _stage: &str, stream: Stream, bytes: &[u8]) {
        let _ = self
            .tx
            .send(Event::Output(self.index, stream, bytes.to_vec()));
    }
}

/// What the stages have done so far: results, the first required stage that did not pass,
/// and where each result goes as it comes.
struct Progress<'a, 'o, 'w> {
    observer: &'a mut (dyn VerifyObserver + 'o),
    recorder: Option<&'a Recorder>,
    warnings: &'w mut Vec<String>,
    /// The first required stage, in the plan's order, that did not pass.
    blocked_by: Option<(usize, String)>,
    results: Vec<Option<StageResult>>,
}

impl Progress<'_, '_, '_> {
    /// Why `planned` does not run, if it does not.
    fn skip_reason(
        &self,
        planned: &plan::PlannedStage,
        cancel: Option<&CancelHandle>,
        keep_going: bool,
    ) -> Option<String> {
        if let Some(skip) = &planned.skip {
            Some(skip.reason())
        } else if cancel.is_some_and(|c| c.is_cancelled()) {
            Some("the verification was cancelled".into())
        } else if let (Some((_, failed)), false) = (&self.blocked_by, keep_going) {
            Some(format!(
                "required stage `{failed}` did not pass (fail fast; --keep-going runs all)"
            ))
        } else {
            None
        }
    }

    /// Stage `index` ended (or was skipped): fail fast from now on if it was required and
    /// did not pass; tell the observer; record it.
    fn finish(&mut self, index: usize, result: StageResult) {
        if result.required
            && self
                .blocked_by
                .as_ref()
                .is_none_or(|(first, _)| index < *first)
            && !matches!(result.status, StageStatus::Pass | StageStatus::Skipped)
        {
            self.blocked_by = Some((index, result.name.clone()));
        }
        self.observer.stage_finished(index, &result);
        if let Some(recorder) = self.recorder
            && let Err(e) = recorder.stage(index, &result)
        {
            self.warnings
                .push(format!("stage {} was not recorded: {e}", result.name));
        }
        self.results[index] = Some(result);
    }
}

struct AssembleInput {
    repo: PathBuf,
    rev: String,
    commit: String,
    /// The digest of the patch applied.
    patch: Option<String>,
    ws_path: PathBuf,
    strategy: String,
    started_at: SystemTime,
    duration: Duration,
    changed: Vec<String>,
    cancelled: bool,
    run_id: Option<String>,
}

/// The gate: fail-closed. A required stage blocks unless it passed, or targeting decided it
/// does not apply to this change.
fn assemble(input: AssembleInput, plan: &Plan, stages: Vec<StageResult>) -> RunReport {
    let isolation = stages.iter().find_map(|s| s.isolation.clone());
    let targeted_out = |s: &StageResult| {
        s.status == StageStatus::Skipped
            && plan.stages.iter().any(|p| {
                p.stage.name == s.name
                    && matches!(
                        p.skip,
                        Some(PlannedSkip::NotAffected(_) | PlannedSkip::Cached(_))
                    )
            })
    };
    let blocking: Vec<String> = stages
        .iter()
        .filter(|s| s.required && s.status != StageStatus::Pass && !targeted_out(s))
        .map(|s| s.name.clone())
        .collect();
    let first_failure = stages
        .iter()
        .find(|s| s.required && s.failure.is_some())
        .map(|s| {
            let f = s.failure.as_ref().expect("filtered");
            ReportFailure {
                category: f.category,
                stage: Some(s.name.clone()),
                reason: f.reason.clone(),
            }
        });
    // A required stage this host cannot run (its tool is missing) is the host's failure too.
    let infra = stages.iter().any(|s| {
        s.required
            && s.failure
                .as_ref()
                .is_some_and(|f| f.category == StageFailureCategory::Infra)
    }) || plan
        .stages
        .iter()
        .any(|p| p.stage.required && matches!(p.skip, Some(PlannedSkip::NotInstalled(_))));
    let overall = if input.cancelled || infra {
        Overall::Error
    } else if blocking.is_empty() {
        Overall::Pass
    } else {
        Overall::Fail
    };
    let failure = first_failure.or_else(|| {
        (!blocking.is_empty()).then(|| ReportFailure {
            category: StageFailureCategory::Infra,
            stage: blocking.first().cloned(),
            reason: if input.cancelled {
                "the verification was cancelled".into()
            } else {
                // e.g. "pytest is not installed on this host", "not selected by --stages".
                stages
                    .iter()
                    .find(|s| Some(&s.name) == blocking.first())
                    .and_then(|s| s.skip_reason.as_ref())
                    .map(|why| format!("a required stage did not run: {why}"))
                    .unwrap_or_else(|| "a required stage did not run".into())
            },
        })
    });
    RunReport {
        schema: RunReportTag,
        run_id: input.run_id.unwrap_or_else(new_run_id),
        overall,
        repo: input.repo.display().to_string(),
        r#ref: input.rev,
        commit: input.commit,
        subject: None,
        patch: input.patch,
        workspace: WorkspaceInfo {
            path: input.ws_path.display().to_string(),
            strategy: input.strategy,
            strategy_note: None,
            isolated: true,
        },
        started_at: humantime::format_rfc3339_millis(input.started_at).to_string(),
        duration_ms: input.duration.as_millis() as u64,
        promotion: Promotion {
            allowed: overall == Overall::Pass && blocking.is_empty(),
            blocking,
        },
        failure: if overall == Overall::Pass {
            None
        } else {
            failure
        },
        stages,
        changed_files: input.changed,
        plan: PlanInfo {
            source: plan.source,
            origin: plan.origin,
            targeted: plan.targeted,
            reasons: plan.reasons.clone(),
        },
        cache: None,
        isolation,
        timeline: Vec::new(),
    }
}

fn new_run_id() -> String {
    let mut bytes = [0u8; 6];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes.copy_from_slice(&nanos.to_le_bytes()[..6]);
    }
    format!(
        "v-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

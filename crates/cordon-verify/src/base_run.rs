//! The base commit's findings of a lint stage, for [`crate::baseline`]'s comparison: the
//! verification's own when nothing changed (recorded then for later candidates), a record
//! left by an earlier verification of the base, else the same stage run on the base commit in
//! a workspace of its own.
//!
//! A run on the base sees the base's files, the trusted build cache the candidate sees when
//! that is the base's (so clippy replays what it found there instead of checking again), and
//! the host's dependency caches read-only with what the candidate's setup stages added to
//! them; never the candidate's own layers. It happens only when it matters: a lint stage that
//! failed with findings, and no record of the base's.

use std::path::PathBuf;

use cordon_exec::CancelHandle;
use cordon_types::{BaselineSource, StageCategory, StageResult, StageStatus};
use cordon_workspace::Workspaces;

use crate::baseline::{BaseFindings, BaselineStore};
use crate::config::RedactConfig;
use crate::judge::Found;
use crate::pipeline::{Quiet, VerifyRequest};
use crate::plan::PlannedStage;
use crate::stage::{Ran, StageHooks, StagePlace, run_sandboxed};
use crate::tree::Dir;

/// What a verification compares its lint stages' findings with.
pub(crate) struct BaselineContext {
    /// The base commit (none known: no comparison).
    pub(crate) base: Option<cordon_git::CommitId>,
    /// Whether the verification is the base itself, unchanged: every finding is the base's.
    pub(crate) pristine: bool,
    /// The recorded baselines (with caching on: they are keyed by the toolchains' versions).
    pub(crate) store: Option<BaselineStore>,
    /// The repository, to make a workspace of the base.
    pub(crate) repo: PathBuf,
    /// The workspace store.
    pub(crate) workspaces: Workspaces,
    /// The project inside the repository (relative).
    pub(crate) project: PathBuf,
}

/// A stage's run, as its base run needs it.
pub(crate) struct Judged<'a> {
    pub(crate) redact: &'a RedactConfig,
    pub(crate) request: &'a VerifyRequest,
    pub(crate) cancel: Option<&'a CancelHandle>,
    pub(crate) result: &'a StageResult,
    pub(crate) found: &'a Found,
}

/// The base's findings of the lint stage `planned` (see the module documentation); `None`
/// when they are not compared: not a lint stage, no base, or nothing to compare (a stage that
/// passed, or failed without findings, and no record).
pub(crate) fn base_findings(
    planned: &PlannedStage,
    place: &StagePlace<'_>,
    judged: Judged<'_>,
) -> Option<BaseFindings> {
    if planned.stage.category != StageCategory::Lint {
        return None;
    }
    let ctx = place.baseline?;
    let base = ctx.base.as_ref()?;
    let fails = judged.result.status == StageStatus::Fail;
    if ctx.pristine {
        if let Some(store) = &ctx.store
            && matches!(judged.result.status, StageStatus::Pass | StageStatus::Fail)
        {
            let found = judged.found;
            // Not kept is not fatal: a later candidate runs the stage on the base instead.
            let _ = store.record(
                base.as_str(),
                &planned.stage,
                fails,
                &found.findings,
                &found.texts,
                found.omitted == 0,
            );
        }
        return Some(BaseFindings {
            commit: base.as_str().to_owned(),
            source: BaselineSource::Unchanged,
            findings: Vec::new(),
            fails,
            note: None,
        });
    }
    if let Some(record) = ctx
        .store
        .as_ref()
        .and_then(|s| s.load(base.as_str(), &planned.stage))
    {
        return Some(BaseFindings {
            commit: record.commit,
            source: BaselineSource::Recorded,
            fails: record.fails,
            findings: record
                .findings
                .into_iter()
                .zip(record.texts.into_iter().chain(std::iter::repeat(None)))
                .collect(),
            note: None,
        });
    }
    if !fails || judged.found.findings.is_empty() {
        return None;
    }
    let _span = place.timeline.span("baseline", Some(&planned.stage.name));
    Some(run_on_base(planned, place, ctx, base, &judged))
}

/// Runs `planned` on the base commit (see the module documentation).
fn run_on_base(
    planned: &PlannedStage,
    place: &StagePlace<'_>,
    ctx: &BaselineContext,
    base: &cordon_git::CommitId,
    judged: &Judged<'_>,
) -> BaseFindings {
    let unavailable = |why: String| BaseFindings::unavailable(base.as_str(), why);
    if place.overlay.is_none() {
        return unavailable(
            "the workspace is a git worktree: the stage cannot run on the base beside it".into(),
        );
    }
    let workspace = match ctx.workspaces.create_transient(&ctx.repo, base.as_str()) {
        Ok(ws) => ws,
        Err(e) => return unavailable(format!("cannot make a workspace of the base: {e}")),
    };
    let parts = match ctx.workspaces.overlay_parts(workspace.record()) {
        Ok(Some(parts)) => parts,
        Ok(None) => {
            let _ = workspace.remove();
            return unavailable("the base's workspace has no overlay layers".into());
        }
        Err(e) => {
            let _ = workspace.remove();
            return unavailable(format!("cannot read the base's workspace: {e}"));
        }
    };
    let tree = Dir::tree(
        parts.layers(),
        Some(PathBuf::from(cordon_sandbox::SANDBOX_WORKSPACE)),
    );
    let root = workspace.path().join(&ctx.project);
    let scratch = ctx.workspaces.scratch_dir(&workspace.record().id);
    let cache = place.cache.for_base_run(&scratch);
    let base_place = StagePlace {
        root: &root,
        ws_path: workspace.path(),
        common_dir: place.common_dir,
        tree: &tree,
        overlay: Some(&parts),
        cache: &cache,
        private: None,
        baseline: None,
        timeline: place.timeline,
    };
    let ran = run_sandboxed(
        planned,
        &base_place,
        judged.redact,
        judged.request,
        StageHooks {
            observer: &mut Quiet,
            cancel: judged.cancel,
            recorder: None,
        },
    );
    drop(cache);
    let _ = workspace.remove();
    match ran {
        Ok(Ran { result, found, .. })
            if matches!(result.status, StageStatus::Pass | StageStatus::Fail) =>
        {
            BaseFindings {
                commit: base.as_str().to_owned(),
                source: BaselineSource::Ran,
                fails: result.status == StageStatus::Fail,
                findings: found
                    .findings
                    .into_iter()
                    .zip(found.texts.into_iter().chain(std::iter::repeat(None)))
                    .collect(),
                note: None,
            }
        }
        Ok(Ran { result, .. }) => unavailable(format!(
            "the stage did not run to its end on the base ({}): {}",
            result.status.as_str(),
            result
                .failure
                .map(|f| f.reason)
                .unwrap_or_else(|| "no reason given".into())
        )),
        Err(result) => unavailable(format!(
            "the stage could not run on the base: {}",
            result
                .failure
                .map(|f| f.reason)
                .unwrap_or_else(|| "no reason given".into())
        )),
    }
}

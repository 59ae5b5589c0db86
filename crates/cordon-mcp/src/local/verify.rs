//! `verify`: `cordon_verify` as `cordon verify` calls it, recorded in the run history, its
//! stage events sent as progress notifications. The plan is judged against the operator's
//! bounds before anything runs (as the job service judges it against a project's policy), and
//! the whole verification is bounded by `--max-timeout`.

use std::sync::{Arc, Condvar, Mutex};

use cordon_store::{RunKind, RunState};
use cordon_types::{Overall, RunReport, StageResult, StageStatus};
use cordon_verify::{
    NetworkSetting, Plan, StageConfig, VerifyHooks, VerifyObserver, VerifyRequest,
};

use super::Local;
use crate::failure::ToolFailure;
use crate::inputs::VerifyInput;
use crate::server::{Call, ToolOutput};

/// The most bytes of output a verification's transcript keeps (as `cordon verify`'s default).
const TRANSCRIPT_LIMIT: u64 = 256 << 20;

/// Bytes of each stage's output kept in the report (head and tail together).
const STAGE_OUTPUT_LIMIT: usize = 64 << 10;

impl Local {
    pub(super) fn verify(
        &self,
        input: VerifyInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let mut request = self.verify_request(&input, call)?;
        // The ref resolved once: the plan judged is the plan that runs.
        let commit = cordon_git::Repo::open(&request.repo)
            .and_then(|r| r.resolve_commit(&request.rev))
            .map_err(|e| ToolFailure::usage(format!("ref {:?}: {e}", request.rev)))?;
        let shown_ref = std::mem::replace(&mut request.rev, commit.as_str().to_owned());
        let (plan, _) = cordon_verify::explain(&request)?;
        self.check_plan(&plan, request.only.as_deref())?;
        let command = command_of(&input, &request, &shown_ref);
        let recorder = cordon_runner::Recorder::begin_on(
            self.store.clone(),
            RunKind::Verify,
            Some(&request.repo),
            None,
            &command,
            TRANSCRIPT_LIMIT,
        )?;
        request.run_id = Some(recorder.id().to_owned());
        call.progress(format!(
            "verification {} of {}@{shown_ref} started",
            recorder.id(),
            request.repo.display()
        ));
        let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watchdog = Watchdog::start(
            Arc::clone(&call.cancel),
            self.bounds.max_timeout,
            Arc::clone(&timed_out),
        );
        let mut observer = Progress { call };
        let verified = cordon_verify::verify(
            &request,
            VerifyHooks {
                observer: &mut observer,
                cancel: Some(&call.cancel),
                recorder: Some(&recorder),
            },
        );
        watchdog.stop();
        let verified = match verified {
            Ok(v) => v,
            Err(error) => {
                let failure = ToolFailure::from(error);
                let _ = recorder.finish(RunState::Error, &failure.document);
                return Err(failure);
            }
        };
        let report = verified.report;
        let state = if call.cancel.is_cancelled() {
            RunState::Cancelled
        } else {
            match report.overall {
                Overall::Pass => RunState::Pass,
                Overall::Fail => RunState::Fail,
                Overall::Error => RunState::Error,
            }
        };
        let _ = recorder.finish(state, &report);
        let mut summary = summary(&report);
        if timed_out.load(std::sync::atomic::Ordering::SeqCst) {
            summary.insert_str(
                0,
                &format!(
                    "stopped at the operator's bound --max-timeout {}\n",
                    humantime::format_duration(self.bounds.max_timeout)
                ),
            );
        }
        Ok(ToolOutput::of(&report, summary))
    }

    /// The verification asked for: a repository the agent may open at a ref with a patch, or
    /// a session's change as a patch on the commit it started from.
    fn verify_request(
        &self,
        input: &VerifyInput,
        call: &Call,
    ) -> Result<VerifyRequest, ToolFailure> {
        let own = usize::from(input.session.is_some()) + usize::from(input.workspace.is_some());
        let named = input.repo.is_some() || input.rev.is_some() || input.patch.is_some();
        if own > 1 || (own == 1 && named) {
            return Err(ToolFailure::usage(
                "`session` or `workspace` verifies its own change: not with each other, nor \
                 with repo, ref or patch",
            ));
        }
        let (repo, rev, patch) = match (&input.session, &input.workspace) {
            (Some(id), _) => {
                let session = self.open_session(id, call)?;
                let record = session.record()?;
                let diff = session.diff(cordon_session::MAX_DIFF_BYTES)?;
                if diff.truncated {
                    return Err(too_large("session", id, diff.patch_bytes));
                }
                let patch = (!diff.patch.is_empty()).then(|| diff.patch.into_bytes());
                (record.repo, record.base_commit.as_str().to_owned(), patch)
            }
            (None, Some(id)) => {
                let record = self.workspace_record(id, call)?;
                let diff = self.workspaces.diff(&record.id, false)?;
                let patch = diff.patch.unwrap_or_default();
                if patch.len() > cordon_session::MAX_DIFF_BYTES {
                    let bytes = u64::try_from(patch.len()).unwrap_or(u64::MAX);
                    return Err(too_large("workspace", id, bytes));
                }
                let patch = (!patch.is_empty()).then_some(patch);
                (record.repo, record.commit.as_str().to_owned(), patch)
            }
            (None, None) => {
                let place = self.bounds.default_place(call.roots())?;
                let repo = match &input.repo {
                    Some(dir) => place.join(dir),
                    None => place,
                };
                let repo = self.bounds.check_path("repo", &repo, call.roots())?;
                let rev = input.rev.clone().unwrap_or_else(|| "HEAD".to_owned());
                (repo, rev, input.patch.clone().map(String::into_bytes))
            }
        };
        Ok(VerifyRequest {
            repo,
            rev,
            base: input.base.clone(),
            patch,
            only: input.stages.clone(),
            keep_going: input.keep_going,
            output_limit: STAGE_OUTPUT_LIMIT,
            project: input.project.as_ref().map(Into::into),
            max_memory: self.bounds.memory,
            ..VerifyRequest::default()
        })
    }

    /// Refuses a plan with a stage (that would run) asking for more network than the
    /// operator's bound.
    fn check_plan(&self, plan: &Plan, only: Option<&[String]>) -> Result<(), ToolFailure> {
        let running = plan
            .stages
            .iter()
            .filter(|s| s.skip.is_none())
            .filter(|s| only.is_none_or(|o| o.contains(&s.stage.name)));
        for planned in running {
            let stage = &planned.stage;
            let wanted = NetworkSetting::rule(stage.network.as_ref());
            self.bounds.check_network(&wanted).map_err(|refusal| {
                refusal.context(format!(
                    "stage `{}` of the plan asks for more network than this server allows; \
                     nothing ran",
                    stage.name
                ))
            })?;
        }
        Ok(())
    }
}

/// A session's or workspace's change too large to verify as a patch.
fn too_large(what: &str, id: &str, bytes: u64) -> ToolFailure {
    ToolFailure::usage(format!(
        "{what} {id}'s change is {bytes} bytes, more than verify takes as a patch ({} bytes)",
        cordon_session::MAX_DIFF_BYTES
    ))
    .hint("commit it to a branch of the repository (session_pull for a session) and verify the ref")
}

/// The command a verification is recorded under.
fn command_of(input: &VerifyInput, request: &VerifyRequest, shown_ref: &str) -> Vec<String> {
    let mut command = vec![
        "mcp".to_owned(),
        "verify".to_owned(),
        "--ref".to_owned(),
        shown_ref.to_owned(),
    ];
    if let Some(id) = &input.session {
        command.extend(["--session".to_owned(), id.clone()]);
    } else if let Some(id) = &input.workspace {
        command.extend(["--workspace".to_owned(), id.clone()]);
    } else if request.patch.is_some() {
        command.extend(["--patch".to_owned(), "(inline)".to_owned()]);
    }
    if let Some(stages) = &request.only {
        command.extend(["--stages".to_owned(), stages.join(",")]);
    }
    command
}

/// The verification's stage events, as progress notifications.
struct Progress<'a> {
    call: &'a Call,
}

impl VerifyObserver for Progress<'_> {
    fn planned(&mut self, plan: &Plan) {
        self.call
            .progress(format!("plan: {} stage(s)", plan.stages.len()));
    }

    fn stage_started(&mut self, index: usize, stage: &StageConfig) {
        self.call.progress(format!(
            "stage {} `{}` ({}) started",
            index + 1,
            stage.name,
            stage.category.as_str()
        ));
    }

    fn stage_finished(&mut self, index: usize, result: &StageResult) {
        self.call.progress(format!(
            "stage {} `{}`: {} in {} ms{}",
            index + 1,
            result.name,
            status_text(result.status),
            result.duration_ms,
            result
                .skip_reason
                .as_deref()
                .or(result.failure.as_ref().map(|f| f.reason.as_str()))
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ));
    }
}

fn status_text(status: StageStatus) -> &'static str {
    match status {
        StageStatus::Pass => "pass",
        StageStatus::Fail => "fail",
        StageStatus::Timeout => "timeout",
        StageStatus::Error => "error",
        StageStatus::Skipped => "skipped",
    }
}

/// The report in a few lines: the gate, the blocking stages, the findings.
pub(crate) fn summary(report: &RunReport) -> String {
    let mut lines = vec![format!(
        "gate: {} ({} stage(s), {} ms, run {})",
        if report.promotion.allowed {
            "passed: the change may be promoted"
        } else {
            "blocked"
        },
        report.stages.len(),
        report.duration_ms,
        report.run_id
    )];
    if !report.promotion.blocking.is_empty() {
        lines.push(format!(
            "blocking: {}",
            report.promotion.blocking.join(", ")
        ));
    }
    for stage in &report.stages {
        lines.push(format!("{}: {}", stage.name, status_text(stage.status)));
        for finding in stage.findings.iter().take(20) {
            let place = match (&finding.file, finding.line) {
                (Some(file), Some(line)) => format!("{file}:{line}: "),
                (Some(file), None) => format!("{file}: "),
                _ => String::new(),
            };
            let test = finding
                .test
                .as_deref()
                .map(|t| format!("[{t}] "))
                .unwrap_or_default();
            lines.push(format!("  {place}{test}{}", finding.message));
        }
    }
    lines.join("\n")
}

/// Cancels a verification that runs past the operator's `--max-timeout`.
struct Watchdog {
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: std::thread::JoinHandle<()>,
}

impl Watchdog {
    fn start(
        cancel: Arc<cordon_exec::CancelHandle>,
        limit: std::time::Duration,
        timed_out: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let watched = Arc::clone(&done);
        let thread = std::thread::spawn(move || {
            let (lock, cvar) = &*watched;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (guard, wait) = cvar
                .wait_timeout_while(guard, limit, |finished| !*finished)
                .unwrap_or_else(|e| e.into_inner());
            if wait.timed_out() && !*guard {
                timed_out.store(true, std::sync::atomic::Ordering::SeqCst);
                cancel.cancel();
            }
        });
        Watchdog { done, thread }
    }

    fn stop(self) {
        *self.done.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.done.1.notify_all();
        let _ = self.thread.join();
    }
}

/// `session_compare`'s verifications, each recorded in the run history under its session.
struct CompareHistory {
    store: cordon_store::Store,
}

impl cordon_verify::CompareRecording for CompareHistory {
    fn begin(&self, candidate: &cordon_verify::Candidate) -> Option<cordon_runner::Recorder> {
        let command = vec!["session_compare".to_owned(), candidate.id.clone()];
        cordon_runner::Recorder::begin_on(
            self.store.clone(),
            RunKind::Verify,
            Some(&candidate.request.repo),
            Some(&candidate.id),
            &command,
            TRANSCRIPT_LIMIT,
        )
        .ok()
    }

    fn finish(&self, recorder: cordon_runner::Recorder, report: &RunReport) {
        let state = match report.overall {
            Overall::Pass => RunState::Pass,
            Overall::Fail => RunState::Fail,
            Overall::Error => RunState::Error,
        };
        let _ = recorder.finish(state, report);
    }
}

impl Local {
    /// `session_compare`: each session's change verified as `verify` with `session` would
    /// (its plan judged against the operator's bounds first), several at once, ranked.
    pub(super) fn session_compare(
        &self,
        input: crate::inputs::SessionCompareInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        if input.ids.is_empty() {
            return Err(ToolFailure::usage("give `ids`: the sessions to compare"));
        }
        let mut candidates = Vec::with_capacity(input.ids.len());
        for id in &input.ids {
            let verify = VerifyInput {
                repo: None,
                session: Some(id.clone()),
                workspace: None,
                rev: None,
                base: None,
                patch: None,
                project: None,
                stages: input.stages.clone(),
                keep_going: false,
            };
            let request = self.verify_request(&verify, call)?;
            let (plan, _) = cordon_verify::explain(&request)?;
            self.check_plan(&plan, request.only.as_deref())?;
            candidates.push(cordon_verify::Candidate {
                id: id.clone(),
                request,
                unavailable: None,
            });
        }
        let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watchdog = Watchdog::start(
            Arc::clone(&call.cancel),
            self.bounds.max_timeout,
            Arc::clone(&timed_out),
        );
        let parallel = std::thread::available_parallelism().map_or(1, usize::from);
        let history = CompareHistory {
            store: self.store.clone(),
        };
        let report = cordon_verify::compare(candidates, parallel, Some(&call.cancel), &history);
        watchdog.stop();
        let mut summary: Vec<String> = report
            .candidates
            .iter()
            .map(|r| format!("{}. {}: {}", r.rank, r.id, r.reason))
            .collect();
        summary.push(match &report.winner {
            Some(winner) => format!("winner: {winner} (session_pull brings its commits)"),
            None => "no candidate passed the gate".to_owned(),
        });
        if timed_out.load(std::sync::atomic::Ordering::SeqCst) {
            summary.insert(
                0,
                format!(
                    "stopped at the operator's bound --max-timeout {}",
                    humantime::format_duration(self.bounds.max_timeout)
                ),
            );
        }
        Ok(ToolOutput::of(&report, summary.join("\n")))
    }
}

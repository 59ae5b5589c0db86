//! `verify` jobs: the plan is checked against the project's policy (commands, networks,
//! secrets) before anything runs, then `cordon_verify::verify` runs it with live stage
//! events and output in the job's log.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cordon_types::Overall;
use cordon_verify::NetworkSetting;

use super::program::cpu_ms;
use super::{Attempt, EventSink, Outcome};
use crate::api::{JobFailure, VerifyInputs};
use crate::policy::NetworkRule;

fn rule_of(setting: Option<&NetworkSetting>) -> NetworkRule {
    NetworkSetting::rule(setting)
}

/// The stages the job selects (`stages`, narrowed by `categories`), or `None` for all.
pub(crate) fn selection(
    plan: &cordon_verify::Plan,
    inputs: &VerifyInputs,
) -> Result<Option<Vec<String>>, Outcome> {
    if inputs.stages.is_none() && inputs.categories.is_none() {
        return Ok(None);
    }
    let mut names = Vec::new();
    for planned in &plan.stages {
        let stage = &planned.stage;
        let by_name = inputs
            .stages
            .as_ref()
            .is_none_or(|only| only.contains(&stage.name));
        let by_category = inputs
            .categories
            .as_ref()
            .is_none_or(|c| c.iter().any(|c| c == stage.category.as_str()));
        if by_name && by_category {
            names.push(stage.name.clone());
        }
    }
    for wanted in inputs.stages.iter().flatten() {
        if !plan.stages.iter().any(|p| &p.stage.name == wanted) {
            let known: Vec<&str> = plan.stages.iter().map(|p| p.stage.name.as_str()).collect();
            return Err(Outcome::failed(
                "usage",
                format!(
                    "inputs.stages: no stage named `{wanted}` (stages: {})",
                    known.join(", ")
                ),
            ));
        }
    }
    if names.is_empty() {
        return Err(Outcome::failed(
            "usage",
            "no stage of the plan matches inputs.stages and inputs.categories",
        ));
    }
    Ok(Some(names))
}

/// The most stages a verify job runs (each has its sandbox, its result and its output in the
/// report): a repository's plan asking for more is refused.
pub(crate) const MAX_STAGES: usize = 64;

/// Refuses the plan when a stage that would run breaks the project's policy (its network
/// judged against the job type's, `verify` or `session.compare`).
pub(crate) fn check_plan(
    attempt: &Attempt<'_>,
    plan: &cordon_verify::Plan,
    only: Option<&[String]>,
) -> Result<(), Outcome> {
    let Some((key, rules)) = attempt.policy.project(&attempt.job.project) else {
        return Err(Outcome::failed(
            "policy",
            "the project has no rules any more",
        ));
    };
    let asked = attempt.secret_names();
    let credentials = attempt.credentials();
    let running = plan
        .stages
        .iter()
        .filter(|s| s.skip.is_none())
        .filter(|s| only.is_none_or(|o| o.contains(&s.stage.name)));
    let count = running.clone().count();
    if count > MAX_STAGES {
        return Err(Outcome::failed(
            "policy",
            format!("the plan runs {count} stages, more than {MAX_STAGES}; nothing ran"),
        ));
    }
    for planned in running {
        let stage = &planned.stage;
        let refuse = |what: String| {
            Err(Outcome::failed(
                "policy",
                format!("stage `{}` {what}; nothing ran", stage.name),
            ))
        };
        if let Err(refusal) = rules.check_command(key, &stage.run) {
            return refuse(format!(
                "would run {:?}: {} ({})",
                stage.run, refusal.reason, refusal.rule
            ));
        }
        let job_type = attempt.job.job_type.as_str();
        if let Err(refusal) = rules.check_network(key, job_type, &rule_of(stage.network.as_ref())) {
            return refuse(format!("asks for {} ({})", refusal.reason, refusal.rule));
        }
        if let Some(secret) = stage.secrets.iter().find(|s| !asked.contains(s)) {
            return refuse(format!(
                "asks for the secret {secret:?}, which the job did not name in `secrets`"
            ));
        }
        if let Some(credential) = stage
            .credential_rules()
            .into_iter()
            .find(|c| !credentials.contains(c))
        {
            return refuse(format!(
                "asks for the credential {credential}, which the project's policy does not give \
                 (`credentials`)"
            ));
        }
    }
    Ok(())
}

/// The watchdog of a job's timeout: cancels the attempt when `deadline` passes before
/// [`Watchdog::stop`].
pub(crate) struct Watchdog {
    timed_out: Arc<AtomicBool>,
    done: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: std::thread::JoinHandle<()>,
}

impl Watchdog {
    /// Starts watching.
    pub(crate) fn start(attempt: &Attempt<'_>, deadline: std::time::Instant) -> Self {
        let timed_out = Arc::new(AtomicBool::new(false));
        let done = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (cancel, flag, watched) = (
            Arc::clone(attempt.cancel),
            Arc::clone(&timed_out),
            Arc::clone(&done),
        );
        let limit = deadline.saturating_duration_since(std::time::Instant::now());
        let thread = std::thread::spawn(move || {
            let (lock, cvar) = &*watched;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (guard, result) = cvar
                .wait_timeout_while(guard, limit, |finished| !*finished)
                .unwrap_or_else(|e| e.into_inner());
            if result.timed_out() && !*guard {
                flag.store(true, Ordering::SeqCst);
                cancel.cancel();
            }
        });
        Watchdog {
            timed_out,
            done,
            thread,
        }
    }

    /// Stops watching; whether the deadline passed first.
    pub(crate) fn stop(self) -> bool {
        *self.done.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.done.1.notify_all();
        let _ = self.thread.join();
        self.timed_out.load(Ordering::SeqCst)
    }
}

/// A `verify` job.
pub(crate) fn verify_job(attempt: &Attempt<'_>) -> Outcome {
    // The job's timeout covers the clone made for it too.
    let deadline = super::repo::deadline_of(attempt, std::time::Instant::now());
    let inputs: VerifyInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let scratch = attempt.scratch();
    let repo = match (&inputs.workspace, &inputs.repo) {
        (Some(from), _) => attempt.workspace_of(&from.from_job),
        (None, Some(url)) => {
            super::repo::clone_for_job(attempt, deadline, url, inputs.rev.as_deref())
        }
        (None, None) => Err(Outcome::failed(
            "usage",
            "inputs: give `workspace` or `repo`",
        )),
    };
    let outcome = match repo {
        Ok(repo) => {
            // A clone made for the job has the ref checked out already.
            let rev = match &inputs.repo {
                Some(_) => "HEAD".to_owned(),
                None => inputs.rev.clone().unwrap_or_else(|| "HEAD".into()),
            };
            verify_in(attempt, &inputs, repo, rev, deadline)
        }
        Err(o) => o,
    };
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

fn verify_in(
    attempt: &Attempt<'_>,
    inputs: &VerifyInputs,
    repo: std::path::PathBuf,
    rev: String,
    deadline: std::time::Instant,
) -> Outcome {
    let job = attempt.job;
    // The ref resolved once: the plan checked against the policy is the plan that runs, even
    // if another job moves the workspace's branch meanwhile.
    let rev = match cordon_git::Repo::open(&repo).and_then(|r| r.resolve_commit(&rev)) {
        Ok(commit) => commit.as_str().to_owned(),
        Err(error) => return Outcome::failed("usage", format!("ref {rev:?}: {error}")),
    };
    let mut request = cordon_verify::VerifyRequest {
        repo,
        rev,
        patch: inputs.patch.clone().map(String::into_bytes),
        output_limit: cordon_exec::DEFAULT_OUTPUT_LIMIT,
        run_id: Some(format!("{}-{}", job.id, job.attempt)),
        env: attempt.env(),
        secret_values: attempt.secret_values(),
        ..cordon_verify::VerifyRequest::default()
    };
    // The plan first: a verify whose plan breaks the policy is refused before anything runs.
    let plan = match cordon_verify::explain(&request) {
        Ok((plan, _)) => plan,
        Err(error) => return super::failure::verify_failed(&error),
    };
    let only = match selection(&plan, inputs) {
        Ok(only) => only,
        Err(o) => return o,
    };
    if let Err(o) = check_plan(attempt, &plan, only.as_deref()) {
        return o;
    }
    request.only = only;
    // The project's limits hold for every stage; the output a report keeps is the project's
    // output limit in all, shared by the stages that run (16 KiB each at least).
    let limits = attempt.limits();
    request.max_memory = Some(limits.memory_bytes());
    request.max_pids = Some(limits.pids);
    // Each running stage gets those limits: the project says how many run at once.
    request.max_parallel_stages = Some(usize::from(limits.parallel_stages.max(1)));
    request.allow_degraded = attempt.policy.degradations();
    let running = plan
        .stages
        .iter()
        .filter(|s| s.skip.is_none())
        .filter(|s| {
            request
                .only
                .as_ref()
                .is_none_or(|o| o.contains(&s.stage.name))
        })
        .count()
        .max(1);
    request.output_limit = usize::try_from(limits.output_bytes() / running as u64)
        .unwrap_or(usize::MAX)
        .max(16 << 10);
    // The job's timeout covers the whole verification.
    let timed_out = Arc::new(AtomicBool::new(false));
    let done = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let watchdog = {
        let (cancel, timed_out, done) = (
            Arc::clone(attempt.cancel),
            Arc::clone(&timed_out),
            Arc::clone(&done),
        );
        let limit = deadline.saturating_duration_since(std::time::Instant::now());
        std::thread::spawn(move || {
            let (lock, cvar) = &*done;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (guard, result) = cvar
                .wait_timeout_while(guard, limit, |finished| !*finished)
                .unwrap_or_else(|e| e.into_inner());
            if result.timed_out() && !*guard {
                timed_out.store(true, Ordering::SeqCst);
                cancel.cancel();
            }
        })
    };
    let mut sink = EventSink::new(attempt);
    let verified = cordon_verify::verify(
        &request,
        cordon_verify::VerifyHooks {
            observer: &mut sink,
            cancel: Some(attempt.cancel),
            recorder: None,
        },
    );
    sink.flush();
    *done.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
    done.1.notify_all();
    let _ = watchdog.join();
    let verified = match verified {
        Ok(v) => v,
        Err(error) => return super::failure::verify_failed(&error),
    };
    let report = &verified.report;
    let cpu = report.stages.iter().map(|s| cpu_ms(&s.resource)).sum();
    let result = serde_json::to_value(report).ok();
    if timed_out.load(Ordering::SeqCst) {
        return Outcome {
            result,
            cpu_ms: cpu,
            ..Outcome::failed(
                "timeout",
                format!(
                    "the verification ran past its timeout of {} ms",
                    job.timeout_ms
                ),
            )
        };
    }
    match report.overall {
        Overall::Pass => Outcome {
            cpu_ms: cpu,
            ..Outcome::succeeded(result.unwrap_or_default())
        },
        Overall::Fail | Overall::Error => {
            let (category, reason) = report.failure.as_ref().map_or_else(
                || {
                    (
                        "infra".to_owned(),
                        "the verification did not complete".to_owned(),
                    )
                },
                |f| {
                    let category = serde_json::to_value(f.category)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| "infra".into());
                    (
                        super::failure::terminal_category(category, &f.reason),
                        f.reason.clone(),
                    )
                },
            );
            Outcome {
                state: cordon_store::JobState::Failed,
                result,
                failure: Some(JobFailure { category, reason }),
                cpu_ms: cpu,
            }
        }
    }
}

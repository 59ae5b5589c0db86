//! `session.*` jobs: a session (`cordon-session`) of an earlier job's workspace, where agents
//! and read-only reviewers run programs, whose commits come back to the workspace's branch
//! as a fast-forward only. Sessions live under the server's `CORDON_HOME`, like those of
//! `cordon session`; a session job names its session by the `session.create` job that made
//! it, so a project reaches only its own sessions.

use std::path::PathBuf;
use std::time::Duration;

use cordon_session::{
    Access, CreateRequest, ForkRequest, PullRequest, PushRequest, Session, SessionError,
    SessionErrorClass, Sessions,
};
use cordon_store::{JobFilter, JobState};
use cordon_types::units::parse_duration;

use super::program::{ProgramSpec, run_program};
use super::{Attempt, Outcome};
use crate::api::{
    JobFailure, JobType, SessionCompareInputs, SessionCreateInputs, SessionExecInputs,
    SessionForkInputs, SessionInputs, SessionRef, VerifyInputs,
};
use crate::policy::NetworkRule;

fn failed(error: &SessionError) -> Outcome {
    let category = match error.class() {
        SessionErrorClass::Refused => "refused",
        SessionErrorClass::Usage => "usage",
        SessionErrorClass::Timeout => "timeout",
        SessionErrorClass::Infra => "infra",
    };
    let mut reason = error.to_string();
    if let Some(hint) = error.hint() {
        reason.push_str(&format!(" (hint: {hint})"));
    }
    Outcome::failed(category, reason)
}

fn sessions() -> Result<Sessions, Outcome> {
    Sessions::from_env().map_err(|e| failed(&e))
}

/// The record (`cordon.session/v1`, as made) of the session an earlier job of this project
/// made: a `session.create` job's, or one of a `session.fork` job's.
fn record_of(attempt: &Attempt<'_>, session: &SessionRef) -> Result<serde_json::Value, Outcome> {
    let from_job = &session.from_job;
    let result =
        attempt.earlier_result(from_job, &[JobType::SessionCreate, JobType::SessionFork])?;
    let forked = result.get("schema").and_then(|s| s.as_str()) == Some("cordon.session-fork/v1");
    let record = match (forked, session.fork) {
        (false, None) => Some(result),
        (true, Some(i)) => result
            .get("sessions")
            .and_then(|s| s.get(usize::try_from(i).unwrap_or(usize::MAX)))
            .cloned(),
        (false, Some(_)) => {
            return Err(Outcome::failed(
                "usage",
                format!("job {from_job} made one session: `fork` is for session.fork jobs"),
            ));
        }
        (true, None) => {
            return Err(Outcome::failed(
                "usage",
                format!("job {from_job} forked sessions: name one with `fork`"),
            ));
        }
    };
    record.ok_or_else(|| {
        Outcome::failed(
            "usage",
            format!(
                "job {from_job} made no session number {} (its sessions are numbered from 0)",
                session.fork.unwrap_or(0)
            ),
        )
    })
}

/// The session an earlier job of this project made (see [`record_of`]).
fn session_of(attempt: &Attempt<'_>, session: &SessionRef) -> Result<Session, Outcome> {
    let record = record_of(attempt, session)?;
    let id = record.get("id").and_then(|v| v.as_str()).ok_or_else(|| {
        Outcome::failed("usage", format!("job {} made no session", session.from_job))
    })?;
    sessions()?.open_str(id).map_err(|e| failed(&e))
}

/// The inputs of a `session.push`, `session.pull` or `session.remove` job and its session.
fn session_inputs(attempt: &Attempt<'_>) -> Result<(SessionInputs, Session), Outcome> {
    let inputs: SessionInputs = attempt.inputs()?;
    let session = session_of(attempt, &inputs.session)?;
    Ok((inputs, session))
}

/// How long a session operation may wait for the session's writer: the job's timeout.
fn wait(attempt: &Attempt<'_>) -> Duration {
    Duration::from_millis(attempt.job.timeout_ms)
}

fn document<T: serde::Serialize>(value: &T) -> Outcome {
    match serde_json::to_value(value) {
        Ok(v) => Outcome::succeeded(v),
        Err(e) => Outcome::failed("infra", format!("cannot encode the result: {e}")),
    }
}

/// `session.create`: a persistent session of the workspace's branch.
pub(crate) fn create_job(attempt: &Attempt<'_>) -> Outcome {
    let inputs: SessionCreateInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let repo = match attempt.workspace_of(&inputs.workspace.from_job) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let mut request = CreateRequest::new(repo);
    request.depth = inputs.depth;
    if let Some(idle) = &inputs.idle_timeout {
        match parse_duration(idle) {
            Ok(d) => request.idle_timeout = d,
            Err(e) => return Outcome::failed("usage", format!("inputs.idle_timeout: {e}")),
        }
    }
    let sessions = match sessions() {
        Ok(s) => s,
        Err(o) => return o,
    };
    match sessions.create(&request) {
        Ok(record) => document(&record),
        Err(e) => failed(&e),
    }
}

/// `session.push`: the workspace branch's new commits into the session.
pub(crate) fn push_job(attempt: &Attempt<'_>) -> Outcome {
    let session = match session_inputs(attempt) {
        Ok((_, s)) => s,
        Err(o) => return o,
    };
    let request = PushRequest {
        wait: wait(attempt),
        ..PushRequest::default()
    };
    let stop = || attempt.cancel.is_cancelled();
    match session.push_or_stop(&request, &stop) {
        Ok(report) => document(&report),
        Err(e) => failed(&e),
    }
}

/// `session.pull`: the session's branch back into the workspace's, fast-forward only.
pub(crate) fn pull_job(attempt: &Attempt<'_>) -> Outcome {
    let deadline = super::repo::deadline_of(attempt, std::time::Instant::now());
    let (inputs, session) = match session_inputs(attempt) {
        Ok(found) => found,
        Err(o) => return o,
    };
    // The pull moves the workspace's branch (and its checkout): it writes the workspace, so
    // it holds the workspace's lock like `repo.applyPatch` and `run` do.
    let workspace = record_of(attempt, &inputs.session)
        .ok()
        .and_then(|r| r.get("repo").and_then(|v| v.as_str()).map(PathBuf::from));
    let _lock = match workspace.map(|root| super::repo::lock_workspace(attempt, &root, deadline)) {
        Some(Err(o)) => return o,
        held => held,
    };
    let request = PullRequest {
        wait: wait(attempt),
        ..PullRequest::default()
    };
    let stop = || attempt.cancel.is_cancelled();
    match session.pull_or_stop(&request, &stop) {
        Ok(report) => document(&report),
        Err(e) => failed(&e),
    }
}

/// `session.exec`: one program in the session, as its writer or as a read-only reviewer.
pub(crate) fn exec_job(attempt: &Attempt<'_>) -> Outcome {
    let started = std::time::Instant::now();
    let inputs: SessionExecInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let session = match session_of(attempt, &inputs.session) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let access = if inputs.read_only {
        Access::ReadOnly
    } else {
        Access::Write
    };
    // The wait for the writer ends on the job's cancel, and counts against its timeout.
    let stop = || attempt.cancel.is_cancelled();
    let lease = match session.begin_exec_or_stop(access, wait(attempt), &stop) {
        Ok(lease) => lease,
        Err(e) => return failed(&e),
    };
    let outcome = run_program(
        attempt,
        ProgramSpec {
            argv: inputs.argv.clone(),
            cwd: lease.tree().to_owned(),
            workspace: lease.mount(),
            network: inputs.network.unwrap_or(NetworkRule::None),
            memory: inputs.memory,
            pids: inputs.pids,
            output_limit: None,
            timeout: wait(attempt).saturating_sub(started.elapsed()),
        },
    );
    let exit = outcome
        .result
        .as_ref()
        .and_then(|r| r.get("exit_code"))
        .and_then(|c| c.as_i64())
        .and_then(|c| u8::try_from(c).ok());
    let command = outcome
        .result
        .as_ref()
        .and_then(|r| r.get("command"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or(inputs.argv);
    if let Err(e) = lease.finish(None, command, exit) {
        eprintln!(
            "cordon serve: job {}: cannot record the run in session {}: {e}",
            attempt.job.id,
            session.id().as_str()
        );
    }
    outcome
}

/// `session.remove`: ends the session's running `session.exec` jobs (their process trees
/// die, here or on any worker), then removes the session.
pub(crate) fn remove_job(attempt: &Attempt<'_>) -> Outcome {
    let (inputs, session) = match session_inputs(attempt) {
        Ok(found) => found,
        Err(o) => return o,
    };
    let store = &attempt.service.store;
    let running = store.list_jobs(&JobFilter {
        projects: vec![attempt.job.project.clone()],
        state: Some(JobState::Running),
        before: None,
        limit: 10_000,
    });
    match running {
        Ok(jobs) => {
            for job in jobs.iter().filter(|j| {
                j.job_type == JobType::SessionExec.as_str()
                    && j.inputs
                        .get("session")
                        .and_then(|v| serde_json::from_value::<SessionRef>(v.clone()).ok())
                        .as_ref()
                        == Some(&inputs.session)
            }) {
                if let Err(e) = attempt.service.cancel_running(&job.id) {
                    eprintln!("cordon serve: cannot cancel job {}: {e}", job.id);
                }
            }
        }
        Err(e) => return Outcome::failed("infra", e.to_string()),
    }
    let stop = || attempt.cancel.is_cancelled();
    match session.remove_or_stop(wait(attempt), &stop) {
        Ok(record) => document(&record),
        Err(e) => failed(&e),
    }
}

/// `session.fork`: new sessions with the session's exact state; the source goes on.
pub(crate) fn fork_job(attempt: &Attempt<'_>) -> Outcome {
    let inputs: SessionForkInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let session = match session_of(attempt, &inputs.session) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let request = ForkRequest {
        wait: wait(attempt),
        ..ForkRequest::new(inputs.count)
    };
    // The wait for a writer in the source ends on the job's cancel, within its timeout.
    let stop = || attempt.cancel.is_cancelled();
    match session.fork_or_stop(&request, &stop) {
        Ok(report) => document(&report),
        Err(e) => failed(&e),
    }
}

/// `session.compare`: each session's change verified on its base commit with the base's
/// plan (checked against the project's policy first, as a `verify` job's), as many at once as
/// the slots the job holds, then ranked.
pub(crate) fn compare_job(attempt: &Attempt<'_>) -> Outcome {
    let deadline = super::repo::deadline_of(attempt, std::time::Instant::now());
    let inputs: SessionCompareInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let selection = VerifyInputs {
        workspace: None,
        repo: None,
        rev: None,
        patch: None,
        stages: inputs.stages.clone(),
        categories: inputs.categories.clone(),
    };
    let limits = attempt.limits();
    let mut candidates = Vec::with_capacity(inputs.sessions.len());
    for reference in &inputs.sessions {
        let session = match session_of(attempt, reference) {
            Ok(s) => s,
            Err(o) => return o,
        };
        let record = match session.record() {
            Ok(r) => r,
            Err(e) => return failed(&e),
        };
        let mut request = cordon_verify::VerifyRequest {
            repo: record.repo.clone(),
            rev: record.base_commit.to_string(),
            base: Some(record.base_commit.to_string()),
            env: attempt.env(),
            secret_values: attempt.secret_values(),
            max_memory: Some(limits.memory_bytes()),
            max_pids: Some(limits.pids),
            max_parallel_stages: Some(usize::from(limits.parallel_stages.max(1))),
            allow_degraded: attempt.policy.degradations(),
            ..cordon_verify::VerifyRequest::default()
        };
        // The base commit's plan: a candidate never chooses its own checks. Checked against
        // the policy before anything runs.
        let plan = match cordon_verify::explain(&request) {
            Ok((plan, _)) => plan,
            Err(error) => return super::failure::verify_failed(&error),
        };
        let only = match super::verify::selection(&plan, &selection) {
            Ok(only) => only,
            Err(o) => return o,
        };
        if let Err(o) = super::verify::check_plan(attempt, &plan, only.as_deref()) {
            return o;
        }
        let running = plan
            .stages
            .iter()
            .filter(|s| s.skip.is_none())
            .filter(|s| only.as_ref().is_none_or(|o| o.contains(&s.stage.name)))
            .count()
            .max(1);
        request.only = only;
        // Each candidate's report keeps the project's output limit, shared by its stages.
        request.output_limit = usize::try_from(limits.output_bytes() / running as u64)
            .unwrap_or(usize::MAX)
            .max(16 << 10);
        let unavailable = match session.compare_patch() {
            Ok(patch) => {
                request.patch = patch;
                None
            }
            Err(why) => Some(why),
        };
        candidates.push(cordon_verify::Candidate {
            id: session.id().to_string(),
            request,
            unavailable,
        });
    }
    // As many verifications at once as the job holds slots (see `slots_of`).
    let policy = &attempt.policy;
    let parallel = cordon_store::effective_slots(
        i64::from(attempt.job.slots),
        policy.concurrency(&attempt.job.project),
        policy.workers,
    );
    let watchdog = super::verify::Watchdog::start(attempt, deadline);
    let report = cordon_verify::compare(
        candidates,
        usize::try_from(parallel).unwrap_or(1),
        Some(attempt.cancel),
        &cordon_verify::NoRecording,
    );
    let timed_out = watchdog.stop();
    let cpu = report
        .candidates
        .iter()
        .filter_map(|c| c.report.as_ref())
        .flat_map(|r| r.stages.iter())
        .map(|s| super::program::cpu_ms(&s.resource))
        .sum();
    let result = match serde_json::to_value(&report) {
        Ok(v) => v,
        Err(e) => return Outcome::failed("infra", format!("cannot encode the result: {e}")),
    };
    if timed_out {
        return Outcome {
            result: Some(result),
            cpu_ms: cpu,
            ..Outcome::failed(
                "timeout",
                format!(
                    "the comparison ran past its timeout of {} ms",
                    attempt.job.timeout_ms
                ),
            )
        };
    }
    if report.winner.is_some() {
        return Outcome {
            cpu_ms: cpu,
            ..Outcome::succeeded(result)
        };
    }
    // No candidate passed: the best one's failure says why, as a verify job's would.
    let best = report.candidates.first();
    let (category, why) = best
        .and_then(|c| c.report.as_ref())
        .and_then(|r| r.failure.as_ref())
        .map_or_else(
            || ("infra".to_owned(), best.and_then(|c| c.error.clone())),
            |f| {
                let category = serde_json::to_value(f.category)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "infra".into());
                (
                    super::failure::terminal_category(category, &f.reason),
                    Some(f.reason.clone()),
                )
            },
        );
    let reason = match best {
        Some(best) => format!(
            "no candidate passed the gate; the best, {}: {}",
            best.id,
            why.unwrap_or_else(|| best.reason.clone())
        ),
        None => "no candidate to compare".to_owned(),
    };
    Outcome {
        state: cordon_store::JobState::Failed,
        result: Some(result),
        failure: Some(JobFailure { category, reason }),
        cpu_ms: cpu,
    }
}

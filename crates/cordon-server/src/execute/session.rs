//! `session.*` jobs: a session (`cordon-session`) of an earlier job's workspace, where agents
//! and read-only reviewers run programs, whose commits come back to the workspace's branch
//! as a fast-forward only. Sessions live under the server's `CORDON_HOME`, like those of
//! `cordon session`; a session job names its session by the `session.create` job that made
//! it, so a project reaches only its own sessions.

use std::path::PathBuf;
use std::time::Duration;

use cordon_session::{
    Access, CreateRequest, PullRequest, PushRequest, Session, SessionError, SessionErrorClass,
    Sessions,
};
use cordon_store::{JobFilter, JobState};
use cordon_types::units::parse_duration;

use super::program::{ProgramSpec, run_program};
use super::{Attempt, Outcome};
use crate::api::{JobType, SessionCreateInputs, SessionExecInputs, SessionInputs};
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

/// The session an earlier `session.create` job of this project made.
fn session_of(attempt: &Attempt<'_>, from_job: &str) -> Result<Session, Outcome> {
    let result = attempt.earlier_result(from_job, &[JobType::SessionCreate])?;
    let id = result
        .get("id")
        .and_then(|v| v.as_str())
        .ok_or_else(|| Outcome::failed("usage", format!("job {from_job} made no session")))?;
    sessions()?.open_str(id).map_err(|e| failed(&e))
}

/// The inputs of a `session.push`, `session.pull` or `session.remove` job and its session.
fn session_inputs(attempt: &Attempt<'_>) -> Result<(SessionInputs, Session), Outcome> {
    let inputs: SessionInputs = attempt.inputs()?;
    let session = session_of(attempt, &inputs.session.from_job)?;
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
    let workspace = attempt
        .earlier_result(&inputs.session.from_job, &[JobType::SessionCreate])
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
    let session = match session_of(attempt, &inputs.session.from_job) {
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
                        .pointer("/session/from_job")
                        .and_then(|v| v.as_str())
                        == Some(inputs.session.from_job.as_str())
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

//! `run` jobs, and the one way every job runs a program: `cordon_runner::run` in the
//! sandbox, with the job's bounds, network, variables and secrets, its output written live to
//! the job's log.

use std::path::PathBuf;
use std::time::Duration;

use cordon_runner::{Bounds, Hooks, Isolation, RunRequest, SandboxOptions, WorkspaceMount};
use cordon_types::{ResourceUsage, RunStatus};

use super::{Attempt, EventSink, Outcome};
use crate::api::{JobFailure, RunInputs};
use crate::policy::NetworkRule;

/// What differs between the programs jobs run.
pub(crate) struct ProgramSpec {
    pub(crate) argv: Vec<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) workspace: WorkspaceMount,
    pub(crate) network: NetworkRule,
    pub(crate) memory: Option<String>,
    pub(crate) pids: Option<u64>,
    pub(crate) output_limit: Option<String>,
    /// What is left of the job's timeout for the program (a clone or a wait before it
    /// counts against the job's timeout too).
    pub(crate) timeout: Duration,
}

/// CPU time of a run (the whole tree when it was measured exactly), in milliseconds.
pub(crate) fn cpu_ms(usage: &ResourceUsage) -> u64 {
    match (usage.tree_cpu_user_ms, usage.tree_cpu_sys_ms) {
        (Some(user), Some(sys)) => user + sys,
        _ => usage.cpu_user_ms.unwrap_or(0) + usage.cpu_sys_ms.unwrap_or(0),
    }
}

/// The sandbox options of a network rule (checked against policy at submission): the one
/// translation every door uses ([`SandboxOptions::with_network`]).
pub(crate) fn sandbox_for(network: &NetworkRule) -> Result<SandboxOptions, Outcome> {
    SandboxOptions::with_network(network)
        .map(|(options, _)| options)
        .map_err(|e| Outcome::failed("usage", format!("inputs.network: {e}")))
}

/// Runs one program for the attempt and maps its result to the job's outcome.
pub(crate) fn run_program(attempt: &Attempt<'_>, spec: ProgramSpec) -> Outcome {
    let job = attempt.job;
    let mut options = match sandbox_for(&spec.network) {
        Ok(o) => o,
        Err(o) => return o,
    };
    // What the job asked for, within the project's limits as they are now (the policy may
    // have been reloaded since it was submitted); the project's limits when it asked nothing.
    let max = attempt.limits();
    let memory = match spec.memory.as_deref().map(cordon_types::units::parse_size) {
        Some(Ok(bytes)) => bytes.min(max.memory_bytes()),
        Some(Err(e)) => return Outcome::failed("usage", format!("inputs.memory: {e}")),
        None => max.memory_bytes(),
    };
    options.limits.memory_bytes = Some(memory);
    options.allow_degraded = attempt.policy.degradations();
    options.limits.pids = Some(spec.pids.unwrap_or(max.pids).min(max.pids));
    let output_limit = match spec
        .output_limit
        .as_deref()
        .map(cordon_types::units::parse_size)
    {
        Some(Ok(bytes)) => bytes.min(max.output_bytes()),
        Some(Err(e)) => return Outcome::failed("usage", format!("inputs.output_limit: {e}")),
        None => max.output_bytes(),
    };
    let bounds = Bounds {
        timeout: spec.timeout.max(Duration::from_millis(1)),
        output_limit: usize::try_from(output_limit).unwrap_or(usize::MAX),
        ..Bounds::default()
    };
    // The project's credentials for the hosts this job may reach.
    if options.network == cordon_types::NetworkMode::Allowlist {
        options.proxy.credentials = attempt
            .credentials()
            .into_iter()
            .filter(|c| options.proxy.allow.allows(&c.host, c.port))
            .collect();
    }
    let mut request = RunRequest::new(spec.argv.iter().cloned(), spec.cwd);
    request.workspace = Some(spec.workspace);
    request.isolation = Isolation::Sandboxed(options);
    request.env = attempt.env();
    request.secrets = attempt.secret_names();
    request.secret_values = attempt.secret_values();
    request.bounds = bounds;
    let mut sink = EventSink::new(attempt);
    let ran = cordon_runner::run(
        &request,
        Hooks {
            sink: Some(&mut sink),
            cancel: Some(attempt.cancel),
            ready: None,
            transcript: None,
            network_notice: None,
        },
    );
    sink.flush();
    let ran = match ran {
        Ok(ran) => ran,
        Err(error) => return super::failure::run_failed(&error),
    };
    let cpu = cpu_ms(&ran.result.resource);
    let result = serde_json::to_value(&ran.result).ok();
    let (state, failure) = match ran.result.status {
        RunStatus::Pass => (cordon_store::JobState::Succeeded, None),
        RunStatus::Timeout => (
            cordon_store::JobState::Failed,
            Some((
                "timeout".to_owned(),
                format!("the job ran past its timeout of {} ms", job.timeout_ms),
            )),
        ),
        RunStatus::Cancelled => (
            cordon_store::JobState::Cancelled,
            Some(("cancelled".to_owned(), "the job was cancelled".to_owned())),
        ),
        RunStatus::Fail | RunStatus::Error => {
            // The runner's own category: what the author must fix (`exit`, `signal`) versus
            // what a retry may fix (`resource`, `infra`).
            let (category, reason) = ran.result.failure.as_ref().map_or_else(
                || ("infra".to_owned(), "the program did not pass".to_owned()),
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
            (cordon_store::JobState::Failed, Some((category, reason)))
        }
    };
    Outcome {
        state,
        result,
        failure: failure.map(|(category, reason)| JobFailure { category, reason }),
        cpu_ms: cpu,
    }
}

/// A `run` job: in an earlier job's workspace, in a clone of `repo` made for it, or in a
/// fresh empty directory.
pub(crate) fn run_job(attempt: &Attempt<'_>) -> Outcome {
    let deadline = super::repo::deadline_of(attempt, std::time::Instant::now());
    let inputs: RunInputs = match attempt.inputs() {
        Ok(i) => i,
        Err(o) => return o,
    };
    let scratch = attempt.scratch();
    // A service workspace is this job's alone while it runs (see `lock_workspace`).
    let mut _lock = None;
    let root = match (&inputs.workspace, &inputs.repo) {
        (Some(from), _) => match attempt.workspace_of(&from.from_job).and_then(|root| {
            _lock = Some(super::repo::lock_workspace(attempt, &root, deadline)?);
            Ok(root)
        }) {
            Ok(root) => root,
            Err(o) => return o,
        },
        (None, Some(url)) => {
            match super::repo::clone_for_job(attempt, deadline, url, inputs.rev.as_deref()) {
                Ok(root) => root,
                Err(o) => return o,
            }
        }
        (None, None) => {
            let root = scratch.join("work");
            if let Err(error) = std::fs::create_dir_all(&root) {
                return Outcome::failed(
                    "infra",
                    format!("cannot create {}: {error}", root.display()),
                );
            }
            root
        }
    };
    let outcome = run_program(
        attempt,
        ProgramSpec {
            argv: inputs.argv,
            cwd: root.clone(),
            workspace: WorkspaceMount {
                // The repository's git data is the server's (later jobs run git on it on the
                // host): read-only to the program, like a worktree's shared git directory.
                git_common_dir: Some(root.join(".git")).filter(|g| g.is_dir()),
                root,
                read_only: false,
                overlay: None,
            },
            network: inputs.network.unwrap_or(NetworkRule::None),
            memory: inputs.memory,
            pids: inputs.pids,
            output_limit: inputs.output_limit,
            timeout: deadline.saturating_duration_since(std::time::Instant::now()),
        },
    );
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

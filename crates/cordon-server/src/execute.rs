//! One attempt of one job: the type's work, through the crates that do it (`cordon-runner`
//! for programs, `cordon-verify` for verifications, hardened `cordon-git` for clones), with
//! live output (already redacted by the runner) written to the job's event log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cordon_exec::{CancelHandle, OutputSink, Stream};
use cordon_runner::{Bounds, Hooks, Isolation, RunRequest, SandboxOptions, WorkspaceMount};
use cordon_store::{JobId, JobRow, JobState, Store};
use cordon_types::{Overall, RunStatus};

use crate::api::{ApplyPatchInputs, CloneInputs, JobFailure, JobType, RunInputs, VerifyInputs};
use crate::service::Service;

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `succeeded`, `failed` or `cancelled`.
    pub state: JobState,
    /// The type's output document.
    pub result: Option<serde_json::Value>,
    /// Why it failed.
    pub failure: Option<JobFailure>,
}

impl Outcome {
    pub(crate) fn failed(category: &str, reason: impl Into<String>) -> Self {
        Outcome {
            state: JobState::Failed,
            result: None,
            failure: Some(JobFailure {
                category: category.into(),
                reason: reason.into(),
            }),
        }
    }
}

/// Runs one attempt of `job`.
pub fn execute(service: &Service, job: &JobRow, cancel: &Arc<CancelHandle>) -> Outcome {
    let outcome = match JobType::parse(&job.job_type) {
        Some(JobType::Run) => run_job(service, job, cancel),
        Some(JobType::Verify) => verify_job(service, job, cancel),
        Some(JobType::RepoClone) => clone_job(service, job),
        Some(JobType::RepoApplyPatch) => apply_patch_job(service, job),
        None => Outcome::failed("usage", format!("unknown job type {:?}", job.job_type)),
    };
    if cancel.is_cancelled() && outcome.state != JobState::Succeeded {
        let timed_out = outcome
            .failure
            .as_ref()
            .is_some_and(|f| f.category == "timeout");
        if !timed_out {
            return Outcome {
                state: JobState::Cancelled,
                result: outcome.result,
                failure: Some(JobFailure {
                    category: "cancelled".into(),
                    reason: "the job was cancelled".into(),
                }),
            };
        }
    }
    outcome
}

fn inputs<T: serde::de::DeserializeOwned>(job: &JobRow) -> Result<T, Outcome> {
    let mut value = job.inputs.clone();
    if let Some(map) = value.as_object_mut() {
        map.remove("secrets");
        map.remove("env_keys");
    }
    serde_json::from_value(value).map_err(|e| Outcome::failed("usage", format!("inputs: {e}")))
}

fn names(job: &JobRow, key: &str) -> Vec<String> {
    job.inputs
        .get(key)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The workspace directory an earlier `repo.clone` job produced.
fn workspace_of(service: &Service, job: &JobRow, from: &str) -> Result<PathBuf, Outcome> {
    let id: JobId = from
        .parse()
        .map_err(|e| Outcome::failed("usage", format!("{e}")))?;
    let source = service
        .store
        .get_job(&id)
        .map_err(|e| Outcome::failed("infra", e.to_string()))?
        .filter(|j| j.project == job.project)
        .ok_or_else(|| Outcome::failed("usage", format!("no job {id} in this project")))?;
    if source.state != JobState::Succeeded {
        return Err(Outcome::failed(
            "usage",
            format!("job {id} is {}, not succeeded", source.state.as_str()),
        ));
    }
    let path = source
        .result
        .as_ref()
        .and_then(|r| r.get("workspace"))
        .and_then(|w| w.as_str())
        .map(PathBuf::from)
        .ok_or_else(|| Outcome::failed("usage", format!("job {id} produced no workspace")))?;
    if !path.is_dir() {
        return Err(Outcome::failed(
            "usage",
            format!("the workspace of job {id} is gone"),
        ));
    }
    Ok(path)
}

/// Writes a job's live output to its event log as it arrives.
struct EventSink<'a> {
    store: &'a Store,
    job: &'a JobId,
    stage: Option<String>,
    pending: Vec<(Stream, Vec<u8>)>,
    pending_bytes: usize,
}

impl<'a> EventSink<'a> {
    fn new(store: &'a Store, job: &'a JobId) -> Self {
        EventSink {
            store,
            job,
            stage: None,
            pending: Vec::new(),
            pending_bytes: 0,
        }
    }

    fn push(&mut self, stream: Stream, bytes: &[u8]) {
        match self.pending.last_mut() {
            Some((s, buf)) if *s == stream => buf.extend_from_slice(bytes),
            _ => self.pending.push((stream, bytes.to_vec())),
        }
        self.pending_bytes += bytes.len();
        // Written at once: a live log must not hold back the last line of a quiet program
        // (the executor hands over output as it reads it, so writes are already batched).
        self.flush();
    }

    fn flush(&mut self) {
        for (stream, bytes) in std::mem::take(&mut self.pending) {
            let data = serde_json::json!({
                "stage": self.stage,
                "stream": match stream { Stream::Stdout => "stdout", Stream::Stderr => "stderr" },
                "text": String::from_utf8_lossy(&bytes),
            });
            if let Err(error) = self.store.append_job_event(self.job, "output", &data) {
                eprintln!("cordon serve: job {}: output lost: {error}", self.job);
            }
        }
        self.pending_bytes = 0;
    }

    fn event(&mut self, kind: &str, data: serde_json::Value) {
        self.flush();
        if let Err(error) = self.store.append_job_event(self.job, kind, &data) {
            eprintln!(
                "cordon serve: job {}: cannot log an event: {error}",
                self.job
            );
        }
    }
}

impl OutputSink for EventSink<'_> {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        self.push(stream, bytes);
    }
}

impl cordon_verify::VerifyObserver for EventSink<'_> {
    fn stage_started(&mut self, index: usize, stage: &cordon_verify::StageConfig) {
        self.stage = Some(stage.name.clone());
        self.event(
            "stage",
            serde_json::json!({"index": index, "stage": stage.name, "status": "running"}),
        );
    }

    fn output(&mut self, _stage: &str, stream: Stream, bytes: &[u8]) {
        self.push(stream, bytes);
    }

    fn stage_finished(&mut self, index: usize, result: &cordon_types::StageResult) {
        self.event(
            "stage",
            serde_json::json!({
                "index": index,
                "stage": result.name,
                "status": result.status,
                "duration_ms": result.duration_ms,
            }),
        );
        self.stage = None;
    }
}

fn env_of(job: &JobRow) -> Vec<(String, String)> {
    names(job, "env_keys")
        .into_iter()
        .filter_map(|k| std::env::var(&k).ok().map(|v| (k, v)))
        .collect()
}

fn run_job(service: &Service, job: &JobRow, cancel: &CancelHandle) -> Outcome {
    let inputs: RunInputs = match inputs(job) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let scratch = service
        .data_dir
        .join("scratch")
        .join(format!("{}-{}", job.id, job.attempt));
    let (cwd, workspace) = match &inputs.workspace {
        Some(from) => match workspace_of(service, job, &from.from_job) {
            Ok(root) => (
                root.clone(),
                Some(WorkspaceMount {
                    root,
                    git_common_dir: None,
                    read_only: false,
                }),
            ),
            Err(o) => return o,
        },
        None => {
            if let Err(error) = std::fs::create_dir_all(&scratch) {
                return Outcome::failed(
                    "infra",
                    format!("cannot create {}: {error}", scratch.display()),
                );
            }
            // A fresh directory as the job's own workspace (writable, nothing else).
            (
                scratch.clone(),
                Some(WorkspaceMount {
                    root: scratch.clone(),
                    git_common_dir: None,
                    read_only: false,
                }),
            )
        }
    };
    let mut request = RunRequest::new(inputs.argv.iter().cloned(), cwd);
    request.workspace = workspace;
    request.isolation = Isolation::Sandboxed(SandboxOptions::default());
    request.env = env_of(job);
    request.secrets = names(job, "secrets");
    request.bounds = Bounds {
        timeout: Duration::from_millis(job.timeout_ms),
        ..Bounds::default()
    };
    let mut sink = EventSink::new(&service.store, &job.id);
    let ran = cordon_runner::run(
        &request,
        Hooks {
            sink: Some(&mut sink),
            cancel: Some(cancel),
            ready: None,
            transcript: None,
            network_notice: None,
        },
    );
    sink.flush();
    let _ = std::fs::remove_dir_all(&scratch);
    let ran = match ran {
        Ok(ran) => ran,
        Err(error) => {
            let category = match error.class() {
                cordon_runner::RunErrorClass::Infra => "infra",
                cordon_runner::RunErrorClass::Unenforceable => "setup",
                cordon_runner::RunErrorClass::Usage => "usage",
            };
            return Outcome::failed(category, error.to_string());
        }
    };
    let result = serde_json::to_value(&ran.result).ok();
    let (state, failure) = match ran.result.status {
        RunStatus::Pass => (JobState::Succeeded, None),
        RunStatus::Timeout => (
            JobState::Failed,
            Some((
                "timeout",
                format!("the job ran past its timeout of {} ms", job.timeout_ms),
            )),
        ),
        RunStatus::Cancelled => (
            JobState::Cancelled,
            Some(("cancelled", "the job was cancelled".into())),
        ),
        RunStatus::Fail => (
            JobState::Failed,
            Some((
                "exit",
                format!(
                    "the program failed (exit code {:?}, signal {:?})",
                    ran.result.exit_code, ran.result.signal
                ),
            )),
        ),
        RunStatus::Error => (
            JobState::Failed,
            Some((
                "error",
                ran.result.failure.as_ref().map_or_else(
                    || "cordon could not run the program".into(),
                    |f| format!("{f:?}"),
                ),
            )),
        ),
    };
    Outcome {
        state,
        result,
        failure: failure.map(|(category, reason)| JobFailure {
            category: category.into(),
            reason,
        }),
    }
}

fn verify_job(service: &Service, job: &JobRow, cancel: &Arc<CancelHandle>) -> Outcome {
    let inputs: VerifyInputs = match inputs(job) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let repo = match workspace_of(service, job, &inputs.workspace.from_job) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let request = cordon_verify::VerifyRequest {
        repo,
        rev: inputs.rev.unwrap_or_else(|| "HEAD".into()),
        patch: inputs.patch.map(String::into_bytes),
        only: inputs.stages,
        output_limit: cordon_exec::DEFAULT_OUTPUT_LIMIT,
        run_id: Some(format!("{}-{}", job.id, job.attempt)),
        ..cordon_verify::VerifyRequest::default()
    };
    // The plan first: a verify whose plan holds a disallowed command is refused before
    // anything runs.
    let plan = match cordon_verify::explain(&request) {
        Ok((plan, _)) => plan,
        Err(error) => return Outcome::failed("setup", error.to_string()),
    };
    let policy = service.policy();
    let Some((key, rules)) = policy.project(&job.project) else {
        return Outcome::failed("policy", "the project has no rules any more");
    };
    for planned in plan.stages.iter().filter(|s| s.skip.is_none()) {
        if let Err(refusal) = rules.check_command(key, &planned.stage.run) {
            return Outcome::failed(
                "policy",
                format!(
                    "stage `{}` would run {:?}: {} ({})",
                    planned.stage.name, planned.stage.run, refusal.reason, refusal.rule
                ),
            );
        }
    }
    // The job's timeout covers the whole verification.
    let timed_out = Arc::new(AtomicBool::new(false));
    let done = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let watchdog = {
        let (cancel, timed_out, done) = (
            Arc::clone(cancel),
            Arc::clone(&timed_out),
            Arc::clone(&done),
        );
        let limit = Duration::from_millis(job.timeout_ms);
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
    let mut sink = EventSink::new(&service.store, &job.id);
    let verified = cordon_verify::verify(
        &request,
        cordon_verify::VerifyHooks {
            observer: &mut sink,
            cancel: Some(cancel),
            recorder: None,
        },
    );
    sink.flush();
    *done.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
    done.1.notify_all();
    let _ = watchdog.join();
    let verified = match verified {
        Ok(v) => v,
        Err(error) => return Outcome::failed("setup", error.to_string()),
    };
    let report = &verified.report;
    let result = serde_json::to_value(report).ok();
    if timed_out.load(Ordering::SeqCst) {
        return Outcome {
            result,
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
            state: JobState::Succeeded,
            result,
            failure: None,
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
                    (category, f.reason.clone())
                },
            );
            Outcome {
                state: JobState::Failed,
                result,
                failure: Some(JobFailure { category, reason }),
            }
        }
    }
}

fn clone_job(service: &Service, job: &JobRow) -> Outcome {
    let inputs: CloneInputs = match inputs(job) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let parent = service.data_dir.join("workspaces");
    let dest = parent.join(job.id.as_str());
    if let Err(error) = std::fs::create_dir_all(&parent) {
        return Outcome::failed(
            "infra",
            format!("cannot create {}: {error}", parent.display()),
        );
    }
    // A previous attempt's leftovers.
    let _ = std::fs::remove_dir_all(&dest);
    match clone(&parent, &dest, &inputs) {
        Ok(commit) => Outcome {
            state: JobState::Succeeded,
            result: Some(serde_json::json!({
                "workspace": dest.display().to_string(),
                "commit": commit,
            })),
            failure: None,
        },
        Err(error) => {
            let _ = std::fs::remove_dir_all(&dest);
            Outcome::failed("setup", error.to_string())
        }
    }
}

fn clone(parent: &Path, dest: &Path, inputs: &CloneInputs) -> Result<String, cordon_git::GitError> {
    use cordon_git::{GitCommand, GitContext};
    let mut args = vec!["clone".to_owned(), "--quiet".into(), "--no-checkout".into()];
    if let Some(depth) = inputs.depth {
        args.push(format!("--depth={depth}"));
    }
    args.push("--".into());
    args.push(inputs.url.clone());
    args.push(dest.display().to_string());
    GitCommand::new(
        &GitContext::Discover {
            dir: parent.to_owned(),
        },
        &args,
    )
    .run()?;
    let rev = inputs.rev.as_deref().unwrap_or("HEAD");
    let repo = cordon_git::Repo::open(dest)?;
    let commit = repo.resolve_commit(rev)?;
    GitCommand::new(
        &GitContext::Discover {
            dir: dest.to_owned(),
        },
        ["checkout", "--quiet", "--detach", commit.as_str()],
    )
    .run()?;
    Ok(commit.as_str().to_owned())
}

fn apply_patch_job(service: &Service, job: &JobRow) -> Outcome {
    let inputs: ApplyPatchInputs = match inputs(job) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let root = match workspace_of(service, job, &inputs.workspace.from_job) {
        Ok(p) => p,
        Err(o) => return o,
    };
    match apply_and_commit(&root, &inputs, job) {
        Ok(result) => Outcome {
            state: JobState::Succeeded,
            result: Some(result),
            failure: None,
        },
        Err(outcome) => outcome,
    }
}

/// Applies the patch (all or nothing, paths confined), checks the expected files, and
/// commits, so that a later job at `HEAD` sees the change.
fn apply_and_commit(
    root: &Path,
    inputs: &ApplyPatchInputs,
    job: &JobRow,
) -> Result<serde_json::Value, Outcome> {
    use cordon_git::{GitCommand, GitContext};
    use sha2::{Digest, Sha256};
    let git_dir = root.join(".git");
    let worktree = cordon_git::Worktree::from_parts(git_dir.clone(), git_dir, root.to_owned());
    let context = GitContext::Discover {
        dir: root.to_owned(),
    };
    let git = |args: &[&str]| {
        GitCommand::new(&context, args)
            .run()
            .map_err(|e| Outcome::failed("setup", e.to_string()))
    };
    let changed = worktree
        .apply_patch(inputs.patch.as_bytes())
        .map_err(|e| Outcome::failed("usage", format!("the patch was refused: {e}")))?;
    let mut applied: Vec<String> = changed.iter().map(|c| c.path.to_string()).collect();
    applied.sort();
    if let Some(expected) = &inputs.expect_files {
        let mut expected = expected.clone();
        expected.sort();
        if expected != applied {
            // Back to the commit the patch was applied on: nothing of it stays.
            git(&["reset", "--quiet", "--hard", "HEAD"])?;
            git(&["clean", "--quiet", "-fd"])?;
            return Err(Outcome::failed(
                "usage",
                format!("the patch changes {applied:?}, not the expected {expected:?}"),
            ));
        }
    }
    git(&["add", "--all"])?;
    let numstat = git(&["diff", "--cached", "--numstat", "-z"])?;
    let (mut insertions, mut deletions) = (0u64, 0u64);
    for entry in numstat.stdout.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(entry);
        let mut fields = text.split('\t');
        insertions += fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        deletions += fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    }
    let patch_id: String = Sha256::digest(inputs.patch.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let message = format!("cordon job {}: patch {patch_id}", job.id);
    GitCommand::new(
        &context,
        ["commit", "--quiet", "--no-verify", "-m", &message],
    )
    .config(&[
        ("user.name".into(), "cordon".into()),
        ("user.email".into(), "cordon@localhost".into()),
    ])
    .run()
    .map_err(|e| Outcome::failed("setup", e.to_string()))?;
    let commit = cordon_git::Repo::open(root)
        .and_then(|r| r.resolve_commit("HEAD"))
        .map_err(|e| Outcome::failed("setup", e.to_string()))?;
    Ok(serde_json::json!({
        "workspace": root.display().to_string(),
        "commit": commit.as_str(),
        "applied_files": applied,
        "diff": {"files": changed.len(), "insertions": insertions, "deletions": deletions},
        "patch_id": patch_id,
    }))
}

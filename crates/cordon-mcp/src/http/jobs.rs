//! [`Jobs`]: the tools answered by the job service, each call a job of the caller's project.

use std::sync::Arc;
use std::time::Duration;

use cordon_server::{
    ApplyPatchInputs, CloneInputs, FromJob, JobDocument, JobRequest, JobType, RequestError,
    RunInputs, Service, SessionCompareInputs, SessionCreateInputs, SessionExecInputs,
    SessionForkInputs, SessionInputs, SessionRef, VerifyInputs,
};
use cordon_store::{JobFilter, JobId, JobRow, JobState, TokenRow};
use cordon_types::{ErrorClass, ErrorKind, exit_code};
use rmcp::model::{JsonObject, Tool};

use crate::catalogue::{Flavour, ToolName};
use crate::failure::ToolFailure;
use crate::inputs::{
    IdInput, RunInput, RunsLogsInput, SessionCompareInput, SessionCreateInput, SessionExecInput,
    SessionForkInput, SessionPullInput, StreamName, VerifyInput, WorkspaceApplyInput,
    WorkspaceCreateInput, parse as arguments,
};
use crate::outputs::{RunLogs, RunLogsTag};
use crate::server::{Backend, Call, RunEntry, ToolOutput};

/// How often a call looks for its job's new events.
const EVENT_POLL: Duration = Duration::from_millis(100);

/// The tools over the job service: those it has job types for, and the run history.
const SERVED: [ToolName; 12] = [
    ToolName::Run,
    ToolName::Verify,
    ToolName::WorkspaceCreate,
    ToolName::WorkspaceApply,
    ToolName::SessionCreate,
    ToolName::SessionExec,
    ToolName::SessionPull,
    ToolName::SessionRemove,
    ToolName::SessionFork,
    ToolName::SessionCompare,
    ToolName::RunsShow,
    ToolName::RunsLogs,
];

/// A session named over the job service: its `session_create` job's id, or `FORK_JOB:I` for
/// the `I`th (from 0) session a `session_fork` job made.
fn session_ref(id: &str) -> Result<SessionRef, ToolFailure> {
    match id.split_once(':') {
        None => Ok(SessionRef {
            from_job: id.to_owned(),
            fork: None,
        }),
        Some((job, index)) => {
            let fork = index.parse::<u32>().map_err(|_| {
                ToolFailure::usage(format!(
                    "session {id:?}: a fork's session is named FORK_JOB:I, with I its index \
                     from 0"
                ))
            })?;
            Ok(SessionRef {
                from_job: job.to_owned(),
                fork: Some(fork),
            })
        }
    }
}

/// The tools answered by the job service.
pub(super) struct Jobs {
    service: Arc<Service>,
}

/// A refusal of the service as a tool error (a policy rule or a budget names itself).
fn request_failure(error: RequestError) -> ToolFailure {
    let class = |code, kind| ErrorClass::new(code, kind);
    let (class, hint) = match &error {
        RequestError::Unauthorized | RequestError::Scope(_) => {
            (class(exit_code::USAGE, ErrorKind::Refused), None)
        }
        RequestError::NotFound => (class(exit_code::USAGE, ErrorKind::NotFound), None),
        RequestError::BadRequest(_) => (ErrorClass::USAGE, None),
        RequestError::Policy { rule, .. } => (
            class(exit_code::USAGE, ErrorKind::Refused),
            Some(format!("the project's policy refuses it ({rule})")),
        ),
        RequestError::Conflict { .. } => (class(exit_code::FAILED, ErrorKind::Conflict), None),
        RequestError::Budget { .. } => (
            class(exit_code::FAILED, ErrorKind::Refused),
            Some("the project's daily budget is spent; it resets at midnight UTC".to_owned()),
        ),
        RequestError::Busy(_) => (class(exit_code::FAILED, ErrorKind::Unavailable), None),
        _ => (ErrorClass::INTERNAL, None),
    };
    ToolFailure::of(class, &error, hint)
}

/// An input the job service does not take.
fn not_here(what: &str) -> ToolFailure {
    ToolFailure::usage(format!("{what} is not available over the job service"))
        .hint("`cordon mcp` (stdio, on the machine) takes it")
}

fn value(inputs: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(inputs).unwrap_or(serde_json::Value::Null)
}

impl Jobs {
    /// The tools over `service`.
    pub(super) fn new(service: Arc<Service>) -> Self {
        Jobs { service }
    }

    /// The caller's token.
    fn token(&self, call: &Call) -> Result<TokenRow, ToolFailure> {
        self.service
            .authenticate(call.authorization.as_deref())
            .map_err(request_failure)
    }

    /// Submits a job of the token's project and follows it to its end: its state and stage
    /// events as progress, the client's cancel as the job's. Returns the job as it ended.
    fn submit(
        &self,
        call: &Call,
        job_type: JobType,
        inputs: serde_json::Value,
        timeout: Option<String>,
    ) -> Result<JobRow, ToolFailure> {
        let token = self.token(call)?;
        let request = JobRequest {
            schema: None,
            project: token.project.clone(),
            job_type,
            inputs,
            timeout,
            idempotency_key: None,
            secrets: Vec::new(),
            env_keys: Vec::new(),
            priority: 0,
        };
        let (job, _) = self
            .service
            .submit(&token, &request)
            .map_err(request_failure)?;
        call.progress(format!("job {} ({}) queued", job.id, job_type.as_str()));
        self.follow(&token, &job.id, call)
    }

    /// Waits for job `id` to end, forwarding its events.
    fn follow(&self, token: &TokenRow, id: &JobId, call: &Call) -> Result<JobRow, ToolFailure> {
        let store = &self.service.store;
        let (mut after, mut cancelled) = (0, false);
        loop {
            let events = store.job_events(id, after, 200)?;
            let mut ended = false;
            for event in &events {
                after = event.seq;
                match event.kind.as_str() {
                    "state" => call.progress(format!(
                        "job {id}: {}",
                        event.data["state"].as_str().unwrap_or("?")
                    )),
                    "stage" => call.progress(format!(
                        "stage `{}`: {}",
                        event.data["stage"].as_str().unwrap_or("?"),
                        event.data["status"].as_str().unwrap_or("?")
                    )),
                    "end" => ended = true,
                    _ => {}
                }
            }
            if ended {
                return store
                    .get_job(id)?
                    .ok_or_else(|| ToolFailure::internal(format!("job {id} vanished")));
            }
            if call.cancel.is_cancelled() && !cancelled {
                cancelled = true;
                self.service
                    .cancel(token, id.as_str())
                    .map_err(request_failure)?;
            }
            if events.is_empty() {
                std::thread::sleep(EVENT_POLL);
            }
        }
    }

    /// A job that ended as the tool's answer: its result document, or a tool error when it
    /// has none (refused by policy at run time, bad inputs, cordon's failure).
    fn answer(
        job: &JobRow,
        summary: impl Fn(&serde_json::Value) -> String,
    ) -> Result<ToolOutput, ToolFailure> {
        match &job.result {
            Some(result) if !result.is_null() => Ok(ToolOutput {
                structured: result.clone(),
                summary: format!(
                    "job {}: {}\n{}",
                    job.id,
                    job.state.as_str(),
                    summary(result)
                ),
            }),
            _ => Err(Self::failure(job)),
        }
    }

    /// The tool error of a job that ended without a result.
    fn failure(job: &JobRow) -> ToolFailure {
        let failure: Option<cordon_server::JobFailure> = job
            .failure
            .clone()
            .and_then(|f| serde_json::from_value(f).ok());
        let (category, reason) = failure.map_or_else(
            || {
                (
                    "infra".to_owned(),
                    format!("job {} ended {}", job.id, job.state.as_str()),
                )
            },
            |f| (f.category, f.reason),
        );
        let class = match category.as_str() {
            "usage" => ErrorClass::USAGE,
            "policy" => ErrorClass::new(exit_code::USAGE, ErrorKind::Refused),
            "timeout" => ErrorClass::new(exit_code::TIMED_OUT, ErrorKind::Timeout),
            "cancelled" => ErrorClass::new(exit_code::FAILED, ErrorKind::Refused),
            _ => ErrorClass::INTERNAL,
        };
        ToolFailure::message(class, format!("job {} ({category}): {reason}", job.id))
    }

    /// A job as the answer of a tool whose result is the job itself (its id names what it
    /// made).
    fn job_answer(job: &JobRow) -> Result<ToolOutput, ToolFailure> {
        if job.state != JobState::Succeeded {
            return Err(Self::failure(job));
        }
        let document = JobDocument::from(job);
        let summary = format!(
            "job {} {}: {}",
            job.id,
            job.state.as_str(),
            job.result
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
        Ok(ToolOutput::of(&document, summary))
    }

    fn run(&self, input: RunInput, call: &Call) -> Result<ToolOutput, ToolFailure> {
        if input.cwd.is_some() {
            return Err(not_here("cwd").hint("run in a workspace (workspace_create's id)"));
        }
        if !input.env.is_empty() {
            return Err(not_here("env").hint("the project's policy passes variables by name"));
        }
        if input.no_sandbox {
            return Err(not_here("no_sandbox"));
        }
        let job = match &input.session {
            Some(session) => self.submit(
                call,
                JobType::SessionExec,
                value(&SessionExecInputs {
                    session: SessionRef {
                        from_job: session.clone(),
                        fork: None,
                    },
                    argv: input.argv,
                    read_only: false,
                    network: input.network,
                    memory: input.memory,
                    pids: input.pids,
                }),
                input.timeout,
            )?,
            None => self.submit(
                call,
                JobType::Run,
                value(&RunInputs {
                    argv: input.argv,
                    workspace: input.workspace.map(|from_job| FromJob { from_job }),
                    repo: None,
                    rev: None,
                    network: input.network,
                    memory: input.memory,
                    pids: input.pids,
                    output_limit: input.output_limit,
                }),
                input.timeout,
            )?,
        };
        Self::run_answer(&job)
    }

    /// A program's job: its run result, with the job's id in the summary.
    fn run_answer(job: &JobRow) -> Result<ToolOutput, ToolFailure> {
        let result: cordon_types::RunResult = match &job.result {
            Some(result) => serde_json::from_value(result.clone())
                .map_err(|e| ToolFailure::internal(format!("job {}'s result: {e}", job.id)))?,
            None => return Err(Self::failure(job)),
        };
        let mut output = crate::local::run_output(&result);
        output.summary = format!("job {}\n{}", job.id, output.summary);
        Ok(output)
    }

    fn session_exec(
        &self,
        input: SessionExecInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        for (given, what) in [
            (input.cwd.is_some(), "cwd"),
            (
                input.wait.is_some(),
                "wait (a writer waits within the job's timeout)",
            ),
            (!input.env.is_empty(), "env"),
        ] {
            if given {
                return Err(not_here(what));
            }
        }
        let job = self.submit(
            call,
            JobType::SessionExec,
            value(&SessionExecInputs {
                session: session_ref(&input.id)?,
                argv: input.argv,
                read_only: input.read_only,
                network: input.network,
                memory: input.memory,
                pids: input.pids,
            }),
            input.timeout,
        )?;
        Self::run_answer(&job)
    }

    fn verify(&self, input: VerifyInput, call: &Call) -> Result<ToolOutput, ToolFailure> {
        for (given, what) in [
            (input.session.is_some(), "session"),
            (input.base.is_some(), "base"),
            (input.project.is_some(), "project"),
            (input.keep_going, "keep_going"),
        ] {
            if given {
                return Err(not_here(what));
            }
        }
        if input.workspace.is_none() && input.repo.is_none() {
            return Err(ToolFailure::usage(
                "give `workspace` (workspace_create's id) or `repo` (a repository the server \
                 can reach)",
            ));
        }
        let job = self.submit(
            call,
            JobType::Verify,
            value(&VerifyInputs {
                workspace: input.workspace.map(|from_job| FromJob { from_job }),
                repo: input.repo,
                rev: input.rev,
                patch: input.patch,
                stages: input.stages,
                categories: None,
            }),
            None,
        )?;
        Self::answer(&job, |result| {
            serde_json::from_value::<cordon_types::RunReport>(result.clone())
                .map(|report| crate::local::report_summary(&report))
                .unwrap_or_default()
        })
    }

    fn places(
        &self,
        name: ToolName,
        args: JsonObject,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        match name {
            ToolName::WorkspaceCreate => {
                let input: WorkspaceCreateInput = arguments(name, args)?;
                let url = input.repo.ok_or_else(|| {
                    ToolFailure::usage("give `repo`: a repository the server can reach")
                })?;
                let inputs = CloneInputs {
                    url,
                    rev: input.rev,
                    depth: None,
                };
                Self::job_answer(&self.submit(call, JobType::RepoClone, value(&inputs), None)?)
            }
            ToolName::WorkspaceApply => {
                let input: WorkspaceApplyInput = arguments(name, args)?;
                let inputs = ApplyPatchInputs {
                    workspace: FromJob { from_job: input.id },
                    patch: input.patch,
                    expect_files: None,
                };
                Self::job_answer(&self.submit(
                    call,
                    JobType::RepoApplyPatch,
                    value(&inputs),
                    None,
                )?)
            }
            ToolName::SessionCreate => {
                let input: SessionCreateInput = arguments(name, args)?;
                if input.repo.is_some() || input.rev.is_some() || input.branch.is_some() {
                    return Err(not_here("repo, ref and branch")
                        .hint("give `workspace`: a workspace_create job's id"));
                }
                let workspace = input.workspace.ok_or_else(|| {
                    ToolFailure::usage("give `workspace`: a workspace_create job's id")
                })?;
                let inputs = SessionCreateInputs {
                    workspace: FromJob {
                        from_job: workspace,
                    },
                    depth: input.depth,
                    idle_timeout: input.idle_timeout,
                };
                let job = self.submit(call, JobType::SessionCreate, value(&inputs), None)?;
                Self::answer(&job, |_| "the session's id is this job's id".to_owned())
            }
            ToolName::SessionPull | ToolName::SessionRemove => {
                let (id, job_type) = if name == ToolName::SessionPull {
                    let input: SessionPullInput = arguments(name, args)?;
                    if input.into.is_some() {
                        return Err(not_here("into"));
                    }
                    (input.id, JobType::SessionPull)
                } else {
                    (arguments::<IdInput>(name, args)?.id, JobType::SessionRemove)
                };
                let inputs = SessionInputs {
                    session: session_ref(&id)?,
                };
                let job = self.submit(call, job_type, value(&inputs), None)?;
                Self::answer(&job, |result| result.to_string())
            }
            ToolName::SessionFork => {
                let input: SessionForkInput = arguments(name, args)?;
                let inputs = SessionForkInputs {
                    session: session_ref(&input.id)?,
                    count: input.count.unwrap_or(1),
                };
                let job = self.submit(call, JobType::SessionFork, value(&inputs), None)?;
                let names: Vec<String> = (0..inputs.count)
                    .map(|i| format!("{}:{i}", job.id))
                    .collect();
                Self::answer(&job, |_| {
                    format!(
                        "over this service, name the new sessions {} in the session tools",
                        names.join(", ")
                    )
                })
            }
            ToolName::SessionCompare => {
                let input: SessionCompareInput = arguments(name, args)?;
                if input.ids.is_empty() {
                    return Err(ToolFailure::usage("give `ids`: the sessions to compare"));
                }
                let inputs = SessionCompareInputs {
                    sessions: input
                        .ids
                        .iter()
                        .map(|id| session_ref(id))
                        .collect::<Result<_, _>>()?,
                    stages: input.stages,
                    categories: None,
                };
                let job = self.submit(call, JobType::SessionCompare, value(&inputs), None)?;
                Self::answer(&job, |result| {
                    let ranked = result["candidates"].as_array().map_or_else(Vec::new, |c| {
                        c.iter()
                            .map(|c| {
                                let text = |key: &str| c[key].as_str().unwrap_or("").to_owned();
                                format!("{}. {}: {}", c["rank"], text("id"), text("reason"))
                            })
                            .collect()
                    });
                    format!(
                        "{}\nwinner: {}",
                        ranked.join("\n"),
                        result["winner"]
                            .as_str()
                            .unwrap_or("none (no candidate passed)")
                    )
                })
            }
            _ => Err(ToolFailure::usage(format!(
                "{} is not available over the job service",
                name.as_str()
            ))),
        }
    }

    /// A job the token may see.
    fn visible(&self, id: &str, call: &Call) -> Result<JobRow, ToolFailure> {
        let token = self.token(call)?;
        self.service
            .visible_job(&token, id)
            .map_err(request_failure)
    }

    fn logs(&self, input: RunsLogsInput, call: &Call) -> Result<ToolOutput, ToolFailure> {
        let job = self.visible(&input.id, call)?;
        let max = input
            .max_bytes
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(64 << 10)
            .min(1 << 20);
        let stream = input.stream.map(|s| match s {
            StreamName::Stdout => "stdout",
            StreamName::Stderr => "stderr",
        });
        let mut text = String::new();
        let mut after = 0;
        loop {
            let page = self.service.store.job_events(&job.id, after, 1000)?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            let outputs = page.iter().filter(|e| e.kind == "output").filter(|e| {
                stream.is_none_or(|s| e.data["stream"] == s)
                    && input
                        .stage
                        .as_deref()
                        .is_none_or(|stage| e.data["stage"] == stage)
            });
            for event in outputs {
                text.push_str(event.data["text"].as_str().unwrap_or(""));
            }
        }
        let bytes = u64::try_from(text.len()).unwrap_or(u64::MAX);
        let kept = match input.from {
            crate::inputs::LogEnd::Head => head(&text, max),
            crate::inputs::LogEnd::Tail => tail(&text, max),
        };
        let logs = RunLogs {
            schema: RunLogsTag,
            run_id: job.id.to_string(),
            truncated: kept.len() < text.len(),
            text: kept.to_owned(),
            bytes,
            lost_bytes: 0,
        };
        let summary = format!(
            "{} of {bytes} bytes of job {}'s output:\n{}",
            kept.len(),
            job.id,
            kept
        );
        Ok(ToolOutput::of(&logs, summary))
    }
}

/// At most `max` bytes of the start of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// At most `max` bytes of the end of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

impl Backend for Jobs {
    fn tools(&self) -> Vec<Tool> {
        let flavour = Flavour {
            network: true,
            no_sandbox: false,
        };
        let job_schema = Arc::new(crate::catalogue::answer_schema::<JobDocument>());
        SERVED
            .into_iter()
            .map(|name| {
                let tool = crate::catalogue::tool(name, flavour);
                match name {
                    // Their answer is the job: its id names the workspace, or the run.
                    ToolName::WorkspaceCreate | ToolName::WorkspaceApply | ToolName::RunsShow => {
                        tool.with_raw_output_schema(Arc::clone(&job_schema))
                    }
                    _ => tool,
                }
            })
            .collect()
    }

    fn uses_roots(&self) -> bool {
        false
    }

    fn call(
        &self,
        name: ToolName,
        args: JsonObject,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        match name {
            ToolName::Run => self.run(arguments(name, args)?, call),
            ToolName::SessionExec => self.session_exec(arguments(name, args)?, call),
            ToolName::Verify => self.verify(arguments(name, args)?, call),
            ToolName::RunsShow => {
                let input: IdInput = arguments(name, args)?;
                let job = self.visible(&input.id, call)?;
                let summary = format!("job {} ({}) {}", job.id, job.job_type, job.state.as_str());
                Ok(ToolOutput::of(&JobDocument::from(&job), summary))
            }
            ToolName::RunsLogs => self.logs(arguments(name, args)?, call),
            ToolName::WorkspaceCreate
            | ToolName::WorkspaceApply
            | ToolName::SessionCreate
            | ToolName::SessionPull
            | ToolName::SessionRemove
            | ToolName::WorkspaceDiff
            | ToolName::WorkspaceRemove
            | ToolName::SessionDiff
            | ToolName::SessionFork
            | ToolName::SessionCompare
            | ToolName::SessionShow => self.places(name, args, call),
        }
    }

    fn recent_runs(&self, call: &Call) -> Result<Vec<RunEntry>, ToolFailure> {
        let token = self.token(call)?;
        cordon_server::require(&token, "read").map_err(request_failure)?;
        let jobs = self.service.store.list_jobs(&JobFilter {
            projects: vec![token.project.clone()],
            state: None,
            before: None,
            limit: 50,
        })?;
        Ok(jobs
            .iter()
            .map(|job| RunEntry {
                id: job.id.to_string(),
                description: format!("{} {}", job.job_type, job.state.as_str()),
            })
            .collect())
    }

    fn read_run(&self, id: &str, call: &Call) -> Result<serde_json::Value, ToolFailure> {
        let job = self.visible(id, call)?;
        Ok(serde_json::to_value(JobDocument::from(&job)).unwrap_or(serde_json::Value::Null))
    }
}

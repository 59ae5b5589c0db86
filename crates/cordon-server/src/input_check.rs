//! [`InputCheck`]: a submitted job's inputs, parsed for its type and checked against its
//! project's policy before the job is queued.

use cordon_store::JobId;
use cordon_types::units::parse_duration;

use crate::api::{
    ApplyPatchInputs, CloneInputs, FromJob, JobRequest, JobType, MAX_SESSIONS, RunInputs,
    SessionCompareInputs, SessionCreateInputs, SessionExecInputs, SessionForkInputs, SessionInputs,
    SessionRef, VerifyInputs,
};
use crate::policy::{NetworkRule, ProjectPolicy, Refusal};
use crate::service::{RequestError, Service, clone_remote};

/// The checks of one request's inputs: the service (for earlier jobs and its state
/// directories), the request, its project's key and rules.
pub(crate) struct InputCheck<'a> {
    pub(crate) service: &'a Service,
    pub(crate) request: &'a JobRequest,
    pub(crate) key: &'a str,
    pub(crate) rules: &'a ProjectPolicy,
}

fn bad(e: serde_json::Error) -> RequestError {
    RequestError::BadRequest(format!("inputs: {e}"))
}

fn refused(r: Refusal) -> RequestError {
    RequestError::Policy {
        rule: r.rule,
        reason: r.reason,
    }
}

impl InputCheck<'_> {
    /// Parses the type's inputs (400 with the field) and checks commands, repositories and
    /// networks against policy.
    pub(crate) fn check(&self) -> Result<(), RequestError> {
        let value = self.request.inputs.clone();
        match self.request.job_type {
            JobType::Run => {
                let inputs: RunInputs = serde_json::from_value(value).map_err(bad)?;
                self.program(&inputs.argv, &inputs.network)?;
                match (&inputs.workspace, &inputs.repo) {
                    (Some(_), Some(_)) => {
                        return Err(RequestError::BadRequest(
                            "inputs: give `workspace` or `repo`, not both".into(),
                        ));
                    }
                    (Some(f), None) => self.workspace(f)?,
                    (None, Some(url)) => self.repository(url, "repo")?,
                    (None, None) => {}
                }
                self.limits(&inputs.memory, inputs.pids, &inputs.output_limit)?;
            }
            JobType::Verify => {
                let inputs: VerifyInputs = serde_json::from_value(value).map_err(bad)?;
                match (&inputs.workspace, &inputs.repo) {
                    (Some(f), None) => self.workspace(f)?,
                    (None, Some(url)) => self.repository(url, "repo")?,
                    _ => {
                        return Err(RequestError::BadRequest(
                            "inputs: give exactly one of `workspace` and `repo`".into(),
                        ));
                    }
                }
                categories(inputs.categories.as_deref())?;
            }
            JobType::RepoApplyPatch => {
                let inputs: ApplyPatchInputs = serde_json::from_value(value).map_err(bad)?;
                self.workspace(&inputs.workspace)?;
            }
            JobType::RepoClone => {
                let inputs: CloneInputs = serde_json::from_value(value).map_err(bad)?;
                self.repository(&inputs.url, "url")?;
            }
            JobType::SessionCreate => {
                let inputs: SessionCreateInputs = serde_json::from_value(value).map_err(bad)?;
                self.workspace(&inputs.workspace)?;
                if let Some(idle) = &inputs.idle_timeout {
                    parse_duration(idle).map_err(|e| {
                        RequestError::BadRequest(format!("inputs.idle_timeout: {e}"))
                    })?;
                }
            }
            JobType::SessionPush | JobType::SessionPull | JobType::SessionRemove => {
                let inputs: SessionInputs = serde_json::from_value(value).map_err(bad)?;
                self.session(&inputs.session)?;
            }
            JobType::SessionExec => {
                let inputs: SessionExecInputs = serde_json::from_value(value).map_err(bad)?;
                self.program(&inputs.argv, &inputs.network)?;
                self.session(&inputs.session)?;
                self.limits(&inputs.memory, inputs.pids, &None)?;
            }
            JobType::SessionFork => {
                let inputs: SessionForkInputs = serde_json::from_value(value).map_err(bad)?;
                if inputs.count == 0 || inputs.count > MAX_SESSIONS {
                    return Err(RequestError::BadRequest(format!(
                        "inputs.count: {} is not within 1 to {MAX_SESSIONS}",
                        inputs.count
                    )));
                }
                self.session_at("session", &inputs.session)?;
            }
            JobType::SessionCompare => {
                let inputs: SessionCompareInputs = serde_json::from_value(value).map_err(bad)?;
                let n = inputs.sessions.len();
                if n == 0 || n > MAX_SESSIONS as usize {
                    return Err(RequestError::BadRequest(format!(
                        "inputs.sessions: {n} sessions; compare 1 to {MAX_SESSIONS}"
                    )));
                }
                let mut seen = std::collections::HashSet::new();
                for (i, session) in inputs.sessions.iter().enumerate() {
                    if !seen.insert(session) {
                        return Err(RequestError::BadRequest(format!(
                            "inputs.sessions[{i}] names the same session as an earlier entry \
                             ({}): compare each session once",
                            describe(session)
                        )));
                    }
                    self.session_at(&format!("sessions[{i}]"), session)?;
                }
                categories(inputs.categories.as_deref())?;
            }
        }
        Ok(())
    }

    /// `inputs.<field>.from_job` names an earlier job of this project, of one of the
    /// `wanted` types.
    fn earlier(&self, field: &str, id: &str, wanted: &[JobType]) -> Result<(), RequestError> {
        let id: JobId = id
            .parse()
            .map_err(|e| RequestError::BadRequest(format!("inputs.{field}.from_job: {e}")))?;
        let names: Vec<&str> = wanted.iter().map(|t| t.as_str()).collect();
        match self.service.store.get_job(&id)? {
            Some(job)
                if job.project == self.request.project
                    && JobType::parse(&job.job_type).is_some_and(|t| wanted.contains(&t)) =>
            {
                Ok(())
            }
            _ => Err(RequestError::BadRequest(format!(
                "inputs.{field}.from_job: no {} job {id} in this project",
                names.join(" or ")
            ))),
        }
    }

    /// A workspace made by an earlier `repo.clone` or `repo.apply_patch` job.
    fn workspace(&self, f: &FromJob) -> Result<(), RequestError> {
        self.earlier(
            "workspace",
            &f.from_job,
            &[JobType::RepoClone, JobType::RepoApplyPatch],
        )
    }

    /// A session made by an earlier `session.create` or `session.fork` job.
    fn session(&self, f: &SessionRef) -> Result<(), RequestError> {
        self.session_at("session", f)
    }

    /// A session made by an earlier `session.create` job, or one of a `session.fork` job's
    /// (`inputs.<field>`): the job of this project, and for a fork an index within its count.
    fn session_at(&self, field: &str, f: &SessionRef) -> Result<(), RequestError> {
        self.earlier(
            field,
            &f.from_job,
            &[JobType::SessionCreate, JobType::SessionFork],
        )?;
        let id: JobId = f
            .from_job
            .parse()
            .map_err(|e| RequestError::BadRequest(format!("inputs.{field}.from_job: {e}")))?;
        let Some(job) = self.service.store.get_job(&id)? else {
            return Err(RequestError::BadRequest(format!(
                "inputs.{field}.from_job: no job {id} in this project"
            )));
        };
        let forked = job.job_type == JobType::SessionFork.as_str();
        match (forked, f.fork) {
            (false, None) => Ok(()),
            (false, Some(_)) => Err(RequestError::BadRequest(format!(
                "inputs.{field}.fork: job {id} is a session.create job, which made one session; \
                 `fork` names one of a session.fork job's sessions"
            ))),
            (true, None) => Err(RequestError::BadRequest(format!(
                "inputs.{field}: job {id} is a session.fork job: name which of its sessions \
                 with `fork` (0 for the first)"
            ))),
            (true, Some(index)) => {
                let count = job
                    .inputs
                    .get("count")
                    .and_then(|c| c.as_u64())
                    .unwrap_or(1);
                if u64::from(index) >= count {
                    return Err(RequestError::BadRequest(format!(
                        "inputs.{field}.fork: {index} is past the {count} sessions job {id} \
                         makes (0 to {})",
                        count - 1
                    )));
                }
                Ok(())
            }
        }
    }

    /// A repository the server clones on the host: its URL against the allow rules
    /// (`["git", "clone", URL]`) and its host against `repo.clone`'s network.
    fn repository(&self, url: &str, field: &str) -> Result<(), RequestError> {
        let (key, rules) = (self.key, self.rules);
        if url.is_empty() || url.starts_with('-') || url.contains('\0') {
            return Err(RequestError::BadRequest(format!(
                "inputs.{field} is invalid"
            )));
        }
        rules
            .check_command(key, &["git".into(), "clone".into(), url.to_owned()])
            .map_err(refused)?;
        // `run` and `verify` of a `repo` clone on the host as `repo.clone` does: the
        // project must be allowed that.
        if field == "repo"
            && !rules
                .job_types
                .iter()
                .any(|t| t == JobType::RepoClone.as_str())
        {
            return Err(RequestError::Policy {
                rule: format!("projects.{key}.job_types"),
                reason: "inputs.repo clones on the server's host, as repo.clone does, \
                         which this project may not"
                    .into(),
            });
        }
        if let Some(path) = crate::sources::local_path(url) {
            crate::sources::check_local(&path, &self.service.state_dirs())
                .and_then(|real| crate::sources::check_git_dir(&real))
                .map_err(|reason| RequestError::Policy {
                    rule: "repository".into(),
                    reason: format!("inputs.{field}: {reason}"),
                })?;
        }
        if let Some(host) = clone_remote(url) {
            rules
                .check_network(key, "repo.clone", &NetworkRule::Allow(vec![host]))
                .map_err(refused)?;
        }
        Ok(())
    }

    /// A program the job runs: its command line against the allow rules, the network it
    /// asks for against the job type's.
    fn program(&self, argv: &[String], network: &Option<NetworkRule>) -> Result<(), RequestError> {
        if argv.is_empty() {
            return Err(RequestError::BadRequest("inputs.argv is empty".into()));
        }
        self.rules.check_command(self.key, argv).map_err(refused)?;
        if let Some(network) = network {
            self.rules
                .check_network(self.key, self.request.job_type.as_str(), network)
                .map_err(refused)?;
        }
        Ok(())
    }

    /// Limits a job asks for: well-formed, enough to start anything, within the project's.
    fn limits(
        &self,
        memory: &Option<String>,
        pids: Option<u64>,
        output_limit: &Option<String>,
    ) -> Result<(), RequestError> {
        let max = &self.rules.limits;
        let over = |what: &str, asked: String, most: String| RequestError::Policy {
            rule: format!("projects.{}.limits.{what}", self.key),
            reason: format!("inputs.{what} {asked} is over the project's {most}"),
        };
        if let Some(text) = memory {
            let bytes = cordon_types::units::parse_size(text)
                .map_err(|e| RequestError::BadRequest(format!("inputs.memory: {e}")))?;
            if bytes < crate::policy::MIN_MEMORY {
                return Err(RequestError::BadRequest(
                    "inputs.memory: at least 16MiB (nothing starts in less)".into(),
                ));
            }
            if bytes > max.memory_bytes() {
                return Err(over("memory", text.clone(), max.memory.clone()));
            }
        }
        if let Some(pids) = pids {
            if pids == 0 {
                return Err(RequestError::BadRequest("inputs.pids: at least 1".into()));
            }
            if pids > max.pids {
                return Err(over("pids", pids.to_string(), max.pids.to_string()));
            }
        }
        if let Some(text) = output_limit {
            let bytes = cordon_types::units::parse_size(text)
                .map_err(|e| RequestError::BadRequest(format!("inputs.output_limit: {e}")))?;
            if bytes > max.output_bytes() {
                return Err(over("output_limit", text.clone(), max.output_limit.clone()));
            }
        }
        Ok(())
    }
}

/// A session reference as an error names it.
fn describe(session: &SessionRef) -> String {
    match session.fork {
        Some(i) => format!("fork {i} of job {}", session.from_job),
        None => format!("the session of job {}", session.from_job),
    }
}

/// Stage categories asked for: each one cordon knows.
fn categories(asked: Option<&[String]>) -> Result<(), RequestError> {
    for category in asked.into_iter().flatten() {
        if !crate::execute::STAGE_CATEGORIES.contains(&category.as_str()) {
            return Err(RequestError::BadRequest(format!(
                "inputs.categories: unknown category {category:?} (known: {})",
                crate::execute::STAGE_CATEGORIES.join(", ")
            )));
        }
    }
    Ok(())
}

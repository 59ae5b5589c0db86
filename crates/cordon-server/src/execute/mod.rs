//! One attempt of one job: the type's work, through the crates that do it (`cordon-runner`
//! for programs, `cordon-verify` for verifications, hardened `cordon-git` for clones and
//! patches, `cordon-session` for sessions), with live output (already redacted by the
//! runner) written to the job's event log.

mod failure;
mod program;
mod repo;
mod session;
mod sink;
mod verify;

use std::path::PathBuf;
use std::sync::Arc;

use cordon_exec::CancelHandle;
use cordon_store::{JobId, JobRow, JobState};

use crate::api::{JobFailure, JobType};
use crate::policy::Policy;
use crate::secrets::SecretValues;
use crate::service::Service;

pub(crate) use sink::EventSink;

/// The stage categories a `verify` job may select.
pub const STAGE_CATEGORIES: &[&str] = &[
    "setup",
    "lint",
    "typecheck",
    "compile",
    "test",
    "build",
    "smoke",
    "migrate",
];

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `succeeded`, `failed` or `cancelled`.
    pub state: JobState,
    /// The type's output document.
    pub result: Option<serde_json::Value>,
    /// Why it failed.
    pub failure: Option<JobFailure>,
    /// CPU time of the attempt's programs (user + system, whole trees), milliseconds.
    pub cpu_ms: u64,
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
            cpu_ms: 0,
        }
    }

    pub(crate) fn succeeded(result: serde_json::Value) -> Self {
        Outcome {
            state: JobState::Succeeded,
            result: Some(result),
            failure: None,
            cpu_ms: 0,
        }
    }
}

/// What every job type's work needs: the service, the job, its cancel handle, the policy
/// and the server's secrets as they were when the attempt started.
pub(crate) struct Attempt<'a> {
    pub(crate) service: &'a Service,
    pub(crate) job: &'a JobRow,
    pub(crate) cancel: &'a Arc<CancelHandle>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) secrets: Arc<SecretValues>,
}

impl Attempt<'_> {
    /// The job's inputs as the type's input struct (the server's own `secrets` and
    /// `env_keys` entries removed).
    pub(crate) fn inputs<T: serde::de::DeserializeOwned>(&self) -> Result<T, Outcome> {
        let mut value = self.job.inputs.clone();
        if let Some(map) = value.as_object_mut() {
            map.remove("secrets");
            map.remove("env_keys");
        }
        serde_json::from_value(value).map_err(|e| Outcome::failed("usage", format!("inputs: {e}")))
    }

    fn names(&self, key: &str) -> Vec<String> {
        self.job
            .inputs
            .get(key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// The secrets the job asked for (by name; values come from the secrets file, else the
    /// server's environment).
    /// (Those the project's policy no longer allows — it was reloaded since — are left out.)
    pub(crate) fn secret_names(&self) -> Vec<String> {
        let allowed = self
            .policy
            .project(&self.job.project)
            .map(|(_, rules)| rules.secrets.clone())
            .unwrap_or_default();
        self.names("secrets")
            .into_iter()
            .filter(|name| allowed.contains(name))
            .collect()
    }

    /// The variables of the server's environment the job asked for.
    /// (Those the project's policy no longer allows — it was reloaded since — are left out.)
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let allowed = self
            .rules()
            .map(|rules| rules.env_keys.clone())
            .unwrap_or_default();
        self.names("env_keys")
            .into_iter()
            .filter(|name| allowed.contains(name))
            .filter_map(|k| std::env::var(&k).ok().map(|v| (k, v)))
            .collect()
    }

    /// The project's rules in the policy of this attempt.
    pub(crate) fn rules(&self) -> Option<&crate::policy::ProjectPolicy> {
        self.policy
            .project(&self.job.project)
            .map(|(_, rules)| rules)
    }

    /// The project's credentials (checked when the policy was loaded).
    pub(crate) fn credentials(&self) -> Vec<cordon_proxy::Credential> {
        self.rules()
            .map(|rules| rules.credentials.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|spec| cordon_proxy::Credential::parse(spec).ok())
            .collect()
    }

    /// The secret values redacted from the job's output: those of the secrets and the
    /// credentials the project may use (a credential's value also goes to the proxy, never
    /// to the job). Another project's values are not matched: a job printing guesses would
    /// otherwise learn which guess is another project's secret, and under which name.
    pub(crate) fn secret_values(&self) -> Vec<(String, String)> {
        let mut allowed = self
            .rules()
            .map(|rules| rules.secrets.clone())
            .unwrap_or_default();
        allowed.extend(self.credentials().into_iter().map(|c| c.name));
        self.secrets
            .pairs()
            .iter()
            .filter(|(name, _)| allowed.contains(name))
            .cloned()
            .collect()
    }

    /// The project's limits in the policy of this attempt (the built-in ones when the
    /// project has no rules any more; such a job is refused before it runs anyway).
    pub(crate) fn limits(&self) -> crate::policy::JobLimits {
        self.rules().map(|r| r.limits.clone()).unwrap_or_default()
    }

    /// A scratch directory of this attempt (removed by the caller, and when its worker
    /// starts again).
    pub(crate) fn scratch(&self) -> PathBuf {
        self.service
            .scratch_dir()
            .join(format!("{}-{}", self.job.id, self.job.attempt))
    }

    /// The output of an earlier job of this project that succeeded: its result document.
    pub(crate) fn earlier_result(
        &self,
        from: &str,
        wanted: &[JobType],
    ) -> Result<serde_json::Value, Outcome> {
        let id: JobId = from
            .parse()
            .map_err(|e| Outcome::failed("usage", format!("{e}")))?;
        let source = self
            .service
            .store
            .get_job(&id)
            .map_err(|e| Outcome::failed("infra", e.to_string()))?
            .filter(|j| j.project == self.job.project)
            .filter(|j| JobType::parse(&j.job_type).is_some_and(|t| wanted.contains(&t)))
            .ok_or_else(|| Outcome::failed("usage", format!("no such job {id} in this project")))?;
        if source.state != JobState::Succeeded {
            return Err(Outcome::failed(
                "usage",
                format!("job {id} is {}, not succeeded", source.state.as_str()),
            ));
        }
        source
            .result
            .ok_or_else(|| Outcome::failed("usage", format!("job {id} has no result")))
    }

    /// The workspace directory an earlier `repo.clone` or `repo.applyPatch` job produced.
    pub(crate) fn workspace_of(&self, from: &str) -> Result<PathBuf, Outcome> {
        let result = self.earlier_result(from, &[JobType::RepoClone, JobType::RepoApplyPatch])?;
        let path = result
            .get("workspace")
            .and_then(|w| w.as_str())
            .map(PathBuf::from)
            .ok_or_else(|| Outcome::failed("usage", format!("job {from} produced no workspace")))?;
        if !path.is_dir() {
            let made_by = from
                .parse::<JobId>()
                .ok()
                .and_then(|id| self.service.store.get_job(&id).ok().flatten())
                .and_then(|j| j.worker)
                .unwrap_or_default();
            let reason = if !made_by.is_empty() && made_by != self.service.worker_name {
                format!(
                    "the workspace of job {from} is on worker {made_by}'s disk, not on this \
                     worker's ({}): workers that share workspaces need a shared CORDON_HOME/serve",
                    self.service.worker_name
                )
            } else {
                format!("the workspace of job {from} is gone")
            };
            return Err(Outcome::failed("usage", reason));
        }
        crate::retention::touch(&path);
        Ok(path)
    }
}

/// Runs one attempt of `job`.
pub fn execute(service: &Service, job: &JobRow, cancel: &Arc<CancelHandle>) -> Outcome {
    let attempt = Attempt {
        service,
        job,
        cancel,
        policy: service.policy(),
        secrets: service.secrets(),
    };
    let outcome = match JobType::parse(&job.job_type) {
        Some(JobType::Run) => program::run_job(&attempt),
        Some(JobType::Verify) => verify::verify_job(&attempt),
        Some(JobType::RepoClone) => repo::clone_job(&attempt),
        Some(JobType::RepoApplyPatch) => repo::apply_patch_job(&attempt),
        Some(JobType::SessionCreate) => session::create_job(&attempt),
        Some(JobType::SessionPush) => session::push_job(&attempt),
        Some(JobType::SessionExec) => session::exec_job(&attempt),
        Some(JobType::SessionPull) => session::pull_job(&attempt),
        Some(JobType::SessionRemove) => session::remove_job(&attempt),
        Some(JobType::SessionFork) => session::fork_job(&attempt),
        Some(JobType::SessionCompare) => session::compare_job(&attempt),
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
                failure: Some(JobFailure {
                    category: "cancelled".into(),
                    reason: "the job was cancelled".into(),
                }),
                ..outcome
            };
        }
    }
    outcome
}

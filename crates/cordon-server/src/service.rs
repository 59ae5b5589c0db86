//! The service's decisions, transport-free: authenticate, check policy and budgets, enqueue,
//! cancel. Blocking (the store blocks): the HTTP layer calls these from blocking tasks.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use cordon_exec::CancelHandle;
use cordon_store::{JobId, JobRow, JobState, NewJob, Store, TokenRow};
use cordon_types::units::parse_duration;
use sha2::{Digest, Sha256};

use crate::api::JobRequest;
use crate::policy::Policy;
use crate::secrets::SecretValues;

/// What may go wrong serving a request; the HTTP layer maps each to a status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// No token.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// A token that does not work: unknown, expired or revoked (which one is said).
    #[error("{0}")]
    TokenRefused(&'static str),
    /// The token lacks the scope.
    #[error("the token lacks the `{0}` scope")]
    Scope(&'static str),
    /// Nothing the token may see has this id.
    #[error("no such job")]
    NotFound,
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// Policy refuses it.
    #[error("{reason}")]
    Policy {
        /// The rule that refused.
        rule: String,
        /// Why.
        reason: String,
    },
    /// The idempotency key already names a job submitted with a different type or inputs.
    #[error("{message}")]
    Conflict {
        /// The job the key names.
        job: String,
        /// What is wrong.
        message: String,
    },
    /// Too many of something the client holds open (live-log streams): try again later.
    #[error("{0}")]
    Busy(String),
    /// The project's daily budget is spent.
    #[error("the project's daily budget is spent")]
    Budget {
        /// When it resets (Unix epoch ms).
        resets_at_ms: i64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cordon_store::StoreError),
    /// The server failed in a way the client cannot act on (the details are in its log).
    #[error("the server failed to answer; its log says why")]
    Internal,
}

/// The scopes a token may carry.
pub const SCOPES: &[&str] = &["submit", "read", "admin"];

/// Everything the request handlers and the workers share.
#[derive(Debug)]
pub struct Service {
    /// The store: queue, events, tokens, audit.
    pub store: Store,
    /// The policy in force (replaced on reload).
    pub policy: RwLock<Arc<Policy>>,
    /// The values of the policy's secrets file (replaced on reload).
    pub secrets: RwLock<Arc<SecretValues>>,
    /// Where the policy comes from (`None`: built in).
    pub policy_path: Option<PathBuf>,
    /// Where workspaces of `repo.clone` jobs live.
    pub data_dir: PathBuf,
    /// The first retry waits this long; each next one twice as long.
    pub retry_backoff: Duration,
    /// The jobs this process's workers run.
    pub running: Mutex<HashMap<JobId, Arc<RunningJob>>>,
    /// This process's worker name in the store (unique among the live workers sharing it).
    pub worker_name: String,
    /// How long a claimed job stays this process's without a renewal.
    pub lease: Duration,
    /// Wakes idle workers (a job was queued or a slot freed).
    pub wake: (Mutex<u64>, Condvar),
    /// Set when the server stops: running jobs are ended and requeued, not cancelled.
    pub shutting_down: std::sync::atomic::AtomicBool,
    /// The projects past a daily budget, as last counted (jobs queued before the budget ran
    /// out wait for the next day), and when they were counted.
    pub over_budget: Mutex<Option<(std::time::Instant, Vec<String>)>>,
    /// The open live-log streams (bounded per token and in all).
    pub live_streams: Arc<crate::streams::LiveStreams>,
    /// Wakes the webhook sender when a delivery is queued.
    pub webhook_wake: crate::webhooks::Wake,
    /// Wakes live logs when their job has new events.
    pub live_wake: Arc<crate::live_wake::LiveWake>,
    /// How this process's workers registered in the store (`None`: it runs no jobs).
    pub worker_info: Option<cordon_store::WorkerInfo>,
    /// Set once an operator asked this process's workers to drain (`cordon worker --drain`):
    /// they finish their running jobs and claim no new ones.
    pub draining: std::sync::atomic::AtomicBool,
}

/// A job one of this process's workers runs.
#[derive(Debug)]
pub struct RunningJob {
    /// The attempt it runs (its writes are fenced by it).
    pub attempt: u32,
    /// Ends its process tree.
    pub cancel: Arc<CancelHandle>,
    /// When its lease was last renewed.
    pub renewed: Mutex<std::time::Instant>,
    /// Set when the lease is lost: the attempt must not write anything more.
    pub lost: std::sync::atomic::AtomicBool,
    /// Set once the attempt's end is recorded: it holds no lease any more (the heartbeat
    /// neither renews it nor takes the refused renewal for a lost lease).
    pub ended: std::sync::atomic::AtomicBool,
}

impl RunningJob {
    /// A job just claimed (its lease fresh).
    pub fn new(attempt: u32, cancel: Arc<CancelHandle>) -> Self {
        RunningJob {
            attempt,
            cancel,
            renewed: Mutex::new(std::time::Instant::now()),
            lost: std::sync::atomic::AtomicBool::new(false),
            ended: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether the attempt's end is recorded.
    pub fn has_ended(&self) -> bool {
        self.ended.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The lease is gone: the job's process tree is ended and nothing more is written.
    pub fn lose(&self) {
        self.lost.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cancel.cancel();
    }

    /// Whether the lease was lost.
    pub fn is_lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The SHA-256 of a token, hex (what the store keeps).
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Creates a token for `project` with `scopes` (and a `name` for people): returns `(id,
/// secret)`. The secret is shown once; the store keeps only its hash.
pub fn create_token(
    store: &Store,
    project: &str,
    scopes: &[String],
    expires: Option<Duration>,
    name: Option<&str>,
) -> Result<(String, String), RequestError> {
    if name.is_some_and(|n| n.trim().is_empty() || n.len() > 200) {
        return Err(RequestError::BadRequest(
            "a token's name is 1 to 200 characters".into(),
        ));
    }
    if let Some(bad) = scopes.iter().find(|s| !SCOPES.contains(&s.as_str())) {
        return Err(RequestError::BadRequest(format!(
            "unknown scope {bad:?} (known: submit, read, admin)"
        )));
    }
    if project.is_empty() {
        return Err(RequestError::BadRequest("the project is empty".into()));
    }
    if project == crate::access::ALL_PROJECTS && !scopes.iter().any(|s| s == "admin") {
        return Err(RequestError::BadRequest(
            "a token for every project (`*`) is an operator token: it needs the admin scope".into(),
        ));
    }
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| RequestError::BadRequest(e.to_string()))?;
    let secret: String = std::iter::once("cdn_".to_owned())
        .chain(bytes.iter().map(|b| format!("{b:02x}")))
        .collect();
    let expires_at = expires.map(|d| now_ms() + i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let id = store.create_named_token(&token_hash(&secret), project, scopes, expires_at, name)?;
    store.audit(
        "cli",
        "token.create",
        &id,
        &serde_json::json!({"project": project, "scopes": scopes, "name": name}),
    )?;
    Ok((id, secret))
}

/// Asks worker `name` to drain (`cordon worker --drain`): it finishes its running jobs, takes
/// no new ones and (`cordon worker`) stops. `false` when no worker of that name is registered.
pub fn drain_worker(store: &Store, name: &str) -> Result<bool, RequestError> {
    let found = store.drain_worker(name)?;
    if found {
        store.audit("cli", "worker.drain", name, &serde_json::json!({}))?;
    }
    Ok(found)
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

const DAY_MS: i64 = 86_400_000;

/// A token's last use is recorded to this resolution (one write per token at most this often).
const TOKEN_USE_RESOLUTION_MS: i64 = 60_000;

/// How long a cancel waits for a running job to reach its final state before it answers with
/// the job still `cancelling` (its worker may be on another machine, or slow to stop it).
pub const CANCEL_WAIT: Duration = Duration::from_secs(5);

impl Service {
    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The secret values in force.
    pub fn secrets(&self) -> Arc<SecretValues> {
        Arc::clone(&self.secrets.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Re-reads the policy file and its secrets file (SIGHUP); keeps the old ones when
    /// either is invalid.
    pub fn reload_policy(&self) -> Result<(), crate::policy::PolicyError> {
        if let Some(path) = &self.policy_path {
            let fresh = Policy::load(path)?;
            let secrets = fresh.load_secrets()?;
            *self.policy.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
            *self.secrets.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(secrets);
            self.notify();
        }
        Ok(())
    }

    /// Asks a running job to stop: flagged in the store (its worker, here or on another
    /// machine, ends its process tree) and, when it runs here, cancelled at once.
    pub fn cancel_running(&self, id: &JobId) -> Result<(), RequestError> {
        self.store.cancel_job(id)?;
        if let Some(job) = self.running_job(id) {
            job.cancel.cancel();
        }
        Ok(())
    }

    /// Why a queued job is held back, if something holds it: its project's daily budget is
    /// spent (it runs once the budget resets), or it waits for its retry's backoff.
    pub fn waiting_reason(&self, job: &JobRow) -> Result<Option<String>, RequestError> {
        if job.state != JobState::Queued {
            return Ok(None);
        }
        let now = now_ms();
        let policy = self.policy();
        if let Some((key, rules)) = policy.project(&job.project)
            && (rules.daily_wall().is_some() || rules.daily_cpu().is_some())
        {
            let day_start = now - now.rem_euclid(DAY_MS);
            let used = self.store.project_usage(&job.project, day_start)?;
            let spent = |budget: Option<Duration>, used: u64| {
                budget.is_some_and(|b| u128::from(used) >= b.as_millis())
            };
            if spent(rules.daily_wall(), used.wall_ms) || spent(rules.daily_cpu(), used.cpu_ms) {
                let resets = humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH
                        + Duration::from_millis(u64::try_from(day_start + DAY_MS).unwrap_or(0)),
                );
                return Ok(Some(format!(
                    "project {:?} spent its daily budget (projects.{key}.daily_budget): the job \
                     runs after it resets at {resets}",
                    job.project
                )));
            }
        }
        if job.not_before_ms > now {
            return Ok(Some(format!(
                "attempt {} failed; the next one waits {} ms for its backoff",
                job.attempt,
                job.not_before_ms - now
            )));
        }
        if job.slots > 1
            && let Some((key, rules)) = policy.project(&job.project)
        {
            return self.slots_wait(job, key, rules.concurrency, policy.workers);
        }
        Ok(None)
    }

    /// Why a job holding several slots waits, when too few are free now.
    fn slots_wait(
        &self,
        job: &JobRow,
        key: &str,
        concurrency: u32,
        workers: u32,
    ) -> Result<Option<String>, RequestError> {
        let running = self.store.list_jobs(&cordon_store::JobFilter {
            projects: Vec::new(),
            state: Some(JobState::Running),
            before: None,
            limit: 10_000,
        })?;
        let held = |j: &JobRow| i64::from(j.slots.min(workers).max(1));
        let total: i64 = running.iter().map(held).sum();
        let busy: i64 = running
            .iter()
            .filter(|j| j.project == job.project)
            .map(held)
            .sum();
        let need = cordon_store::effective_slots(i64::from(job.slots), concurrency, workers);
        if busy + need <= i64::from(concurrency) && total + need <= i64::from(workers) {
            return Ok(None);
        }
        Ok(Some(format!(
            "this {} runs {need} verifications at once and holds {need} slots of the \
             concurrency limits: it starts when {need} are free (project {:?}: {busy} of {} \
             busy, projects.{key}.concurrency; all projects: {total} of {workers} workers busy)",
            job.job_type, job.project, concurrency
        )))
    }

    /// Counts again which projects are past a daily budget, when the last count is more
    /// than a few seconds old. Called before a claim (never inside one: it asks the store).
    pub fn refresh_over_budget(&self) {
        const RECOUNT: Duration = Duration::from_secs(5);
        let stale = self
            .over_budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= RECOUNT);
        if stale {
            let projects = self.count_over_budget();
            *self.over_budget.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((std::time::Instant::now(), projects));
        }
    }

    /// Whether `project` was past one of its daily budgets at the last count.
    pub fn is_over_budget(&self, project: &str) -> bool {
        self.over_budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|(_, projects)| projects.iter().any(|p| p == project))
    }

    fn count_over_budget(&self) -> Vec<String> {
        let policy = self.policy();
        let now = now_ms();
        let day_start = now - now.rem_euclid(DAY_MS);
        let Ok(depth) = self.store.queue_depth() else {
            return Vec::new();
        };
        depth
            .into_iter()
            .map(|d| d.project)
            .filter(|project| {
                let Some((_, rules)) = policy.project(project) else {
                    return false;
                };
                let (wall, cpu) = (rules.daily_wall(), rules.daily_cpu());
                if wall.is_none() && cpu.is_none() {
                    return false;
                }
                let Ok(used) = self.store.project_usage(project, day_start) else {
                    return false;
                };
                let spent = |budget: Option<Duration>, used: u64| {
                    budget.is_some_and(|b| u128::from(used) >= b.as_millis())
                };
                spent(wall, used.wall_ms) || spent(cpu, used.cpu_ms)
            })
            .collect()
    }

    /// The scratch directories of this process's workers: `scratch/<worker name>` under the
    /// data directory, so that processes sharing it never remove each other's.
    pub fn scratch_dir(&self) -> PathBuf {
        let name: String = self
            .worker_name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.data_dir.join("scratch").join(name)
    }

    /// A job this process runs.
    pub fn running_job(&self, id: &JobId) -> Option<Arc<RunningJob>> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Every job this process runs.
    pub fn running_jobs(&self) -> Vec<(JobId, Arc<RunningJob>)> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, job)| (id.clone(), Arc::clone(job)))
            .collect()
    }

    /// Wakes the workers.
    pub fn notify(&self) {
        let (lock, cvar) = &self.wake;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        cvar.notify_all();
    }

    /// The token behind an `Authorization` header value.
    pub fn authenticate(&self, header: Option<&str>) -> Result<TokenRow, RequestError> {
        // The scheme is case-insensitive (RFC 7235).
        let secret = header
            .and_then(|h| h.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, secret)| secret.trim())
            .filter(|s| !s.is_empty())
            .ok_or(RequestError::Unauthorized)?;
        let hash = token_hash(secret);
        let Some(token) = self.store.find_token(&hash)? else {
            // Why it does not work, as the dashboard's login says: the client can act on it.
            let why = match self.store.token_by_hash(&hash)? {
                Some(t) if t.revoked_at_ms.is_some() => "this token was revoked",
                Some(_) => "this token has expired",
                None => "this token is unknown to this server",
            };
            return Err(RequestError::TokenRefused(why));
        };
        // Its last use, to the minute (one write a minute at most per token).
        if token
            .last_used_at_ms
            .is_none_or(|at| now_ms() - at >= TOKEN_USE_RESOLUTION_MS)
            && let Err(error) = self.store.touch_token(&token.id)
        {
            eprintln!("cordon: cannot record token {}'s use: {error}", token.id);
        }
        Ok(token)
    }

    /// cordon's own state, which no job may clone from: the service's data directory and
    /// `CORDON_HOME` (workspaces, bases, the run history).
    pub fn state_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.data_dir.clone()];
        if let Ok(home) = cordon_types::cordon_home() {
            dirs.push(home);
        }
        dirs
    }

    /// A job the token may see (another project's job is "not found"; an operator token sees
    /// every project's).
    pub fn visible_job(&self, token: &TokenRow, id: &str) -> Result<JobRow, RequestError> {
        require(token, "read")?;
        self.job_of(token, id)
    }

    /// A job of the token's project (any project's for an operator token), whatever its
    /// scopes.
    fn job_of(&self, token: &TokenRow, id: &str) -> Result<JobRow, RequestError> {
        let id: JobId = id.parse().map_err(|_| RequestError::NotFound)?;
        match self.store.get_job(&id)? {
            Some(job) if crate::access::sees(token, &job.project) => Ok(job),
            _ => Err(RequestError::NotFound),
        }
    }

    fn submit_job(
        &self,
        token: &TokenRow,
        request: &JobRequest,
        rerun_of: Option<JobId>,
    ) -> Result<(JobRow, bool), RequestError> {
        require(token, "submit")?;
        for (field, value, limit) in [
            ("project", Some(&request.project), 200),
            ("idempotency_key", request.idempotency_key.as_ref(), 200),
        ] {
            if value.is_some_and(|v| v.len() > limit) {
                return Err(RequestError::BadRequest(format!(
                    "{field} is longer than {limit} bytes"
                )));
            }
        }
        if request.project == crate::access::ALL_PROJECTS {
            return Err(RequestError::BadRequest(
                "`*` names every project, not one: submit for a project".into(),
            ));
        }
        if request.project != token.project {
            return Err(RequestError::Policy {
                rule: "token.project".into(),
                reason: format!(
                    "this token acts for project {:?}, not {:?}",
                    token.project, request.project
                ),
            });
        }
        let mut inputs = request.inputs.clone();
        if let Some(map) = inputs.as_object_mut() {
            map.insert("secrets".into(), serde_json::json!(request.secrets));
            map.insert("env_keys".into(), serde_json::json!(request.env_keys));
        }
        // A retried submission gets its job back, whatever the budget says now; a different
        // request under the same key is refused, never answered with another request's job.
        if let Some(key) = &request.idempotency_key
            && let Some(job) = self.store.find_job_by_key(&request.project, key)?
        {
            return same_request(job, request.job_type.as_str(), &inputs).map(|job| (job, false));
        }
        let policy = self.policy();
        let Some((key, rules)) = policy.project(&request.project) else {
            return Err(RequestError::Policy {
                rule: "projects".into(),
                reason: format!(
                    "no rules for project {:?} and no `*` rules",
                    request.project
                ),
            });
        };
        if !rules
            .job_types
            .iter()
            .any(|t| t == request.job_type.as_str())
        {
            return Err(RequestError::Policy {
                rule: format!("projects.{key}.job_types"),
                reason: format!("job type {} is not allowed", request.job_type.as_str()),
            });
        }
        for (names, allowed, what) in [
            (&request.secrets, &rules.secrets, "secrets"),
            (&request.env_keys, &rules.env_keys, "env_keys"),
        ] {
            if let Some(name) = names.iter().find(|n| !allowed.contains(n)) {
                return Err(RequestError::Policy {
                    rule: format!("projects.{key}.{what}"),
                    reason: format!("{what} {name:?} is not allowed for this project"),
                });
            }
        }
        let max = rules.max_timeout();
        let timeout = match &request.timeout {
            Some(text) => parse_duration(text)
                .map_err(|e| RequestError::BadRequest(format!("timeout: {e}")))?,
            None => max,
        };
        if timeout > max || timeout.is_zero() {
            return Err(RequestError::Policy {
                rule: format!("projects.{key}.max_timeout"),
                reason: format!(
                    "timeout {} is not within (0, {}]",
                    humantime::format_duration(timeout),
                    rules.max_timeout
                ),
            });
        }
        self.check_inputs(request, key, rules)?;
        if rules.daily_wall().is_some() || rules.daily_cpu().is_some() {
            let now = now_ms();
            let day_start = now - now.rem_euclid(DAY_MS);
            let used = self.store.project_usage(&request.project, day_start)?;
            let spent = |budget: Option<Duration>, used: u64| {
                budget.is_some_and(|b| u128::from(used) >= b.as_millis())
            };
            if spent(rules.daily_wall(), used.wall_ms) || spent(rules.daily_cpu(), used.cpu_ms) {
                return Err(RequestError::Budget {
                    resets_at_ms: day_start + DAY_MS,
                });
            }
        }
        // A full queue takes no more (counted, then inserted: racing submissions may pass it
        // by a few).
        let queued = self
            .store
            .queue_depth()?
            .into_iter()
            .find(|d| d.project == request.project)
            .map_or(0, |d| d.queued);
        if queued >= rules.max_queued {
            return Err(RequestError::Busy(format!(
                "project {:?} has {queued} jobs queued, as many as it may \
                 (projects.{key}.max_queued); submit again when some have run",
                request.project
            )));
        }
        let (job, created) = self.store.insert_job(&NewJob {
            project: request.project.clone(),
            job_type: request.job_type.as_str().into(),
            priority: request.priority,
            max_attempts: rules.max_attempts,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            idempotency_key: request.idempotency_key.clone(),
            inputs: inputs.clone(),
            submitted_by: token.id.clone(),
            rerun_of,
            slots: slots_of(request, rules.concurrency, policy.workers),
        })?;
        if created {
            self.store.audit(
                &token.id,
                "job.submit",
                job.id.as_str(),
                &serde_json::json!({"project": job.project, "type": job.job_type}),
            )?;
            self.store.append_job_event(
                &job.id,
                "state",
                &serde_json::json!({"state": "queued", "attempt": 0}),
            )?;
            self.notify();
            return Ok((job, true));
        }
        // A racing submission under the same key won: the same checks as above.
        same_request(job, request.job_type.as_str(), &inputs).map(|job| (job, false))
    }

    /// Parses the type's inputs (400 with the field) and checks commands, repositories and
    /// networks against policy.
    fn check_inputs(
        &self,
        request: &JobRequest,
        key: &str,
        rules: &crate::policy::ProjectPolicy,
    ) -> Result<(), RequestError> {
        crate::input_check::InputCheck {
            service: self,
            request,
            key,
            rules,
        }
        .check()
    }

    /// Checks a submission against the token, the policy and the budget, then enqueues it
    /// (or finds the job its idempotency key names). Returns the job and whether it is new.
    pub fn submit(
        &self,
        token: &TokenRow,
        request: &JobRequest,
    ) -> Result<(JobRow, bool), RequestError> {
        self.submit_job(token, request, None)
    }

    /// Submits an ended job again (`POST /v1/jobs/{id}/rerun`): a new job with the same type,
    /// inputs, secrets, variables, priority and timeout, linked to the original, checked
    /// against today's policy and budgets like any submission.
    pub fn rerun(&self, token: &TokenRow, id: &str) -> Result<JobRow, RequestError> {
        require(token, "submit")?;
        let original = self.job_of(token, id)?;
        if !original.state.is_final() {
            return Err(RequestError::Conflict {
                job: original.id.to_string(),
                message: format!(
                    "job {} is still {}: re-run it once it ended",
                    original.id,
                    original.state.as_str()
                ),
            });
        }
        let job_type = crate::api::JobType::ALL
            .iter()
            .find(|t| t.as_str() == original.job_type)
            .copied()
            .ok_or_else(|| {
                RequestError::BadRequest(format!("unknown job type {:?}", original.job_type))
            })?;
        let mut inputs = original.inputs.clone();
        let mut names = |key: &str| -> Vec<String> {
            inputs
                .as_object_mut()
                .and_then(|m| m.remove(key))
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default()
        };
        let (secrets, env_keys) = (names("secrets"), names("env_keys"));
        let request = JobRequest {
            schema: None,
            project: original.project.clone(),
            job_type,
            inputs,
            timeout: Some(format!("{}ms", original.timeout_ms)),
            idempotency_key: None,
            secrets,
            env_keys,
            priority: original.priority,
        };
        // Against today's policy: a timeout longer than it now allows is cut to its maximum.
        let request = match self.policy().project(&original.project) {
            Some((_, rules))
                if Duration::from_millis(original.timeout_ms) > rules.max_timeout() =>
            {
                JobRequest {
                    timeout: None,
                    ..request
                }
            }
            _ => request,
        };
        let (job, _) = self.submit_job(token, &request, Some(original.id.clone()))?;
        self.store.audit(
            &token.id,
            "job.rerun",
            job.id.as_str(),
            &serde_json::json!({"rerun_of": original.id.as_str()}),
        )?;
        Ok(job)
    }

    /// Cancels a job the token may see: queued ones at once, running ones by killing their
    /// process tree. Returns the job once it reached its final state, or (after
    /// [`CANCEL_WAIT`]) as it stands: `cancelling` on the wire.
    pub fn cancel(&self, token: &TokenRow, id: &str) -> Result<JobRow, RequestError> {
        require(token, "submit")?;
        let job = self.job_of(token, id)?;
        let after = self.store.cancel_job(&job.id)?;
        self.store.audit(
            &token.id,
            "job.cancel",
            job.id.as_str(),
            &serde_json::json!({}),
        )?;
        match after {
            Some(JobState::Cancelled) if job.state == JobState::Queued => {
                self.store.append_job_event(
                    &job.id,
                    "state",
                    &serde_json::json!({"state": "cancelled", "attempt": job.attempt}),
                )?;
                self.store.append_job_event(
                    &job.id,
                    "end",
                    &serde_json::json!({"state": "cancelled"}),
                )?;
                crate::webhooks::job_ended(self, &job.id);
            }
            Some(JobState::Running) => {
                // Here at once; on another machine, its worker's heartbeat sees the flag.
                if let Some(running) = self.running_job(&job.id) {
                    running.cancel.cancel();
                }
            }
            _ => {}
        }
        let deadline = std::time::Instant::now() + CANCEL_WAIT;
        loop {
            let now = self.store.get_job(&job.id)?.ok_or(RequestError::NotFound)?;
            if now.state.is_final() || std::time::Instant::now() >= deadline {
                return Ok(now);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The host (`HOST[:PORT]`, lowercase) a clone URL reaches, `None` for a local path (git's
/// own rules: `SCHEME://[USER@]HOST[:PORT]/…`, or the scp-like `[USER@]HOST:PATH` when no
/// `/` comes before the first `:`; `file://` is local).
pub fn clone_remote(url: &str) -> Option<String> {
    if let Some((scheme, rest)) = url.split_once("://") {
        if scheme.eq_ignore_ascii_case("file") {
            return None;
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        return Some(host.to_ascii_lowercase());
    }
    let (before, _) = url.split_once(':')?;
    if before.contains('/') {
        return None;
    }
    let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
    Some(host.to_ascii_lowercase())
}

/// Fails unless the token carries `scope` (or `admin`).
pub fn require(token: &TokenRow, scope: &'static str) -> Result<(), RequestError> {
    if token.scopes.iter().any(|s| s == scope || s == "admin") {
        Ok(())
    } else {
        Err(RequestError::Scope(scope))
    }
}

/// The job an idempotency key named, if it was submitted with this type and these inputs
/// (secrets and environment keys included); a conflict otherwise.
fn same_request(
    job: JobRow,
    job_type: &str,
    inputs: &serde_json::Value,
) -> Result<JobRow, RequestError> {
    if job.job_type == job_type && &job.inputs == inputs {
        Ok(job)
    } else {
        Err(RequestError::Conflict {
            job: job.id.to_string(),
            message: format!(
                "idempotency key already names job {} ({}), submitted with a different type or \
                 inputs; use another key for a different request",
                job.id, job.job_type
            ),
        })
    }
}

/// The slots of the concurrency limits a job holds while it runs: a `session.compare` of N
/// candidates runs up to N verifications at once, as many as its project's concurrency and
/// the workers allow (the rest wait for a free one inside the job); every other job, one.
fn slots_of(request: &JobRequest, concurrency: u32, workers: u32) -> u32 {
    let n = match request.job_type {
        crate::api::JobType::SessionCompare => request
            .inputs
            .get("sessions")
            .and_then(|s| s.as_array())
            .map_or(1, Vec::len),
        _ => 1,
    };
    u32::try_from(n)
        .unwrap_or(u32::MAX)
        .min(concurrency)
        .min(workers)
        .max(1)
}

//! What may run, how much and how many at once: `cordon-server.toml` as data with query
//! methods. Nothing is allowed that no rule allows; a matching `deny` rule wins over every
//! `allow` and carries its reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_types::units::parse_duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The programs the default policy lets `run` jobs and verify stages start: the usual build,
/// test and lint tools cordon detects.
pub const DEFAULT_TOOLS: &[&str] = &[
    "cargo", "rustc", "go", "npm", "npx", "pnpm", "yarn", "node", "python", "python3", "pytest",
    "ruff", "mypy", "tox", "make", "cmake", "ctest", "mvn", "gradle", "git", "tsc", "eslint",
];

/// The whole policy file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Running jobs at most, in all (on every worker sharing the store).
    #[serde(default = "default_workers")]
    pub workers: u32,
    /// A file of secret values, `NAME=value` per line (`#` comments), owned by the server's
    /// user and readable by nobody else (refused otherwise). A project's `secrets` are looked
    /// up there first, then in the server's environment; the values of the secrets a project
    /// may use are redacted from all its jobs' output. Re-read with the policy (SIGHUP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_file: Option<PathBuf>,
    /// Per project; the project `*` applies to every project not named.
    #[serde(default)]
    pub projects: BTreeMap<String, ProjectPolicy>,
    /// Protections the operator accepts weaker where this host cannot enforce them: `cgroup`
    /// (memory and pids limits by per-process rlimits when no cgroup is writable),
    /// `landlock`, `seccomp`. Without it a job that cannot get every protection is refused
    /// (`setup`, saying which); with it, the job's result says what was enforced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_degraded: Vec<String>,
    /// How long the workspace of a `repo.clone` job is kept after the last job used it (and
    /// while no queued or running job names it), e.g. `"7d"`.
    #[serde(default = "default_retention")]
    pub workspace_retention: String,
}

fn default_retention() -> String {
    "7d".into()
}

fn default_workers() -> u32 {
    4
}

/// A webhook of a project (`[[projects.NAME.webhooks]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Where job documents are POSTed: `https://HOST[:PORT]/PATH` (the receiver verified
    /// against the host's trust store) or `http://HOST[:PORT]/PATH` (a receiver on the same
    /// host or network).
    pub url: String,
    /// The name of the secret (from the secrets file, else the server's environment) whose
    /// value signs each delivery.
    pub secret: String,
}

/// One project's rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectPolicy {
    /// Running jobs at most in this project.
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    /// The longest timeout a job may ask for (e.g. `"30m"`); also the default.
    #[serde(default = "default_max_timeout")]
    pub max_timeout: String,
    /// Job types this project may submit (`run`, `verify`, `repo.clone`,
    /// `repo.applyPatch`).
    #[serde(default = "default_types")]
    pub job_types: Vec<String>,
    /// Wall-clock time the project's jobs may use per UTC day.
    #[serde(default)]
    pub daily_budget: Option<Budget>,
    /// Command prefixes that may run (`["cargo", "*"]`; `*` matches any one argument, a
    /// final `*` any rest).
    #[serde(default)]
    pub allow: Vec<Vec<String>>,
    /// Command prefixes that may not run, whatever `allow` says.
    #[serde(default)]
    pub deny: Vec<DenyRule>,
    /// Variables of the server's environment a job may ask to pass on.
    #[serde(default)]
    pub env_keys: Vec<String>,
    /// Secrets (variables of the server's environment) a job may ask for; their values are
    /// redacted from everything stored or streamed.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Credentials the network proxy adds to the project's jobs (`"HOST[:PORT]=NAME[:HOW]"`,
    /// as `cordon run --credential`): every `run` and `session.exec` job whose network allows
    /// HOST gets it, and a verify stage that names it in `cordon.toml`; the job never sees the
    /// value (NAME, from the secrets file or the server's environment, holds a placeholder in
    /// its environment), which is redacted from everything stored or streamed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
    /// Webhooks told of each job's end: its job document POSTed to `url`, signed with the
    /// secret `secret` names (HMAC-SHA256 over `TIMESTAMP.BODY`), retried with backoff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<Webhook>,
    /// Attempts a job gets at most (retries of infrastructure failures).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    /// The most network each job type may have (`"none"`, `"registry"`, `"host"` or
    /// `{ allow = ["HOST[:PORT]", "*.example.org"] }`); a type not named gets none. A `run`
    /// or `session.exec` job asks for its network (default none); every stage of a `verify`
    /// plan (of each candidate's plan, for `session.compare`) is checked before anything runs; `repo.clone` needs more than none for anything
    /// but a local path.
    #[serde(default = "default_network")]
    pub network: BTreeMap<String, NetworkRule>,
    /// What each job (each stage of a verify job) may use at most; also what it gets when it
    /// asks for nothing.
    #[serde(default)]
    pub limits: JobLimits,
    /// Jobs waiting in the queue at most (retries included); a submission past it is
    /// answered 429 until some have run.
    #[serde(default = "default_max_queued")]
    pub max_queued: u32,
}

fn default_max_queued() -> u32 {
    1000
}

/// A project's per-job limits: each is the most a job may ask for and the default of a job
/// that asks for nothing (a verify stage asking for more gets this much).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobLimits {
    /// Memory of the job's process tree (e.g. `"4GiB"`).
    #[serde(default = "default_memory")]
    pub memory: String,
    /// Processes and threads of the job's process tree.
    #[serde(default = "default_pids")]
    pub pids: u64,
    /// Bytes of each output stream kept in the result (head and tail); a verify job's stages
    /// share it.
    #[serde(default = "default_output_limit")]
    pub output_limit: String,
    /// How many of a verify job's `parallel = true` stages run at once. Each stage gets the
    /// memory and process limits above, so the default, 1, keeps them the job's; 2 lets two
    /// stages each use them at once (a parallel group's stages still run on layers of their
    /// own either way).
    #[serde(default = "default_parallel_stages")]
    pub parallel_stages: u16,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits {
            memory: default_memory(),
            pids: default_pids(),
            output_limit: default_output_limit(),
            parallel_stages: default_parallel_stages(),
        }
    }
}

fn default_parallel_stages() -> u16 {
    1
}

impl JobLimits {
    /// The memory limit in bytes.
    pub fn memory_bytes(&self) -> u64 {
        cordon_types::units::parse_size(&self.memory).unwrap_or(4 << 30)
    }

    /// The output limit in bytes.
    pub fn output_bytes(&self) -> u64 {
        cordon_types::units::parse_size(&self.output_limit).unwrap_or(1 << 20)
    }
}

/// The least memory a job may ask for: below it nothing starts.
pub const MIN_MEMORY: u64 = 16 << 20;

fn default_memory() -> String {
    "4GiB".into()
}
fn default_pids() -> u64 {
    1024
}
fn default_output_limit() -> String {
    "1MiB".into()
}

// How much network a job has, or may have: shared with `cordon mcp`'s operator bounds, so it
// lives with the other contracts.
pub use cordon_types::NetworkRule;

fn default_network() -> BTreeMap<String, NetworkRule> {
    [
        ("run", NetworkRule::None),
        ("verify", NetworkRule::Registry),
        ("repo.clone", NetworkRule::Host),
        ("session.exec", NetworkRule::None),
        ("session.compare", NetworkRule::Registry),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn default_concurrency() -> u32 {
    2
}
fn default_max_timeout() -> String {
    "30m".into()
}
fn default_types() -> Vec<String> {
    crate::api::JobType::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect()
}
fn default_attempts() -> u32 {
    3
}

/// A daily budget (UTC days); a project past either part gets 429 until the day ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Wall-clock time of all the project's attempts (e.g. `"4h"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<String>,
    /// CPU time (user + system, whole process trees) of all the project's attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
}

/// A refusal with its reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyRule {
    /// The command prefix refused.
    pub argv: Vec<String>,
    /// Why (shown to the client).
    pub reason: String,
}

/// Why a policy cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file cannot be read.
    #[error("cannot read the policy {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The policy's secrets file is refused.
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretsError),
    /// The file is not a valid policy.
    #[error("the policy {path} is invalid: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A refusal by policy: which rule refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule (e.g. `projects.web.deny[0]`).
    pub rule: String,
    /// Why.
    pub reason: String,
}

impl Policy {
    /// The built-in policy: any project, `run`, `verify` and `repo.clone` limited to the usual
    /// build, test and lint tools, concurrency 2 per project, 4 workers, no secrets.
    pub fn builtin() -> Self {
        let tools = DEFAULT_TOOLS
            .iter()
            .map(|t| vec![(*t).to_owned(), "*".to_owned()])
            .collect();
        let mut projects = BTreeMap::new();
        projects.insert(
            "*".to_owned(),
            ProjectPolicy {
                concurrency: default_concurrency(),
                max_timeout: default_max_timeout(),
                job_types: default_types(),
                daily_budget: Some(Budget {
                    wall: Some("8h".into()),
                    cpu: Some("16h".into()),
                }),
                allow: tools,
                deny: vec![DenyRule {
                    argv: vec!["git".into(), "push".into(), "*".into()],
                    reason: "jobs do not publish anything".into(),
                }],
                env_keys: Vec::new(),
                secrets: Vec::new(),
                credentials: Vec::new(),
                webhooks: Vec::new(),
                max_attempts: default_attempts(),
                network: default_network(),
                limits: JobLimits::default(),
                max_queued: default_max_queued(),
            },
        );
        Policy {
            workers: default_workers(),
            secrets_file: None,
            projects,
            allow_degraded: Vec::new(),
            workspace_retention: default_retention(),
        }
    }

    /// How long an unused workspace is kept.
    pub fn workspace_retention(&self) -> Duration {
        parse_duration(&self.workspace_retention).unwrap_or(Duration::from_secs(7 * 86_400))
    }

    /// The protections the operator accepts weaker (`allow_degraded`), as the sandbox names
    /// them.
    pub fn degradations(&self) -> Vec<cordon_sandbox::Degradation> {
        cordon_sandbox::Degradation::ALL
            .into_iter()
            .filter(|d| self.allow_degraded.iter().any(|n| n == d.name()))
            .collect()
    }

    /// The built-in policy as a config file to start from: compact, one argv rule a line.
    pub fn builtin_toml() -> String {
        let body = one_rule_a_line(&toml::to_string(&Self::builtin()).unwrap_or_default());
        format!(
            "# cordon-server.toml: what the job service lets each project do.\n\
             # Nothing is allowed that no rule allows; a deny rule wins over every allow.\n\
             # The project \"*\" applies to every project not named.\n\
             #\n\
             # How allow and deny rules match a job's command (its argv):\n\
             # - a rule is a prefix of the argv, compared argument by argument, whole\n\
             #   arguments only: [\"cargo\", \"test\"] matches `cargo test --release`;\n\
             # - \"*\" is the only pattern, and only as a whole argument: any one argument;\n\
             #   last in a rule, any rest (nothing included). \"*rm*\" or \"*.sh\" inside an\n\
             #   argument is refused when the policy is loaded, since it could match only\n\
             #   itself, literally;\n\
             # - a program named bare matches a bare name (`./cargo` is not `cargo`); deny\n\
             #   rules also match a program given as a path by its file name, and see git's\n\
             #   subcommand behind its global options (`git -c x=y push` is `git push`);\n\
             # - a shell's script is one argument: `sh -c \"rm -rf x\"` cannot be denied by\n\
             #   what the script says. Allow no shell, or deny it: [\"sh\", \"-c\", \"*\"].\n\n\
             {body}"
        )
    }

    /// Reads and checks a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and checks policy text (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, PolicyError> {
        let invalid = |reason: String| PolicyError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let policy: Policy = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if policy.workers == 0 {
            return Err(invalid("workers must be at least 1".into()));
        }
        parse_duration(&policy.workspace_retention)
            .map_err(|e| invalid(format!("workspace_retention: {e}")))?;
        for name in &policy.allow_degraded {
            if !cordon_sandbox::Degradation::ALL
                .iter()
                .any(|d| d.name() == name.as_str())
            {
                return Err(invalid(format!(
                    "allow_degraded: unknown protection {name:?} (known: {})",
                    cordon_sandbox::Degradation::ALL
                        .map(|d| d.name())
                        .join(", ")
                )));
            }
        }
        for (name, project) in &policy.projects {
            parse_duration(&project.max_timeout)
                .map_err(|e| invalid(format!("projects.{name}.max_timeout: {e}")))?;
            if let Some(budget) = &project.daily_budget {
                for (part, value) in [("wall", &budget.wall), ("cpu", &budget.cpu)] {
                    if let Some(value) = value {
                        parse_duration(value).map_err(|e| {
                            invalid(format!("projects.{name}.daily_budget.{part}: {e}"))
                        })?;
                    }
                }
            }
            for hook in &project.webhooks {
                crate::webhooks::Target::parse(&hook.url)
                    .map_err(|e| invalid(format!("projects.{name}.webhooks: {e}")))?;
            }
            for spec in &project.credentials {
                cordon_proxy::Credential::parse(spec)
                    .map_err(|e| invalid(format!("projects.{name}.credentials: {e}")))?;
            }
            for job_type in project.job_types.iter().chain(project.network.keys()) {
                if crate::api::JobType::parse(job_type).is_none() {
                    return Err(invalid(format!(
                        "projects.{name}: unknown job type {job_type:?} (known: {})",
                        crate::api::JobType::ALL.map(|t| t.as_str()).join(", ")
                    )));
                }
            }
            let limits = &project.limits;
            match cordon_types::units::parse_size(&limits.memory) {
                Ok(bytes) if bytes >= MIN_MEMORY => {}
                Ok(_) => {
                    return Err(invalid(format!(
                        "projects.{name}.limits.memory: at least 16MiB"
                    )));
                }
                Err(e) => return Err(invalid(format!("projects.{name}.limits.memory: {e}"))),
            }
            match cordon_types::units::parse_size(&limits.output_limit) {
                Ok(bytes) if bytes > 0 => {}
                Ok(_) => {
                    return Err(invalid(format!(
                        "projects.{name}.limits.output_limit must be more than 0"
                    )));
                }
                Err(e) => {
                    return Err(invalid(format!("projects.{name}.limits.output_limit: {e}")));
                }
            }
            if limits.pids == 0 {
                return Err(invalid(format!(
                    "projects.{name}.limits.pids must be at least 1"
                )));
            }
            if !(1..=64).contains(&limits.parallel_stages) {
                return Err(invalid(format!(
                    "projects.{name}.limits.parallel_stages must be 1 to 64"
                )));
            }
            check_rules(name, project).map_err(invalid)?;
            if project.concurrency == 0 || project.max_attempts == 0 || project.max_queued == 0 {
                return Err(invalid(format!(
                    "projects.{name}: concurrency, max_attempts and max_queued must be at least 1"
                )));
            }
        }
        Ok(policy)
    }

    /// The rules of `project` (its own, else `*`), with the key they are under; `None` when
    /// neither exists (the project may do nothing).
    pub fn project(&self, project: &str) -> Option<(&str, &ProjectPolicy)> {
        self.projects
            .get_key_value(project)
            .or_else(|| self.projects.get_key_value("*"))
            .map(|(k, v)| (k.as_str(), v))
    }

    /// The values of the secrets file (none without one).
    pub fn load_secrets(&self) -> Result<crate::secrets::SecretValues, PolicyError> {
        match &self.secrets_file {
            Some(path) => Ok(crate::secrets::SecretValues::load(path)?),
            None => Ok(crate::secrets::SecretValues::default()),
        }
    }

    /// Running jobs at most in `project` (0: none may run).
    pub fn concurrency(&self, project: &str) -> u32 {
        self.project(project).map_or(0, |(_, p)| p.concurrency)
    }
}

impl ProjectPolicy {
    /// The longest timeout.
    pub fn max_timeout(&self) -> Duration {
        parse_duration(&self.max_timeout).unwrap_or(Duration::from_secs(1800))
    }

    /// The daily wall-clock budget, if any.
    pub fn daily_wall(&self) -> Option<Duration> {
        self.daily_budget
            .as_ref()
            .and_then(|b| b.wall.as_deref())
            .and_then(|w| parse_duration(w).ok())
    }

    /// The daily CPU-time budget, if any.
    pub fn daily_cpu(&self) -> Option<Duration> {
        self.daily_budget
            .as_ref()
            .and_then(|b| b.cpu.as_deref())
            .and_then(|c| parse_duration(c).ok())
    }

    /// The most network a job of `job_type` may have.
    pub fn network_for(&self, job_type: &str) -> &NetworkRule {
        self.network.get(job_type).unwrap_or(&NetworkRule::None)
    }

    /// Whether a job of `job_type` may have `wanted` (`key` names the project's section).
    pub fn check_network(
        &self,
        key: &str,
        job_type: &str,
        wanted: &NetworkRule,
    ) -> Result<(), Refusal> {
        let allowed = self.network_for(job_type);
        if allowed.permits(wanted) {
            return Ok(());
        }
        Err(Refusal {
            rule: format!("projects.{key}.network.{job_type}"),
            reason: format!(
                "network {} is not allowed for {job_type} jobs (at most: {})",
                wanted.describe(),
                allowed.describe()
            ),
        })
    }

    /// Whether `argv` may run under these rules (`key` names the project's section).
    pub fn check_command(&self, key: &str, argv: &[String]) -> Result<(), Refusal> {
        // Deny rules also see git's command behind its global options (`git -c x=y push`,
        // `git --git-dir=.git push` are `git push`); allow rules see the argv as given, so an
        // option in front of an allowed subcommand is not allowed by it.
        let bare = without_git_globals(argv);
        if let Some((i, rule)) = self.deny.iter().enumerate().find(|(_, r)| {
            [argv, bare.as_slice()].iter().any(|argv| {
                prefix_matches(&r.argv, argv, true) || prefix_matches(&r.argv, argv, false)
            })
        }) {
            return Err(Refusal {
                rule: format!("projects.{key}.deny[{i}]"),
                reason: rule.reason.clone(),
            });
        }
        if self
            .allow
            .iter()
            .any(|rule| prefix_matches(rule, argv, false))
        {
            return Ok(());
        }
        Err(Refusal {
            rule: format!("projects.{key}.allow"),
            reason: format!("no allow rule matches the command {argv:?}"),
        })
    }
}

/// Refuses rules that cannot match the way they read. Rules match whole arguments, and `*`
/// only as a whole argument: `["sh", "-c", "*rm*"]` would match the one argument `*rm*`
/// literally, never `sh -c "rm -rf x"`, and a loader that took it would leave the operator
/// believing `rm` denied. An empty rule would match every command.
fn check_rules(name: &str, project: &ProjectPolicy) -> Result<(), String> {
    let rules = project
        .allow
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("projects.{name}.allow[{i}]"), r))
        .chain(
            project
                .deny
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("projects.{name}.deny[{i}]"), &r.argv)),
        );
    for (at, rule) in rules {
        if rule.is_empty() {
            return Err(format!(
                "{at} is empty, which would match every command; name the program"
            ));
        }
        if let Some(arg) = rule.iter().find(|a| a.contains('*') && a.as_str() != "*") {
            return Err(format!(
                "{at}: {arg:?} cannot match the way it reads: rules match whole arguments, \
                 and `*` only as a whole argument (any one argument; last in a rule, any \
                 rest), so it would match only the literal argument {arg:?}. A pattern inside \
                 an argument is not supported: a shell's script (`sh -c \"rm -rf x\"`) \
                 cannot be judged by its text; deny or leave out the shell itself \
                 ([\"sh\", \"-c\", \"*\"])"
            ));
        }
    }
    Ok(())
}

/// `argv` without git's global options between the program and its subcommand, when the
/// program is git (by file name); `argv` itself otherwise. Options git documents as taking a
/// separate value (`-c`, `-C`, `--git-dir`, …) take the next argument with them.
fn without_git_globals(argv: &[String]) -> Vec<String> {
    const WITH_VALUE: &[&str] = &[
        "-c",
        "-C",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--config-env",
        "--super-prefix",
        "--attr-source",
    ];
    let is_git = argv
        .first()
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "git");
    if !is_git {
        return argv.to_vec();
    }
    let mut rest = argv[1..].iter().peekable();
    while let Some(arg) = rest.peek() {
        if !arg.starts_with('-') {
            break;
        }
        let arg = rest.next().map(String::as_str).unwrap_or_default();
        if arg == "--" {
            break;
        }
        // `-c x=y` and `--git-dir .git` take the next argument; `-cx=y`, `-Cdir` and
        // `--git-dir=.git` carry theirs.
        if WITH_VALUE.contains(&arg) {
            rest.next();
        }
    }
    std::iter::once(argv[0].clone())
        .chain(rest.cloned())
        .collect()
}

/// Whether `rule` matches the start of `argv`: `*` matches any one argument; a final `*`
/// matches any rest, including nothing. A program named bare (`cargo`) matches a rule's bare
/// name; a program given as a path (`./cargo`, `/usr/bin/git`) matches only a rule that
/// names that same path (or `*`): a repository cannot pass its own `bin/cargo` off as the
/// allowed `cargo`.
///
/// Deny rules are matched more broadly (`by_name`): a program given as a path also matches
/// a rule naming its file name, so `/usr/bin/git push` is refused by `["git", "push"]`.
fn prefix_matches(rule: &[String], argv: &[String], by_name: bool) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    let name = if by_name {
        Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(program)
    } else {
        program.as_str()
    };
    let mut args = std::iter::once(name).chain(argv[1..].iter().map(String::as_str));
    for (i, want) in rule.iter().enumerate() {
        let last = i + 1 == rule.len();
        if want == "*" && last {
            return true;
        }
        match args.next() {
            Some(arg) if want == "*" || want == arg => {}
            _ => return false,
        }
    }
    true
}

/// TOML as `toml::to_string` writes it (every array inline), with each array of arrays (the
/// argv rules) spread one element a line.
fn one_rule_a_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.lines() {
        match line.split_once(" = [[") {
            Some((key, _)) if !key.starts_with('[') => {
                let value = &line[key.len() + " = ".len()..];
                out.push_str(key);
                out.push_str(" = [\n");
                for element in top_level_elements(value) {
                    out.push_str("    ");
                    out.push_str(element.trim());
                    out.push_str(",\n");
                }
                out.push_str("]\n");
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The elements of an inline TOML array (`[a, [b, c], "d,e"]`), split at its own commas (not
/// those inside nested arrays, tables or strings).
fn top_level_elements(array: &str) -> Vec<&str> {
    let inner = array
        .trim()
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(array);
    let mut elements = Vec::new();
    let (mut depth, mut quote, mut escaped, mut start) = (0usize, None, false, 0);
    for (i, c) in inner.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q == '"' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '[' | '{' => depth += 1,
                ']' | '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    elements.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            },
        }
    }
    if !inner[start..].trim().is_empty() {
        elements.push(&inner[start..]);
    }
    elements
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&[&str]], deny: &[&[&str]]) -> ProjectPolicy {
        let mut p = Policy::builtin().projects.remove("*").unwrap();
        p.allow = allow
            .iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect();
        p.deny = deny
            .iter()
            .map(|r| DenyRule {
                argv: r.iter().map(|s| s.to_string()).collect(),
                reason: "no".into(),
            })
            .collect();
        p
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn allow_degraded_names_the_sandboxs_protections() {
        let path = Path::new("p.toml");
        let policy = Policy::parse(path, "allow_degraded = [\"cgroup\"]\n").unwrap();
        assert_eq!(
            policy.degradations(),
            vec![cordon_sandbox::Degradation::Cgroup]
        );
        assert!(
            Policy::builtin().degradations().is_empty(),
            "nothing by default"
        );
        let error = Policy::parse(path, "allow_degraded = [\"network\"]\n").unwrap_err();
        assert!(error.to_string().contains("unknown protection"), "{error}");
    }

    #[test]
    fn deny_rules_see_gits_subcommand_behind_its_global_options() {
        let p = rules(&[&["git", "*"]], &[&["git", "push", "*"]]);
        for refused in [
            &["git", "-c", "x.y=1", "push", "origin"][..],
            &["git", "-cx.y=1", "push"],
            &["git", "--git-dir=.git", "push"],
            &["git", "--git-dir", ".git", "--work-tree", ".", "push"],
            &["git", "-C", "sub", "--no-pager", "push"],
            &["/usr/bin/git", "--bare", "-p", "push"],
            &["git", "--exec-path", "push"],
        ] {
            assert!(
                p.check_command("x", &argv(refused)).is_err(),
                "{refused:?} was allowed"
            );
        }
        for allowed in [
            &["git", "-c", "x.y=1", "status"][..],
            &["git", "-Cpush", "status"],
            &["git", "log", "push"],
        ] {
            assert!(p.check_command("x", &argv(allowed)).is_ok(), "{allowed:?}");
        }
        // An allow rule is not stretched the same way: an option in front of an allowed
        // subcommand is not that subcommand.
        let narrow = rules(&[&["git", "status"]], &[]);
        assert!(narrow.check_command("x", &argv(&["git", "status"])).is_ok());
        assert!(
            narrow
                .check_command("x", &argv(&["git", "-c", "core.pager=sh", "status"]))
                .is_err()
        );
    }

    #[test]
    fn deny_wins_over_allow_and_nothing_is_allowed_by_default() {
        let p = rules(&[&["git", "*"]], &[&["git", "push", "*"]]);
        assert!(p.check_command("x", &argv(&["git", "status"])).is_ok());
        // A program given as a path is not the bare name's program.
        assert!(
            p.check_command("x", &argv(&["/usr/bin/git", "log", "-1"]))
                .is_err()
        );
        assert!(p.check_command("x", &argv(&["./git", "log"])).is_err());
        let refusal = p
            .check_command("x", &argv(&["/usr/bin/git", "push", "o"]))
            .unwrap_err();
        assert_eq!(
            refusal.rule, "projects.x.deny[0]",
            "deny rules match by file name"
        );
        let by_path = rules(&[&["/usr/bin/git", "*"]], &[]);
        assert!(
            by_path
                .check_command("x", &argv(&["/usr/bin/git", "log"]))
                .is_ok()
        );
        assert!(by_path.check_command("x", &argv(&["git", "log"])).is_err());
        let refusal = p
            .check_command("x", &argv(&["git", "push", "origin"]))
            .unwrap_err();
        assert_eq!(refusal.rule, "projects.x.deny[0]");
        assert!(
            p.check_command("x", &argv(&["sh", "-c", "git status"]))
                .is_err()
        );
        assert!(p.check_command("x", &argv(&[])).is_err());
    }

    #[test]
    fn exact_rules_match_prefixes_only() {
        let p = rules(&[&["git", "status"]], &[]);
        assert!(
            p.check_command("x", &argv(&["git", "status", "-s"]))
                .is_ok()
        );
        assert!(p.check_command("x", &argv(&["git"])).is_err());
        assert!(p.check_command("x", &argv(&["git", "stash"])).is_err());
    }

    #[test]
    fn the_builtin_policy_round_trips_through_its_file() {
        let text = Policy::builtin_toml();
        let parsed = Policy::parse(Path::new("builtin"), &text).unwrap();
        assert_eq!(parsed, Policy::builtin());
        // Compact: one allow rule a line.
        assert!(text.contains("\n    [\"cargo\", \"*\"],\n"), "{text}");
        assert!(text.lines().count() < 80, "{text}");
    }

    #[test]
    fn arrays_of_arrays_are_split_at_their_own_commas() {
        assert_eq!(
            top_level_elements(r#"[["a", "b,]"], ['c', "d\"]"], { x = [1, 2] }]"#),
            [r#"["a", "b,]"]"#, r#" ['c', "d\"]"]"#, " { x = [1, 2] }"]
        );
    }

    #[test]
    fn invalid_policies_are_refused_with_the_field() {
        let error = Policy::parse(Path::new("p.toml"), "workers = 1\nbogus = 2\n").unwrap_err();
        assert!(error.to_string().contains("bogus"), "{error}");
        let error = Policy::parse(
            Path::new("p.toml"),
            "[projects.a]\nmax_timeout = \"soon\"\n",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("projects.a.max_timeout"),
            "{error}"
        );
        for bad in ["0", "65"] {
            let error = Policy::parse(
                Path::new("p.toml"),
                &format!("[projects.a]\nlimits = {{ parallel_stages = {bad} }}\n"),
            )
            .unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("projects.a.limits.parallel_stages"),
                "{error}"
            );
        }
        let ok = Policy::parse(
            Path::new("p.toml"),
            "[projects.a]\nlimits = { parallel_stages = 2 }\n",
        )
        .unwrap();
        assert_eq!(ok.projects["a"].limits.parallel_stages, 2);
        let default = Policy::parse(Path::new("p.toml"), "[projects.a]\n").unwrap();
        assert_eq!(default.projects["a"].limits.parallel_stages, 1);
    }
}

//! What may run, how much and how many at once: `cordon-server.toml` as data with query
//! methods. Nothing is allowed that no rule allows; a matching `deny` rule wins over every
//! `allow` and carries its reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// Running jobs at most on this server.
    #[serde(default = "default_workers")]
    pub workers: u32,
    /// Per project; the project `*` applies to every project not named.
    #[serde(default)]
    pub projects: BTreeMap<String, ProjectPolicy>,
}

fn default_workers() -> u32 {
    4
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
    /// Attempts a job gets at most (retries of infrastructure failures).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
}

fn default_concurrency() -> u32 {
    2
}
fn default_max_timeout() -> String {
    "30m".into()
}
fn default_types() -> Vec<String> {
    vec![
        "run".into(),
        "verify".into(),
        "repo.clone".into(),
        "repo.applyPatch".into(),
    ]
}
fn default_attempts() -> u32 {
    3
}

/// A daily budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Wall-clock time of all the project's attempts (e.g. `"4h"`).
    pub wall: String,
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
                daily_budget: Some(Budget { wall: "8h".into() }),
                allow: tools,
                deny: vec![DenyRule {
                    argv: vec!["git".into(), "push".into(), "*".into()],
                    reason: "jobs do not publish anything".into(),
                }],
                env_keys: Vec::new(),
                secrets: Vec::new(),
                max_attempts: default_attempts(),
            },
        );
        Policy {
            workers: default_workers(),
            projects,
        }
    }

    /// The built-in policy as a config file to start from.
    pub fn builtin_toml() -> String {
        let body = toml::to_string_pretty(&Self::builtin()).unwrap_or_default();
        format!(
            "# cordon-server.toml: what the job service lets each project do.\n\
             # Nothing is allowed that no rule allows; a deny rule wins over every allow.\n\
             # The project \"*\" applies to every project not named.\n\n{body}"
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
        for (name, project) in &policy.projects {
            parse_duration(&project.max_timeout)
                .map_err(|e| invalid(format!("projects.{name}.max_timeout: {e}")))?;
            if let Some(budget) = &project.daily_budget {
                parse_duration(&budget.wall)
                    .map_err(|e| invalid(format!("projects.{name}.daily_budget.wall: {e}")))?;
            }
            if project.concurrency == 0 || project.max_attempts == 0 {
                return Err(invalid(format!(
                    "projects.{name}: concurrency and max_attempts must be at least 1"
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
            .and_then(|b| parse_duration(&b.wall).ok())
    }

    /// Whether `argv` may run under these rules (`key` names the project's section).
    pub fn check_command(&self, key: &str, argv: &[String]) -> Result<(), Refusal> {
        if let Some((i, rule)) = self
            .deny
            .iter()
            .enumerate()
            .find(|(_, r)| prefix_matches(&r.argv, argv))
        {
            return Err(Refusal {
                rule: format!("projects.{key}.deny[{i}]"),
                reason: rule.reason.clone(),
            });
        }
        if self.allow.iter().any(|rule| prefix_matches(rule, argv)) {
            return Ok(());
        }
        Err(Refusal {
            rule: format!("projects.{key}.allow"),
            reason: format!("no allow rule matches the command {argv:?}"),
        })
    }
}

/// Whether `rule` matches the start of `argv`: `*` matches any one argument; a final `*`
/// matches any rest, including nothing. A program given as a path matches by its file name.
fn prefix_matches(rule: &[String], argv: &[String]) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
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

/// Parses `"90s"`, `"30m"`, `"4h"`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{text:?} is not a duration: {e}"))
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
    fn deny_wins_over_allow_and_nothing_is_allowed_by_default() {
        let p = rules(&[&["git", "*"]], &[&["git", "push", "*"]]);
        assert!(p.check_command("x", &argv(&["git", "status"])).is_ok());
        assert!(
            p.check_command("x", &argv(&["/usr/bin/git", "log", "-1"]))
                .is_ok()
        );
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
    }
}

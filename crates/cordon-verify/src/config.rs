//! `cordon.toml`: the declared stages of a project.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_types::StageCategory;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

use crate::error::ConfigError;

/// The default timeout of a stage.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(600);

/// The contents of `cordon.toml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "cordon.toml")]
pub struct Config {
    /// The stages, run in order.
    #[serde(default, rename = "stage")]
    pub stages: Vec<StageConfig>,
    /// Redaction settings for transcripts and reports.
    #[serde(default)]
    pub redact: RedactConfig,
}

/// `[redact]`: extra patterns whose matches are hidden from output.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedactConfig {
    /// Regular expressions; every match is replaced by `[REDACTED:pattern-N]`.
    #[serde(default)]
    pub patterns: Vec<String>,
    /// Exact strings never redacted (e.g. a public example token that tests print).
    #[serde(default)]
    pub allow: Vec<String>,
}

/// One `[[stage]]`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageConfig {
    /// A unique name.
    pub name: String,
    /// What kind of check it is.
    pub category: StageCategory,
    /// The argv; a shell must be explicit: `["sh", "-c", "..."]`.
    pub run: Vec<String>,
    /// Wall-clock limit, e.g. `"10m"` (default 10m). For smoke stages: how long the program
    /// may take to become ready.
    #[serde(default, deserialize_with = "duration")]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Duration>,
    /// Memory limit of the stage's process tree, e.g. `"2GiB"`.
    #[serde(default, deserialize_with = "size")]
    #[schemars(with = "Option<String>")]
    pub memory: Option<u64>,
    /// Maximum number of processes and threads.
    #[serde(default)]
    pub pids: Option<u64>,
    /// `"none"` (default), `"registry"` (the default of detected setup stages),
    /// `{ allow = ["HOST[:PORT]", ...] }` or `"host"`.
    #[serde(default)]
    pub network: Option<NetworkSetting>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names of variables taken from cordon's environment and redacted from output.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Credentials the network proxy adds to the stage's HTTPS requests to a host
    /// (`"HOST[:PORT]=NAME[:HOW]"`, as `cordon run --credential`): NAME is a variable of
    /// cordon's environment the stage never sees (its NAME holds a placeholder); the host must
    /// be on the stage's network allowlist.
    #[serde(default)]
    pub credentials: Vec<String>,
    /// Directory to run in, relative to the repository root.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Whether a failure blocks promotion (default true).
    #[serde(default = "yes")]
    pub required: bool,
    /// Run only when a changed path matches one of these globs.
    #[serde(default)]
    pub when_changed: Vec<String>,
    /// For smoke stages: when the started program counts as ready.
    #[serde(default)]
    pub ready: Option<ReadyConfig>,
    /// Make dependency caches writable (setup stages).
    #[serde(default)]
    pub writable_caches: bool,
    /// Directories the stage makes, relative to the project (e.g. `[".venv"]`): a trusted
    /// build of the base commit caches them (read-only layers under each candidate's own, as
    /// `target/` and `node_modules/` are).
    #[serde(default)]
    pub outputs: Vec<PathBuf>,
    /// For setup stages with `outputs`: globs of the files the outputs are made from,
    /// relative to the project (e.g. `["requirements*.txt", "pyproject.toml"]`). A candidate
    /// that changes none of them skips the stage and sees the trusted build's outputs.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// Run at the same time as the neighbouring stages that also say `parallel` (a group of
    /// consecutive ones; it starts when the stages before it have ended). Each sees the
    /// workspace and its build directories as the stages before the group left them, through
    /// its own copy-on-write layer that is thrown away when it ends: nothing a parallel stage
    /// writes reaches any other stage. A trusted build (whose writes become the cache) and a
    /// workspace without overlay layers run the group one stage after another. Not for setup
    /// stages or stages with `writable_caches`: what those write is meant for the stages after.
    #[serde(default)]
    pub parallel: bool,
    /// For lint stages: whether findings the base commit has too still fail the stage. By
    /// default (false) they are compared with the base's (same tool, rule, file and text after
    /// line shifts) and only the change's `new` ones fail it; a failure whose findings are all
    /// the base's, on a base that fails the same way, is the base's.
    #[serde(default)]
    pub block_existing: bool,
    /// Whether warnings the stage's tool reports fail it even when the tool exits with 0
    /// (errors always do). The detected clippy stage sets it instead of passing `-D warnings`:
    /// raised to errors, warnings would end cargo's check of the crate before it records it
    /// as done, and every verification would check the crate again. A lint stage's warnings
    /// are compared with the base's as its errors are: only new ones fail it.
    #[serde(default)]
    pub fail_on_warnings: bool,
}

/// `network = "none" | "registry" | "host"` or `network = { allow = ["HOST[:PORT]", ...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkSetting {
    /// A private network namespace with only loopback.
    None,
    /// Loopback, plus cordon's filtering proxy to the package registries the user's clients
    /// are configured to use (cargo, npm, pip, Go; read from the user's configuration, never
    /// the project's).
    Registry,
    /// Loopback, plus cordon's filtering proxy to these host names only (`HOST[:PORT]`,
    /// `*.example.org`).
    Allow(Vec<String>),
    /// The host's network.
    Host,
}

impl NetworkSetting {
    /// The network rule of a stage with this setting (`None`: no network), as a job
    /// service's policy or `cordon mcp`'s operator bound judges it.
    pub fn rule(setting: Option<&NetworkSetting>) -> cordon_types::NetworkRule {
        use cordon_types::NetworkRule;
        match setting {
            None | Some(NetworkSetting::None) => NetworkRule::None,
            Some(NetworkSetting::Registry) => NetworkRule::Registry,
            Some(NetworkSetting::Allow(hosts)) => NetworkRule::Allow(hosts.clone()),
            Some(NetworkSetting::Host) => NetworkRule::Host,
        }
    }

    /// The network mode of a stage with this setting (`None`: no network).
    pub fn mode(setting: Option<&NetworkSetting>) -> cordon_types::NetworkMode {
        match setting {
            Some(NetworkSetting::Host) => cordon_types::NetworkMode::Host,
            Some(NetworkSetting::Registry | NetworkSetting::Allow(_)) => {
                cordon_types::NetworkMode::Allowlist
            }
            Some(NetworkSetting::None) | None => cordon_types::NetworkMode::None,
        }
    }
}

/// `ready = { stdout = "regex" }` or `ready = { tcp = 8080 }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum ReadyConfig {
    /// Ready when a line of standard output (or error) matches this regular expression.
    Stdout(String),
    /// Ready when something listens on this TCP port inside the sandbox.
    Tcp(u16),
}

fn yes() -> bool {
    true
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    cordon_types::units::parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let text = String::deserialize(d)?;
    cordon_types::units::parse_size(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

impl StageConfig {
    /// The stage's credentials, parsed (checked when the configuration was loaded).
    pub fn credential_rules(&self) -> Vec<cordon_proxy::Credential> {
        self.credentials
            .iter()
            .filter_map(|c| cordon_proxy::Credential::parse(c).ok())
            .collect()
    }

    /// What is wrong with `credentials`, if anything: a bad rule, a stage without an
    /// allowlisted network, a host its `allow` list leaves out.
    fn credential_error(&self) -> Option<String> {
        let name = &self.name;
        if self.credentials.is_empty() {
            return None;
        }
        let allow = match &self.network {
            Some(NetworkSetting::Allow(entries)) => cordon_proxy::Allowlist::parse(entries).ok(),
            Some(NetworkSetting::Registry) => None,
            Some(NetworkSetting::None | NetworkSetting::Host) | None => {
                return Some(format!(
                    "stage `{name}`: `credentials` are added by the network proxy: they need `network = {{ allow = [...] }}` or `\"registry\"`"
                ));
            }
        };
        for spec in &self.credentials {
            let rule = match cordon_proxy::Credential::parse(spec) {
                Ok(rule) => rule,
                Err(e) => return Some(format!("stage `{name}`: {e}")),
            };
            if allow
                .as_ref()
                .is_some_and(|a| !a.allows(&rule.host, rule.port))
            {
                return Some(format!(
                    "stage `{name}`: credential host {}:{} is not in the stage's `allow` list",
                    rule.host, rule.port
                ));
            }
        }
        None
    }

    /// What is wrong with `outputs` and `inputs`, if anything.
    fn cache_error(&self) -> Option<String> {
        let name = &self.name;
        for out in &self.outputs {
            let plain = !out.as_os_str().is_empty()
                && out
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
                && !out.starts_with(".git");
            if !plain {
                return Some(format!(
                    "stage `{name}`: `outputs` entry {:?} must be a directory inside the project (relative, no `..`, `.` or `.git`)",
                    out.display().to_string()
                ));
            }
        }
        if self.parallel && (self.category == StageCategory::Setup || self.writable_caches) {
            return Some(format!(
                "stage `{name}`: `parallel` is not for setup stages or stages with `writable_caches` (a parallel stage's writes are thrown away; the stages after need what those write)"
            ));
        }
        if self.inputs.is_empty() {
            return None;
        }
        if self.category != StageCategory::Setup {
            return Some(format!(
                "stage `{name}`: `inputs` (skip when unchanged) is for setup stages only"
            ));
        }
        if self.outputs.is_empty() {
            return Some(format!(
                "stage `{name}`: `inputs` needs `outputs` (what a skipped stage's candidates see instead)"
            ));
        }
        self.inputs.iter().find_map(|glob| {
            globset::Glob::new(glob)
                .err()
                .map(|e| format!("stage `{name}`: bad `inputs` glob {glob:?}: {e}"))
        })
    }
}

impl Config {
    /// Parses `text`, read from `path` (named in errors, with the line).
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            ConfigError {
                path: path.to_owned(),
                line,
                message: e.message().to_owned(),
            }
        })?;
        config.validate(path, text)?;
        Ok(config)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_owned(),
            line: None,
            message: format!("cannot read it: {e}"),
        })?;
        Config::parse(path, &text)
    }

    fn validate(&self, path: &Path, text: &str) -> Result<(), ConfigError> {
        let fail = |name: &str, message: String| {
            // Point at the stage's `name = "..."` line when it can be found.
            let needle = format!("\"{name}\"");
            let line = text
                .lines()
                .position(|l| l.contains("name") && l.contains(&needle))
                .map(|i| i + 1);
            Err(ConfigError {
                path: path.to_owned(),
                line,
                message,
            })
        };
        if self.stages.is_empty() {
            return Err(ConfigError {
                path: path.to_owned(),
                line: None,
                message: "no [[stage]] is declared".into(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for stage in &self.stages {
            if stage.name.trim().is_empty() {
                return fail(&stage.name, "a stage has an empty `name`".into());
            }
            if cordon_types::text::has_control(&stage.name) {
                return fail(
                    &stage.name,
                    format!(
                        "stage name {:?} holds a control character (escape sequences, \
                         newlines): names are shown on terminals and in reports",
                        stage.name
                    ),
                );
            }
            if !seen.insert(stage.name.as_str()) {
                return fail(
                    &stage.name,
                    format!("stage name `{}` is used twice", stage.name),
                );
            }
            if let Some(NetworkSetting::Allow(entries)) = &stage.network
                && let Err(e) = cordon_proxy::Allowlist::parse(entries)
            {
                return fail(&stage.name, format!("stage `{}`: {e}", stage.name));
            }
            if let Some(message) = stage.credential_error() {
                return fail(&stage.name, message);
            }
            if stage.run.is_empty() || stage.run[0].is_empty() {
                return fail(
                    &stage.name,
                    format!("stage `{}`: `run` must name a program", stage.name),
                );
            }
            if let Some(cwd) = &stage.cwd
                && (cwd.is_absolute()
                    || cwd
                        .components()
                        .any(|c| matches!(c, std::path::Component::ParentDir)))
            {
                return fail(
                    &stage.name,
                    format!(
                        "stage `{}`: `cwd` must be relative to the repository and stay inside it",
                        stage.name
                    ),
                );
            }
            if let Some(message) = stage.cache_error() {
                return fail(&stage.name, message);
            }
            for glob in &stage.when_changed {
                if let Err(e) = globset::Glob::new(glob) {
                    return fail(
                        &stage.name,
                        format!(
                            "stage `{}`: bad `when_changed` glob {glob:?}: {e}",
                            stage.name
                        ),
                    );
                }
            }
            match (&stage.ready, stage.category) {
                (Some(_), c) if c != StageCategory::Smoke => {
                    return fail(
                        &stage.name,
                        format!("stage `{}`: `ready` is only for smoke stages", stage.name),
                    );
                }
                (Some(ReadyConfig::Stdout(re)), _) => {
                    if let Err(e) = regex::Regex::new(re) {
                        return fail(
                            &stage.name,
                            format!("stage `{}`: bad `ready.stdout` regex: {e}", stage.name),
                        );
                    }
                }
                (None, StageCategory::Smoke) => {
                    return fail(
                        &stage.name,
                        format!(
                            "stage `{}`: a smoke stage needs `ready = {{ stdout = \"regex\" }}` or `ready = {{ tcp = PORT }}`",
                            stage.name
                        ),
                    );
                }
                _ => {}
            }
            for name in stage.env.keys().chain(&stage.secrets) {
                let valid = !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    return fail(
                        &stage.name,
                        format!("stage `{}`: invalid variable name {name:?}", stage.name),
                    );
                }
            }
        }
        for pattern in &self.redact.patterns {
            if let Err(e) = regex::Regex::new(pattern) {
                return Err(ConfigError {
                    path: path.to_owned(),
                    line: None,
                    message: format!("bad `redact.patterns` entry {pattern:?}: {e}"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("cordon.toml"), text)
    }

    #[test]
    fn credentials_need_a_host_the_stage_may_reach() {
        let stage = |network: &str, credential: &str| {
            format!(
                "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"true\"]\n{network}\ncredentials = [\"{credential}\"]\n"
            )
        };
        let ok = parse(&stage(
            "network = { allow = [\"api.example.com\"] }",
            "api.example.com=API_KEY",
        ))
        .unwrap();
        let rules = ok.stages[0].credential_rules();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].name, "API_KEY");
        assert!(parse(&stage("network = \"registry\"", "pypi.example.com=K")).is_ok());
        for (network, credential, said) in [
            ("", "api.example.com=K", "need `network = { allow"),
            (
                "network = { allow = [\"a.example.com\"] }",
                "b.example.com=K",
                "b.example.com:443 is not in the stage's `allow` list",
            ),
            (
                "network = { allow = [\"a.example.com\"] }",
                "a.example.com=K:digest",
                "is not a way to add it",
            ),
        ] {
            let err = parse(&stage(network, credential)).unwrap_err().to_string();
            assert!(err.contains(said), "{err}");
        }
    }

    #[test]
    fn parses_a_full_stage() {
        let config = parse(
            r#"
[[stage]]
name = "test"
category = "test"
run = ["cargo", "test"]
timeout = "10m"
memory = "2GiB"
pids = 512
network = "none"
env = { RUST_LOG = "debug" }
required = false
when_changed = ["src/**"]

[[stage]]
name = "serve"
category = "smoke"
run = ["./server"]
ready = { tcp = 8080 }
"#,
        )
        .unwrap();
        let test = &config.stages[0];
        assert_eq!(test.timeout, Some(Duration::from_secs(600)));
        assert_eq!(test.memory, Some(2 << 30));
        assert!(!test.required);
        assert_eq!(config.stages[1].ready, Some(ReadyConfig::Tcp(8080)));
        assert!(config.stages[1].required);
    }

    #[test]
    fn errors_name_the_file_line_and_key() {
        let e = parse(
            "[[stage]]\nname = \"a\"\ncategory = \"test\"\nrun = [\"x\"]\ntiemout = \"1s\"\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.to_string().contains("tiemout"), "{e}");
        assert!(e.to_string().starts_with("cordon.toml:5:"), "{e}");

        let e = parse(
            "[[stage]]\nname = \"a\"\ncategory = \"test\"\nrun = [\"x\"]\ntimeout = \"soon\"\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.to_string().contains("invalid duration"), "{e}");

        let e =
            parse("[[stage]]\nname = \"a\"\ncategory = \"testing\"\nrun = [\"x\"]\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");

        let e = parse("[[stage]]\nname = \"a\"\ncategory = \"test\"\nrun = \"cargo test\"\n")
            .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
    }

    #[test]
    fn semantic_errors() {
        let dup = "[[stage]]\nname = \"a\"\ncategory = \"test\"\nrun = [\"x\"]\n[[stage]]\nname = \"a\"\ncategory = \"lint\"\nrun = [\"y\"]\n";
        assert!(parse(dup).unwrap_err().to_string().contains("used twice"));
        let smoke = "[[stage]]\nname = \"s\"\ncategory = \"smoke\"\nrun = [\"x\"]\n";
        assert!(parse(smoke).unwrap_err().to_string().contains("ready"));
        let escape =
            "[[stage]]\nname = \"s\"\ncategory = \"test\"\nrun = [\"x\"]\ncwd = \"../up\"\n";
        assert!(parse(escape).unwrap_err().to_string().contains("cwd"));
        let regex = "[[stage]]\nname = \"s\"\ncategory = \"smoke\"\nrun = [\"x\"]\nready = { stdout = \"(\" }\n";
        assert!(parse(regex).unwrap_err().to_string().contains("regex"));
        assert!(parse("").unwrap_err().to_string().contains("no [[stage]]"));
        for (body, expected) in [
            (
                "category = \"setup\"\noutputs = [\"../up\"]",
                "inside the project",
            ),
            (
                "category = \"setup\"\noutputs = [\"/abs\"]",
                "inside the project",
            ),
            (
                "category = \"setup\"\noutputs = [\".\"]",
                "inside the project",
            ),
            (
                "category = \"setup\"\noutputs = [\".git/x\"]",
                "inside the project",
            ),
            (
                "category = \"test\"\noutputs = [\"o\"]\ninputs = [\"x\"]",
                "setup stages only",
            ),
            ("category = \"setup\"\ninputs = [\"x\"]", "needs `outputs`"),
            (
                "category = \"setup\"\nparallel = true",
                "`parallel` is not for setup stages",
            ),
            (
                "category = \"test\"\nwritable_caches = true\nparallel = true",
                "`parallel` is not for setup stages or stages with `writable_caches`",
            ),
            ("category = \"test\"\nparallel = \"yes\"", "invalid type"),
            (
                "category = \"setup\"\noutputs = [\"o\"]\ninputs = [\"[\"]",
                "bad `inputs` glob",
            ),
        ] {
            let text = format!("[[stage]]\nname = \"s\"\n{body}\nrun = [\"x\"]\n");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(expected), "{text}: {e}");
        }
        let ok = parse("[[stage]]\nname = \"venv\"\ncategory = \"setup\"\nrun = [\"x\"]\noutputs = [\".venv\", \"a/b\"]\ninputs = [\"requirements*.txt\"]\n").unwrap();
        assert_eq!(
            ok.stages[0].outputs,
            [PathBuf::from(".venv"), PathBuf::from("a/b")]
        );
        let control = "[[stage]]\nname = \"a\\u001b[2Jb\"\ncategory = \"test\"\nrun = [\"x\"]\n";
        assert!(
            parse(control)
                .unwrap_err()
                .to_string()
                .contains("control character")
        );
    }
}

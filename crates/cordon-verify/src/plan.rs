//! The plan: which stages run, from `cordon.toml` or detection, narrowed by targeting.

use std::path::Path;

use cordon_types::{NetworkMode, PlanOrigin, PlanSource, StageCategory};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::{Config, NetworkSetting, RedactConfig, StageConfig};
use crate::error::{ConfigError, VerifyError};
use crate::tree::Dir;
use crate::{detect, target};

/// A stage as it will run (or why it will not).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStage {
    /// The stage, with its argv possibly narrowed by targeting.
    pub stage: StageConfig,
    /// Set when the plan decided not to run it, and why.
    pub skip: Option<PlannedSkip>,
    /// What targeting decided, when it decided something.
    pub targeting: Option<String>,
    /// Whether the argv was narrowed to a selection (e.g. `cargo test -p a`).
    pub narrowed: bool,
}

/// Why the plan does not run a stage. The gate acts on the kind, never on the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlannedSkip {
    /// `--stages` did not select it: a required stage then counts as not passed.
    NotSelected,
    /// Targeting decided the change cannot affect it (the text says why): it does not block.
    NotAffected(String),
    /// What it would make comes from a trusted build cache unchanged (an install whose
    /// manifests did not change): it does not block.
    Cached(String),
    /// This host lacks the stage's tool (`ruff is not installed on this host`): a required
    /// stage then counts as not passed.
    NotInstalled(String),
}

impl PlannedSkip {
    /// The reason as shown in reports.
    pub fn reason(&self) -> String {
        match self {
            PlannedSkip::NotSelected => "not selected by --stages".to_owned(),
            PlannedSkip::NotAffected(why)
            | PlannedSkip::NotInstalled(why)
            | PlannedSkip::Cached(why) => why.clone(),
        }
    }
}

impl PlannedStage {
    /// The reason the plan skips this stage, as shown in reports.
    pub fn skip_reason(&self) -> Option<String> {
        self.skip.as_ref().map(PlannedSkip::reason)
    }
}

/// The stages of one verification and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `cordon.toml` or detected.
    pub source: PlanSource,
    /// Which side chose it.
    pub origin: PlanOrigin,
    /// Every stage, in order.
    pub stages: Vec<PlannedStage>,
    /// Whether changed files narrowed the plan.
    pub targeted: bool,
    /// One line per decision.
    pub reasons: Vec<String>,
    /// Redaction settings from the config (`[redact]`).
    pub redact: RedactConfig,
    /// What each cached place shows the stages (build directories for every stage; host
    /// caches writable through a private layer in setup stages, read-only otherwise).
    pub cache: Vec<String>,
    /// Why those caches: one line per decision.
    pub cache_reasons: Vec<String>,
    /// What is verified (`HEAD 79b129f + 2 modified, 1 untracked`).
    pub subject: Option<cordon_types::Subject>,
}

cordon_types::schema_tag!(
    /// The `schema` tag of `cordon verify --explain --json`: `"cordon.verify-plan/v1"`.
    PlanDocumentTag,
    "cordon.verify-plan/v1"
);

/// The plan as `cordon verify --explain --json` prints it: what would run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanDocument {
    /// Always `cordon.verify-plan/v1`.
    pub schema: PlanDocumentTag,
    /// `cordon.toml` or detected.
    pub source: PlanSource,
    /// Which side chose it: the ref, the base, or `--config`.
    pub origin: PlanOrigin,
    /// Whether changed files narrowed the plan.
    pub targeted: bool,
    /// One line per decision.
    pub reasons: Vec<String>,
    /// The changed files targeting saw (repository-relative).
    pub changed_files: Vec<String>,
    /// Every stage, in order.
    pub stages: Vec<PlannedStageDocument>,
    /// The build caches: what each place shows (directories of the workspace in every stage;
    /// host caches writable through a private layer in setup stages, read-only otherwise).
    #[serde(default)]
    pub cache: Vec<String>,
    /// Why those caches.
    #[serde(default)]
    pub cache_reasons: Vec<String>,
    /// What would be verified: the ref, a patch, the checkout's uncommitted changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<cordon_types::Subject>,
}

/// One stage of a [`PlanDocument`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedStageDocument {
    /// The stage's name.
    pub name: String,
    /// Its category.
    pub category: StageCategory,
    /// Whether the gate requires it.
    pub required: bool,
    /// The argv it runs (after targeting).
    pub command: Vec<String>,
    /// The network it reaches.
    pub network: NetworkMode,
    /// Whether it runs.
    pub runs: bool,
    /// Why not, when it does not.
    pub skip_reason: Option<String>,
    /// What targeting decided, when it decided something.
    pub targeting: Option<String>,
    /// Whether it runs at the same time as its parallel neighbours, on layers of its own.
    #[serde(default)]
    pub parallel: bool,
}

impl Plan {
    /// The plan as a document, with the changed files targeting saw.
    pub fn document(&self, changed: &[String]) -> PlanDocument {
        PlanDocument {
            schema: PlanDocumentTag,
            source: self.source,
            origin: self.origin,
            targeted: self.targeted,
            reasons: self.reasons.clone(),
            changed_files: changed.to_vec(),
            cache: self.cache.clone(),
            cache_reasons: self.cache_reasons.clone(),
            subject: self.subject.clone(),
            stages: self
                .stages
                .iter()
                .map(|p| PlannedStageDocument {
                    name: p.stage.name.clone(),
                    category: p.stage.category,
                    required: p.stage.required,
                    command: p.stage.run.clone(),
                    network: NetworkSetting::mode(p.stage.network.as_ref()),
                    runs: p.skip.is_none(),
                    skip_reason: p.skip_reason(),
                    targeting: p.targeting.clone(),
                    parallel: p.stage.parallel,
                })
                .collect(),
        }
    }
}

/// The stages before targeting: declared or detected, with the packages the tree had before
/// any patch (a patch must not be able to redraw package boundaries to pick what is tested).
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// The Cargo workspace's packages at the ref, if it is one.
    pub cargo_packages: Option<Vec<target::Package>>,
    /// The Node workspace's packages at the ref, if it is one.
    pub node_packages: Option<Vec<target::Package>>,
    /// Where they come from.
    pub source: PlanSource,
    /// Which side chose them.
    pub origin: PlanOrigin,
    /// The stages, in order.
    pub stages: Vec<StageConfig>,
    /// Why.
    pub reasons: Vec<String>,
    /// Redaction settings from the config (`[redact]`).
    pub redact: RedactConfig,
    /// Detected stages whose tool this host lacks.
    pub missing: Vec<detect::Missing>,
}

/// Reads the stages for the tree at `root`: `--config`, else `cordon.toml` at the root, else
/// detection. Call it before the patch is applied, so that the candidate change cannot
/// rewrite the plan that judges it.
pub fn declared(root: &Dir, config: Option<&Path>) -> Result<Declared, VerifyError> {
    declared_on(root, config, &detect::Installed::from_host())
}

/// [`declared`] for a host with the tools `host` finds.
pub fn declared_on(
    root: &Dir,
    config: Option<&Path>,
    host: &detect::Installed,
) -> Result<Declared, VerifyError> {
    let committed = root.join("cordon.toml");
    if config.is_some() || committed.is_file() {
        // An error in the committed cordon.toml names it as the repository does, not by its
        // path in the transient workspace.
        let cfg = match config {
            Some(path) => Config::load(path)?,
            None => {
                let shown = Path::new("cordon.toml");
                let text = committed.read_to_string().map_err(|e| ConfigError {
                    path: shown.to_owned(),
                    line: None,
                    message: format!("cannot read it: {e}"),
                })?;
                Config::parse(shown, &text)?
            }
        };
        let shown = match config {
            Some(path) => path.display().to_string(),
            None => "cordon.toml".to_owned(),
        };
        return Ok(Declared {
            cargo_packages: target::cargo_packages(root),
            node_packages: target::node_packages(root),
            source: PlanSource::CordonToml,
            origin: if config.is_some() {
                PlanOrigin::ConfigFile
            } else {
                PlanOrigin::Ref
            },
            stages: cfg.stages,
            reasons: vec![format!(
                "stages declared in {shown} (as committed at the ref)"
            )],
            redact: cfg.redact,
            missing: Vec::new(),
        });
    }
    let found = detect::detect_on(root, host);
    if found.stages.is_empty() {
        return Err(VerifyError::Usage(format!(
            "nothing to verify: {}; write a cordon.toml (see `cordon schema cordon-toml`)",
            found.reasons.join("; ")
        )));
    }
    Ok(Declared {
        cargo_packages: target::cargo_packages(root),
        node_packages: target::node_packages(root),
        source: PlanSource::Detected,
        origin: PlanOrigin::Ref,
        stages: found.stages,
        reasons: found.reasons,
        redact: RedactConfig::default(),
        missing: found.missing,
    })
}

/// Narrows `declared` to what must run for `changed` files.
pub fn build(
    declared: Declared,
    only: Option<&[String]>,
    changed: &[String],
) -> Result<Plan, VerifyError> {
    let Declared {
        source,
        origin,
        stages,
        mut reasons,
        redact,
        cargo_packages,
        node_packages,
        missing,
    } = declared;
    if let Some(only) = only {
        for name in only {
            if !stages.iter().any(|s| &s.name == name) {
                let known: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
                return Err(VerifyError::Usage(format!(
                    "--stages: no stage named `{name}` (stages: {})",
                    known.join(", ")
                )));
            }
        }
        reasons.push(format!("--stages selected: {}", only.join(", ")));
    }
    let cargo_selection = cargo_packages
        .as_deref()
        .and_then(|p| target::select(p, changed));
    let node_selection = node_packages
        .as_deref()
        .and_then(|p| target::select(p, changed));
    let mut targeted = false;
    let mut planned = Vec::new();
    for stage in stages {
        let mut p = PlannedStage {
            stage,
            skip: None,
            targeting: None,
            narrowed: false,
        };
        if let Some(only) = only
            && !only.contains(&p.stage.name)
        {
            p.skip = Some(PlannedSkip::NotSelected);
            planned.push(p);
            continue;
        }
        if let Some(m) = missing.iter().find(|m| m.stage == p.stage.name) {
            p.skip = Some(PlannedSkip::NotInstalled(m.reason.clone()));
            planned.push(p);
            continue;
        }
        if !p.stage.when_changed.is_empty() {
            targeted = true;
            if changed.is_empty() {
                p.targeting = Some("no changed files known: runs (fail closed)".into());
            } else if target::matches_when_changed(&p.stage.when_changed, changed) {
                p.targeting = Some("a changed file matches when_changed".into());
            } else {
                p.skip = Some(PlannedSkip::NotAffected(format!(
                    "no changed file matches when_changed ({})",
                    p.stage.when_changed.join(", ")
                )));
            }
        }
        if p.skip.is_none() && is_cargo_test(&p.stage) {
            match (&cargo_packages, &cargo_selection) {
                (Some(all), Some(selected))
                    if selected.len() < all.len() && !selected.is_empty() =>
                {
                    targeted = true;
                    for name in selected {
                        p.stage.run.push("-p".into());
                        p.stage.run.push(name.clone());
                    }
                    p.narrowed = true;
                    p.targeting = Some(format!(
                        "changed packages and their dependents: {}",
                        selected.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                (Some(all), None) if all.len() > 1 => {
                    p.targeting = Some(
                        "full suite: a change lies outside every package, or no change is known"
                            .into(),
                    );
                }
                _ => {}
            }
        }
        if p.skip.is_none()
            && let Some(kind) = node_workspace_test(&p.stage)
        {
            match (&node_packages, &node_selection) {
                (Some(all), Some(selected))
                    if selected.len() < all.len() && !selected.is_empty() =>
                {
                    targeted = true;
                    p.stage.run = narrow_node(&p.stage.run, kind, selected);
                    p.narrowed = true;
                    p.targeting = Some(format!(
                        "changed workspace packages and their dependents: {}",
                        selected.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                (Some(_), _) => {
                    p.targeting = Some(
                        "every workspace package: a change lies outside every package, or no change is known"
                            .into(),
                    );
                }
                _ => {}
            }
        }
        planned.push(p);
    }
    if targeted {
        reasons.push(format!("targeted by {} changed file(s)", changed.len()));
    }
    Ok(Plan {
        source,
        origin,
        stages: planned,
        targeted,
        reasons,
        redact,
        cache: Vec::new(),
        cache_reasons: Vec::new(),
        subject: None,
    })
}

/// The Node workspace-wide test commands cordon detects, and can narrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeWorkspaceTest {
    /// `npm run --silent test --workspaces --if-present`
    Npm,
    /// `pnpm -r --if-present run test`
    Pnpm,
}

fn node_workspace_test(stage: &StageConfig) -> Option<NodeWorkspaceTest> {
    let run: Vec<&str> = stage.run.iter().map(String::as_str).collect();
    if run == detect::NPM_WORKSPACES_TEST {
        Some(NodeWorkspaceTest::Npm)
    } else if run == detect::PNPM_RECURSIVE_TEST {
        Some(NodeWorkspaceTest::Pnpm)
    } else {
        None
    }
}

fn narrow_node(
    run: &[String],
    kind: NodeWorkspaceTest,
    selected: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    match kind {
        NodeWorkspaceTest::Npm => {
            let mut argv: Vec<String> = ["npm", "run", "--silent", "test"]
                .map(String::from)
                .to_vec();
            argv.extend(selected.iter().map(|name| format!("--workspace={name}")));
            argv.push("--if-present".into());
            argv
        }
        NodeWorkspaceTest::Pnpm => {
            let mut argv = vec!["pnpm".to_owned()];
            for name in selected {
                argv.push("--filter".into());
                argv.push(name.clone());
            }
            argv.extend(["--if-present", "run", "test"].map(String::from));
            let _ = run;
            argv
        }
    }
}

/// A `cargo test` stage whose package selection cordon may narrow.
fn is_cargo_test(stage: &StageConfig) -> bool {
    stage.category == StageCategory::Test
        && stage.run.first().map(String::as_str) == Some("cargo")
        && stage.run.get(1).map(String::as_str) == Some("test")
        && !stage
            .run
            .iter()
            .any(|a| a == "-p" || a == "--package" || a == "--workspace" || a == "--")
}

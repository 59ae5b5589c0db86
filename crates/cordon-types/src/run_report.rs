//! `cordon.run-report/v1`: the outcome of a staged verification (`cordon verify`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::finding::Finding;
use crate::run_result::{CapturedOutput, LimitKind, ResourceUsage};

crate::schema_tag!(
    /// The `schema` tag of a run report: always `"cordon.run-report/v1"`.
    RunReportTag,
    "cordon.run-report/v1"
);

/// The revision of `cordon.run-report/v1` these types describe. A revision adds optional fields
/// only (a reader of an older revision ignores nothing it knew; a document of an older revision
/// still parses): revision 2 added `stages[].findings`, `stages[].findings_omitted` and
/// `stages[].tests.subtests_passed` / `subtests_failed`; revision 3 added `stages[].network`;
/// revision 4 added `workspace.strategy_note` and `cache`; revision 5 added `subject`,
/// `timeline`, `stages[].baseline`, `stages[].findings[].baseline` and
/// `stages[].findings[].via`.
pub const RUN_REPORT_REVISION: u32 = 5;

/// What happened when a candidate change was verified stage by stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-revision" = 5))]
pub struct RunReport {
    /// Always `cordon.run-report/v1`.
    pub schema: RunReportTag,
    /// Unique id of this verification.
    pub run_id: String,
    /// The overall outcome: `error` when cordon could not do its job.
    pub overall: Overall,
    /// The source repository (absolute path).
    pub repo: String,
    /// The ref that was verified, as given.
    pub r#ref: String,
    /// The commit the ref resolved to.
    pub commit: String,
    /// What was verified, in one line and in counts (revision 5): the commit as committed, the
    /// commit and a patch, or a checkout's working tree (`HEAD 79b129f + 2 modified, 1
    /// untracked`); and what of the checkout was left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// SHA-256 of the applied patch, or `null` when no patch was applied.
    pub patch: Option<String>,
    /// The isolated workspace the stages ran in.
    pub workspace: WorkspaceInfo,
    /// When the verification started, RFC 3339 in UTC.
    pub started_at: String,
    /// Wall-clock time of the whole verification, in milliseconds.
    pub duration_ms: u64,
    /// Every planned stage, in order, including skipped ones.
    pub stages: Vec<StageResult>,
    /// The first blocking failure, if any.
    pub failure: Option<ReportFailure>,
    /// The promotion gate's decision.
    pub promotion: Promotion,
    /// Files changed against the base (patch and commits), repository-relative.
    pub changed_files: Vec<String>,
    /// Where the plan came from and whether it was targeted.
    pub plan: PlanInfo,
    /// Which trusted build cache the stages saw, and whether this verification made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheInfo>,
    /// How the stages were isolated (that of the first stage that ran sandboxed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// Where the time went, phase by phase, in order (revision 5): resolving the ref,
    /// snapshotting the working tree, making the workspace, planning, applying the patch,
    /// deciding the caches, each stage, each baseline run, keeping the cache, removing the
    /// workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<Phase>,
}

/// What a verification judged (`RunReport::subject`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// Which state of the repository.
    pub kind: SubjectKind,
    /// One line, the first of every rendering: `HEAD 79b129f + 2 modified, 1 untracked`,
    /// `main 79b129f`, `HEAD 79b129f + patch 3f2a…`, with what was left out when the checkout
    /// has uncommitted changes that were not verified.
    pub summary: String,
    /// The checkout's uncommitted changes that were verified (`working_tree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<ChangeCounts>,
    /// The checkout's uncommitted changes this verification left out (`--committed`, `--ref`,
    /// `--patch` in a checkout that has some): its verdict is not about them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_verified: Option<ChangeCounts>,
}

/// Which state of the repository a verification judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubjectKind {
    /// `HEAD` plus the checkout's staged, unstaged and untracked (not ignored) changes, as
    /// they were when the verification started.
    WorkingTree,
    /// A commit as committed.
    Commit,
    /// A commit with a patch applied.
    Patch,
}

/// Uncommitted changes of a checkout, by kind (against `HEAD`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeCounts {
    /// Tracked files whose content or mode changed (staged or not).
    pub modified: u64,
    /// Files staged as new.
    pub added: u64,
    /// Tracked files deleted (staged or not).
    pub deleted: u64,
    /// Tracked files renamed (staged).
    pub renamed: u64,
    /// New files not staged and not ignored.
    pub untracked: u64,
}

impl ChangeCounts {
    /// Whether there is no change at all.
    pub fn is_empty(&self) -> bool {
        *self == ChangeCounts::default()
    }

    /// `2 modified, 1 untracked` (kinds with none left out); `no changes` when empty.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            (self.modified, "modified"),
            (self.added, "added"),
            (self.deleted, "deleted"),
            (self.renamed, "renamed"),
            (self.untracked, "untracked"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if parts.is_empty() {
            "no changes".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// One phase of a verification's timeline (`RunReport::timeline`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// What: `resolve`, `snapshot`, `workspace`, `plan`, `patch`, `cache`, `stage`,
    /// `baseline`, `promote`, `cleanup`.
    pub phase: String,
    /// The stage, for `stage` and `baseline` phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// When it started, in milliseconds since the verification started.
    pub start_ms: u64,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
}

/// The build caches of a verification (`cordon verify`'s warm builds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheInfo {
    /// The trusted cache the stages saw (its key), if any.
    pub used: Option<String>,
    /// The commit the cache was built from.
    pub used_commit: Option<String>,
    /// Whether this verification was a trusted build whose layers became a cache.
    pub promoted: Option<String>,
    /// Each place and what it showed: `target/ ← trusted cache 1a2b… (3 layers)`.
    pub places: Vec<String>,
    /// Why: one line per decision.
    pub reasons: Vec<String>,
}

/// The overall outcome of a verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overall {
    /// Every required stage passed.
    Pass,
    /// A required stage did not pass.
    Fail,
    /// cordon could not complete the verification (infrastructure).
    Error,
}

/// The workspace a verification ran in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceInfo {
    /// Its path while it existed.
    pub path: String,
    /// How it was made (`overlay`, `git-worktree`).
    pub strategy: String,
    /// Why that strategy, when it is not the default's (overlay refused here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy_note: Option<String>,
    /// Always true: the live checkout was not used.
    pub isolated: bool,
}

/// One stage's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageResult {
    /// The stage's unique name.
    pub name: String,
    /// What kind of check it is.
    pub category: StageCategory,
    /// The outcome.
    pub status: StageStatus,
    /// Whether a failure blocks promotion.
    pub required: bool,
    /// The argv that ran.
    pub command: Vec<String>,
    /// Where it ran (inside the workspace).
    pub cwd: String,
    /// The exit code, when the program exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<String>,
    /// Wall-clock time, in milliseconds (0 when skipped).
    pub duration_ms: u64,
    /// Head and tail of standard output.
    pub stdout: CapturedOutput,
    /// Head and tail of standard error.
    pub stderr: CapturedOutput,
    /// Limits reached.
    pub limits_hit: Vec<LimitKind>,
    /// Resource usage.
    pub resource: ResourceUsage,
    /// Why it did not pass; `null` on pass and skip.
    pub failure: Option<StageFailure>,
    /// Why it was skipped; `null` unless `status` is `skipped`.
    pub skip_reason: Option<String>,
    /// What targeting decided for this stage (e.g. the packages selected).
    pub targeting: Option<String>,
    /// Test counts read from the output of known test runners (libtest, pytest, node), when
    /// recognised.
    pub tests: Option<TestCounts>,
    /// What the stage's tools reported, parsed (revision 2): failing tests, compile errors,
    /// lints and type errors, errors first, at most 50. Empty when the stage passed cleanly or
    /// its tool is not one cordon knows (cordon never guesses).
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// How many findings were left out beyond the 50 kept (revision 2).
    #[serde(default)]
    pub findings_omitted: u64,
    /// What the stage reached through cordon's network proxy and what it was refused, when
    /// its network was an allowlist (a detected setup stage's `registry`; revision 3).
    #[serde(default)]
    pub network: Option<crate::NetworkReport>,
    /// How the stage's program was isolated, when it ran sandboxed: its tier and what that
    /// tier does not protect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// How a lint stage's findings compare with the base commit's (revision 5): each finding
    /// is then `new` or `existing`, and only new ones block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<StageBaseline>,
}

/// How a sandboxed program was isolated (the `sandbox` section of its run result, in brief).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Isolation {
    /// `namespaces` or `landlock`.
    pub tier: crate::IsolationTier,
    /// What the namespace tier protects that this tier did not (empty in it).
    #[serde(default)]
    pub not_enforced: Vec<String>,
}

/// A lint stage's findings compared with the base commit's (`StageResult::baseline`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageBaseline {
    /// The base commit compared with.
    pub commit: String,
    /// How the base's findings were known.
    pub source: BaselineSource,
    /// Findings the base has too (all of them, listed or not).
    pub existing: u64,
    /// Findings the change brought (all of them, listed or not).
    pub new: u64,
    /// Whether the stage fails on the base too: a failure whose findings are all `existing`
    /// is then the base's, and does not block.
    pub base_fails: bool,
    /// Why no comparison could be made (`source` is `unavailable`): every finding then counts
    /// as new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How the base commit's findings were known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BaselineSource {
    /// Nothing changed against the base: every finding is the base's own.
    Unchanged,
    /// A verification of the base commit recorded them.
    Recorded,
    /// This verification ran the stage on the base commit.
    Ran,
    /// They could not be known (see `note`): every finding counts as new.
    Unavailable,
}

/// How many tests a stage ran, as its test runner reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestCounts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests skipped or ignored.
    pub ignored: u64,
    /// Subtests that passed (pytest's `N subtests passed`; revision 2), counted apart from the
    /// tests that hold them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subtests_passed: u64,
    /// Subtests that failed (revision 2).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subtests_failed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The kind of check a stage performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageCategory {
    /// Fetching dependencies, preparing the tree.
    Setup,
    /// Style and static lints.
    Lint,
    /// Type checking.
    Typecheck,
    /// Compilation.
    Compile,
    /// Tests.
    Test,
    /// Building artifacts.
    Build,
    /// Starting the program and waiting until it is ready.
    Smoke,
    /// Database or data migrations.
    Migrate,
}

impl StageCategory {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Setup => "setup",
            Self::Lint => "lint",
            Self::Typecheck => "typecheck",
            Self::Compile => "compile",
            Self::Test => "test",
            Self::Build => "build",
            Self::Smoke => "smoke",
            Self::Migrate => "migrate",
        }
    }
}

/// A stage's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    /// It ran and passed.
    Pass,
    /// It ran and failed.
    Fail,
    /// Its timeout fired.
    Timeout,
    /// cordon could not run it.
    Error,
    /// It did not run (see `skip_reason`).
    Skipped,
}

impl StageStatus {
    /// The name used in documents (`pass`, `fail`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Timeout => "timeout",
            Self::Error => "error",
            Self::Skipped => "skipped",
        }
    }
}

/// Why a stage failed. Categories separate what the author must fix (`lint`, `typecheck`,
/// `compile`, `test`, `build`, `smoke`, `migrate`) from what a retry may fix (`timeout`,
/// `resource`, `infra`, `setup`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageFailure {
    /// The failure category.
    pub category: StageFailureCategory,
    /// A human-readable explanation.
    pub reason: String,
}

/// The category of a stage failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageFailureCategory {
    /// Lint findings (author fixes).
    Lint,
    /// Type errors (author fixes).
    Typecheck,
    /// Compile errors (author fixes).
    Compile,
    /// Failing tests (author fixes).
    Test,
    /// Build failure (author fixes).
    Build,
    /// The program did not become ready (author fixes).
    Smoke,
    /// A migration failed (author fixes).
    Migrate,
    /// The stage's timeout fired (a retry may fix).
    Timeout,
    /// A resource limit was reached (a retry with more may fix).
    Resource,
    /// cordon or the host failed (a retry may fix).
    Infra,
    /// Dependency set-up failed (a retry may fix).
    Setup,
}

impl StageFailureCategory {
    /// Whether the author of the change must fix it (as opposed to a retry).
    pub fn author_must_fix(self) -> bool {
        !matches!(
            self,
            Self::Timeout | Self::Resource | Self::Infra | Self::Setup
        )
    }
}

/// The first blocking failure of a verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportFailure {
    /// The failure category.
    pub category: StageFailureCategory,
    /// The stage that failed, or `null` when the failure happened outside any stage.
    pub stage: Option<String>,
    /// A human-readable explanation.
    pub reason: String,
}

/// The promotion gate's decision: fail-closed, `allowed` only when every required stage
/// passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Promotion {
    /// Whether the change may be promoted.
    pub allowed: bool,
    /// The required stages that did not pass.
    pub blocking: Vec<String>,
}

/// Where the plan came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanInfo {
    /// `cordon.toml` or `detected`.
    pub source: PlanSource,
    /// Which side chose the plan: the verified ref, the trusted base, or `--config`
    /// (`ref` in reports written before cordon compared plans).
    #[serde(default)]
    pub origin: PlanOrigin,
    /// Whether changed files narrowed what ran.
    pub targeted: bool,
    /// Why the plan looks the way it does, one line per decision.
    pub reasons: Vec<String>,
}

/// Which side chose a plan. A candidate ref must not choose its own checks: when its
/// `cordon.toml` differs from the base's, the base's plan runs unless the user trusts the
/// ref's (`--trust-ref-plan`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PlanOrigin {
    /// The ref's own files (its `cordon.toml` is the base's, there is no base, or the user
    /// trusted it).
    #[default]
    Ref,
    /// The base's `cordon.toml`: the ref changed it and was not trusted.
    Base,
    /// A file the user named (`--config`).
    ConfigFile,
}

/// The origin of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PlanSource {
    /// Declared in `cordon.toml` (or `--config`).
    #[serde(rename = "cordon.toml")]
    CordonToml,
    /// Detected from the project's files.
    #[serde(rename = "detected")]
    Detected,
}

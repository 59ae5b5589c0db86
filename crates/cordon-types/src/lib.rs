//! The stable JSON contracts of cordon.
//!
//! Every document cordon prints with `--json`, stores, or serves carries a `schema` tag such as
//! `cordon.run-result/v1` and is described here as a Rust type with a generated JSON Schema
//! (committed under `schema/` at the repository root; a test fails when they drift apart).
//!
//! - [`RunResult`]: what happened when one program ran under `cordon run`.
//! - [`RunReport`]: what happened when `cordon verify` checked a change stage by stage, with
//!   typed [`Finding`]s per stage (failing tests, compile errors, lints, type errors).
//! - [`ChildReport`]: the private message a supervising helper (the sandbox init) sends back
//!   to the executor about the program it ran on its behalf.
//! - [`SandboxSummary`]: which isolation held for a run, and by which mechanism.
//! - [`ApiError`]: the job service's error answer, also carried by the CLI's error document.
//! - [`ErrorDocument`] (`cordon.error/v1`): how every door reports a failure, and the
//!   [`ErrorClass`] each library gives its errors.
//! - [`NetworkRule`]: how much network a program has or may have (a job service policy, an
//!   operator's bound on `cordon mcp`).
//! - [`cordon_home`]: where cordon keeps its state, resolved the same way by every crate.
//! - [`units`]: durations and sizes as people write them (`10m`, `64KiB`), parsed the same
//!   way by every command line and configuration file.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod api_error;
mod child_report;
mod error_document;
mod finding;
mod home;
mod network;
mod network_rule;
pub mod proc_stat;
mod run_report;
mod run_result;
mod sandbox;
mod stream;
mod tag;
pub mod text;
pub mod units;

pub use api_error::{ApiError, ApiErrorTag};
pub use child_report::{CHILD_NETWORK_FD, CHILD_REPORT_FD, ChildReport, ChildRusage};
pub use error_document::{
    ErrorClass, ErrorDocument, ErrorDocumentTag, ErrorKind, error_causes, exit_code,
};
pub use finding::{
    Baseline, Finding, FindingKind, MAX_FINDING_MESSAGE_BYTES, MAX_FINDINGS, Severity,
};
pub use home::{HomeError, cordon_home, cordon_home_from};
pub use network::{
    DeniedConnection, HostTraffic, MAX_DENIALS_REPORTED, NetworkLimit, NetworkReport,
};
pub use network_rule::NetworkRule;
pub use run_report::{
    BaselineSource, CacheInfo, ChangeCounts, Isolation, Overall, Phase, PlanInfo, PlanOrigin,
    PlanSource, Promotion, RUN_REPORT_REVISION, ReportFailure, RunReport, RunReportTag,
    StageBaseline, StageCategory, StageFailure, StageFailureCategory, StageResult, StageStatus,
    Subject, SubjectKind, TestCounts, WorkspaceInfo,
};
pub use run_result::{
    CapturedOutput, Failure, FailureCategory, LeakReport, LimitKind, RUN_RESULT_SCHEMA,
    ResourceUsage, RunResult, RunResultTag, RunStatus,
};
pub use sandbox::{Enforcement, EnforcementSummary, IsolationTier, NetworkMode, SandboxSummary};
pub use stream::Stream;

/// The JSON Schema of a contract type, as committed under `schema/`.
pub fn schema_json<T: schemars::JsonSchema>() -> String {
    let schema = schemars::schema_for!(T);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    text.push('\n');
    text
}

/// Checks a generated schema against the file committed at `path` (the drift tests of every
/// crate use it). With the environment variable `UPDATE_SCHEMAS` set, writes it instead.
pub fn check_committed_schema(path: &std::path::Path, generated: &str) -> Result<(), String> {
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        return std::fs::write(path, generated).map_err(|e| format!("{}: {e}", path.display()));
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed == generated {
        Ok(())
    } else {
        Err(format!(
            "{} is stale; regenerate it with `UPDATE_SCHEMAS=1 cargo test --workspace schema`",
            path.display()
        ))
    }
}

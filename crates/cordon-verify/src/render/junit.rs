//! JUnit XML (quick-junit): one testsuite for the run, one testcase per stage, and one more
//! per finding of a failed test stage, named after the failing test (`nums`, then `nums #2` for
//! its second failed assertion: names are unique) so that CI test reporters show it. A failed
//! optional stage is `<skipped message="optional: …">`, never a failure.

use std::time::Duration;

use cordon_types::{Finding, FindingKind, RunReport, StageResult, StageStatus};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::text::{clean, finding_line, tail};

/// A JUnit XML document of the report.
pub fn junit(report: &RunReport) -> String {
    // The suite's name says what was verified (`HEAD 79b129f + 2 modified, 1 untracked`).
    let mut suite = TestSuite::new(format!(
        "cordon verify {}: {}",
        report.repo,
        super::subject_line(report)
    ));
    suite.set_time(Duration::from_millis(report.duration_ms));
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(&report.started_at) {
        suite.set_timestamp(at);
    }
    for stage in &report.stages {
        suite.add_test_case(stage_case(report, stage));
        if stage.required && matches!(stage.status, StageStatus::Fail | StageStatus::Timeout) {
            // One testcase per failed assertion, each name unique within the stage: a test
            // that failed twice (two TAP assertions of `nums`) is `nums`, then `nums #2`.
            let mut seen: std::collections::HashMap<String, usize> = Default::default();
            for finding in stage
                .findings
                .iter()
                .filter(|f| f.kind == FindingKind::Test)
            {
                let name = finding
                    .test
                    .clone()
                    .unwrap_or_else(|| "(unnamed test)".into());
                let n = seen.entry(name.clone()).or_default();
                *n += 1;
                let name = match *n {
                    1 => name,
                    n => format!("{name} #{n}"),
                };
                suite.add_test_case(finding_case(stage, finding, name));
            }
        }
    }
    let mut junit = Report::new("cordon verify");
    junit.set_time(Duration::from_millis(report.duration_ms));
    junit.add_test_suite(suite);
    junit
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cordon could not write JUnit XML: {e} -->\n"))
}

/// The stage itself.
fn stage_case(report: &RunReport, stage: &StageResult) -> TestCase {
    let reason = stage
        .failure
        .as_ref()
        .map(|f| clean(&f.reason))
        .unwrap_or_default();
    let category = stage
        .failure
        .as_ref()
        .map(|f| format!("{:?}", f.category).to_lowercase())
        .unwrap_or_default();
    let details = || {
        let mut text = reason.clone();
        if !stage.findings.is_empty() {
            text.push_str("\n\nfindings:\n");
            for f in &stage.findings {
                text.push_str(&format!("  {}\n", finding_line(f)));
            }
            if stage.findings_omitted > 0 {
                text.push_str(&format!("  … and {} more\n", stage.findings_omitted));
            }
        }
        text
    };
    let failed = matches!(
        stage.status,
        StageStatus::Fail | StageStatus::Timeout | StageStatus::Error
    );
    let status = match stage.status {
        StageStatus::Pass => TestCaseStatus::success(),
        StageStatus::Skipped => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(stage.skip_reason.clone().unwrap_or_default());
            s
        }
        // An optional stage does not block: CI must not paint it red.
        _ if !stage.required => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(format!("optional: {reason}"));
            s.set_description(details());
            s
        }
        StageStatus::Fail | StageStatus::Timeout | StageStatus::Error => {
            let kind = if stage.status == StageStatus::Error {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            };
            let mut s = TestCaseStatus::non_success(kind);
            s.set_message(reason.clone());
            s.set_type(category);
            s.set_description(details());
            s
        }
    };
    let mut case = TestCase::new(stage.name.clone(), status);
    case.set_classname(format!("cordon.{}", stage.category.as_str()));
    case.set_time(Duration::from_millis(stage.duration_ms));
    if failed {
        case.set_system_out(tail(report, &stage.stdout, 16 * 1024));
        case.set_system_err(tail(report, &stage.stderr, 16 * 1024));
    }
    case
}

/// A failing test found in a stage's output, as testcase `name`.
fn finding_case(stage: &StageResult, finding: &Finding, name: String) -> TestCase {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
    status.set_message(finding_line(finding));
    status.set_type(finding.kind.as_str());
    status.set_description(format!(
        "{}{}",
        finding
            .location()
            .map(|l| format!("{l}\n"))
            .unwrap_or_default(),
        clean(&finding.message)
    ));
    let mut case = TestCase::new(name, status);
    case.set_classname(format!("cordon.{}", stage.name));
    case
}

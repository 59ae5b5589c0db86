//! Renderings of a run report: JUnit XML (for CI test reporters), Markdown (for a pull-request
//! comment) and the terminal summary. Each starts by saying what was verified (the report's
//! `subject`), then shows the actionable lines in order of what matters — the blocking
//! stages' findings (the failing test, `file:line`), the optional stages' new findings, a count
//! of those the base has too — or the end of whichever stream holds text, with ANSI escapes
//! stripped and the workspace's paths rewritten to the repository's.

mod junit;
mod markdown;
mod terminal;
pub(crate) mod text;

#[cfg(test)]
mod tests;

pub use junit::junit;
pub use markdown::markdown;
pub use terminal::terminal_summary;

use cordon_types::{Baseline, Finding, RunReport, StageResult};

/// One line about a stage: why it failed or was skipped, else what its baseline comparison
/// found and its test counts.
pub fn stage_note(stage: &StageResult) -> String {
    let baseline = stage
        .baseline
        .as_ref()
        .filter(|b| b.existing > 0 && stage.failure.is_none())
        .map(|b| {
            format!(
                "{} existing finding(s) the base has too, {} new",
                b.existing,
                if b.new == 0 {
                    "none".to_owned()
                } else {
                    b.new.to_string()
                }
            )
        });
    stage
        .failure
        .as_ref()
        .map(|f| f.reason.clone())
        .or_else(|| stage.skip_reason.clone())
        .or(baseline)
        .or_else(|| {
            stage.tests.map(|t| {
                format!(
                    "{} passed, {} failed, {} ignored",
                    t.passed, t.failed, t.ignored
                )
            })
        })
        .map(|note| text::clean(&note))
        .unwrap_or_default()
}

/// What was verified, in one line: the report's `subject`, else the ref and its commit (a
/// report of an older revision).
pub fn subject_line(report: &RunReport) -> String {
    match &report.subject {
        Some(subject) => text::clean(&subject.summary),
        None => {
            let short = &report.commit[..report.commit.len().min(12)];
            format!(
                "{} {short}{}",
                text::clean(&report.r#ref),
                if report.patch.is_some() {
                    " + patch"
                } else {
                    ""
                }
            )
        }
    }
}

/// Whether the base has `finding` too.
pub(crate) fn existing(finding: &Finding) -> bool {
    finding.baseline == Some(Baseline::Existing)
}

/// How many of a stage's findings the base has too (listed or not).
pub(crate) fn existing_count(stage: &StageResult) -> u64 {
    stage.baseline.as_ref().map_or(0, |b| b.existing)
}

/// How many of a stage's findings are not the base's (listed or not): all of them when none
/// was compared.
pub(crate) fn new_count(stage: &StageResult) -> u64 {
    stage.baseline.as_ref().map_or_else(
        || stage.findings.len() as u64 + stage.findings_omitted,
        |b| b.new,
    )
}

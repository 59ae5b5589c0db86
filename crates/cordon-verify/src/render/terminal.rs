//! The summary `cordon verify` prints on the terminal after the stages ran.

use std::fmt::Write;

use cordon_types::{Overall, RunReport, StageResult, StageStatus};

use super::text::{finding_line, last_lines};

/// Findings shown per failed stage (the report has them all).
const SHOWN_FINDINGS: usize = 10;
/// Lines of each stream shown for a failed stage without findings.
const SHOWN_LINES: usize = 15;

/// The table of stages, then for each failed stage its findings (or the last lines of the
/// streams that hold text), then the verdict.
pub fn terminal_summary(report: &RunReport) -> String {
    let mut out = String::new();
    let width = report
        .stages
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        out,
        "\n{:<width$}  {:<9}  {:<8}  {:>7}  note",
        "stage", "category", "status", "time"
    );
    for s in &report.stages {
        let row = format!(
            "{:<width$}  {:<9}  {:<8}  {:>6.1}s  {}{}",
            s.name,
            s.category.as_str(),
            s.status.as_str(),
            s.duration_ms as f64 / 1000.0,
            if s.required { "" } else { "(optional) " },
            super::stage_note(s),
        );
        let _ = writeln!(out, "{}", row.trim_end());
        if let Some(targeting) = &s.targeting
            && s.status != StageStatus::Skipped
        {
            let _ = writeln!(
                out,
                "{:<width$}  targeted: {targeting} ({})",
                "",
                shell_words::join(&s.command)
            );
        }
    }
    // What matters first: the stages that block, then the optional ones.
    let (blocking, optional): (Vec<&StageResult>, Vec<&StageResult>) = report
        .stages
        .iter()
        .filter(|s| failed(s))
        .partition(|s| s.required);
    for s in blocking.iter().chain(&optional) {
        stage_details(&mut out, report, s);
    }
    let verdict = match report.overall {
        Overall::Pass => "gate: PASSED — promotion allowed".to_owned(),
        Overall::Fail => format!("gate: BLOCKED by {}", report.promotion.blocking.join(", ")),
        Overall::Error => format!(
            "gate: ERROR — {}",
            report
                .failure
                .as_ref()
                .map(|f| f.reason.as_str())
                .unwrap_or("cordon could not complete the verification")
        ),
    };
    let _ = writeln!(out, "\nverified: {}", super::subject_line(report));
    let _ = writeln!(
        out,
        "{verdict} ({:.1}s, run {})",
        report.duration_ms as f64 / 1000.0,
        report.run_id
    );
    out
}

fn failed(s: &StageResult) -> bool {
    matches!(
        s.status,
        StageStatus::Fail | StageStatus::Timeout | StageStatus::Error
    )
}

/// What a failed stage said: its new findings (all, when none was compared with the base)
/// and how many the base has too, or the end of each stream that holds text.
fn stage_details(out: &mut String, report: &RunReport, s: &StageResult) {
    let optional = if s.required { "" } else { ", optional" };
    if !s.findings.is_empty() {
        let new = super::new_count(s);
        let existing = super::existing_count(s);
        let counts = if existing > 0 {
            format!("{new} new finding(s), {existing} existing")
        } else {
            format!("{new} finding(s)")
        };
        let _ = writeln!(out, "\n--- {} ({counts}{optional}) ---", s.name);
        let listed: Vec<_> = s.findings.iter().filter(|f| !super::existing(f)).collect();
        for f in listed.iter().take(SHOWN_FINDINGS) {
            let _ = writeln!(out, "  {}", finding_line(f));
        }
        if new > SHOWN_FINDINGS as u64 {
            let _ = writeln!(
                out,
                "  … and {} more (`--json` has up to 50)",
                new - SHOWN_FINDINGS as u64
            );
        }
        if existing > 0 {
            let _ = writeln!(
                out,
                "  ({existing} existing finding(s) the base has too: not listed)"
            );
        }
        return;
    }
    for (name, stream) in [("stdout", &s.stdout), ("stderr", &s.stderr)] {
        let lines = last_lines(report, stream, SHOWN_LINES);
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n--- {} (last lines of {name}{optional}) ---", s.name);
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    }
}

//! A Markdown summary for a pull-request comment: what was verified and the verdict, the
//! stages, the failure, then the findings in order of what matters — the blocking stages'
//! findings, the optional stages' new ones, a count of those the base has too — and the end of
//! each failed stage's output, collapsed.

use std::fmt::Write;

use cordon_types::{RunReport, StageResult, StageStatus};

use super::text::{clean, finding_line, tail};

/// Findings listed per failed stage.
const LISTED_FINDINGS: usize = 20;

/// Untrusted text as an inert table cell: one line, no markup, no HTML, no controls.
fn cell(text: &str) -> String {
    cordon_types::text::for_markdown(&clean(text))
}

/// Text from the tools' output as a code span: neither Markdown nor HTML inside it is
/// interpreted (a hostile test name cannot add links, images or markup to the comment). The
/// fence is one backtick longer than the longest run inside; the text is padded with a space
/// on each side only when it starts or ends with a backtick (CommonMark strips one such
/// space, so `` `x` `` stays `x` and `95 passed` is not shown as ` 95 passed `).
fn code(text: &str) -> String {
    let text = clean(text).replace('\n', " ");
    let text = text.trim();
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    if text.starts_with('`') || text.ends_with('`') {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

/// A code span fit for a table cell (pipes escaped, as GitHub's tables need even there).
fn code_cell(text: &str) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    code(text).replace('|', "\\|")
}

/// A stage's status as the table shows it: an optional stage that did not pass is a warning
/// (⚠), never a failure — it does not block, and a passed gate must not look failed.
fn status_mark(stage: &StageResult) -> &'static str {
    match stage.status {
        StageStatus::Pass => "✅ pass",
        StageStatus::Skipped => "⏭️ skipped",
        StageStatus::Fail | StageStatus::Timeout | StageStatus::Error if !stage.required => {
            "⚠️ warning"
        }
        StageStatus::Fail => "❌ fail",
        StageStatus::Timeout => "⏱️ timeout",
        StageStatus::Error => "❗ error",
    }
}

/// Whether a stage did not pass.
fn failed(stage: &StageResult) -> bool {
    matches!(
        stage.status,
        StageStatus::Fail | StageStatus::Timeout | StageStatus::Error
    )
}

/// A Markdown summary for a pull-request comment.
pub fn markdown(report: &RunReport) -> String {
    let mut out = String::new();
    let verdict = if report.promotion.allowed {
        "✅ passed — promotion allowed"
    } else {
        "❌ blocked — promotion not allowed"
    };
    let _ = writeln!(
        out,
        "**cordon verify** of {}: **{verdict}**\n",
        code(&super::subject_line(report))
    );
    let _ = writeln!(
        out,
        "{} · {:.1}s · plan: {}{}\n",
        cell(&report.repo),
        report.duration_ms as f64 / 1000.0,
        match (report.plan.source, report.plan.origin) {
            (_, cordon_types::PlanOrigin::ConfigFile) => "--config",
            (_, cordon_types::PlanOrigin::Base) => "the base's cordon.toml",
            (cordon_types::PlanSource::CordonToml, _) => "cordon.toml",
            (cordon_types::PlanSource::Detected, _) => "detected",
        },
        if report.plan.targeted {
            ", targeted"
        } else {
            ""
        },
    );
    let _ = writeln!(
        out,
        "| stage | category | required | status | time | note |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for s in &report.stages {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1}s | {} |",
            cell(&s.name),
            s.category.as_str(),
            if s.required { "yes" } else { "no" },
            status_mark(s),
            s.duration_ms as f64 / 1000.0,
            code_cell(&super::stage_note(s))
        );
    }
    if let Some(f) = &report.failure {
        let _ = writeln!(
            out,
            "\n**Failure** ({}): {}{}",
            format!("{:?}", f.category).to_lowercase(),
            f.stage
                .as_deref()
                .map(|s| format!("stage {}: ", code(s)))
                .unwrap_or_default(),
            code(&f.reason)
        );
    }
    // What matters first: the stages that block, then the optional ones (warnings).
    let (blocking, optional): (Vec<&StageResult>, Vec<&StageResult>) = report
        .stages
        .iter()
        .filter(|s| failed(s))
        .partition(|s| s.required);
    for s in blocking.iter().chain(&optional) {
        stage_findings(&mut out, s);
    }
    for s in blocking.iter().chain(&optional) {
        stage_output(&mut out, report, s);
    }
    out
}

/// A failed stage's findings: the new ones (or all, when none was compared with the base),
/// then how many the base has too.
fn stage_findings(out: &mut String, s: &StageResult) {
    let listed: Vec<_> = s.findings.iter().filter(|f| !super::existing(f)).collect();
    let existing = super::existing_count(s);
    if listed.is_empty() && existing == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "\n**{}**{}:\n",
        cell(&s.name),
        if s.required {
            ""
        } else {
            " (optional: ⚠ does not block)"
        }
    );
    for f in listed.iter().take(LISTED_FINDINGS) {
        let _ = writeln!(out, "- {}", code(&finding_line(f)));
    }
    let more = super::new_count(s).saturating_sub(LISTED_FINDINGS.min(listed.len()) as u64);
    if more > 0 {
        let _ = writeln!(out, "- … and {more} more");
    }
    if existing > 0 {
        let _ = writeln!(
            out,
            "- {existing} existing finding(s): the base has them too{}",
            if s.status == StageStatus::Pass {
                ""
            } else {
                " (not listed)"
            }
        );
    }
}

/// The end of a failed stage's output, collapsed.
fn stage_output(out: &mut String, report: &RunReport, s: &StageResult) {
    let mut streams = String::new();
    for out_stream in [&s.stdout, &s.stderr] {
        let text = tail(report, out_stream, 4000);
        if !text.trim().is_empty() {
            streams.push_str(text.trim_end());
            streams.push('\n');
        }
    }
    if streams.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n<details><summary>{} output (end){}</summary>\n\n```text\n{}```\n\n</details>",
        cordon_types::text::for_html(&s.name),
        if s.required { "" } else { ", optional" },
        streams.replace("```", "ʼʼʼ")
    );
}

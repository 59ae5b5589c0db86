//! A Markdown summary for a pull-request comment: the verdict, the stages, the failure, each
//! failed stage's findings, and the end of its output.

use std::fmt::Write;

use cordon_types::{RunReport, StageStatus};

use super::text::{clean, finding_line, tail};

/// Findings listed per failed stage.
const LISTED_FINDINGS: usize = 20;

/// Untrusted text as an inert table cell: one line, no markup, no HTML, no controls.
fn cell(text: &str) -> String {
    cordon_types::text::for_markdown(&clean(text))
}

/// Text from the tools' output as a code span: neither Markdown nor HTML inside it is
/// interpreted (a hostile test name cannot add links, images or markup to the comment). The
/// fence is one backtick longer than the longest run inside.
fn code(text: &str) -> String {
    let text = clean(text).replace('\n', " ");
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    format!("{fence} {} {fence}", text.trim())
}

/// A code span fit for a table cell (pipes escaped, as GitHub's tables need even there).
fn code_cell(text: &str) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    code(text).replace('|', "\\|")
}

fn status_mark(status: StageStatus) -> &'static str {
    match status {
        StageStatus::Pass => "✅ pass",
        StageStatus::Fail => "❌ fail",
        StageStatus::Timeout => "⏱️ timeout",
        StageStatus::Error => "⚠️ error",
        StageStatus::Skipped => "⏭️ skipped",
    }
}

/// A Markdown summary for a pull-request comment.
pub fn markdown(report: &RunReport) -> String {
    let mut out = String::new();
    let verdict = if report.promotion.allowed {
        "✅ **cordon verify: passed** — promotion allowed"
    } else {
        "❌ **cordon verify: blocked** — promotion not allowed"
    };
    let _ = writeln!(out, "{verdict}\n");
    let short = &report.commit[..report.commit.len().min(12)];
    let _ = writeln!(
        out,
        "{} at {} ({short}){} · {:.1}s · plan: {}{}\n",
        cell(&report.repo),
        cell(&report.r#ref),
        if report.patch.is_some() {
            " + patch"
        } else {
            ""
        },
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
            status_mark(s.status),
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
    for s in report.stages.iter().filter(|s| {
        matches!(
            s.status,
            StageStatus::Fail | StageStatus::Timeout | StageStatus::Error
        )
    }) {
        if !s.findings.is_empty() {
            let _ = writeln!(
                out,
                "\n**{}**{}:\n",
                cell(&s.name),
                if s.required { "" } else { " (optional)" }
            );
            for f in s.findings.iter().take(LISTED_FINDINGS) {
                let _ = writeln!(out, "- {}", code(&finding_line(f)));
            }
            let more =
                (s.findings.len().saturating_sub(LISTED_FINDINGS)) as u64 + s.findings_omitted;
            if more > 0 {
                let _ = writeln!(out, "- … and {more} more");
            }
        }
        let mut streams = String::new();
        for out_stream in [&s.stdout, &s.stderr] {
            let text = tail(report, out_stream, 4000);
            if !text.trim().is_empty() {
                streams.push_str(text.trim_end());
                streams.push('\n');
            }
        }
        if streams.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "\n<details><summary>{} output (end)</summary>\n\n```text\n{}```\n\n</details>",
            cordon_types::text::for_html(&s.name),
            streams.replace("```", "ʼʼʼ")
        );
    }
    out
}

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

/// Untrusted inline text (a list item, a reason): the same, inert.
fn inline(text: &str) -> String {
    cell(text)
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
            cell(&super::stage_note(s))
        );
    }
    if let Some(f) = &report.failure {
        let _ = writeln!(
            out,
            "\n**Failure** ({}): {}{}",
            format!("{:?}", f.category).to_lowercase(),
            f.stage
                .as_deref()
                .map(|s| format!("stage {}: ", inline(s)))
                .unwrap_or_default(),
            inline(&f.reason)
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
                inline(&s.name),
                if s.required { "" } else { " (optional)" }
            );
            for f in s.findings.iter().take(LISTED_FINDINGS) {
                let _ = writeln!(out, "- {}", inline(&finding_line(f)));
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

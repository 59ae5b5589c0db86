//! Renderings of a run report: JUnit XML (for CI test reporters) and Markdown (for a PR
//! comment).

use std::fmt::Write;

use cordon_types::{CapturedOutput, RunReport, StageResult, StageStatus};

/// Escapes text for XML content and attributes, dropping characters XML 1.0 forbids.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The end of a captured stream, as text for a failure message.
fn tail_text(out: &CapturedOutput, max: usize) -> String {
    let text = if out.truncated {
        format!("[… {} bytes omitted …]\n{}", out.omitted_bytes, out.tail)
    } else {
        out.head.clone()
    };
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[…]{}", &text[start..])
}

/// A JUnit XML document: one testsuite for the run, one testcase per stage.
pub fn junit(report: &RunReport) -> String {
    let count = |s: StageStatus| report.stages.iter().filter(|x| x.status == s).count();
    let failures = count(StageStatus::Fail) + count(StageStatus::Timeout);
    let errors = count(StageStatus::Error);
    let skipped = count(StageStatus::Skipped);
    let mut out = String::new();
    let _ = writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        out,
        r#"<testsuites name="cordon verify" tests="{}" failures="{failures}" errors="{errors}" skipped="{skipped}" time="{:.3}">"#,
        report.stages.len(),
        report.duration_ms as f64 / 1000.0
    );
    let _ = writeln!(
        out,
        r#"  <testsuite name="{}" id="{}" tests="{}" failures="{failures}" errors="{errors}" skipped="{skipped}" time="{:.3}" timestamp="{}">"#,
        xml(&format!("cordon verify {}@{}", report.repo, report.r#ref)),
        xml(&report.run_id),
        report.stages.len(),
        report.duration_ms as f64 / 1000.0,
        xml(report.started_at.trim_end_matches('Z')),
    );
    for stage in &report.stages {
        let _ = write!(
            out,
            r#"    <testcase name="{}" classname="cordon.{}" time="{:.3}""#,
            xml(&stage.name),
            stage.category.as_str(),
            stage.duration_ms as f64 / 1000.0
        );
        let reason = stage
            .failure
            .as_ref()
            .map(|f| f.reason.clone())
            .unwrap_or_default();
        let category = stage
            .failure
            .as_ref()
            .map(|f| format!("{:?}", f.category).to_lowercase())
            .unwrap_or_default();
        match stage.status {
            StageStatus::Pass => {
                let _ = writeln!(out, " />");
                continue;
            }
            StageStatus::Skipped => {
                let _ = writeln!(
                    out,
                    ">\n      <skipped message=\"{}\" />",
                    xml(stage.skip_reason.as_deref().unwrap_or(""))
                );
            }
            StageStatus::Fail | StageStatus::Timeout => {
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>",
                    xml(&reason),
                    xml(&category),
                    xml(&format!(
                        "{}\n--- stdout (end) ---\n{}\n--- stderr (end) ---\n{}",
                        reason,
                        tail_text(&stage.stdout, 8192),
                        tail_text(&stage.stderr, 8192)
                    ))
                );
            }
            StageStatus::Error => {
                let _ = writeln!(
                    out,
                    ">\n      <error message=\"{}\" type=\"{}\">{}</error>",
                    xml(&reason),
                    xml(&category),
                    xml(&tail_text(&stage.stderr, 8192))
                );
            }
        }
        if stage.status != StageStatus::Skipped {
            let _ = writeln!(
                out,
                "      <system-out>{}</system-out>\n      <system-err>{}</system-err>",
                xml(&tail_text(&stage.stdout, 16384)),
                xml(&tail_text(&stage.stderr, 16384))
            );
        }
        let _ = writeln!(out, "    </testcase>");
    }
    let _ = writeln!(out, "  </testsuite>\n</testsuites>");
    out
}

fn status_mark(stage: &StageResult) -> &'static str {
    match stage.status {
        StageStatus::Pass => "✅ pass",
        StageStatus::Fail => "❌ fail",
        StageStatus::Timeout => "⏱️ timeout",
        StageStatus::Error => "⚠️ error",
        StageStatus::Skipped => "⏭️ skipped",
    }
}

/// One line about a stage: why it failed or was skipped, else its test counts.
pub fn stage_note(stage: &StageResult) -> String {
    stage
        .failure
        .as_ref()
        .map(|f| f.reason.clone())
        .or_else(|| stage.skip_reason.clone())
        .or_else(|| {
            stage.tests.map(|t| {
                format!(
                    "{} passed, {} failed, {} ignored",
                    t.passed, t.failed, t.ignored
                )
            })
        })
        .unwrap_or_default()
}

/// Untrusted text as inert Markdown (a table cell, a line): no markup, no HTML, no controls.
fn cell(text: &str) -> String {
    cordon_types::text::for_markdown(text)
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
        let note = stage_note(s);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1}s | {} |",
            cell(&s.name),
            s.category.as_str(),
            if s.required { "yes" } else { "no" },
            status_mark(s),
            s.duration_ms as f64 / 1000.0,
            cell(&note)
        );
    }
    if let Some(f) = &report.failure {
        let _ = writeln!(
            out,
            "\n**Failure** ({}): {}{}",
            format!("{:?}", f.category).to_lowercase(),
            f.stage
                .as_deref()
                .map(|s| format!("stage {}: ", cell(s)))
                .unwrap_or_default(),
            cell(&f.reason)
        );
    }
    for s in report.stages.iter().filter(|s| {
        matches!(
            s.status,
            StageStatus::Fail | StageStatus::Timeout | StageStatus::Error
        )
    }) {
        let _ = writeln!(
            out,
            "\n<details><summary>{} output (end)</summary>\n\n```text\n{}\n{}\n```\n\n</details>",
            cordon_types::text::for_html(&s.name),
            cordon_types::text::for_terminal(&tail_text(&s.stdout, 4000)).replace("```", "ʼʼʼ"),
            cordon_types::text::for_terminal(&tail_text(&s.stderr, 4000)).replace("```", "ʼʼʼ")
        );
    }
    out
}

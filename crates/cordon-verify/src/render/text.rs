//! Text as the renderings show it: no ANSI escapes or control characters, the workspace's
//! paths rewritten to the repository's, the end of a stream within a budget.

use cordon_types::{CapturedOutput, Finding, RunReport};

/// `raw` without ANSI escape sequences and control characters (newlines and tabs stay).
pub(crate) fn clean(raw: &str) -> String {
    crate::findings::strip_ansi(raw)
        .chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}

/// `text` with the (deleted) workspace's path rewritten to the repository root's.
pub(crate) fn repo_paths(report: &RunReport, text: &str) -> String {
    let workspace = &report.workspace.path;
    if workspace.len() <= 1 {
        return text.to_owned();
    }
    let mut text = text.replace(workspace.as_str(), &report.repo);
    // An overlay workspace appears at one fixed path inside the sandbox.
    if report.workspace.strategy == "overlay" {
        text = text.replace(cordon_sandbox::SANDBOX_WORKSPACE, &report.repo);
    }
    if let Ok(real) = std::fs::canonicalize(workspace) {
        let real = real.display().to_string();
        if real.len() > 1 {
            text = text.replace(&real, &report.repo);
        }
    }
    text
}

/// The end of a captured stream (at most `max` bytes, cut at a line start when it can),
/// clean, with the workspace's paths rewritten; empty when the stream was.
pub(crate) fn tail(report: &RunReport, out: &CapturedOutput, max: usize) -> String {
    let raw = if out.truncated {
        format!("[… {} bytes omitted …]\n{}", out.omitted_bytes, out.tail)
    } else {
        out.head.clone()
    };
    let text = repo_paths(report, &clean(&readable(&raw)));
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let cut = &text[start..];
    let cut = cut.split_once('\n').map(|(_, rest)| rest).unwrap_or(cut);
    format!("[…]\n{cut}")
}

/// `raw` with cargo's JSON messages (`--message-format=json`) turned back into what cargo
/// would have printed: a compiler message's `rendered` text; artifacts and the build summary
/// dropped. Other lines stay as they are.
pub(crate) fn readable(raw: &str) -> String {
    if !raw.contains("{\"reason\":") {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len() / 4);
    for line in raw.split_inclusive('\n') {
        if !line.starts_with("{\"reason\":") {
            out.push_str(line);
            continue;
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            out.push_str(line);
            continue;
        };
        if let Some(rendered) = value
            .get("message")
            .and_then(|m| m.get("rendered"))
            .and_then(|r| r.as_str())
        {
            out.push_str(rendered);
        }
    }
    out
}

/// The last `n` non-empty-ended lines of a stream.
pub(crate) fn last_lines(report: &RunReport, out: &CapturedOutput, n: usize) -> Vec<String> {
    let text = tail(report, out, 64 * 1024);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].iter().map(|l| (*l).to_owned()).collect()
}

/// A finding as one line: `src/lib.rs:9:9: test `tests::adds` failed: message`.
pub(crate) fn finding_line(finding: &Finding) -> String {
    clean(&finding.headline())
}

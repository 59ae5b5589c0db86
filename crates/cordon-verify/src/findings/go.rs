//! Go: `go test` (`--- FAIL: TestAdd (0.00s)` then `    add_test.go:7: message`, the package
//! named by the `FAIL\texample.com/demo\t0.003s` line that follows), and the compiler's and
//! vet's `./add.go:10:9: message`.

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// `file.go:line[:col]: message`.
fn positioned(line: &str) -> Option<(&str, u32, Option<u32>, &str)> {
    let t = line.trim();
    let (at, message) = t.split_once(": ")?;
    let mut parts = at.split(':');
    let raw = parts.next()?;
    let file = raw.strip_prefix("./").unwrap_or(raw);
    if !file.ends_with(".go") || file.contains(' ') {
        return None;
    }
    let line_no = number(parts.next()?)?;
    let column = parts.next().and_then(number);
    Some((file, line_no, column, message))
}

/// The package of a `FAIL\tPKG\t0.01s`, `FAIL\tPKG [build failed]` or `ok  \tPKG\t...` line.
fn package_line(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("FAIL\t")
        .or_else(|| line.strip_prefix("ok  \t"))?;
    rest.split(['\t', ' ']).next().filter(|p| !p.is_empty())
}

/// `go test`'s failing tests; a test's file is named by the package it belongs to
/// (`example.com/demo/add_test.go`), which [`super::PathContext`] maps to the module's
/// directory.
pub(crate) fn parse_test(text: &str, sink: &mut Sink) {
    let mut pending: Vec<Finding> = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for line in text.lines() {
        if let Some(package) = package_line(line) {
            for mut finding in pending.drain(..) {
                finding.file = finding.file.map(|f| format!("{package}/{f}"));
                push(sink, finding);
            }
            current = None;
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("--- FAIL: ") {
            let name = rest.rsplit_once(" (").map(|(n, _)| n).unwrap_or(rest);
            current = Some((indent(line), name.to_owned()));
            continue;
        }
        let Some((at, test)) = &current else {
            continue;
        };
        if indent(line) <= *at {
            current = None;
            continue;
        }
        if let Some((file, line_no, column, message)) = positioned(line) {
            if pending.len() < super::MAX_RAW_FINDINGS {
                pending.push(Finding {
                    kind: FindingKind::Test,
                    severity: Severity::Error,
                    tool: "go-test".into(),
                    test: Some(test.clone()),
                    file: Some(file.to_owned()),
                    line: Some(line_no),
                    column,
                    code: None,
                    message: message.to_owned(),
                    baseline: None,
                    via: None,
                });
            }
        } else if let Some(last) = pending.last_mut()
            && last.test.as_ref() == Some(test)
            && last.message.len() < 4096
        {
            // A message's further lines are indented deeper.
            last.message.push('\n');
            last.message.push_str(line.trim());
        }
    }
    // Without its package line (a cut capture) a file name alone would be a guess.
    for mut finding in pending {
        finding.message = format!(
            "{}:{}: {}",
            finding.file.take().unwrap_or_default(),
            finding.line.take().unwrap_or_default(),
            finding.message
        );
        finding.column = None;
        push(sink, finding);
    }
    parse_positions(text, sink, FindingKind::Compile, "go");
}

/// `go vet`'s findings.
pub(crate) fn parse_vet(text: &str, sink: &mut Sink) {
    parse_positions(text, sink, FindingKind::Lint, "go-vet");
}

/// `go build`'s errors.
pub(crate) fn parse_build(text: &str, sink: &mut Sink) {
    parse_positions(text, sink, FindingKind::Compile, "go");
}

/// `./file.go:line:col: message` lines (relative to the go command's directory, with `./`).
fn parse_positions(text: &str, sink: &mut Sink, kind: FindingKind, tool: &str) {
    for line in text
        .lines()
        .filter(|l| l.starts_with("./") || l.starts_with("../"))
    {
        let Some((file, line_no, column, message)) = positioned(line) else {
            continue;
        };
        let file = if line.starts_with("../") {
            line.split(':').next().unwrap_or(file)
        } else {
            file
        };
        if !push(
            sink,
            Finding {
                kind,
                severity: Severity::Error,
                tool: tool.into(),
                test: None,
                file: Some(file.to_owned()),
                line: Some(line_no),
                column,
                code: None,
                message: message.to_owned(),
                baseline: None,
                via: None,
            },
        ) {
            return;
        }
    }
}

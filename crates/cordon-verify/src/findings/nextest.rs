//! cargo-nextest: `FAIL [ 0.005s] (2/3) crate tests::adds`, then the test's indented output
//! with libtest's panic in it.

use std::collections::HashSet;

use cordon_types::{Finding, FindingKind, Severity};

use super::libtest::panic_in;
use super::{Sink, push};

/// A status line of a test that did not pass: the binary and the test.
fn failed_test(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start();
    let (status, rest) = rest.split_once(" [")?;
    if !(status == "FAIL" || status == "TIMEOUT" || status.starts_with("SIG")) {
        return None;
    }
    let (_, rest) = rest.split_once("] ")?;
    let rest = match rest.strip_prefix('(') {
        Some(counted) => counted.split_once(") ")?.1,
        None => rest,
    };
    let (binary, test) = rest.trim().split_once(' ')?;
    Some((binary, test))
}

fn is_status_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('─')
        || [
            "PASS [",
            "FAIL [",
            "SKIP [",
            "TIMEOUT [",
            "LEAK [",
            "SLOW [",
            "Summary [",
        ]
        .iter()
        .any(|p| t.starts_with(p))
        || (t.starts_with("SIG") && t.contains(" ["))
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    let mut done: HashSet<(&str, &str)> = HashSet::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((binary, test)) = failed_test(lines[i]) else {
            i += 1;
            continue;
        };
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !is_status_line(lines[i]) {
            body.push(lines[i].strip_prefix("    ").unwrap_or(lines[i]));
            i += 1;
        }
        if !done.insert((binary, test)) {
            continue;
        }
        let panic = panic_in(&body).unwrap_or_default();
        push(
            sink,
            Finding {
                kind: FindingKind::Test,
                severity: Severity::Error,
                tool: "nextest".into(),
                test: Some(test.to_owned()),
                file: panic.file,
                line: panic.line,
                column: panic.column,
                code: None,
                message: if panic.message.is_empty() {
                    "FAILED".into()
                } else {
                    panic.message
                },
                baseline: None,
                via: None,
            },
        );
    }
}

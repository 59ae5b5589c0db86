//! TAP (node's test runner when its output is not a terminal, tape, tap): each `not ok` with
//! its YAML block. The test is named by node's `# Subtest:` path (`suite > inner`) or tape's
//! `# test name` comment; the place is the first stack frame in the project's own code (not
//! `node:` internals, not `node_modules`), else the block's `at:` or `location:`.

use std::collections::HashMap;

use cordon_types::{Finding, FindingKind, Severity};

use super::js_stack::frame;
use super::{Sink, node_check, push};

/// Comments that are TAP's own summary, not a test's name.
const SUMMARY: &[&str] = &[
    "tests",
    "suites",
    "pass",
    "fail",
    "cancelled",
    "skipped",
    "todo",
    "duration_ms",
    "ok",
];

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// `not ok 3 - name # SKIP`: the name, unless a directive excuses it.
fn not_ok(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("not ok ")?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let name = rest.trim_start().strip_prefix("- ").unwrap_or(rest).trim();
    let upper = name.to_ascii_uppercase();
    if upper.contains("# SKIP") || upper.contains("# TODO") {
        return None;
    }
    Some(name)
}

/// The YAML block after a `not ok` line: its keys, block scalars joined by newlines, quotes
/// removed.
fn yaml_block(lines: &[&str]) -> (HashMap<String, String>, usize) {
    let mut map: HashMap<String, String> = HashMap::new();
    let Some(first) = lines.first() else {
        return (map, 0);
    };
    if first.trim() != "---" {
        return (map, 0);
    }
    let base = indent(first);
    let mut used = 1;
    let mut key: Option<(String, usize)> = None;
    for line in &lines[1..] {
        used += 1;
        if line.trim() == "..." && indent(line) == base {
            break;
        }
        if used > 400 {
            break;
        }
        if let Some((k, key_indent)) = &key
            && (indent(line) > *key_indent || line.trim().is_empty())
        {
            let entry = map.entry(k.clone()).or_default();
            if !entry.is_empty() {
                entry.push('\n');
            }
            entry.push_str(line.trim());
            continue;
        }
        key = None;
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        let v = v.trim();
        if v == "|-" || v == "|" || v == ">-" {
            key = Some((k.to_owned(), indent(line)));
            map.insert(k.to_owned(), String::new());
        } else {
            map.insert(k.to_owned(), unquote(v));
        }
    }
    (map, used)
}

fn unquote(v: &str) -> String {
    if let Some(inner) = v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        inner.replace("''", "'")
    } else if let Some(inner) = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        inner.replace("\\\"", "\"")
    } else {
        v.to_owned()
    }
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    let mut subtests: Vec<(usize, &str)> = Vec::new();
    let mut comment_test: Option<&str> = None;
    let mut comments: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let at = indent(line);
        let trimmed = line.trim_start();
        if let Some(name) = trimmed.strip_prefix("# Subtest: ") {
            subtests.retain(|(k, _)| *k < at);
            subtests.push((at, name));
        } else if let Some(comment) = trimmed.strip_prefix("# ") {
            let word = comment.split_whitespace().next().unwrap_or("");
            if at == 0 && !SUMMARY.contains(&word) {
                comment_test = Some(comment.trim());
            }
            if comments.len() < 200 {
                comments.push(comment);
            }
        } else if let Some(name) = not_ok(line) {
            let (yaml, used) = yaml_block(&lines[i + 1..]);
            i += used;
            if let Some(finding) = finding(name, at, &yaml, &subtests, comment_test, &comments)
                && !push(sink, finding)
            {
                return;
            }
            comments.clear();
        } else if trimmed.starts_with("ok ") {
            comments.clear();
        }
        i += 1;
    }
}

fn finding(
    name: &str,
    at: usize,
    yaml: &HashMap<String, String>,
    subtests: &[(usize, &str)],
    comment_test: Option<&str>,
    comments: &[&str],
) -> Option<Finding> {
    let get = |k: &str| yaml.get(k).map(String::as_str).filter(|v| !v.is_empty());
    if get("failureType") == Some("subtestsFailed") {
        // Its failing subtests carry the detail.
        return None;
    }
    let node = yaml.contains_key("failureType") || yaml.contains_key("location");
    let test = if node {
        let mut path: Vec<&str> = subtests
            .iter()
            .filter(|(k, _)| *k < at)
            .map(|(_, n)| *n)
            .collect();
        path.push(name);
        path.join(" > ")
    } else {
        comment_test.unwrap_or(name).to_owned()
    };
    // A test file that does not load: the syntax error node printed before it.
    let mut syntax = Sink::new();
    node_check::parse(&comments.join("\n"), &mut syntax);
    if let Some(mut compile) = syntax.into_iter().next() {
        compile.tool = "node-test".into();
        compile.test = Some(test);
        return Some(compile);
    }
    let place = get("stack")
        .and_then(|s| s.lines().find_map(frame))
        .or_else(|| get("at").and_then(frame))
        .or_else(|| get("location").and_then(frame));
    let mut message = match get("error") {
        Some(error) => error.to_owned(),
        None if node => name.to_owned(),
        None => name.to_owned(),
    };
    if !node && let (Some(expected), Some(actual)) = (get("expected"), get("actual")) {
        message = format!("{message}\nexpected: {expected}\nactual: {actual}");
    }
    let (file, line, column) = match place {
        Some((f, l, c)) => (Some(f), Some(l), c),
        None => (None, None, None),
    };
    Some(Finding {
        kind: FindingKind::Test,
        severity: Severity::Error,
        tool: if node { "node-test" } else { "tap" }.into(),
        test: Some(test),
        file,
        line,
        column,
        code: None,
        message,
        baseline: None,
        via: None,
    })
}

//! eslint's default ("stylish") format: a file's path on its own line, then
//! `  1:7  error  'x' is assigned a value but never used  no-unused-vars`.

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

/// `  LINE:COL  LEVEL  MESSAGE  RULE`.
fn problem(line: &str) -> Option<(u32, u32, Severity, &str, Option<&str>)> {
    if !line.starts_with("  ") {
        return None;
    }
    let t = line.trim();
    let (place, rest) = t.split_once(' ')?;
    let (l, c) = place.split_once(':')?;
    let rest = rest.trim_start();
    let (level, rest) = rest.split_once(' ')?;
    let severity = match level {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        _ => return None,
    };
    let rest = rest.trim();
    // The rule is the last column, two or more spaces after the message (none for a parse
    // error).
    let (message, rule) = match rest.rfind("  ") {
        Some(at) => (rest[..at].trim(), Some(rest[at..].trim())),
        None => (rest, None),
    };
    Some((number(l)?, number(c)?, severity, message, rule))
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let mut file: Option<&str> = None;
    for line in text.lines() {
        if !line.is_empty() && !line.starts_with(' ') {
            let t = line.trim();
            file = (t.starts_with('/') || !t.contains(' ')).then_some(t);
            continue;
        }
        let (Some(path), Some((l, c, severity, message, rule))) = (file, problem(line)) else {
            continue;
        };
        if !push(
            sink,
            Finding {
                kind: FindingKind::Lint,
                severity,
                tool: "eslint".into(),
                test: None,
                file: Some(path.to_owned()),
                line: Some(l),
                column: Some(c),
                code: rule.map(str::to_owned),
                message: message.to_owned(),
                baseline: None,
                via: None,
            },
        ) {
            return;
        }
    }
}

//! tsc: `src/a.ts(5,26): error TS2345: message` (plain) or `src/a.ts:5:26 - error TS2345:
//! message` (`--pretty`), continuation lines indented.

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

/// The file, line, column, severity, code and first message line of a diagnostic line.
fn diagnostic(line: &str) -> Option<(&str, u32, u32, Severity, &str, &str)> {
    let (place, rest) = if let Some((place, rest)) = line.split_once("): ") {
        let (file, lc) = place.rsplit_once('(')?;
        let (l, c) = lc.split_once(',')?;
        ((file, l, c), rest)
    } else {
        let (place, rest) = line.split_once(" - ")?;
        let mut parts = place.rsplitn(3, ':');
        let c = parts.next()?;
        let l = parts.next()?;
        ((parts.next()?, l, c), rest)
    };
    let (level, rest) = rest.split_once(' ')?;
    let severity = match level {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        _ => return None,
    };
    let (code, message) = rest.split_once(": ")?;
    if !code.starts_with("TS") || place.0.is_empty() || place.0.starts_with(' ') {
        return None;
    }
    Some((
        place.0,
        number(place.1)?,
        number(place.2)?,
        severity,
        code,
        message,
    ))
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some((file, line_no, column, severity, code, first)) = diagnostic(line) else {
            continue;
        };
        // Plain mode continues a message on indented lines (pretty mode quotes the source
        // there instead: not part of the message).
        let more: Vec<&str> = if line.contains("): ") {
            lines[i + 1..]
                .iter()
                .take_while(|l| l.starts_with("  "))
                .take(20)
                .map(|l| l.trim())
                .collect()
        } else {
            Vec::new()
        };
        let mut message = first.to_owned();
        for m in more {
            message.push('\n');
            message.push_str(m);
        }
        if !push(
            sink,
            Finding {
                kind: FindingKind::Type,
                severity,
                tool: "tsc".into(),
                test: None,
                file: Some(file.to_owned()),
                line: Some(line_no),
                column: Some(column),
                code: Some(code.to_owned()),
                message,
                baseline: None,
                via: None,
            },
        ) {
            return;
        }
    }
}

//! rustc's and clippy's human diagnostics (what cargo prints on stderr):
//!
//! ```text
//! error[E0277]: cannot add `&str` to `u32`
//!  --> src/lib.rs:3:7
//! ```

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

/// Summary lines that are not diagnostics of the code.
const NOT_DIAGNOSTICS: &[&str] = &[
    "could not compile",
    "aborting due to",
    "build failed",
    "test failed",
    "generated ",
    "unused manifest key",
];

/// A diagnostic's header: level, code, message.
fn header(line: &str) -> Option<(Severity, Option<&str>, &str)> {
    let (level, rest) = if let Some(rest) = line.strip_prefix("error") {
        (Severity::Error, rest)
    } else if let Some(rest) = line.strip_prefix("warning") {
        (Severity::Warning, rest)
    } else {
        return None;
    };
    let (code, rest) = match rest.strip_prefix('[') {
        Some(coded) => {
            let (code, rest) = coded.split_once(']')?;
            (Some(code), rest)
        }
        None => (None, rest),
    };
    let message = rest.strip_prefix(": ")?;
    if NOT_DIAGNOSTICS.iter().any(|n| message.contains(n)) {
        return None;
    }
    Some((level, code, message))
}

/// ` --> src/lib.rs:3:7`.
fn arrow(line: &str) -> Option<(&str, u32, u32)> {
    let place = line.trim_start().strip_prefix("--> ")?;
    let mut parts = place.rsplitn(3, ':');
    let col = number(parts.next()?)?;
    let line = number(parts.next()?)?;
    Some((parts.next()?, line, col))
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some((severity, code, message)) = header(line) else {
            continue;
        };
        // The location is the first ` --> ` before the next header; clippy names its lint in
        // a help line (`...index.html#needless_return`).
        let body = lines[i + 1..].iter().take(60).take_while(|l| {
            header(l).is_none() && !l.starts_with("error") && !l.starts_with("warning")
        });
        let mut place = None;
        let mut lint = None;
        for l in body {
            if place.is_none() {
                place = arrow(l);
            }
            // `.../rust-clippy/master/index.html#needless_return` (or `rust-1.95.0/`).
            if l.contains("rust-clippy/")
                && let Some((_, name)) = l.split_once("index.html#")
            {
                lint = Some(format!("clippy::{}", name.trim()));
            }
        }
        let Some((file, line_no, column)) = place else {
            continue;
        };
        let code = code.map(str::to_owned).or(lint);
        let is_clippy = code.as_deref().is_some_and(|c| c.starts_with("clippy::"));
        let kind = if is_clippy || severity == Severity::Warning {
            FindingKind::Lint
        } else {
            FindingKind::Compile
        };
        push(
            sink,
            Finding {
                kind,
                severity,
                tool: if is_clippy { "clippy" } else { "rustc" }.into(),
                test: None,
                file: Some(file.to_owned()),
                line: Some(line_no),
                column: Some(column),
                code,
                message: message.to_owned(),
            },
        );
    }
}

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

/// Whether a diagnostic's note says the project raised a warning to an error: "`-D
/// unused-variables` implied by `-D warnings`", "`#[deny(unused)]` implied by
/// `#[deny(warnings)]`".
pub(crate) fn raised_by_deny_warnings(note: &str) -> bool {
    note.contains("implied by `-D warnings`") || note.contains("implied by `#[deny(warnings)]`")
}

/// A diagnostic's severity as the tool sees it: `level`, except that a warning the project
/// raised to an error (`raised`, see [`raised_by_deny_warnings`]) stays a warning. `None` for
/// levels that are not findings (notes, help).
pub(crate) fn severity(level: &str, raised: bool) -> Option<Severity> {
    match level {
        "error" if raised => Some(Severity::Warning),
        "error" | "error: internal compiler error" => Some(Severity::Error),
        "warning" => Some(Severity::Warning),
        _ => None,
    }
}

/// A diagnostic's kind: a lint (clippy's, or rustc's such as `unused_variables`: any code but
/// an `E` error code), else a compile error, or a warning without a code.
pub(crate) fn kind(code: Option<&str>, severity: Severity) -> FindingKind {
    let error_code = code.is_some_and(|c| {
        c.len() == 5 && c.starts_with('E') && c[1..].bytes().all(|b| b.is_ascii_digit())
    });
    match code {
        Some(_) if !error_code => FindingKind::Lint,
        None if severity == Severity::Warning => FindingKind::Lint,
        _ => FindingKind::Compile,
    }
}

/// The lint a note names, when a human diagnostic's header has no code: "`-D
/// unused-variables` implied by `-D warnings`" and "`#[warn(unused_variables)]` on by
/// default" name `unused_variables`.
fn lint_of_note(line: &str) -> Option<String> {
    let note = line.trim_start().strip_prefix("= note: `")?;
    let (inside, _) = note.split_once('`')?;
    let name = if let Some(flag) = inside.strip_prefix("-D ").or(inside.strip_prefix("-W ")) {
        flag.replace('-', "_")
    } else {
        let attribute = inside.strip_prefix("#[")?.strip_suffix(")]")?;
        let (_, name) = attribute.split_once('(')?;
        name.to_owned()
    };
    (!name.is_empty() && name != "warnings").then_some(name)
}

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
        let mut raised = false;
        for l in body {
            if place.is_none() {
                place = arrow(l);
            }
            raised |= raised_by_deny_warnings(l);
            if lint.is_none() {
                lint = lint_of_note(l);
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
        let severity = if raised && severity == Severity::Error {
            Severity::Warning
        } else {
            severity
        };
        let kind = kind(code.as_deref(), severity);
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
                baseline: None,
                via: None,
            },
        );
    }
}

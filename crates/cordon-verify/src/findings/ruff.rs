//! ruff: `F401 [*] `os` imported but unused` then ` --> pkg/mod.py:1:8` (its default output),
//! or `pkg/mod.py:1:8: F401 [*] message` (`--output-format=concise`).

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

/// A rule code: capital letters then digits (`F401`, `E501`, `PLR0913`).
fn is_code(word: &str) -> bool {
    let letters = word.chars().take_while(char::is_ascii_uppercase).count();
    letters > 0 && word.len() > letters && word[letters..].chars().all(|c| c.is_ascii_digit())
}

/// `CODE [*] message` → code and message.
fn headed(line: &str) -> Option<(&str, &str)> {
    let (code, rest) = line.split_once(' ')?;
    is_code(code).then_some(())?;
    Some((code, rest.strip_prefix("[*] ").unwrap_or(rest)))
}

/// `file:line:col` → its parts.
fn place(text: &str) -> Option<(&str, u32, u32)> {
    let mut parts = text.rsplitn(3, ':');
    let col = number(parts.next()?)?;
    let line = number(parts.next()?)?;
    Some((parts.next()?, line, col))
}

fn finding(file: &str, line: u32, column: u32, code: &str, message: &str) -> Finding {
    Finding {
        kind: FindingKind::Lint,
        severity: Severity::Error,
        tool: "ruff".into(),
        test: None,
        file: Some(file.to_owned()),
        line: Some(line),
        column: Some(column),
        code: Some(code.to_owned()),
        message: message.to_owned(),
        baseline: None,
        via: None,
    }
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        // Concise: `pkg/mod.py:1:8: F401 [*] message`.
        if let Some((at, rest)) = line.split_once(": ")
            && let Some((file, l, c)) = place(at)
            && let Some((code, message)) = headed(rest)
        {
            if !push(sink, finding(file, l, c, code, message)) {
                return;
            }
            continue;
        }
        // Full: the header, then ` --> file:line:col`.
        let Some((code, message)) = headed(line) else {
            continue;
        };
        let Some((file, l, c)) = lines
            .get(i + 1)
            .and_then(|next| next.trim_start().strip_prefix("--> "))
            .and_then(place)
        else {
            continue;
        };
        if !push(sink, finding(file, l, c, code, message)) {
            return;
        }
    }
}

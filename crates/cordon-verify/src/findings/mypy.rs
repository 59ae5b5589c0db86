//! mypy: `pkg/mod.py:6: error: Incompatible return value type ...  [return-value]` (with
//! `:col` after the line when `--show-column-numbers`).

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    for line in text.lines() {
        let (severity, at, message) = if let Some((at, m)) = line.split_once(": error: ") {
            (Severity::Error, at, m)
        } else if let Some((at, m)) = line.split_once(": warning: ") {
            (Severity::Warning, at, m)
        } else {
            continue;
        };
        let mut parts = at.split(':');
        let Some(file) = parts
            .next()
            .filter(|f| f.ends_with(".py") || f.ends_with(".pyi"))
        else {
            continue;
        };
        let Some(line_no) = parts.next().and_then(number) else {
            continue;
        };
        let column = parts.next().and_then(number);
        // The error code closes the line: `  [return-value]`.
        let (message, code) = match message.rsplit_once("  [") {
            Some((m, code)) if code.ends_with(']') => {
                (m, Some(code.trim_end_matches(']').to_owned()))
            }
            _ => (message, None),
        };
        if !push(
            sink,
            Finding {
                kind: FindingKind::Type,
                severity,
                tool: "mypy".into(),
                test: None,
                file: Some(file.to_owned()),
                line: Some(line_no),
                column,
                code,
                message: message.to_owned(),
                baseline: None,
                via: None,
            },
        ) {
            return;
        }
    }
}

//! vitest: ` FAIL  file > suite > test`, the message, then ` ❯ file:line:col`.

use cordon_types::{Finding, FindingKind, Severity};

use super::js_stack::frame;
use super::{Sink, push};

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(title) = lines[i].trim_start().strip_prefix("FAIL ") else {
            i += 1;
            continue;
        };
        let Some((file, test)) = title.trim().split_once(" > ") else {
            i += 1;
            continue;
        };
        let mut message = Vec::new();
        let mut place = None;
        i += 1;
        while i < lines.len() {
            let l = lines[i].trim();
            if l.starts_with("FAIL ") || l.starts_with("⎯") {
                break;
            }
            if let Some(at) = l.strip_prefix("❯ ") {
                place = frame(at);
                break;
            }
            if !l.is_empty() && message.len() < 12 {
                message.push(l);
            }
            i += 1;
        }
        let (place_file, line, column) = match place {
            Some((f, l, c)) => (f, Some(l), c),
            None => (file.trim().to_owned(), None, None),
        };
        if !push(
            sink,
            Finding {
                kind: FindingKind::Test,
                severity: Severity::Error,
                tool: "vitest".into(),
                test: Some(test.trim().to_owned()),
                file: Some(place_file),
                line,
                column,
                code: None,
                message: message.join("\n"),
                baseline: None,
                via: None,
            },
        ) {
            return;
        }
        i += 1;
    }
}

//! jest: `● suite › test`, the message, a code frame, then `at f (path:line:col)`.

use cordon_types::{Finding, FindingKind, Severity};

use super::js_stack::frame;
use super::{Sink, push};

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(title) = lines[i].trim_start().strip_prefix("● ") else {
            i += 1;
            continue;
        };
        let mut message = Vec::new();
        let mut place = None;
        let mut in_frame = false;
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("● ") {
            let l = lines[i].trim();
            if l.starts_with("Test Suites:") {
                break;
            }
            // The code frame: `> 5 |     expect(...)`, ` 6 |   })`.
            let code_frame = l
                .trim_start_matches('>')
                .trim_start()
                .split_once('|')
                .is_some_and(|(n, _)| {
                    n.trim().is_empty() || n.trim().chars().all(|c| c.is_ascii_digit())
                });
            if l.starts_with("at ") {
                if place.is_none() {
                    place = frame(l);
                }
            } else if code_frame {
                in_frame = true;
            } else if !in_frame && !l.is_empty() && message.len() < 12 {
                message.push(l);
            }
            i += 1;
        }
        let (file, line, column) = match place {
            Some((f, l, c)) => (Some(f), Some(l), c),
            None => (None, None, None),
        };
        let test = title.replace(" › ", " > ");
        if !push(
            sink,
            Finding {
                kind: FindingKind::Test,
                severity: Severity::Error,
                tool: "jest".into(),
                test: Some(test),
                file,
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
    }
}

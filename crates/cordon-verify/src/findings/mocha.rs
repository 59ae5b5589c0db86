//! mocha's default (spec) reporter: after `N failing`, each `  1) suite` / `       test:` with
//! the message and `at Context.<anonymous> (path:line:col)`.

use cordon_types::{Finding, FindingKind, Severity};

use super::js_stack::frame;
use super::{Sink, push};

/// `1) title` → the title.
fn numbered(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let (n, rest) = t.split_once(") ")?;
    (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit())).then_some(rest)
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines.iter().position(|l| {
        let t = l.trim();
        t.ends_with(" failing")
            && t.split(' ')
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
    }) else {
        return;
    };
    let mut i = start + 1;
    while i < lines.len() {
        let Some(first) = numbered(lines[i]) else {
            i += 1;
            continue;
        };
        // The title continues on indented lines up to the one ending in `:`.
        let mut title = vec![first.trim_end_matches(':')];
        let mut ended = first.ends_with(':');
        i += 1;
        while !ended && i < lines.len() && !lines[i].trim().is_empty() {
            let t = lines[i].trim();
            title.push(t.trim_end_matches(':'));
            ended = t.ends_with(':');
            i += 1;
        }
        let mut message = Vec::new();
        let mut place = None;
        let mut diff = false;
        while i < lines.len() && numbered(lines[i]).is_none() {
            let l = lines[i].trim();
            if l.starts_with("at ") {
                if place.is_none() {
                    place = frame(l);
                }
            } else if l == "+ expected - actual" {
                diff = true;
            } else if !l.is_empty() && !diff && place.is_none() && message.len() < 12 {
                message.push(l);
            }
            i += 1;
        }
        let (file, line, column) = match place {
            Some((f, l, c)) => (Some(f), Some(l), c),
            None => (None, None, None),
        };
        if !push(
            sink,
            Finding {
                kind: FindingKind::Test,
                severity: Severity::Error,
                tool: "mocha".into(),
                test: Some(title.join(" > ")),
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

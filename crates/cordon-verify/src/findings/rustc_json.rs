//! rustc's and clippy's diagnostics in cargo's `--message-format=json`: one JSON object per
//! line, `reason: "compiler-message"`, with the primary span's `file:line:col`. A lint (a code
//! that is not an `E` error code) is a `lint` finding whatever its level; one the project's
//! `-D warnings` (or `#![deny(warnings)]`) raised to an error keeps the tool's own level, a
//! warning (see [`super::rustc::severity`]).

use cordon_types::Finding;
use serde::Deserialize;

use super::{Sink, push};

#[derive(Deserialize)]
struct Line {
    reason: String,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    message: String,
    level: String,
    code: Option<Code>,
    #[serde(default)]
    spans: Vec<Span>,
    #[serde(default)]
    children: Vec<Child>,
}

#[derive(Deserialize)]
struct Child {
    message: String,
}

#[derive(Deserialize)]
struct Code {
    code: String,
}

#[derive(Deserialize)]
struct Span {
    file_name: String,
    line_start: u32,
    column_start: u32,
    is_primary: bool,
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    for line in text.lines().filter(|l| l.starts_with("{\"reason\":")) {
        let Ok(Line {
            reason,
            message: Some(message),
        }) = serde_json::from_str::<Line>(line)
        else {
            continue;
        };
        if reason != "compiler-message" {
            continue;
        }
        let raised = message
            .children
            .iter()
            .any(|c| super::rustc::raised_by_deny_warnings(&c.message));
        let Some(severity) = super::rustc::severity(&message.level, raised) else {
            continue;
        };
        let Some(span) = message.spans.iter().find(|s| s.is_primary) else {
            continue;
        };
        let code = message.code.map(|c| c.code);
        let is_clippy = code.as_deref().is_some_and(|c| c.starts_with("clippy::"));
        let kind = super::rustc::kind(code.as_deref(), severity);
        push(
            sink,
            Finding {
                kind,
                severity,
                tool: if is_clippy { "clippy" } else { "rustc" }.into(),
                test: None,
                file: Some(span.file_name.clone()),
                line: (span.line_start > 0).then_some(span.line_start),
                column: (span.column_start > 0).then_some(span.column_start),
                code,
                message: message.message,
                baseline: None,
                via: None,
            },
        );
    }
}

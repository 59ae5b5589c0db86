//! rustc's and clippy's diagnostics in cargo's `--message-format=json`: one JSON object per
//! line, `reason: "compiler-message"`, with the primary span's `file:line:col`.

use cordon_types::{Finding, FindingKind, Severity};
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
        let severity = match message.level.as_str() {
            "error" | "error: internal compiler error" => Severity::Error,
            "warning" => Severity::Warning,
            _ => continue,
        };
        let Some(span) = message.spans.iter().find(|s| s.is_primary) else {
            continue;
        };
        let code = message.code.map(|c| c.code);
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
                file: Some(span.file_name.clone()),
                line: (span.line_start > 0).then_some(span.line_start),
                column: (span.column_start > 0).then_some(span.column_start),
                code,
                message: message.message,
            },
        );
    }
}

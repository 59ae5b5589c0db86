//! libtest (`cargo test`): the failing tests, their panic message and `file:line:col`.
//!
//! ```text
//! test tests::adds ... FAILED
//! ---- tests::adds stdout ----
//! thread 'tests::adds' (7913) panicked at src/lib.rs:9:9:
//! assertion `left == right` failed
//!   left: 6
//!  right: 5
//! ```

use std::collections::HashMap;

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

/// A panic: where, and what it said.
#[derive(Debug, Default, Clone)]
pub(crate) struct Panic {
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    pub(crate) column: Option<u32>,
    pub(crate) message: String,
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let mut failed: Vec<&str> = Vec::new();
    let mut panics: HashMap<&str, Panic> = HashMap::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
        {
            if failed.len() < super::MAX_RAW_FINDINGS {
                failed.push(name);
            }
        } else if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            let mut section = Vec::new();
            while let Some(next) = lines.peek() {
                if next.starts_with("---- ") || *next == "failures:" {
                    break;
                }
                section.push(*next);
                lines.next();
            }
            if let Some(panic) = panic_in(&section)
                && panics.len() < super::MAX_RAW_FINDINGS
            {
                panics.insert(name, panic);
            }
        }
    }
    // Tests finish in any order; libtest's own closing list is sorted by name, so is this.
    failed.sort_unstable();
    failed.dedup();
    for name in failed {
        let panic = panics.remove(name).unwrap_or_default();
        let message = if panic.message.is_empty() {
            "FAILED".to_owned()
        } else {
            panic.message
        };
        push(
            sink,
            Finding {
                kind: FindingKind::Test,
                severity: Severity::Error,
                tool: "libtest".into(),
                test: Some(name.to_owned()),
                file: panic.file,
                line: panic.line,
                column: panic.column,
                code: None,
                message,
                baseline: None,
                via: None,
            },
        );
    }
}

/// The first panic in a test's captured output: `thread 'NAME' (TID) panicked at
/// FILE:LINE:COL:` and the message lines after it (up to the backtrace note or a blank line).
pub(crate) fn panic_in(lines: &[&str]) -> Option<Panic> {
    let start = lines
        .iter()
        .position(|l| l.starts_with("thread '") && l.contains(" panicked at "))?;
    let header = lines[start];
    // `thread 'NAME' (TID) panicked at` since Rust 1.91, `thread 'NAME' panicked at` before.
    let at = &header[header.find(" panicked at ")? + " panicked at ".len()..];
    let mut panic = Panic::default();
    // Since Rust 1.73: `panicked at src/lib.rs:9:9:` with the message on the next lines.
    if let Some(place) = at.strip_suffix(':') {
        set_place(&mut panic, place);
        let message: Vec<&str> = lines[start + 1..]
            .iter()
            .take_while(|l| {
                !l.trim().is_empty()
                    && !l.starts_with("note: run with `RUST_BACKTRACE")
                    && !l.starts_with("stack backtrace:")
            })
            .take(40)
            .copied()
            .collect();
        panic.message = message.join("\n");
    } else if let Some((message, place)) = at.rsplit_once("', ") {
        // Before: `panicked at 'message', src/lib.rs:9:9`.
        set_place(&mut panic, place);
        panic.message = message.trim_start_matches('\'').to_owned();
    }
    Some(panic)
}

/// `FILE:LINE:COL` into the panic's place.
fn set_place(panic: &mut Panic, place: &str) {
    let mut parts = place.rsplitn(3, ':');
    let (Some(col), Some(line), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    if let (Some(line), Some(col)) = (number(line), number(col)) {
        panic.file = Some(file.to_owned());
        panic.line = Some(line);
        panic.column = Some(col);
    }
}

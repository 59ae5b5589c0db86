//! rustfmt (`cargo fmt --check`): `Diff in /work/app/src/lib.rs:1:` (older versions: `Diff in
//! /work/app/src/lib.rs at line 1:`) before each file's differences.

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

/// The file and line of a `Diff in` header.
fn header(line: &str) -> Option<(&str, u32)> {
    let rest = line.strip_prefix("Diff in ")?.strip_suffix(':')?;
    if let Some((file, line_no)) = rest.rsplit_once(" at line ") {
        return Some((file, number(line_no)?));
    }
    let (file, line_no) = rest.rsplit_once(':')?;
    Some((file, number(line_no)?))
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    for line in text.lines() {
        let Some((file, line_no)) = header(line) else {
            continue;
        };
        if !push(
            sink,
            Finding {
                kind: FindingKind::Lint,
                severity: Severity::Error,
                tool: "rustfmt".into(),
                test: None,
                file: Some(file.to_owned()),
                line: Some(line_no),
                column: None,
                code: None,
                message: "not formatted as rustfmt formats it (`cargo fmt` fixes it)".into(),
                baseline: None,
                via: None,
            },
        ) {
            return;
        }
    }
}

//! node's syntax errors (`node --check`, or a module that fails to load):
//!
//! ```text
//! /work/app/broken.js:2
//!   return a +;
//!             ^
//!
//! SyntaxError: Unexpected token ';'
//! ```

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

/// `PATH:LINE` alone on a line, PATH a script.
fn place(line: &str) -> Option<(&str, u32)> {
    let (file, line_no) = line.trim().rsplit_once(':')?;
    let script = [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx"]
        .iter()
        .any(|ext| file.ends_with(ext));
    (script && !file.contains(' ')).then_some(())?;
    Some((file, number(line_no)?))
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some((file, line_no)) = place(line) else {
            continue;
        };
        let error = lines[i + 1..]
            .iter()
            .take(6)
            .find_map(|l| l.trim().strip_prefix("SyntaxError: ").map(|m| m.to_owned()));
        let Some(message) = error else {
            continue;
        };
        push(
            sink,
            Finding {
                kind: FindingKind::Compile,
                severity: Severity::Error,
                tool: "node".into(),
                test: None,
                file: Some(file.to_owned()),
                line: Some(line_no),
                column: None,
                code: Some("SyntaxError".into()),
                message,
                baseline: None,
                via: None,
            },
        );
    }
}

//! Python syntax errors, as `compileall`, `py_compile` and tracebacks print them:
//!
//! ```text
//!   File "./demo/broken.py", line 1
//!     def add(a, b)
//!                  ^
//! SyntaxError: expected ':'
//! ```

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push};

const SYNTAX_ERRORS: &[&str] = &["SyntaxError", "IndentationError", "TabError"];

/// `File "PATH", line N` (with anything after).
fn file_line(line: &str) -> Option<(&str, u32)> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let (file, rest) = rest.split_once("\", line ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((file, number(&digits)?))
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some((file, line_no)) = file_line(line) else {
            continue;
        };
        // The error follows the quoted source and its caret within a few lines.
        let error = lines[i + 1..].iter().take(6).find_map(|l| {
            let l = l.trim();
            let (name, message) = l.split_once(": ")?;
            SYNTAX_ERRORS.contains(&name).then_some((name, message))
        });
        let Some((name, message)) = error else {
            continue;
        };
        push(
            sink,
            Finding {
                kind: FindingKind::Compile,
                severity: Severity::Error,
                tool: "python".into(),
                test: None,
                file: Some(file.to_owned()),
                line: Some(line_no),
                column: None,
                code: Some(name.to_owned()),
                message: message.to_owned(),
                baseline: None,
                via: None,
            },
        );
    }
}

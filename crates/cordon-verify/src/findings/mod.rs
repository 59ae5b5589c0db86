//! Findings: the actionable lines of a stage's output, typed.
//!
//! [`Tool::identify`] names the tool a stage runs from its argv (and, for a package manager's
//! script, from the script's text in `package.json`); only a known tool's output is parsed —
//! an unknown one yields no findings, never a guess. Each tool has its own small parser
//! module; [`collect`] runs the tool's parsers over the captured head and tail of both streams
//! and [`Bounded`] keeps the result within the report's bounds: ANSI escapes and control
//! characters removed, paths made repository-relative ([`PathContext`]), duplicates dropped,
//! errors first, at most [`cordon_types::MAX_FINDINGS`], messages cut to
//! [`cordon_types::MAX_FINDING_MESSAGE_BYTES`], the rest counted.

mod bounded;
mod eslint;
mod go;
mod jest;
mod js_stack;
mod libtest;
mod mocha;
mod mypy;
mod nextest;
mod node_check;
mod paths;
mod pytest;
mod python_syntax;
mod ruff;
mod rustc;
mod rustc_json;
mod rustfmt;
mod tap;
mod tool;
mod tsc;
mod vitest;

#[cfg(test)]
mod tests;

use cordon_types::{CapturedOutput, Finding};

pub use bounded::Bounded;
pub use paths::PathContext;
pub use tool::Tool;

/// A parser's output before cleaning: paths as the tool printed them.
pub(crate) type Sink = Vec<Finding>;

/// Raw findings a parser may produce from one output before the rest is only counted: hostile
/// output cannot make cordon hold more than this many.
pub(crate) const MAX_RAW_FINDINGS: usize = 1000;

/// The findings of a stage: what `tools` printed on `stdout` and `stderr`, bounded and
/// cleaned.
pub fn collect(
    tools: &[Tool],
    stdout: &CapturedOutput,
    stderr: &CapturedOutput,
    paths: &PathContext,
) -> Bounded {
    collect_into(Bounded::new(paths.clone()), tools, stdout, stderr)
}

/// Like [`collect`], keeping up to `most` findings instead of
/// [`cordon_types::MAX_FINDINGS`]: all of them, to compare with the base's before the report's
/// bound is applied.
pub(crate) fn collect_at_most(
    most: usize,
    tools: &[Tool],
    stdout: &CapturedOutput,
    stderr: &CapturedOutput,
    paths: &PathContext,
) -> Bounded {
    collect_into(
        Bounded::with_limit(paths.clone(), most),
        tools,
        stdout,
        stderr,
    )
}

fn collect_into(
    mut bounded: Bounded,
    tools: &[Tool],
    stdout: &CapturedOutput,
    stderr: &CapturedOutput,
) -> Bounded {
    let tools: Vec<Tool> = tools
        .iter()
        .copied()
        .filter(|t| *t != Tool::Unknown)
        .collect();
    if tools.is_empty() {
        return bounded;
    }
    for out in [stdout, stderr] {
        // A truncated capture's head and tail are parsed apart: a line cut at the gap belongs to
        // neither.
        let parts: &[&str] = if out.truncated {
            &[&out.head, &out.tail]
        } else {
            &[&out.head]
        };
        for part in parts {
            let text = strip_ansi(part);
            for tool in &tools {
                let mut raw = Sink::new();
                tool.parse(&text, &mut raw);
                bounded.extend(raw);
            }
        }
    }
    bounded
}

/// The findings of `text` as `tool` printed it (for tests and callers with plain text).
pub fn parse_text(tool: Tool, text: &str, paths: &PathContext) -> Bounded {
    let out = CapturedOutput {
        bytes_total: text.len() as u64,
        truncated: false,
        omitted_bytes: 0,
        head: text.to_owned(),
        tail: String::new(),
        undelivered_bytes: 0,
    };
    collect(&[tool], &out, &CapturedOutput::default(), paths)
}

/// Pushes `finding` unless the parser already produced [`MAX_RAW_FINDINGS`]; returns whether
/// it was kept.
pub(crate) fn push(sink: &mut Sink, finding: Finding) -> bool {
    if sink.len() >= MAX_RAW_FINDINGS {
        return false;
    }
    sink.push(finding);
    true
}

/// `text` without ANSI escape sequences; unlike `strip_ansi_escapes` alone, tabs stay (go test
/// separates its package lines with them).
pub fn strip_ansi(text: &str) -> String {
    text.split('\t')
        .map(strip_ansi_escapes::strip_str)
        .collect::<Vec<_>>()
        .join("\t")
}

/// `text` parsed as a positive line or column number; `None` for zero, junk or overflow.
pub(crate) fn number(text: &str) -> Option<u32> {
    text.trim().parse::<u32>().ok().filter(|n| *n > 0)
}

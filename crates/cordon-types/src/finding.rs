//! Findings: what a stage's tools said, parsed into something an agent can act on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// At most this many findings are kept per stage; the rest are counted in
/// [`StageResult::findings_omitted`](crate::StageResult::findings_omitted).
pub const MAX_FINDINGS: usize = 50;

/// A finding's message is cut to at most this many bytes (at a character boundary, marked).
pub const MAX_FINDING_MESSAGE_BYTES: usize = 2048;

/// One actionable diagnostic read from a stage's output: a failing test, a compile error, a
/// lint, a type error. Paths are repository-relative; messages carry no ANSI escapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// What kind of problem it is.
    pub kind: FindingKind,
    /// How bad it is.
    pub severity: Severity,
    /// The tool whose output it was read from (`libtest`, `rustc`, `clippy`, `pytest`,
    /// `node-test`, `tap`, `tsc`, `eslint`, `python`, `node`).
    pub tool: String,
    /// The failing test, as the test runner names it (`tests::adds`,
    /// `tests/test_demo.py::test_add`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The file, relative to the repository root (or absolute when it lies outside the
    /// repository, e.g. in the standard library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The 1-based line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The 1-based column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The tool's code for it (`E0308`, `clippy::needless_return`, `TS2322`, `no-unused-vars`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// What the tool said (at most 2 KiB; cut messages end with `…`).
    pub message: String,
    /// Whether the base commit had it too (revision 5): a lint stage's findings are compared
    /// with the base's (same tool, rule and file, the same text after line shifts). `new`
    /// findings are the change's own; `existing` ones were there before it and do not block.
    /// Absent when no comparison was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Where the failure was raised when that is not the test's own line (revision 5): the
    /// helper a test asserted through (`test/common.py:9`), while `file`/`line` name the
    /// test's own frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A finding compared with the base commit's findings of the same stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Baseline {
    /// The base does not have it: the change brought it.
    New,
    /// The base has it too.
    Existing,
}

impl Baseline {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Existing => "existing",
        }
    }
}

/// The kind of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A test failed.
    Test,
    /// The code does not compile (or parse).
    Compile,
    /// A lint fired.
    Lint,
    /// A type checker found an error.
    Type,
}

impl FindingKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Test => "test",
            Self::Compile => "compile",
            Self::Lint => "lint",
            Self::Type => "type",
        }
    }
}

/// The severity of a finding.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// It fails the stage.
    Error,
    /// A warning.
    Warning,
    /// A note.
    Note,
}

impl Severity {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Note => "note",
        }
    }
}

impl Finding {
    /// `file:line:col` (as much of it as is known), or `None` without a file.
    pub fn location(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{file}:{l}:{c}"),
            (Some(l), None) => format!("{file}:{l}"),
            _ => file.to_owned(),
        })
    }

    /// One line that names the problem: "test `tests::adds` failed at src/lib.rs:9:9:
    /// assertion `left == right` failed (left: 6, right: 5)"; a test that failed in a helper
    /// names both frames, its own first ("... at test/test_x.py:30 (via test/common.py:9)").
    pub fn headline(&self) -> String {
        let via = self
            .via
            .as_deref()
            .map(|v| format!(" (via {v})"))
            .unwrap_or_default();
        let at = self
            .location()
            .map(|l| format!(" at {l}{via}"))
            .unwrap_or_default();
        let what = match (self.kind, &self.test, &self.code) {
            (FindingKind::Test, Some(test), _) => format!("test `{test}` failed{at}"),
            (FindingKind::Test, None, _) => format!("a test failed{at}"),
            (kind, _, Some(code)) => format!("{} {code}{at}", self.noun(kind)),
            (kind, _, None) => format!("{}{at}", self.noun(kind)),
        };
        let message = compact(&self.message);
        if message.is_empty() {
            what
        } else {
            format!("{what}: {message}")
        }
    }

    fn noun(&self, kind: FindingKind) -> String {
        let word = match kind {
            FindingKind::Test => "test failure",
            FindingKind::Compile => "compile",
            FindingKind::Lint => "lint",
            FindingKind::Type => "type",
        };
        format!("{word} {}", self.severity.as_str())
    }
}

/// A multi-line message as one line of at most about 300 characters: the first line, then the
/// following lines in parentheses (`assertion failed (left: 6, right: 5)`).
fn compact(message: &str) -> String {
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else {
        return String::new();
    };
    let rest: Vec<&str> = lines.take(4).collect();
    let mut text = if rest.is_empty() {
        first.to_owned()
    } else {
        format!("{first} ({})", rest.join(", "))
    };
    if text.len() > 300 {
        let mut end = 300;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding() -> Finding {
        Finding {
            kind: FindingKind::Test,
            severity: Severity::Error,
            tool: "libtest".into(),
            test: Some("tests::adds".into()),
            file: Some("src/lib.rs".into()),
            line: Some(12),
            column: None,
            code: None,
            message: "assertion `left == right` failed\n  left: 4\n right: 5".into(),
            baseline: None,
            via: None,
        }
    }

    #[test]
    fn headline_names_the_test_the_place_and_the_message() {
        assert_eq!(
            finding().headline(),
            "test `tests::adds` failed at src/lib.rs:12: assertion `left == right` failed (left: 4, right: 5)"
        );
        let compile = Finding {
            kind: FindingKind::Compile,
            test: None,
            code: Some("E0308".into()),
            column: Some(7),
            message: "mismatched types".into(),
            ..finding()
        };
        assert_eq!(
            compile.headline(),
            "compile error E0308 at src/lib.rs:12:7: mismatched types"
        );
        let helped = Finding {
            file: Some("test/test_x.py".into()),
            line: Some(30),
            via: Some("test/common.py:9".into()),
            message: "assert 1 == 2".into(),
            ..finding()
        };
        assert_eq!(
            helped.headline(),
            "test `tests::adds` failed at test/test_x.py:30 (via test/common.py:9): assert 1 == 2"
        );
    }

    #[test]
    fn long_messages_are_cut_in_the_headline() {
        let long = Finding {
            message: "é".repeat(400),
            ..finding()
        };
        let headline = long.headline();
        assert!(headline.ends_with('…'), "{headline}");
        assert!(headline.len() < 400, "{}", headline.len());
    }
}

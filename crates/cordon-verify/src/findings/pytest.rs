//! pytest: the failing node ids from the short summary (`FAILED tests/test_x.py::test_add -
//! assert 6 == 5`, `SUBFAILED[msg] (i=1) ...`, `ERROR tests/test_x.py`), each with the
//! `file:line` and the `E` lines of its section in the failures report. A collection error
//! that is a syntax error becomes a `compile` finding at the broken file's line.

use cordon_types::{Finding, FindingKind, Severity};

use super::{Sink, number, push, python_syntax};

/// One `___ title ___` section of the failures or errors report.
struct Section<'a> {
    title: &'a str,
    lines: Vec<&'a str>,
}

impl Section<'_> {
    /// Where the test failed: the test's own frame (the last `file.py:LINE: ...` frame in the
    /// test's file `own`), and where the failure was raised when that is elsewhere — a helper
    /// the test asserted through (`test/common.py:9`), the last frame in the project's own
    /// files (pytest prints those relative to its root). Without a frame in the test's file:
    /// that last frame, else the last frame of all (the standard library's, absolute).
    fn place(&self, own: Option<&str>) -> Option<(String, u32, Option<String>)> {
        let frames = self.frames();
        let deepest = frames
            .iter()
            .rev()
            .find(|(file, _)| !file.starts_with('/'))
            .or_else(|| frames.last())
            .cloned()?;
        let test_frame = own.and_then(|own| frames.iter().rev().find(|(file, _)| file == own));
        Some(match test_frame {
            Some(frame) if *frame != deepest => (
                frame.0.clone(),
                frame.1,
                Some(format!("{}:{}", deepest.0, deepest.1)),
            ),
            _ => (deepest.0, deepest.1, None),
        })
    }

    /// The `file.py:LINE: ...` frames of the traceback, outermost first.
    fn frames(&self) -> Vec<(String, u32)> {
        self.lines
            .iter()
            .filter_map(|l| {
                let (file, rest) = l.split_once(".py:")?;
                if file.contains(' ') || file.is_empty() {
                    return None;
                }
                let (line, _) = rest.split_once(": ")?;
                Some((format!("{file}.py"), number(line)?))
            })
            .collect()
    }

    /// The `E   ` lines: the assertion and what it compared.
    fn message(&self) -> String {
        self.lines
            .iter()
            .filter_map(|l| l.strip_prefix('E'))
            .filter(|l| l.is_empty() || l.starts_with(' '))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(12)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `___ title ___`.
fn section_title(line: &str) -> Option<&str> {
    let inner = line.strip_prefix("___")?.strip_suffix("___")?;
    let title = inner.trim_matches('_').trim();
    (!title.is_empty()).then_some(title)
}

fn sections(text: &str) -> Vec<Section<'_>> {
    let mut out: Vec<Section<'_>> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        if let Some(title) = section_title(line) {
            if out.len() >= super::MAX_RAW_FINDINGS {
                break;
            }
            out.push(Section {
                title,
                lines: Vec::new(),
            });
            open = true;
        } else if line.starts_with("====") {
            open = false;
        } else if open && let Some(section) = out.last_mut() {
            section.lines.push(line);
        }
    }
    out
}

/// A short-summary line: its kind (`FAILED`, `ERROR`), the test (node id with any subtest
/// label), and the message.
fn summary(line: &str) -> Option<(&str, String, &str, &str)> {
    let (word, rest) = line.split_once(' ')?;
    let (kind, label) = if let Some(label) = word.strip_prefix("SUBFAILED") {
        ("FAILED", label)
    } else if word == "FAILED" || word == "ERROR" {
        (word, "")
    } else {
        return None;
    };
    // `SUBFAILED[even] (i=1) tests/x.py::test - msg`: the label may have spaces.
    let (label, rest) = match rest.find(".py") {
        Some(at) => {
            let start = rest[..at].rfind(' ').map(|s| s + 1).unwrap_or(0);
            (
                format!("{label} {}", &rest[..start]).trim().to_owned(),
                &rest[start..],
            )
        }
        None => (label.to_owned(), rest),
    };
    let (node, message) = rest.split_once(" - ").unwrap_or((rest, ""));
    Some((kind, label, node.trim(), message.trim()))
}

/// The section of node id `node` (titled by its test path: `TestGroup.test_method`).
fn section_for<'s, 'a>(
    sections: &'s [Section<'a>],
    node: &str,
    label: &str,
) -> Option<&'s Section<'a>> {
    let path = node.split_once("::").map(|(_, p)| p).unwrap_or(node);
    let dotted = path.replace("::", ".");
    sections.iter().find(|s| {
        let title = s.title.strip_prefix("ERROR collecting ").unwrap_or(s.title);
        let (name, rest) = title.split_once(' ').unwrap_or((title, ""));
        let same = name == dotted || title == node;
        same && (label.is_empty() || rest.trim() == label.trim())
    })
}

pub(crate) fn parse(text: &str, sink: &mut Sink) {
    let sections = sections(text);
    let summaries: Vec<_> = text.lines().filter_map(summary).collect();
    let has_subfailure = |node: &str| {
        summaries
            .iter()
            .any(|(_, l, n, _)| *n == node && !l.is_empty())
    };
    for (kind, label, node, short) in &summaries {
        // The parent of a failed subtest only says "contains 1 failed subtest".
        if label.is_empty() && short.starts_with("contains ") && has_subfailure(node) {
            continue;
        }
        let section = section_for(&sections, node, label);
        // A collection error caused by a syntax error: the broken file is what to fix.
        if *kind == "ERROR"
            && let Some(section) = section
        {
            let body: Vec<String> = section
                .lines
                .iter()
                .map(|l| l.strip_prefix("E ").unwrap_or(l).to_owned())
                .collect();
            let mut syntax = Sink::new();
            python_syntax::parse(&body.join("\n"), &mut syntax);
            if !syntax.is_empty() {
                for mut finding in syntax {
                    finding.tool = "pytest".into();
                    finding.test = Some((*node).to_owned());
                    push(sink, finding);
                }
                continue;
            }
        }
        let test_file = node
            .split("::")
            .next()
            .filter(|f| f.ends_with(".py"))
            .map(str::to_owned);
        let (file, line, via) = match section.and_then(|s| s.place(test_file.as_deref())) {
            Some((file, line, via)) => (Some(file), Some(line), via),
            None => (test_file, None, None),
        };
        let message = section.map(Section::message).filter(|m| !m.is_empty());
        let test = if label.is_empty() {
            (*node).to_owned()
        } else {
            format!("{node} {label}")
        };
        push(
            sink,
            Finding {
                kind: FindingKind::Test,
                severity: Severity::Error,
                tool: "pytest".into(),
                test: Some(test),
                file,
                line,
                column: None,
                code: None,
                message: message.unwrap_or_else(|| (*short).to_owned()),
                baseline: None,
                via,
            },
        );
    }
}

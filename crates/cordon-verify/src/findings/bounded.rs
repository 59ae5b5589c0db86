//! The bounds of a stage's findings: clean text, repository-relative paths, no duplicates,
//! errors first, at most 50, messages of at most 2 KiB, the rest counted.

use std::collections::HashSet;

use cordon_types::{Finding, MAX_FINDING_MESSAGE_BYTES, MAX_FINDINGS};

use super::PathContext;

/// What makes two findings the same: place, test or code, message.
type Key = (Option<String>, Option<u32>, Option<String>, String);

/// A stage's findings within the report's bounds.
#[derive(Debug, Clone)]
pub struct Bounded {
    paths: PathContext,
    kept: Vec<Finding>,
    seen: HashSet<Key>,
    omitted: u64,
    most: usize,
}

impl Bounded {
    /// No findings yet; paths are rewritten with `paths`.
    pub fn new(paths: PathContext) -> Bounded {
        Bounded::with_limit(paths, MAX_FINDINGS)
    }

    /// No findings yet, keeping at most `most` of them (at least the report's bound).
    pub(crate) fn with_limit(paths: PathContext, most: usize) -> Bounded {
        Bounded {
            paths,
            kept: Vec::new(),
            seen: HashSet::new(),
            omitted: 0,
            most: most.max(MAX_FINDINGS),
        }
    }

    /// Adds raw findings (paths as the tool printed them): cleaned, deduplicated, and counted
    /// past the bound.
    pub fn extend(&mut self, raw: impl IntoIterator<Item = Finding>) {
        for finding in raw {
            let finding = self.clean(finding);
            let key = (
                finding.file.clone(),
                finding.line,
                finding.test.clone().or_else(|| finding.code.clone()),
                finding.message.clone(),
            );
            if self.seen.contains(&key) {
                continue;
            }
            if self.seen.len() < 4 * self.most {
                self.seen.insert(key);
            }
            self.kept.push(finding);
            // Keep the worst ones: errors before warnings, in the order they came.
            if self.kept.len() > self.most {
                self.kept.sort_by_key(|f| f.severity);
                self.kept.truncate(self.most);
                self.omitted += 1;
            }
        }
    }

    fn clean(&self, mut finding: Finding) -> Finding {
        finding.message = cut(&self.paths.rewrite(&text(&finding.message)));
        finding.test = finding.test.map(|t| cut(&self.paths.rewrite(&text(&t))));
        finding.code = finding.code.map(|c| cut(&text(&c)));
        finding.file = finding.file.and_then(|f| self.paths.file(&text(&f)));
        if finding.file.is_none() {
            finding.line = None;
            finding.column = None;
        }
        finding
    }

    /// The kept findings (errors first) and how many were left out.
    pub fn into_parts(mut self) -> (Vec<Finding>, u64) {
        self.kept.sort_by_key(|f| f.severity);
        (self.kept, self.omitted)
    }
}

/// `raw` without ANSI escapes and control characters (newlines and tabs stay), trimmed.
fn text(raw: &str) -> String {
    let stripped = super::strip_ansi(raw);
    stripped
        .chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect::<String>()
        .trim()
        .to_owned()
}

/// `text` cut to at most [`MAX_FINDING_MESSAGE_BYTES`] bytes, at a character boundary, with
/// `…` at the end when cut.
fn cut(text: &str) -> String {
    if text.len() <= MAX_FINDING_MESSAGE_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_FINDING_MESSAGE_BYTES - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

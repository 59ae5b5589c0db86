//! The compiled, immutable redactor.

use std::collections::HashSet;
use std::sync::Arc;

use crate::anchors::Anchors;
use crate::error::RedactWarning;
use crate::literal::{Literals, PartialTail};
use crate::pattern::CompiledPattern;
use crate::stream::StreamRedactor;

/// Redacts secrets from byte streams. Build one with
/// [`RedactorBuilder`](crate::RedactorBuilder).
///
/// A `Redactor` is compiled once and immutable; cloning it is cheap (an
/// [`Arc`]), so one can serve the stdout and stderr streams of many runs.
#[derive(Clone)]
pub struct Redactor {
    pub(crate) inner: Arc<Inner>,
}

/// What a [`Redactor`] shares with its streams.
pub(crate) struct Inner {
    /// The secret values, if any.
    pub(crate) literals: Option<Literals>,
    /// All patterns, built-in ones first.
    pub(crate) patterns: Vec<CompiledPattern>,
    /// For each anchor of `anchor_finder`: the patterns to try where the
    /// finder reports it, each with the longer anchors one of which must
    /// occur there too (none: it surely does).
    pub(crate) anchor_patterns: Vec<Vec<(usize, Vec<Vec<u8>>)>>,
    /// Indices into `patterns` of those without.
    pub(crate) unanchored: Vec<usize>,
    /// Finds the anchors of all anchored patterns.
    pub(crate) anchors: Option<Anchors>,
    /// Partial anchors at the end of the text.
    pub(crate) anchor_tail: PartialTail,
    /// Texts never redacted.
    pub(crate) allow: HashSet<Vec<u8>>,
    /// `[REDACTED:<name>]`, by replacement index.
    pub(crate) replacements: Vec<Vec<u8>>,
    pub(crate) warnings: Vec<RedactWarning>,
}

impl Redactor {
    /// A redactor that redacts nothing: its streams copy their input.
    pub fn disabled() -> Self {
        Redactor {
            inner: Arc::new(Inner {
                literals: None,
                patterns: Vec::new(),
                anchor_patterns: Vec::new(),
                unanchored: Vec::new(),
                anchors: None,
                anchor_tail: PartialTail::new(Vec::new()),
                allow: HashSet::new(),
                replacements: Vec::new(),
                warnings: Vec::new(),
            }),
        }
    }

    /// Whether this redactor has nothing to redact (no secret values and no
    /// patterns). Its streams then copy their input unchanged.
    pub fn is_empty(&self) -> bool {
        self.inner.literals.is_none() && self.inner.patterns.is_empty()
    }

    /// What the builder found worth telling: short or allowlisted secrets
    /// that are not redacted.
    pub fn warnings(&self) -> &[RedactWarning] {
        &self.inner.warnings
    }

    /// Starts redacting one stream (say, a program's stdout).
    pub fn stream(&self) -> StreamRedactor {
        StreamRedactor::new(Arc::clone(&self.inner))
    }

    /// Redacts a whole text at once.
    pub fn redact_all(&self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len());
        let mut stream = self.stream();
        stream.push(input, &mut out);
        stream.finish(&mut out);
        out
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret values.
        f.debug_struct("Redactor")
            .field("patterns", &self.inner.patterns.len())
            .field("has_secrets", &self.inner.literals.is_some())
            .field("allowlisted", &self.inner.allow.len())
            .finish_non_exhaustive()
    }
}

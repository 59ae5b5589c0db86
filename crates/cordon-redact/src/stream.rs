//! Redaction of one stream, pushed in chunks of any size.
//!
//! Each *producer* (the secret values, the anchored patterns, each
//! unanchored pattern) reports the spans it is certain about and a frontier:
//! the first position where a match might start that more input could still
//! change. Text before the lowest frontier is final and is written out,
//! with overlapping spans merged and replaced; the rest is held back.
//! Because the producers and the merge only depend on the text, never on how
//! it was chunked, the output does not depend on the chunking either.

use std::sync::Arc;

use aho_corasick::Input;
use regex_automata::hybrid::dfa::Cache;

use crate::pattern::Eval;
use crate::redactor::Inner;

/// Redacts one stream. Get one from [`Redactor::stream`](crate::Redactor::stream).
///
/// Feed it chunks with [`push`](Self::push), then call
/// [`finish`](Self::finish) once the stream ends. Output is appended to the
/// `out` buffer given to each call. Bytes that could be the start of a secret
/// are held back until the next chunk tells; everything else is written out
/// at once.
pub struct StreamRedactor {
    inner: Arc<Inner>,
    /// Whether nothing can be redacted, so input is copied as is.
    passthrough: bool,
    /// Text not yet written out.
    buf: Vec<u8>,
    /// Stream offset of `buf[0]`.
    base: usize,
    /// Stream offset from which the secret values are not yet scanned.
    literal_pos: usize,
    /// Stream offset from which the anchored patterns are not yet scanned.
    anchored_pos: usize,
    /// Same, for each unanchored pattern (parallel to `inner.unanchored`).
    unanchored_pos: Vec<usize>,
    /// A lazy DFA cache for each pattern (parallel to `inner.patterns`).
    caches: Vec<Cache>,
    /// Spans to redact, in stream offsets, not yet written out.
    hits: Vec<Hit>,
}

/// A span to redact, in stream offsets.
#[derive(Clone, Copy, Debug)]
struct Hit {
    start: usize,
    end: usize,
    name_id: usize,
}

impl StreamRedactor {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        StreamRedactor {
            passthrough: inner.literals.is_none() && inner.patterns.is_empty(),
            caches: inner.patterns.iter().map(|p| p.create_cache()).collect(),
            unanchored_pos: vec![0; inner.unanchored.len()],
            inner,
            buf: Vec::new(),
            base: 0,
            literal_pos: 0,
            anchored_pos: 0,
            hits: Vec::new(),
        }
    }

    /// Redacts the next chunk of the stream, appending to `out` whatever is
    /// certain. An empty chunk is fine and does nothing.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.passthrough {
            out.extend_from_slice(input);
            return;
        }
        if input.is_empty() {
            return;
        }
        self.buf.extend_from_slice(input);
        self.process(false, out);
    }

    /// Ends the stream: appends the rest of the text, redacted. The stream
    /// can then be reused for a new stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.passthrough {
            self.process(true, out);
        }
        debug_assert!(self.buf.is_empty() && self.hits.is_empty());
        self.buf.clear();
        self.hits.clear();
        self.base = 0;
        self.literal_pos = 0;
        self.anchored_pos = 0;
        self.unanchored_pos.iter_mut().for_each(|p| *p = 0);
    }

    /// How many bytes are held back, waiting for more input.
    pub fn held_back(&self) -> usize {
        self.buf.len()
    }

    fn process(&mut self, eof: bool, out: &mut Vec<u8>) {
        let mut frontier = self.buf.len();
        frontier = frontier.min(self.scan_literals(eof));
        frontier = frontier.min(self.scan_anchored(eof));
        for k in 0..self.inner.unanchored.len() {
            frontier = frontier.min(self.scan_unanchored(k, eof));
        }
        self.emit(frontier, out);
    }

    /// Records a pattern match unless it is empty or allowlisted.
    fn record(
        &mut self,
        at: usize,
        eval_redact: std::ops::Range<usize>,
        end: usize,
        name_id: usize,
    ) {
        if eval_redact.is_empty() {
            return;
        }
        let allow = &self.inner.allow;
        if !allow.is_empty()
            && (allow.contains(&self.buf[at + eval_redact.start..at + eval_redact.end])
                || allow.contains(&self.buf[at..at + end]))
        {
            return;
        }
        self.hits.push(Hit {
            start: self.base + at + eval_redact.start,
            end: self.base + at + eval_redact.end,
            name_id,
        });
    }

    /// Scans for secret values; returns the frontier (relative to `buf`).
    fn scan_literals(&mut self, eof: bool) -> usize {
        let Some(literals) = &self.inner.literals else {
            return self.buf.len();
        };
        let base = self.base;
        let hits = &mut self.hits;
        let frontier = literals.scan(&self.buf, self.literal_pos - base, eof, |m| {
            hits.push(Hit {
                start: base + m.start,
                end: base + m.end,
                name_id: m.name_id,
            });
        });
        self.literal_pos = base + frontier;
        frontier
    }

    /// Scans the anchored patterns at each anchor; returns the frontier.
    fn scan_anchored(&mut self, eof: bool) -> usize {
        let inner = Arc::clone(&self.inner);
        let Some(finder) = &inner.anchor_finder else {
            return self.buf.len();
        };
        let from = self.anchored_pos - self.base;
        let tail = if eof {
            self.buf.len()
        } else {
            inner.anchor_tail.start(&self.buf, from)
        };
        let mut at = from;
        let frontier = loop {
            let input = Input::new(&self.buf).span(at..self.buf.len());
            let Some(candidate) = finder.find(input).map(|m| m.start()).filter(|&c| c < tail)
            else {
                break tail;
            };
            if !self.eval_candidate(&inner, candidate, eof) {
                break candidate;
            }
            at = candidate + 1;
        };
        self.anchored_pos = self.base + frontier;
        frontier
    }

    /// Evaluates every anchored pattern whose anchor occurs at `at`. Returns
    /// `false`, recording nothing, if any of them is undecided.
    fn eval_candidate(&mut self, inner: &Inner, at: usize, eof: bool) -> bool {
        let recorded = self.hits.len();
        for &index in &inner.anchored {
            let pattern = &inner.patterns[index];
            let anchors = pattern.anchors.as_deref().unwrap_or_default();
            if !anchors.iter().any(|a| self.buf[at..].starts_with(a)) {
                continue;
            }
            match pattern.eval(&mut self.caches[index], &self.buf[at..], eof) {
                Eval::NoMatch => {}
                Eval::Match { redact, end } => self.record(at, redact, end, pattern.name_id),
                Eval::Undecided => {
                    self.hits.truncate(recorded);
                    return false;
                }
            }
        }
        true
    }

    /// Scans the `k`-th unanchored pattern; returns its frontier.
    fn scan_unanchored(&mut self, k: usize, eof: bool) -> usize {
        let inner = Arc::clone(&self.inner);
        let index = inner.unanchored[k];
        let pattern = &inner.patterns[index];
        let len = self.buf.len();
        // Positions before `complete` have their whole window in the buffer.
        let complete = if eof {
            len
        } else {
            len.saturating_sub(pattern.max_len)
        };
        let mut at = self.unanchored_pos[k] - self.base;
        let frontier = loop {
            if at >= len {
                break len;
            }
            if at < complete {
                // Skip straight to where the regex can match at all.
                match pattern.find_candidate(&self.buf[at..]) {
                    Some(offset) if at + offset < complete => at += offset,
                    _ => {
                        at = complete;
                        continue;
                    }
                }
            }
            match pattern.eval(&mut self.caches[index], &self.buf[at..], eof) {
                Eval::NoMatch => at += 1,
                Eval::Match { redact, end } => {
                    self.record(at, redact, end, pattern.name_id);
                    at += end.max(1);
                }
                Eval::Undecided => break at,
            }
        };
        self.unanchored_pos[k] = self.base + frontier;
        frontier
    }

    /// Writes out everything before `frontier` (relative to `buf`), with
    /// the recorded spans replaced, and drops it from the buffer.
    fn emit(&mut self, frontier: usize, out: &mut Vec<u8>) {
        let base = self.base;
        self.hits
            .sort_unstable_by_key(|h| (h.start, std::cmp::Reverse(h.end), h.name_id));
        let mut cursor = 0;
        let mut limit = frontier;
        let mut done = 0;
        while let Some(first) = self.hits.get(done).copied() {
            let start = first.start - base;
            if start >= frontier {
                break;
            }
            // Merge every span that overlaps the region.
            let mut end = first.end - base;
            let mut next = done + 1;
            while let Some(h) = self.hits.get(next).filter(|h| h.start - base < end) {
                end = end.max(h.end - base);
                next += 1;
            }
            if end > frontier {
                // A span still to come could extend the region.
                limit = start;
                break;
            }
            out.extend_from_slice(&self.buf[cursor..start]);
            out.extend_from_slice(&self.inner.replacements[first.name_id]);
            cursor = end;
            done = next;
        }
        out.extend_from_slice(&self.buf[cursor..limit]);
        self.hits.drain(..done);
        self.buf.drain(..limit);
        self.base += limit;
    }
}

impl std::fmt::Debug for StreamRedactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The held-back text may hold a secret: show only its length.
        f.debug_struct("StreamRedactor")
            .field("held_back", &self.buf.len())
            .field("offset", &self.base)
            .finish_non_exhaustive()
    }
}

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

use regex_automata::hybrid::dfa::Cache;

use crate::pattern::{CompiledPattern, Eval, Site};
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
    /// The byte before `buf[0]` (already written out), which patterns see as
    /// look-behind.
    before: Option<u8>,
    /// Stream offset from which the secret values are not yet scanned.
    literal_pos: usize,
    /// Stream offset from which the anchored patterns are not yet scanned.
    anchored_pos: usize,
    /// Same, for each unanchored pattern (parallel to `inner.unanchored`).
    unanchored_pos: Vec<usize>,
    /// A lazy DFA cache for each pattern (parallel to `inner.patterns`).
    caches: Vec<Option<Cache>>,
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
            caches: inner.patterns.iter().map(|_| None).collect(),
            unanchored_pos: vec![0; inner.unanchored.len()],
            inner,
            buf: Vec::new(),
            base: 0,
            before: None,
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
        if self.buf.is_empty() {
            // Scan the chunk where it is; keep only what is held back.
            let limit = self.process(input, false, out);
            self.buf.extend_from_slice(&input[limit..]);
        } else {
            let mut buf = std::mem::take(&mut self.buf);
            buf.extend_from_slice(input);
            let limit = self.process(&buf, false, out);
            buf.drain(..limit);
            self.buf = buf;
        }
    }

    /// Ends the stream: appends the rest of the text, redacted. The stream
    /// can then be reused for a new stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.passthrough {
            let buf = std::mem::take(&mut self.buf);
            self.process(&buf, true, out);
            self.buf = buf;
        }
        debug_assert!(self.hits.is_empty());
        self.buf.clear();
        self.hits.clear();
        self.base = 0;
        self.before = None;
        self.literal_pos = 0;
        self.anchored_pos = 0;
        self.unanchored_pos.iter_mut().for_each(|p| *p = 0);
    }

    /// How many bytes are held back, waiting for more input.
    pub fn held_back(&self) -> usize {
        self.buf.len()
    }

    /// Redacts `hay`, the text not yet written out (starting at stream
    /// offset `self.base`), and returns how much of it was written out.
    fn process(&mut self, hay: &[u8], eof: bool, out: &mut Vec<u8>) -> usize {
        let mut frontier = hay.len();
        frontier = frontier.min(self.scan_literals(hay, eof));
        frontier = frontier.min(self.scan_anchored(hay, eof));
        for k in 0..self.inner.unanchored.len() {
            frontier = frontier.min(self.scan_unanchored(hay, k, eof));
        }
        self.emit(hay, frontier, out)
    }

    /// Records a pattern match unless it is empty or allowlisted.
    /// Evaluates `pattern` (the `index`-th) anchored at `at` in `hay`, with this stream's
    /// DFA cache for it (made on first use).
    fn eval_at(
        &mut self,
        pattern: &CompiledPattern,
        index: usize,
        hay: &[u8],
        at: usize,
        eof: bool,
    ) -> Eval {
        let site = Site {
            text: hay,
            at,
            before: self.before,
        };
        let cache = self.caches[index].get_or_insert_with(|| pattern.create_cache());
        pattern.eval(cache, site, eof)
    }

    fn record(
        &mut self,
        hay: &[u8],
        at: usize,
        redact: std::ops::Range<usize>,
        end: usize,
        name_id: usize,
    ) {
        if redact.is_empty() {
            return;
        }
        let allow = &self.inner.allow;
        if !allow.is_empty()
            && (allow.contains(&hay[at + redact.start..at + redact.end])
                || allow.contains(&hay[at..at + end]))
        {
            return;
        }
        self.hits.push(Hit {
            start: self.base + at + redact.start,
            end: self.base + at + redact.end,
            name_id,
        });
    }

    /// Scans for secret values; returns the frontier (relative to `hay`).
    fn scan_literals(&mut self, hay: &[u8], eof: bool) -> usize {
        let Some(literals) = &self.inner.literals else {
            return hay.len();
        };
        let base = self.base;
        let hits = &mut self.hits;
        let frontier = literals.scan(hay, self.literal_pos - base, eof, |m| {
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
    fn scan_anchored(&mut self, hay: &[u8], eof: bool) -> usize {
        let inner = Arc::clone(&self.inner);
        let Some(finder) = &inner.anchors else {
            return hay.len();
        };
        let from = self.anchored_pos - self.base;
        let tail = if eof {
            hay.len()
        } else {
            inner.anchor_tail.start(hay, from)
        };
        let mut at = from;
        let frontier = loop {
            let Some((candidate, anchor)) = finder.find(hay, at).filter(|&(start, _)| start < tail)
            else {
                break tail;
            };
            if !self.eval_candidate(hay, &inner, candidate, anchor, eof) {
                break candidate;
            }
            at = candidate + 1;
        };
        self.anchored_pos = self.base + frontier;
        frontier
    }

    /// Evaluates every anchored pattern with an anchor at `at`, where the
    /// finder found anchor number `anchor`. Returns `false`, recording
    /// nothing, if any of them is undecided.
    fn eval_candidate(
        &mut self,
        hay: &[u8],
        inner: &Inner,
        at: usize,
        anchor: usize,
        eof: bool,
    ) -> bool {
        let recorded = self.hits.len();
        for (index, longer) in &inner.anchor_patterns[anchor] {
            let index = *index;
            if !longer.is_empty() && !longer.iter().any(|a| hay[at..].starts_with(a)) {
                continue;
            }
            let pattern = &inner.patterns[index];
            match self.eval_at(pattern, index, hay, at, eof) {
                Eval::NoMatch => {}
                Eval::Match { redact, end } => self.record(hay, at, redact, end, pattern.name_id),
                Eval::Undecided => {
                    self.hits.truncate(recorded);
                    return false;
                }
            }
        }
        true
    }

    /// Scans the `k`-th unanchored pattern; returns its frontier.
    fn scan_unanchored(&mut self, hay: &[u8], k: usize, eof: bool) -> usize {
        let inner = Arc::clone(&self.inner);
        let index = inner.unanchored[k];
        let pattern = &inner.patterns[index];
        let len = hay.len();
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
            if at < complete && pattern.skippable {
                // Skip straight to where the regex can match at all.
                match pattern.find_candidate(&hay[at..]) {
                    Some(offset) if at + offset < complete => at += offset,
                    _ => {
                        at = complete;
                        continue;
                    }
                }
            }
            match self.eval_at(pattern, index, hay, at, eof) {
                Eval::NoMatch => at += 1,
                Eval::Match { redact, end } => {
                    self.record(hay, at, redact, end, pattern.name_id);
                    at += end.max(1);
                }
                Eval::Undecided => break at,
            }
        };
        self.unanchored_pos[k] = self.base + frontier;
        frontier
    }

    /// Writes out everything before `frontier` (relative to `hay`), with
    /// the recorded spans replaced; returns how much was written out.
    fn emit(&mut self, hay: &[u8], frontier: usize, out: &mut Vec<u8>) -> usize {
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
            out.extend_from_slice(&hay[cursor..start]);
            out.extend_from_slice(&self.inner.replacements[first.name_id]);
            cursor = end;
            done = next;
        }
        out.extend_from_slice(&hay[cursor..limit]);
        self.hits.drain(..done);
        if limit > 0 {
            self.before = Some(hay[limit - 1]);
        }
        self.base += limit;
        limit
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

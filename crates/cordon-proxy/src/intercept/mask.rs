//! Hiding credentials in what a server sends back: every occurrence of a revealing string is
//! replaced by as many `*` (the length kept, so that `Content-Length` and chunk sizes stay
//! right), across reads: a string split between two reads is held back until the rest
//! arrives, the stream ends, or nothing more comes for [`HOLD`].

use std::time::Duration;

use aho_corasick::{AhoCorasick, MatchKind};

/// How long the start of a possible match waits for the rest before it is passed on.
pub(crate) const HOLD: Duration = Duration::from_millis(50);

/// The strings to hide, compiled once per run.
#[derive(Debug, Clone)]
pub(crate) struct Needles {
    search: AhoCorasick,
    strings: Vec<Vec<u8>>,
}

impl Needles {
    /// `None` when there is nothing to hide.
    pub(crate) fn new<'a>(strings: impl IntoIterator<Item = &'a str>) -> Option<Needles> {
        let mut strings: Vec<Vec<u8>> = strings
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.as_bytes().to_vec())
            .collect();
        strings.sort();
        strings.dedup();
        if strings.is_empty() {
            return None;
        }
        let search = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&strings)
            .ok()?;
        Some(Needles { search, strings })
    }
}

/// One direction's masking state.
#[derive(Debug)]
pub(crate) struct Masker<'a> {
    needles: Option<&'a Needles>,
    held: Vec<u8>,
}

impl<'a> Masker<'a> {
    pub(crate) fn new(needles: Option<&'a Needles>) -> Self {
        Masker {
            needles,
            held: Vec::new(),
        }
    }

    /// Whether bytes are held back waiting for more.
    pub(crate) fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Masks `input` (after what was held) into `out`, holding back a tail that may be the
    /// start of a revealing string.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let Some(needles) = self.needles else {
            out.extend_from_slice(input);
            return;
        };
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(input);
        mask(needles, &mut buf);
        let keep = partial_tail(needles, &buf);
        let cut = buf.len() - keep;
        self.held = buf.split_off(cut);
        out.extend_from_slice(&buf);
    }

    /// Passes on whatever is held (the stream ended, or nothing came for a while).
    pub(crate) fn flush(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.held);
    }
}

fn mask(needles: &Needles, buf: &mut [u8]) {
    let found: Vec<(usize, usize)> = needles
        .search
        .find_iter(&*buf)
        .map(|m| (m.start(), m.end()))
        .collect();
    for (start, end) in found {
        buf[start..end].fill(b'*');
    }
}

/// The length of the longest tail of `buf` that is a proper prefix of a needle.
fn partial_tail(needles: &Needles, buf: &[u8]) -> usize {
    let longest = needles.strings.iter().map(Vec::len).max().unwrap_or(0);
    let from = buf.len().saturating_sub(longest.saturating_sub(1));
    (from..buf.len())
        .find(|&at| {
            let tail = &buf[at..];
            needles
                .strings
                .iter()
                .any(|n| n.len() > tail.len() && n.starts_with(tail))
        })
        .map_or(0, |at| buf.len() - at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(needles: &Needles, pieces: &[&[u8]]) -> Vec<u8> {
        let mut m = Masker::new(Some(needles));
        let mut out = Vec::new();
        for p in pieces {
            m.feed(p, &mut out);
        }
        m.flush(&mut out);
        out
    }

    #[test]
    fn masks_whole_and_split_occurrences_keeping_the_length() {
        let n = Needles::new(["s3cret-value", "czNjcmV0"]).unwrap();
        let text = b"a s3cret-value b czNjcmV0 c s3cret d".to_vec();
        let whole = run(&n, &[&text]);
        assert_eq!(whole, b"a ************ b ******** c s3cret d");
        for cut in 0..text.len() {
            assert_eq!(
                run(&n, &[&text[..cut], &text[cut..]]),
                whole,
                "cut at {cut}"
            );
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(run(&n, &bytes), whole);
    }

    #[test]
    fn holds_only_a_possible_start_and_flushes_it() {
        let n = Needles::new(["secret"]).unwrap();
        let mut m = Masker::new(Some(&n));
        let mut out = Vec::new();
        m.feed(b"plain text sec", &mut out);
        assert_eq!(out, b"plain text ");
        assert!(m.holding());
        m.feed(b"ond", &mut out);
        assert_eq!(out, b"plain text second");
        assert!(!m.holding());
        m.feed(b"...se", &mut out);
        m.flush(&mut out);
        assert_eq!(out, b"plain text second...se");
    }
}

//! Finding the anchors of the anchored patterns, the automaton built only when there is text
//! enough to pay for it.
//!
//! Building the Aho-Corasick automaton of the built-in patterns' anchors (its trie, its
//! contiguous form, its vectorised prefilter) was a fifth of a short `cordon run`'s user-space
//! instructions, paid at every start even when all there is to redact is the command line. The
//! first [`NAIVE_BYTES`] bytes a redactor scans are searched with a table of the anchors by
//! first byte instead (as fast per byte on short texts, and exact); past them the automaton is
//! built once and used for every stream of the redactor. Both report the same match: the
//! leftmost, and at one position the anchor listed first (aho-corasick's `LeftmostFirst`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, Input};

/// Bytes searched without the automaton, over all the streams of one redactor.
pub(crate) const NAIVE_BYTES: usize = 16 * 1024;

/// The anchors of the anchored patterns, in pattern order.
pub(crate) struct Anchors {
    anchors: Vec<Vec<u8>>,
    /// For each byte, the anchors starting with it, in list order.
    by_first: Vec<Vec<u32>>,
    /// Bytes searched so far without the automaton.
    scanned: AtomicUsize,
    /// The automaton, once built (`None` if it could not be: the table then serves on).
    finder: OnceLock<Option<AhoCorasick>>,
}

impl Anchors {
    /// The finder of `anchors` (non-empty byte strings); nothing is built yet.
    pub(crate) fn new(anchors: Vec<Vec<u8>>) -> Self {
        let mut by_first = vec![Vec::new(); 256];
        for (i, anchor) in anchors.iter().enumerate() {
            if let Some(&b) = anchor.first() {
                by_first[usize::from(b)].push(u32::try_from(i).unwrap_or(u32::MAX));
            }
        }
        Anchors {
            anchors,
            by_first,
            scanned: AtomicUsize::new(0),
            finder: OnceLock::new(),
        }
    }

    /// The leftmost anchor occurrence in `hay[from..]` (lying wholly in `hay`), as its start
    /// and the anchor's index; at one start, the anchor listed first.
    pub(crate) fn find(&self, hay: &[u8], from: usize) -> Option<(usize, usize)> {
        if from >= hay.len() {
            return None;
        }
        if let Some(Some(finder)) = self.finder.get() {
            return finder_find(finder, hay, from);
        }
        let len = hay.len() - from;
        if self.scanned.fetch_add(len, Ordering::Relaxed) + len > NAIVE_BYTES
            && let Some(finder) = self.finder.get_or_init(|| build(&self.anchors))
        {
            return finder_find(finder, hay, from);
        }
        self.find_by_table(hay, from)
    }

    fn find_by_table(&self, hay: &[u8], from: usize) -> Option<(usize, usize)> {
        for (at, &b) in hay.iter().enumerate().skip(from) {
            for &i in &self.by_first[usize::from(b)] {
                let i = i as usize;
                if hay[at..].starts_with(&self.anchors[i]) {
                    return Some((at, i));
                }
            }
        }
        None
    }
}

fn finder_find(finder: &AhoCorasick, hay: &[u8], from: usize) -> Option<(usize, usize)> {
    finder
        .find(Input::new(hay).span(from..hay.len()))
        .map(|m| (m.start(), m.pattern().as_usize()))
}

fn build(anchors: &[Vec<u8>]) -> Option<AhoCorasick> {
    AhoCorasickBuilder::new()
        .match_kind(aho_corasick::MatchKind::LeftmostFirst)
        // A contiguous NFA builds in a fraction of a DFA's time; the anchors' prefilter does
        // the scanning either way.
        .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
        .build(anchors)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn anchors() -> Vec<Vec<u8>> {
        [
            "://",
            "ghp_",
            "gh",
            "AKIA",
            "-----BEGIN",
            "xox",
            "eyJ",
            "Authorization",
            "a",
            "ab",
        ]
        .iter()
        .map(|a| a.as_bytes().to_vec())
        .collect()
    }

    proptest! {
        /// The table and the automaton find the same occurrences, from any position.
        #[test]
        fn the_table_finds_what_the_automaton_finds(
            hay in proptest::collection::vec(
                prop_oneof![Just(b'a'), Just(b'b'), Just(b'g'), Just(b'h'), Just(b'_'), Just(b'p'),
                            Just(b':'), Just(b'/'), Just(b'A'), Just(b'K'), Just(b'I'), Just(b'x'),
                            Just(b'o'), any::<u8>()],
                0..200,
            ),
            from in 0usize..220,
        ) {
            let list = anchors();
            let finder = build(&list).unwrap();
            let table = Anchors::new(list);
            let expected = if from < hay.len() { finder_find(&finder, &hay, from) } else { None };
            prop_assert_eq!(table.find_by_table(&hay, from), expected);
        }
    }

    #[test]
    fn the_automaton_takes_over_past_the_naive_budget() {
        let a = Anchors::new(anchors());
        let text = vec![b'.'; 1024];
        assert_eq!(a.find(&text, 0), None);
        assert!(a.finder.get().is_none(), "built for a short text");
        for _ in 0..(NAIVE_BYTES / text.len()) {
            a.find(&text, 0);
        }
        assert!(matches!(a.finder.get(), Some(Some(_))), "never built");
        assert_eq!(a.find(b"xx ghp_1", 0), Some((3, 1)));
        assert_eq!(a.find(b"xx ghp_1", 4), None);
    }
}

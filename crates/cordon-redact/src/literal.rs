//! Literal secret values, and the partial-match check at the end of the
//! buffered text.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, Input, MatchKind};

use crate::error::RedactError;

/// A set of needles, used to find where a needle might start in the last
/// bytes of the text and be completed by bytes still to come.
pub(crate) struct PartialTail {
    needles: Vec<Vec<u8>>,
    /// Which bytes start some needle.
    first: [bool; 256],
    /// The longest needle's length.
    max_len: usize,
}

impl PartialTail {
    pub(crate) fn new(needles: Vec<Vec<u8>>) -> Self {
        let mut first = [false; 256];
        for needle in &needles {
            if let Some(&b) = needle.first() {
                first[usize::from(b)] = true;
            }
        }
        let max_len = needles.iter().map(Vec::len).max().unwrap_or(0);
        PartialTail {
            needles,
            first,
            max_len,
        }
    }

    /// The smallest position `p >= from` such that `hay[p..]` is a proper,
    /// non-empty prefix of a needle, or `hay.len()` if there is none.
    pub(crate) fn start(&self, hay: &[u8], from: usize) -> usize {
        let lowest = hay
            .len()
            .saturating_sub(self.max_len.saturating_sub(1))
            .max(from);
        (lowest..hay.len())
            .find(|&p| self.first[usize::from(hay[p])] && self.is_partial(&hay[p..]))
            .unwrap_or(hay.len())
    }

    fn is_partial(&self, tail: &[u8]) -> bool {
        self.needles
            .iter()
            .any(|needle| needle.len() > tail.len() && needle.starts_with(tail))
    }
}

/// The secret values, matched all at once, overlapping matches included so
/// that every occurrence of every value is covered.
pub(crate) struct Literals {
    ac: AhoCorasick,
    /// Replacement index of each value, by Aho-Corasick pattern id.
    name_ids: Vec<usize>,
    tail: PartialTail,
}

/// One occurrence of a secret value.
pub(crate) struct LiteralMatch {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) name_id: usize,
}

impl Literals {
    /// `values` are `(value, replacement index)`, deduplicated and non-empty.
    pub(crate) fn new(values: Vec<(Vec<u8>, usize)>) -> Result<Self, RedactError> {
        let ac = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .build(values.iter().map(|(v, _)| v))
            .map_err(|source| RedactError::Literals {
                count: values.len(),
                source,
            })?;
        let name_ids = values.iter().map(|&(_, id)| id).collect();
        let tail = PartialTail::new(values.into_iter().map(|(v, _)| v).collect());
        Ok(Literals { ac, name_ids, tail })
    }

    /// Reports every occurrence starting in `from..` of `hay` that is
    /// certain, and returns the position from which occurrences are not yet
    /// certain (a value may start there and be completed by later bytes).
    pub(crate) fn scan(
        &self,
        hay: &[u8],
        from: usize,
        eof: bool,
        mut report: impl FnMut(LiteralMatch),
    ) -> usize {
        let frontier = if eof {
            hay.len()
        } else {
            self.tail.start(hay, from)
        };
        let input = Input::new(hay).span(from..hay.len());
        for m in self.ac.find_overlapping_iter(input) {
            if m.start() < frontier {
                report(LiteralMatch {
                    start: m.start(),
                    end: m.end(),
                    name_id: self.name_ids[m.pattern().as_usize()],
                });
            }
        }
        frontier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_tail_finds_the_earliest_possible_start() {
        let tail = PartialTail::new(vec![b"abcdef".to_vec(), b"cdxy".to_vec()]);
        assert_eq!(tail.start(b"zzabcd", 0), 2);
        assert_eq!(tail.start(b"zzabcd", 3), 4);
        assert_eq!(tail.start(b"zzabce", 0), 6);
        // A complete needle is not partial.
        assert_eq!(tail.start(b"abcdef", 0), 6);
    }
}

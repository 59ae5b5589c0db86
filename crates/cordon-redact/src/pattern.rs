//! A compiled pattern and its bounded, anchored evaluation at one position.
//!
//! A pattern is only ever evaluated *anchored* at a candidate position `p`,
//! on the window `text[p .. p + max_len]`: the regex sees the window as its
//! whole haystack. A lazy DFA walks the window byte by byte, which tells
//! early whether more input could still change the outcome, so a finished
//! match is reported as soon as it is certain, not only once the whole
//! window has arrived.

use regex_automata::hybrid::LazyStateID;
use std::sync::OnceLock;

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::meta;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchKind, PatternID, nfa::thompson, util::start};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

use crate::error::RedactError;

/// Most anchors a user pattern may have before it is searched without them.
const MAX_EXTRACTED_ANCHORS: usize = 64;

/// A literal that every match of a pattern starts with.
pub(crate) type Anchor = Vec<u8>;

/// Where a pattern is tried: `text[at..]` is all the text known from there
/// on. The byte before, the one byte of look-behind patterns see, is
/// `text[at - 1]`, or `before` when `at` is 0 (`None`: the stream's start).
#[derive(Clone, Copy)]
pub(crate) struct Site<'a> {
    pub(crate) text: &'a [u8],
    pub(crate) at: usize,
    pub(crate) before: Option<u8>,
}

impl Site<'_> {
    fn look_behind(&self) -> Option<u8> {
        match self.at {
            0 => self.before,
            at => Some(self.text[at - 1]),
        }
    }
}

/// The outcome of evaluating a pattern at one position.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Eval {
    /// No match starts here, whatever follows.
    NoMatch,
    /// A match starts here; `redact` is the part to redact (relative to the
    /// position, possibly empty) and `end` where the match ends.
    Match {
        redact: std::ops::Range<usize>,
        end: usize,
    },
    /// More input is needed to tell.
    Undecided,
}

/// A pattern, compiled once and shared by all streams.
pub(crate) struct CompiledPattern {
    /// Index of the replacement text (`[REDACTED:<name>]`).
    pub(crate) name_id: usize,
    /// Maximum match length (window size) in bytes.
    pub(crate) max_len: usize,
    /// Literals every match starts with; `None` if unknown, in which case
    /// `regex` itself finds candidates.
    pub(crate) anchors: Option<Vec<Anchor>>,
    /// Whether the pattern has no look-around assertions, so that an
    /// unanchored search over more text than one window finds every position
    /// a windowed match starts at (or earlier).
    pub(crate) skippable: bool,
    /// The pattern's source, to build the engines from.
    source: String,
    /// The matching engines, built on first use: most streams never meet an
    /// anchor of most patterns, and building them costs ~0.3 ms a pattern,
    /// which would dominate a short run.
    engines: OnceLock<Engines>,
}

/// The compiled matchers of one pattern.
pub(crate) struct Engines {
    /// The regex, for captures and unanchored candidate search.
    pub(crate) regex: meta::Regex,
    /// Group index of the `secret` capture group, if any.
    secret_group: Option<usize>,
    /// Anchored, leftmost-first lazy DFA, to tell when a match is decided.
    dfa: DFA,
}

impl Engines {
    fn build(pattern: &str) -> Result<Engines, Box<dyn std::error::Error + Send + Sync>> {
        let syntax = syntax::Config::new().utf8(false);
        let regex = meta::Regex::builder()
            .syntax(syntax)
            .configure(meta::Config::new().utf8_empty(false))
            .build(pattern)?;
        let secret_group = regex.group_info().to_index(PatternID::ZERO, "secret");
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(MatchKind::LeftmostFirst)
                    .unicode_word_boundary(true),
            )
            .syntax(syntax)
            .thompson(thompson::Config::new().utf8(false))
            .build(pattern)?;
        Ok(Engines {
            regex,
            secret_group,
            dfa,
        })
    }
}

impl CompiledPattern {
    /// Compiles `pattern`. With `anchors` of `None`, prefix literals are
    /// extracted from the regex if there are few enough of them.
    pub(crate) fn compile(
        name: &str,
        name_id: usize,
        pattern: &str,
        max_len: usize,
        anchors: Option<Vec<Anchor>>,
        trusted: bool,
    ) -> Result<Self, RedactError> {
        let invalid =
            |source: Box<dyn std::error::Error + Send + Sync>| RedactError::InvalidPattern {
                name: name.to_owned(),
                source,
            };
        if max_len == 0 {
            return Err(RedactError::ZeroMaxLen {
                name: name.to_owned(),
            });
        }
        // Validate user patterns with the `regex` crate first: its messages are
        // the ones users know. Built-in patterns are known to compile.
        if !trusted {
            regex::bytes::Regex::new(pattern).map_err(|e| invalid(Box::new(e)))?;
        }
        // A trusted pattern with known anchors needs nothing from its syntax
        // tree until it first meets an anchor (and `skippable` only matters for
        // unanchored patterns): skip the parse, which would dominate start-up.
        if trusted && let Some(anchors) = anchors {
            return Ok(CompiledPattern {
                name_id,
                max_len,
                anchors: Some(anchors),
                skippable: false,
                source: pattern.to_owned(),
                engines: OnceLock::new(),
            });
        }
        let hir = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(pattern)
            .map_err(|e| invalid(Box::new(e)))?;
        if hir.properties().minimum_len() == Some(0) {
            return Err(RedactError::EmptyMatch {
                name: name.to_owned(),
            });
        }
        let engines = OnceLock::new();
        if !trusted {
            let built = Engines::build(pattern).map_err(invalid)?;
            let _ = engines.set(built);
        }
        let anchors = anchors.or_else(|| extract_anchors(&hir));
        let skippable = hir.properties().look_set().is_empty();
        Ok(CompiledPattern {
            name_id,
            max_len,
            anchors,
            skippable,
            source: pattern.to_owned(),
            engines,
        })
    }

    /// The engines, built on first use.
    pub(crate) fn engines(&self) -> &Engines {
        self.engines.get_or_init(|| {
            Engines::build(&self.source).expect("built-in patterns compile (tested)")
        })
    }

    /// A fresh DFA cache; each stream owns one per pattern.
    pub(crate) fn create_cache(&self) -> Cache {
        self.engines().dfa.create_cache()
    }

    /// Finds the leftmost position in `hay` where the regex matches
    /// (unanchored), as a cheap way to skip positions.
    pub(crate) fn find_candidate(&self, hay: &[u8]) -> Option<usize> {
        self.engines()
            .regex
            .find(Input::new(hay))
            .map(|m| m.start())
    }

    /// Evaluates the pattern anchored at `site`. `eof` says no more text
    /// will come.
    pub(crate) fn eval(&self, cache: &mut Cache, site: Site<'_>, eof: bool) -> Eval {
        let hay = &site.text[site.at..];
        let complete = eof || hay.len() >= self.max_len;
        let window = &hay[..hay.len().min(self.max_len)];
        match self.walk(cache, window, site.look_behind(), complete) {
            Walk::NoMatch => Eval::NoMatch,
            Walk::Undecided => Eval::Undecided,
            Walk::GaveUp if !complete => Eval::Undecided,
            Walk::GaveUp => self.captures(site, window.len(), window.len()),
            Walk::Match(end) => match self.engines().secret_group {
                // The DFA found the same leftmost-first match the regex would.
                None => Eval::Match {
                    redact: 0..end,
                    end,
                },
                Some(_) => self.captures(site, window.len(), end),
            },
        }
    }

    /// Runs the full regex at `site`, on a window of `window_len` bytes whose
    /// outcome is decided, looking for a match ending at most at `end`. The
    /// regex sees what the DFA saw: one byte of look-behind and the window.
    fn captures(&self, site: Site<'_>, window_len: usize, end: usize) -> Eval {
        let owned;
        let (hay, offset): (&[u8], usize) = match site.look_behind() {
            Some(_) if site.at > 0 => (&site.text[site.at - 1..site.at + window_len], 1),
            Some(byte) => {
                owned = [&[byte][..], &site.text[..window_len]].concat();
                (&owned, 1)
            }
            None => (&site.text[..window_len], 0),
        };
        let input = Input::new(hay)
            .range(offset..offset + end)
            .anchored(Anchored::Yes);
        let shift = |r: std::ops::Range<usize>| r.start - offset..r.end - offset;
        let Engines {
            regex,
            secret_group,
            ..
        } = self.engines();
        match secret_group {
            None => match regex.search(&input) {
                Some(m) => Eval::Match {
                    redact: shift(m.range()),
                    end: m.end() - offset,
                },
                None => Eval::NoMatch,
            },
            Some(group) => {
                let mut caps = regex.create_captures();
                regex.search_captures(&input, &mut caps);
                match (caps.get_match(), caps.get_group(*group)) {
                    (Some(m), Some(secret)) => Eval::Match {
                        redact: shift(secret.range()),
                        end: m.end() - offset,
                    },
                    (Some(m), None) => Eval::Match {
                        redact: m.end() - offset..m.end() - offset,
                        end: m.end() - offset,
                    },
                    (None, _) => Eval::NoMatch,
                }
            }
        }
    }

    /// Walks the lazy DFA over `window` until the outcome is certain.
    fn walk(
        &self,
        cache: &mut Cache,
        window: &[u8],
        look_behind: Option<u8>,
        complete: bool,
    ) -> Walk {
        let config = start::Config::new()
            .anchored(Anchored::Yes)
            .look_behind(look_behind);
        let Ok(mut sid) = self.engines().dfa.start_state(cache, &config) else {
            return Walk::GaveUp;
        };
        // Where the last match seen ends.
        let mut matched = None;
        for (at, &byte) in window.iter().enumerate() {
            sid = match self.engines().dfa.next_state(cache, sid, byte) {
                Ok(sid) => sid,
                Err(_) => return Walk::GaveUp,
            };
            if sid.is_tagged() {
                if sid.is_match() {
                    // Matches are reported one byte late.
                    matched = Some(at);
                } else if sid.is_dead() {
                    return matched.map_or(Walk::NoMatch, Walk::Match);
                } else if sid.is_quit() {
                    return Walk::GaveUp;
                }
            }
        }
        if !complete {
            return self.settled(cache, sid, matched);
        }
        match self.engines().dfa.next_eoi_state(cache, sid) {
            Ok(sid) if sid.is_match() => Walk::Match(window.len()),
            Ok(_) => matched.map_or(Walk::NoMatch, Walk::Match),
            Err(_) => Walk::GaveUp,
        }
    }
}

impl CompiledPattern {
    /// At the end of the text so far, in state `sid`: the outcome is settled
    /// if no next byte can lead anywhere but the dead state and the end of
    /// the text would not add a match either.
    fn settled(&self, cache: &mut Cache, sid: LazyStateID, matched: Option<usize>) -> Walk {
        for unit in self.engines().dfa.byte_classes().representatives(..) {
            let Some(byte) = unit.as_u8() else { continue };
            match self.engines().dfa.next_state(cache, sid, byte) {
                Ok(next) if next.is_dead() => {}
                Ok(_) => return Walk::Undecided,
                Err(_) => return Walk::GaveUp,
            }
        }
        match self.engines().dfa.next_eoi_state(cache, sid) {
            Ok(eoi) if eoi.is_match() => Walk::Undecided,
            Ok(_) => matched.map_or(Walk::NoMatch, Walk::Match),
            Err(_) => Walk::GaveUp,
        }
    }
}

/// What the DFA walk found out.
enum Walk {
    NoMatch,
    /// A match ending here.
    Match(usize),
    Undecided,
    /// The lazy DFA cannot handle this input (say, a Unicode word boundary
    /// next to non-ASCII bytes); fall back to the full regex once the window
    /// is complete.
    GaveUp,
}

/// The prefix literals of a user pattern, if they are few and non-trivial.
fn extract_anchors(hir: &regex_syntax::hir::Hir) -> Option<Vec<Anchor>> {
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(hir);
    let literals = seq.literals()?;
    let usable = !literals.is_empty()
        && literals.len() <= MAX_EXTRACTED_ANCHORS
        && literals.iter().all(|l| l.as_bytes().len() >= 2);
    usable.then(|| literals.iter().map(|l| l.as_bytes().to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(text: &[u8]) -> Site<'_> {
        Site {
            text,
            at: 0,
            before: None,
        }
    }

    fn compile(pattern: &str, max_len: usize) -> CompiledPattern {
        CompiledPattern::compile("t", 0, pattern, max_len, None, false).unwrap()
    }

    #[test]
    fn decides_early_when_the_dfa_dies() {
        let p = compile(r"ab[0-9]+", 100);
        let mut cache = p.create_cache();
        assert_eq!(p.eval(&mut cache, start(b"ab12"), false), Eval::Undecided);
        assert_eq!(
            p.eval(&mut cache, start(b"ab12x"), false),
            Eval::Match {
                redact: 0..4,
                end: 4
            }
        );
        assert_eq!(p.eval(&mut cache, start(b"ax"), false), Eval::NoMatch);
        assert_eq!(
            p.eval(&mut cache, start(b"ab12"), true),
            Eval::Match {
                redact: 0..4,
                end: 4
            }
        );
    }

    #[test]
    fn window_bounds_the_match() {
        let p = compile(r"ab[0-9]+", 4);
        let mut cache = p.create_cache();
        assert_eq!(
            p.eval(&mut cache, start(b"ab1234"), false),
            Eval::Match {
                redact: 0..4,
                end: 4
            }
        );
    }

    #[test]
    fn secret_group_is_the_redacted_part() {
        let p = compile(r"key=(?P<secret>[a-z]+)", 100);
        let mut cache = p.create_cache();
        assert_eq!(
            p.eval(&mut cache, start(b"key=abc;"), false),
            Eval::Match {
                redact: 4..7,
                end: 7
            }
        );
    }

    #[test]
    fn anchors_are_extracted_when_few() {
        assert_eq!(compile(r"tok_[a-z]+", 10).anchors.unwrap(), [b"tok_"]);
        assert!(compile(r"[a-z]+tok", 10).anchors.is_none());
        // Big classes end the prefix (the integration tests rely on this).
        assert_eq!(compile(r"ab_c[^d\s]\w*", 10).anchors.unwrap(), [b"ab_c"]);
        // Too many prefixes to be worth it (the chunking property test relies
        // on this one being unanchored).
        assert!(compile(r"[0-9]{3}x[0-9]+", 10).anchors.is_none());
    }

    #[test]
    fn unicode_word_boundary_falls_back_to_the_regex() {
        let p = compile(r"\bsecret\w+", 100);
        let mut cache = p.create_cache();
        let hay = "secretéé ".as_bytes();
        assert_eq!(p.eval(&mut cache, start(hay), false), Eval::Undecided);
        assert_eq!(
            p.eval(&mut cache, start(hay), true),
            Eval::Match {
                redact: 0..10,
                end: 10
            }
        );
    }

    #[test]
    fn every_builtin_compiles_and_never_matches_empty() {
        // Built-ins are compiled lazily and unchecked at run time: check them here.
        for b in crate::builtin::BUILTINS {
            let p = CompiledPattern::compile(b.name, 0, b.regex, 64, None, false)
                .unwrap_or_else(|e| panic!("{}: {e}", b.name));
            let _ = p.engines();
        }
    }

    fn builtin(name: &str) -> &'static str {
        crate::builtin::BUILTINS
            .iter()
            .find(|b| b.name == name)
            .unwrap()
            .regex
    }

    proptest::proptest! {
        /// The DFA walk ends matches exactly where the regex does.
        #[test]
        fn dfa_and_regex_agree(
            pattern in proptest::sample::select(vec![
                r"ab[0-9]+", r"a(?:bc)?", r"[ab]+?c", r"(?:ab|a)(?:bc|c)?",
                r"a[^\n]*b", r"(?-u:\b)ab\b", r"ab$", r"a(?m:$)", r"(?m:^)ab", r"^a",
                builtin("private-key"), builtin("url-password"),
            ]),
            hay in proptest::collection::vec(
                proptest::sample::select(b"ab01c \n:/@-".to_vec()), 0..24),
            prefix in proptest::sample::select(vec!["", "a", "ab", "-----BEGIN PRIVATE KEY-----", "://u:"]),
            before in proptest::option::of(proptest::sample::select(b"a \n".to_vec())),
        ) {
            let p = compile(pattern, 16);
            let mut cache = p.create_cache();
            let hay = [prefix.as_bytes(), &hay].concat();
            let window = &hay[..hay.len().min(16)];
            // The regex on the window, with the byte before it.
            let with_before = [before.as_slice(), window].concat();
            let offset = usize::from(before.is_some());
            let input = Input::new(&with_before).range(offset..).anchored(Anchored::Yes);
            let expected = p.engines().regex.search(&input).map(|m| m.end() - offset);
            let site = Site { text: &hay, at: 0, before };
            let got = match p.eval(&mut cache, site, true) {
                Eval::Match { end, .. } => Some(end),
                Eval::NoMatch => None,
                Eval::Undecided => panic!("undecided at the end of the text"),
            };
            proptest::prop_assert_eq!(got, expected);
        }
    }
}

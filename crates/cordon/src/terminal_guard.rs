//! What of a program's output may reach the user's terminal as it is.
//!
//! A program writing to a terminal can do more than print: an OSC sequence retitles the
//! window or writes the clipboard (OSC 52), a query (`CSI 6 n`, `CSI c`, `ENQ`) makes the
//! terminal type an answer into the shell, a mode switch (`CSI ? … h`) takes over the mouse or
//! the screen, a DCS/APC string talks to the terminal's own extensions. When cordon passes a
//! program's output through to a terminal, [`TerminalGuard`] keeps what test runners and
//! build tools use — text, colours and styles (SGR, `CSI … m`), and line editing (carriage
//! return, backspace, tab, erase in line `CSI K`, cursor moves `CSI A B C D E F G`) — and
//! drops every other escape sequence whole, every other C0 control, DEL and the C1 controls.
//!
//! It works on bytes as they arrive: a sequence split across reads is recognised all the
//! same. Written here rather than taken from a terminal-emulator crate: it only needs to know
//! where a sequence ends, and which few it keeps.

/// The CSI final bytes kept (without a private-mode marker): SGR, erase in line, and the
/// relative cursor moves a progress line needs.
const KEPT_CSI_FINALS: &[u8] = b"mKABCDEFG";
/// The most parameter bytes a kept CSI sequence may carry; a longer one is dropped.
const MAX_CSI_PARAMS: usize = 64;

/// Where the guard is in the byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Plain text.
    Ground,
    /// After ESC.
    Escape,
    /// After `ESC` and intermediate bytes (`ESC ( B`): dropped up to the final byte.
    EscapeIntermediate,
    /// Inside a CSI sequence; its parameter and intermediate bytes so far (`None`: too long,
    /// dropped whatever it turns out to be).
    Csi(Option<Vec<u8>>),
    /// Inside a control string (OSC, DCS, SOS, PM, APC), dropped up to its terminator.
    String,
    /// Inside a control string, after an ESC (an `ESC \` ends it).
    StringEscape,
    /// After the lead byte `0xC2` of a UTF-8 sequence: a C1 control follows if the next byte
    /// is `0x80..=0x9F`.
    LeadC2,
}

/// A streaming filter of terminal output; see the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct TerminalGuard {
    state: State,
}

impl TerminalGuard {
    /// A guard at the start of a stream.
    pub(crate) fn new() -> Self {
        TerminalGuard {
            state: State::Ground,
        }
    }

    /// Appends to `out` what of `input` may reach the terminal.
    pub(crate) fn filter(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            self.state = match std::mem::replace(&mut self.state, State::Ground) {
                State::Ground => ground(b, out),
                State::LeadC2 => {
                    if (0x80..=0x9f).contains(&b) {
                        c1(b)
                    } else {
                        out.push(0xc2);
                        ground(b, out)
                    }
                }
                State::Escape => match b {
                    b'[' => State::Csi(Some(Vec::new())),
                    b']' | b'P' | b'X' | b'^' | b'_' => State::String,
                    0x20..=0x2f => State::EscapeIntermediate,
                    // A two-byte escape (`ESC 7`, `ESC c`): dropped. ESC ESC starts anew.
                    0x1b => State::Escape,
                    _ => State::Ground,
                },
                State::EscapeIntermediate => match b {
                    0x20..=0x2f => State::EscapeIntermediate,
                    _ => State::Ground,
                },
                State::Csi(params) => csi(params, b, out),
                State::String => match b {
                    0x07 => State::Ground,
                    0x1b => State::StringEscape,
                    _ => State::String,
                },
                // `ESC \` ends the string; any other ESC sequence ends it too (and is dropped).
                State::StringEscape => match b {
                    b'\\' => State::Ground,
                    b'[' => State::Csi(Some(Vec::new())),
                    _ => State::Ground,
                },
            };
        }
    }
}

/// A byte of plain text.
fn ground(b: u8, out: &mut Vec<u8>) -> State {
    match b {
        0x1b => State::Escape,
        0xc2 => State::LeadC2,
        b'\n' | b'\r' | b'\t' | 0x08 | 0x07 => {
            out.push(b);
            State::Ground
        }
        // Other C0 controls (ENQ asks the terminal for an answer; SO/SI switch character
        // sets) and DEL.
        0x00..=0x1f | 0x7f => State::Ground,
        _ => {
            out.push(b);
            State::Ground
        }
    }
}

/// A C1 control (`0x80..=0x9F`, after `0xC2`): its sequence is dropped like the ESC form.
fn c1(b: u8) -> State {
    match b {
        0x9b => State::Csi(Some(Vec::new())),
        0x90 | 0x98 | 0x9d | 0x9e | 0x9f => State::String,
        _ => State::Ground,
    }
}

/// A byte inside a CSI sequence.
fn csi(params: Option<Vec<u8>>, b: u8, out: &mut Vec<u8>) -> State {
    match b {
        // Parameter and intermediate bytes.
        0x20..=0x3f => State::Csi(params.and_then(|mut p| {
            (p.len() < MAX_CSI_PARAMS).then(|| {
                p.push(b);
                p
            })
        })),
        // The final byte: kept if it is one of ours and no private marker (`?`, `<`, `=`,
        // `>`) or intermediate byte made it something else.
        0x40..=0x7e => {
            if let Some(params) = params
                && KEPT_CSI_FINALS.contains(&b)
                && params
                    .iter()
                    .all(|p| p.is_ascii_digit() || *p == b';' || *p == b':')
            {
                out.extend_from_slice(b"\x1b[");
                out.extend_from_slice(&params);
                out.push(b);
            }
            State::Ground
        }
        // Not a CSI byte: the sequence was malformed; it is dropped, and so is this byte
        // unless it is plain text.
        _ => ground(b, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        TerminalGuard::new().filter(input, &mut out);
        out
    }

    /// The same input fed one byte at a time.
    fn guard_bytewise(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut g = TerminalGuard::new();
        for b in input {
            g.filter(std::slice::from_ref(b), &mut out);
        }
        out
    }

    #[test]
    fn colours_and_line_editing_are_kept() {
        let kept: &[&[u8]] = &[
            b"\x1b[1;32mok\x1b[0m\n",
            b"\x1b[38;5;196mred\x1b[m",
            b"\x1b[38:2::255:0:0mtrue colour\x1b[m",
            b"progress 10%\r\x1b[Kprogress 20%\r",
            b"\x1b[2K\x1b[1A\x1b[Gline above\x1b[3C\x1b[2D",
            b"tab\tbell\x07back\x08space",
            "ünïcödé ✓ ç".as_bytes(),
        ];
        for input in kept {
            assert_eq!(guard(input), *input, "{input:?}");
            assert_eq!(guard_bytewise(input), *input, "{input:?}");
        }
    }

    #[test]
    fn everything_else_is_dropped_whole() {
        let cases: &[(&[u8], &[u8])] = &[
            // Window title, clipboard (OSC 52), hyperlinks.
            (b"a\x1b]0;title\x07b", b"ab"),
            (b"a\x1b]52;c;SGVsbG8=\x07b", b"ab"),
            (b"a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", b"alinkb"),
            // Clearing the screen, moving to a place, queries, modes.
            (b"\x1b[2J\x1b[Hgate: PASSED", b"gate: PASSED"),
            (b"a\x1b[6nb\x1b[cc\x1b[>0cd", b"abcd"),
            (b"a\x1b[?1049hb\x1b[?1000hc\x1b[?2004ld", b"abcd"),
            (b"a\x1b[>4;2mb", b"ab"),
            // DCS, APC, PM, SOS strings.
            (
                b"a\x1bP+q544e\x1b\\b\x1b_apc\x1b\\c\x1b^pm\x07d\x1bXsos\x1b\\e",
                b"abcde",
            ),
            // Two-byte and intermediate escapes, C0 controls, DEL.
            (b"a\x1b7b\x1b8c\x1bcd\x1b(0e\x1b#8f", b"abcdef"),
            (b"a\x05b\x0ec\x0fd\x7fe\x00f", b"abcdef"),
            // C1 controls in UTF-8: CSI, OSC, NEL.
            ("a\u{9b}2Jb\u{9d}0;t\u{7}c\u{85}d".as_bytes(), b"abcd"),
            // An over-long CSI sequence, an unterminated string.
            (&[b"a\x1b[".as_slice(), &[b'1'; 100], b"mb"].concat(), b"ab"),
            (b"a\x1b]0;never ends", b"a"),
        ];
        for (input, expected) in cases {
            assert_eq!(guard(input), *expected, "{input:?}");
            assert_eq!(guard_bytewise(input), *expected, "{input:?}");
        }
    }
}

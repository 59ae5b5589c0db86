//! Untrusted text made safe to show: on a terminal, and in Markdown.
//!
//! Stage names, failure reasons, command lines and program output come from the repository
//! and the program under test. Shown raw, an escape sequence clears the screen and prints a
//! forged `gate: PASSED`, retitles the terminal or hides text; in Markdown, a stage name with
//! backticks, `**…**`, links or HTML renders as markup in a pull-request comment. What cordon
//! *renders* goes through these functions; what it *captures* (the report's bytes, the
//! transcript) stays exact.
//!
//! The terminal filter is written here rather than taken from a terminal-parser crate: it
//! needs only to recognise where an escape sequence ends (CSI, OSC, DCS/SOS/PM/APC strings,
//! two-byte escapes) so that none of it is shown, which is a few lines of state machine.

/// `text` without anything a terminal would interpret: escape sequences are dropped whole,
/// other C0 controls (but newline and tab), DEL and C1 controls are dropped. Newlines stay.
pub fn for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            // A C1 CSI/OSC/DCS... introducer: its sequence goes too.
            '\u{9b}' => skip_until_final(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// [`for_terminal`] on one line: newlines, carriage returns and tabs become spaces.
pub fn for_terminal_line(text: &str) -> String {
    for_terminal(&text.replace(['\n', '\r', '\t'], " "))
}

/// Skips the rest of an escape sequence whose ESC was just read.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => skip_until_final(chars),
        Some(']' | 'P' | 'X' | '^' | '_') => skip_string(chars),
        // Intermediate bytes, then one final byte (`ESC ( B`, `ESC # 8`).
        Some(c) if ('\u{20}'..='\u{2f}').contains(&c) => {
            while chars
                .peek()
                .is_some_and(|c| ('\u{20}'..='\u{2f}').contains(c))
            {
                chars.next();
            }
            chars.next();
        }
        // A two-byte escape (`ESC c`, `ESC 7`), or the end of the text.
        _ => {}
    }
}

/// Skips a CSI sequence's parameters and intermediates up to and including its final byte.
fn skip_until_final(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
        if !('\u{20}'..='\u{3f}').contains(&c) {
            // Not part of a CSI sequence: the sequence was malformed; stop dropping.
            return;
        }
    }
}

/// Skips a control string (OSC, DCS, ...) up to its terminator (BEL, ST or `ESC \`).
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

/// `text` as inert Markdown inline text (a table cell, a list item after its marker): one
/// line, controls dropped, the characters that open inline markup escaped (`\`, backticks,
/// `*`, `_` at a word's edge, brackets, `|`, `~`) and HTML characters as entities. Paths,
/// test names and messages stay readable in the raw text (`src/lib.rs:9`, `test_demo`).
pub fn for_markdown(text: &str) -> String {
    let line = for_terminal_line(text);
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '_' => {
                let inside_word = i > 0
                    && chars[i - 1].is_alphanumeric()
                    && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
                if !inside_word {
                    out.push('\\');
                }
                out.push('_');
            }
            '\\' | '`' | '*' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` as inert HTML text (inside `<summary>`): one line, controls dropped, `<`, `>`,
/// `&`, quotes as entities — and the Markdown characters GitHub still interprets there
/// escaped as entities too.
pub fn for_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in for_terminal_line(text).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '`' | '*' | '_' | '[' | ']' | '|' | '~' | '\\' => {
                out.push_str(&format!("&#{};", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether `text` holds a control character (C0, DEL or C1): refused in names.
pub fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_dropped_whole() {
        assert_eq!(
            for_terminal("\u{1b}[2J\u{1b}[Hgate: PASSED"),
            "gate: PASSED"
        );
        assert_eq!(for_terminal("a\u{1b}]0;title\u{7}b"), "ab");
        assert_eq!(
            for_terminal("a\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\b"),
            "alinkb"
        );
        assert_eq!(for_terminal("a\u{1b}(Bb\u{1b}7c"), "abc");
        assert_eq!(for_terminal("a\u{9b}31mb\u{85}c"), "abc");
        assert_eq!(for_terminal("x\u{8}\u{8}y\rz\u{7f}"), "xyz");
        assert_eq!(for_terminal("line\n\tnext"), "line\n\tnext");
        assert_eq!(for_terminal("unterminated \u{1b}[12"), "unterminated ");
        assert_eq!(for_terminal("ünïcödé ✓"), "ünïcödé ✓");
        assert_eq!(for_terminal_line("a\nb\tc"), "a b c");
    }

    #[test]
    fn markdown_and_html_are_inert() {
        assert_eq!(
            for_markdown("**bold** `code` [x](http://e) <img src=x> | a\nb"),
            "\\*\\*bold\\*\\* \\`code\\` \\[x\\](http://e) &lt;img src=x&gt; \\| a b"
        );
        assert_eq!(
            for_markdown("py/tests/test_demo.py:7 _emph_ a_"),
            "py/tests/test_demo.py:7 \\_emph\\_ a\\_"
        );
        assert_eq!(
            for_html("<script>\"'`x`"),
            "&lt;script&gt;&quot;&#39;&#96;x&#96;"
        );
        assert!(has_control("a\u{1b}b"));
        assert!(!has_control("plain name-1"));
    }
}

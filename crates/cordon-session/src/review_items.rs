//! Review items as the source and the reviewers print them: one JSON object a line, parsed
//! as output arrives, with bounds on what a hostile program can make cordon hold.

use cordon_exec::{OutputSink, Stream};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::record::{ItemOrigin, ReviewItem};

/// The longest line kept; longer ones are dropped whole (with a warning).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// The longest body kept; longer ones are cut (with a warning).
pub const MAX_BODY_BYTES: usize = 256 << 10;
/// The longest id accepted.
pub const MAX_ID_BYTES: usize = 256;
/// The marker that ends a reviewer's review when an item's body contains it.
pub const REVIEW_COMPLETE: &str = "[REVIEW COMPLETE]";

/// The state of the change at the code host, as the source reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    /// Still under review.
    Open,
    /// Merged: the watcher removes the session and ends.
    Merged,
    /// Closed without merging: the watcher removes the session and ends.
    Closed,
}

impl std::fmt::Display for SourceState {
    /// The state, in words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SourceState::Open => "open",
            SourceState::Merged => "merged",
            SourceState::Closed => "closed",
        })
    }
}

/// What one line said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    Item(ReviewItem),
    State(SourceState),
    /// Ignored, with why.
    Bad(String),
}

#[derive(Deserialize)]
struct RawLine {
    id: Option<serde_json::Value>,
    body: Option<serde_json::Value>,
    author: Option<serde_json::Value>,
    url: Option<serde_json::Value>,
    state: Option<serde_json::Value>,
}

fn text(value: Option<serde_json::Value>) -> Option<String> {
    match value? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Parses one line (without its newline).
pub(crate) fn parse_line(line: &[u8], origin: ItemOrigin) -> Option<Line> {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return None;
    }
    let shown = || String::from_utf8_lossy(&trimmed[..trimmed.len().min(80)]).into_owned();
    let raw: RawLine = match serde_json::from_slice(trimmed) {
        Ok(raw) => raw,
        Err(e) => return Some(Line::Bad(format!("not a JSON object ({e}): {}", shown()))),
    };
    if raw.id.is_none() {
        return Some(match text(raw.state).as_deref() {
            Some("open") => Line::State(SourceState::Open),
            Some("merged") => Line::State(SourceState::Merged),
            Some("closed") => Line::State(SourceState::Closed),
            _ => Line::Bad(format!("neither an item nor a state: {}", shown())),
        });
    }
    let Some(id) = text(raw.id) else {
        return Some(Line::Bad(format!("the id is not a string: {}", shown())));
    };
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
        return Some(Line::Bad(format!(
            "the id must be 1 to {MAX_ID_BYTES} bytes without control characters: {}",
            shown()
        )));
    }
    let body = text(raw.body).unwrap_or_default();
    Some(Line::Item(ReviewItem {
        id,
        body: cut(body, MAX_BODY_BYTES),
        author: text(raw.author).map(|a| cut(a, MAX_ID_BYTES)),
        url: text(raw.url).map(|u| cut(u, 4096)),
        origin,
        tries: 0,
    }))
}

/// Splits a program's standard output into lines as it arrives and hands each parsed line
/// to `on_line`; a line over [`MAX_LINE_BYTES`] is dropped whole. Standard error is ignored
/// (it is in the transcript).
pub(crate) struct LineSink<F: FnMut(Line)> {
    origin: ItemOrigin,
    buffer: Vec<u8>,
    overlong: bool,
    on_line: F,
}

impl<F: FnMut(Line)> LineSink<F> {
    pub(crate) fn new(origin: ItemOrigin, on_line: F) -> Self {
        LineSink {
            origin,
            buffer: Vec::new(),
            overlong: false,
            on_line,
        }
    }

    /// Parses what is left after the program ended (a last line without a newline).
    pub(crate) fn finish(mut self) {
        if !self.overlong
            && let Some(line) = parse_line(&self.buffer, self.origin)
        {
            (self.on_line)(line);
        }
    }

    fn take(&mut self, chunk: &[u8]) {
        if self.overlong {
            return;
        }
        if self.buffer.len() + chunk.len() > MAX_LINE_BYTES {
            self.overlong = true;
            self.buffer = Vec::new();
            (self.on_line)(Line::Bad(format!(
                "a line longer than {MAX_LINE_BYTES} bytes was dropped"
            )));
            return;
        }
        self.buffer.extend_from_slice(chunk);
    }
}

impl<F: FnMut(Line)> OutputSink for LineSink<F> {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        if stream != Stream::Stdout {
            return;
        }
        let mut rest = bytes;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.take(&rest[..at]);
            let line = std::mem::take(&mut self.buffer);
            if !std::mem::replace(&mut self.overlong, false)
                && let Some(parsed) = parse_line(&line, self.origin)
            {
                (self.on_line)(parsed);
            }
            rest = &rest[at + 1..];
        }
        self.take(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<Line> {
        let mut out = Vec::new();
        let mut sink = LineSink::new(ItemOrigin::Source, |l| out.push(l));
        for chunk in chunks {
            sink.write(Stream::Stdout, chunk);
            sink.write(Stream::Stderr, b"{\"id\":\"from-stderr\"}\n");
        }
        sink.finish();
        out
    }

    #[test]
    fn items_and_states_are_read_across_chunk_boundaries() {
        let got = lines(&[
            b"{\"id\":\"a\",\"bo",
            b"dy\":\"fix it\",\"author\":\"ann\",\"url\":\"https://x/1\"}\n{\"state\":\"mer",
            b"ged\"}\n{\"id\": 7}",
        ]);
        assert_eq!(got.len(), 3, "{got:?}");
        let Line::Item(item) = &got[0] else {
            panic!("{got:?}")
        };
        assert_eq!(
            (item.id.as_str(), item.body.as_str(), item.author.as_deref()),
            ("a", "fix it", Some("ann"))
        );
        assert_eq!(got[1], Line::State(SourceState::Merged));
        assert!(matches!(&got[2], Line::Item(i) if i.id == "7" && i.body.is_empty()));
    }

    #[test]
    fn hostile_lines_are_refused_or_bounded() {
        let huge_body = format!(
            "{{\"id\":\"big\",\"body\":\"{}\"}}\n",
            "é".repeat(MAX_BODY_BYTES)
        );
        let overlong = format!(
            "{{\"id\":\"x\",\"body\":\"{}\"}}\n",
            "a".repeat(MAX_LINE_BYTES)
        );
        let got = lines(&[
            b"not json\n[1,2]\n{\"id\":\"\"}\n{\"id\":\"a\\u0000b\"}\n{\"state\":\"weird\"}\n",
            b"{\"id\":{\"nested\":1}}\n\n   \n",
            huge_body.as_bytes(),
            overlong.as_bytes(),
            b"{\"id\":\"after\"}\n",
        ]);
        let bad = got.iter().filter(|l| matches!(l, Line::Bad(_))).count();
        assert_eq!(bad, 7, "{got:?}");
        let items: Vec<&ReviewItem> = got
            .iter()
            .filter_map(|l| match l {
                Line::Item(i) => Some(i),
                _ => None,
            })
            .collect();
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(items[0].id, "big");
        assert!(items[0].body.len() <= MAX_BODY_BYTES);
        assert!(items[0].body.chars().all(|c| c == 'é'));
        assert_eq!(items[1].id, "after");
    }
}

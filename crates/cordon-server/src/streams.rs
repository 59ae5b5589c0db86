//! Bounds on open live-log streams. Every open stream polls the store, so a client that opens
//! streams without end would cost every other client: each token may hold a few at once, the
//! server a few thousand, and one more is answered 429 until one closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// At most this many open live-log streams per token.
pub const PER_TOKEN: usize = 32;
/// At most this many open live-log streams in one server process.
pub const TOTAL: usize = 2048;

/// The open live-log streams, counted by token.
#[derive(Debug, Default)]
pub struct LiveStreams {
    open: Mutex<(usize, HashMap<String, usize>)>,
}

/// One open stream; dropping it (the client went away, the log ended) frees its place.
#[derive(Debug)]
pub struct StreamPermit {
    streams: Arc<LiveStreams>,
    token_id: String,
}

impl LiveStreams {
    /// A place for one more stream of `token_id`, or why there is none.
    pub fn open(self: &Arc<Self>, token_id: &str) -> Result<StreamPermit, String> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, by_token) = &mut *open;
        let mine = by_token.get(token_id).copied().unwrap_or(0);
        if mine >= PER_TOKEN {
            return Err(format!(
                "this token already has {PER_TOKEN} live logs open: close one first"
            ));
        }
        if *total >= TOTAL {
            return Err(format!(
                "the server has {TOTAL} live logs open: try again later"
            ));
        }
        *total += 1;
        by_token.insert(token_id.to_owned(), mine + 1);
        Ok(StreamPermit {
            streams: Arc::clone(self),
            token_id: token_id.to_owned(),
        })
    }

    /// How many streams are open (all tokens).
    pub fn total(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, by_token) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(count) = by_token.get_mut(&self.token_id) {
            *count -= 1;
            if *count == 0 {
                by_token.remove(&self.token_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_its_share_and_a_closed_stream_frees_its_place() {
        let streams = Arc::new(LiveStreams::default());
        let mine: Vec<_> = (0..PER_TOKEN).map(|_| streams.open("a").unwrap()).collect();
        let refused = streams.open("a").unwrap_err();
        assert!(refused.contains("close one first"), "{refused}");
        let other = streams.open("b").expect("another token is not held back");
        assert_eq!(streams.total(), PER_TOKEN + 1);
        drop(mine);
        drop(other);
        assert_eq!(streams.total(), 0);
        assert!(
            streams.open("a").is_ok(),
            "places come back when streams close"
        );
    }

    #[test]
    fn the_server_holds_at_most_its_total() {
        let streams = Arc::new(LiveStreams::default());
        let held: Vec<_> = (0..TOTAL)
            .map(|i| streams.open(&format!("t{}", i % 100)).unwrap())
            .collect();
        assert!(streams.open("new").unwrap_err().contains("try again later"));
        drop(held);
        assert!(streams.open("new").is_ok());
    }
}

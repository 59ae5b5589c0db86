//! Bounded capture of one output stream: the first bytes, the last bytes, exact counts.
//!
//! Memory is fixed at `limit` bytes whatever the program prints: the head fills first, then a
//! ring buffer keeps the most recent bytes.

use cordon_types::CapturedOutput;

/// Keeps at most `limit` bytes of a stream: `limit / 2` (rounded up) of head, the rest tail.
#[derive(Debug)]
pub struct HeadTail {
    head: Vec<u8>,
    head_cap: usize,
    tail: Vec<u8>,
    tail_cap: usize,
    /// Index in `tail` of the oldest byte once the ring is full.
    tail_start: usize,
    total: u64,
}

impl HeadTail {
    /// A capture that keeps at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        let head_cap = limit.div_ceil(2);
        HeadTail {
            head: Vec::new(),
            head_cap,
            tail: Vec::new(),
            tail_cap: limit - head_cap,
            tail_start: 0,
            total: 0,
        }
    }

    /// Records `bytes`, the next part of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() || self.tail_cap == 0 {
            return;
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - self.tail_cap..]);
            self.tail_start = 0;
            return;
        }
        if self.tail.len() < self.tail_cap {
            let room = self.tail_cap - self.tail.len();
            let take = room.min(bytes.len());
            self.tail.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        // The ring is full and `bytes` is shorter than it: overwrite the oldest bytes in at
        // most two copies.
        let first = bytes.len().min(self.tail_cap - self.tail_start);
        self.tail[self.tail_start..self.tail_start + first].copy_from_slice(&bytes[..first]);
        let rest = &bytes[first..];
        self.tail[..rest.len()].copy_from_slice(rest);
        self.tail_start = (self.tail_start + bytes.len()) % self.tail_cap;
    }

    /// Total bytes seen so far, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether bytes were dropped between head and tail.
    pub fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The captured bytes as `(head, tail)`; tail is empty unless something was dropped.
    pub fn bytes(&self) -> (Vec<u8>, Vec<u8>) {
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(&self.tail[self.tail_start..]);
        tail.extend_from_slice(&self.tail[..self.tail_start]);
        if self.truncated() {
            (self.head.clone(), tail)
        } else {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            (all, Vec::new())
        }
    }

    /// The capture as it appears in a run result (lossy UTF-8).
    pub fn to_captured(&self) -> CapturedOutput {
        let (head, tail) = self.bytes();
        let kept = (head.len() + tail.len()) as u64;
        CapturedOutput {
            bytes_total: self.total,
            truncated: self.truncated(),
            omitted_bytes: self.total - kept,
            head: String::from_utf8_lossy(&head).into_owned(),
            tail: String::from_utf8_lossy(&tail).into_owned(),
            undelivered_bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(limit: usize, chunks: &[&[u8]]) -> HeadTail {
        let mut c = HeadTail::new(limit);
        for chunk in chunks {
            c.push(chunk);
        }
        c
    }

    #[test]
    fn small_output_is_kept_whole_in_head() {
        let c = feed(10, &[b"abc", b"def"]);
        assert_eq!(c.bytes(), (b"abcdef".to_vec(), vec![]));
        assert!(!c.truncated());
        assert_eq!(c.to_captured().omitted_bytes, 0);
    }

    #[test]
    fn output_exactly_at_limit_is_not_truncated() {
        let c = feed(6, &[b"abcdef"]);
        assert!(!c.truncated());
        assert_eq!(c.bytes(), (b"abcdef".to_vec(), vec![]));
    }

    #[test]
    fn long_output_keeps_head_and_latest_tail_in_any_chunking() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        for chunk in [1usize, 3, 7, 64, 4096, 10_000] {
            let mut c = HeadTail::new(100);
            for part in data.chunks(chunk) {
                c.push(part);
            }
            let (head, tail) = c.bytes();
            assert_eq!(head, data[..50], "chunk {chunk}");
            assert_eq!(tail, data[data.len() - 50..], "chunk {chunk}");
            let cap = c.to_captured();
            assert!(cap.truncated);
            assert_eq!(cap.bytes_total, 10_000);
            assert_eq!(cap.omitted_bytes, 9_900);
        }
    }

    #[test]
    fn zero_limit_keeps_nothing_but_counts() {
        let c = feed(0, &[b"hello"]);
        assert_eq!(c.bytes(), (vec![], vec![]));
        assert!(c.truncated());
        assert_eq!(c.total(), 5);
    }

    #[test]
    fn odd_limit_gives_head_the_extra_byte() {
        let c = feed(5, &[b"0123456789"]);
        assert_eq!(c.bytes(), (b"012".to_vec(), b"89".to_vec()));
    }
}

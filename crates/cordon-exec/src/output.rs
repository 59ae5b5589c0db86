//! One output stream of a run: read, filtered, captured (head and tail), passed to the sink.

use std::os::fd::OwnedFd;

use cordon_types::LimitKind;

use crate::capture::HeadTail;
use crate::io::{RunIo, Stream};

/// One output stream being read.
pub(crate) struct StreamState {
    stream: Stream,
    pub(crate) fd: Option<OwnedFd>,
    capture: HeadTail,
    raw_total: u64,
}

impl StreamState {
    /// A stream read from `fd` (`None`: nothing to read, as with a terminal's stderr).
    pub(crate) fn new(stream: Stream, fd: Option<OwnedFd>, limit: usize) -> Self {
        StreamState {
            stream,
            fd,
            capture: HeadTail::new(limit),
            raw_total: 0,
        }
    }

    /// Which stream this is.
    pub(crate) fn stream(&self) -> Stream {
        self.stream
    }

    /// Reads what `poll` said is there; closes the stream on end of file. Returns how many
    /// bytes it read.
    pub(crate) fn read_once(
        &mut self,
        buf: &mut [u8],
        scratch: &mut Vec<u8>,
        io: &mut RunIo<'_>,
        limits_hit: &mut Vec<LimitKind>,
    ) -> usize {
        let Some(fd) = &self.fd else { return 0 };
        match rustix::io::read(fd, &mut *buf) {
            Ok(0) => self.close(scratch, io, limits_hit),
            Ok(n) => {
                self.deliver(&buf[..n], scratch, io, limits_hit);
                return n;
            }
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
            Err(_) => self.close(scratch, io, limits_hit),
        }
        0
    }

    fn deliver(
        &mut self,
        bytes: &[u8],
        scratch: &mut Vec<u8>,
        io: &mut RunIo<'_>,
        limits_hit: &mut Vec<LimitKind>,
    ) {
        self.raw_total += bytes.len() as u64;
        match io.filter.as_deref_mut() {
            Some(filter) => {
                scratch.clear();
                filter.filter(self.stream, bytes, scratch);
                self.keep(scratch, io, limits_hit);
            }
            None => self.keep(bytes, io, limits_hit),
        }
    }

    fn keep(&mut self, bytes: &[u8], io: &mut RunIo<'_>, limits_hit: &mut Vec<LimitKind>) {
        if bytes.is_empty() {
            return;
        }
        let was_truncated = self.capture.truncated();
        self.capture.push(bytes);
        if !was_truncated && self.capture.truncated() && !limits_hit.contains(&LimitKind::Output) {
            limits_hit.push(LimitKind::Output);
        }
        if let Some(sink) = io.sink.as_deref_mut() {
            sink.write(self.stream, bytes);
            if !sink.wants_more(self.stream) {
                // Whoever reads cordon's output is gone (`cordon run -- yes | head -1`): stop
                // reading, so the program gets EPIPE/SIGPIPE as it would in a shell pipeline.
                self.fd = None;
            }
        }
        if let Some(probe) = io.ready.as_deref_mut() {
            probe.observe(self.stream, bytes);
        }
    }

    /// Stops reading, releasing whatever the filter still holds.
    pub(crate) fn close(
        &mut self,
        scratch: &mut Vec<u8>,
        io: &mut RunIo<'_>,
        limits_hit: &mut Vec<LimitKind>,
    ) {
        if self.fd.take().is_none() {
            return;
        }
        if let Some(filter) = io.filter.as_deref_mut() {
            scratch.clear();
            filter.flush(self.stream, scratch);
            let held = std::mem::take(scratch);
            self.keep(&held, io, limits_hit);
            *scratch = held;
        }
    }

    pub(crate) fn into_captured(self) -> cordon_types::CapturedOutput {
        let mut captured = self.capture.to_captured();
        captured.bytes_total = self.raw_total;
        captured
    }
}

//! Where a run's output goes besides the bounded capture.

use cordon_types::LimitKind;
pub use cordon_types::Stream;

use crate::cancel::CancelHandle;

/// Receives every byte of output as it arrives (after the [`OutputFilter`], if any): a live
/// terminal view, a transcript writer, a log stream.
pub trait OutputSink {
    /// The next bytes of `stream`.
    fn write(&mut self, stream: Stream, bytes: &[u8]);

    /// Whether the sink still takes `stream`; when it stops (its reader went away), the
    /// executor stops reading that stream and the program sees a broken pipe.
    fn wants_more(&self, stream: Stream) -> bool {
        let _ = stream;
        true
    }

    /// Whether the sink can take more of `stream` right now. A sink that is behind (a slow
    /// terminal) answers `false`: the executor then stops reading that stream for a while —
    /// the program blocks on its full pipe, as it would writing to that terminal directly —
    /// while deadlines, kills and cancellation go on. It must become `true` again by itself
    /// (the executor asks every few milliseconds), and a sink must never block in
    /// [`OutputSink::write`].
    fn accepts_more(&self, stream: Stream) -> bool {
        let _ = stream;
        true
    }
}

/// Transforms output before anything sees it (redaction). Stateful per stream: it may hold
/// bytes back across calls and must release them on [`OutputFilter::flush`].
pub trait OutputFilter {
    /// Appends to `out` what may be released of `input` (the next bytes of `stream`).
    fn filter(&mut self, stream: Stream, input: &[u8], out: &mut Vec<u8>);
    /// Appends to `out` everything still held back for `stream`; the stream has ended.
    fn flush(&mut self, stream: Stream, out: &mut Vec<u8>);
}

/// Decides when a long-running program (a server under a startup smoke test) is *ready*.
/// Once it is, the executor stops the program's tree and reports a pass.
pub trait ReadyProbe {
    /// Sees every byte of output (after the filter), e.g. to match a "listening" line.
    fn observe(&mut self, stream: Stream, bytes: &[u8]) {
        let _ = (stream, bytes);
    }
    /// Asked every few tens of milliseconds while the program runs; `root_pid` is the
    /// process the executor spawned (its `/proc/<pid>/net/tcp` shows its network namespace).
    fn is_ready(&mut self, root_pid: i32) -> bool;
}

/// Watches a resource the kernel does not bound for cordon (the disk a working tree uses):
/// when it says a limit is exceeded, the executor ends the program's tree and reports it.
pub trait LimitGuard {
    /// Asked a few times a second while the program runs: the limit exceeded, if any.
    fn exceeded(&mut self) -> Option<LimitKind>;
}

/// The optional companions of a run.
#[derive(Default)]
pub struct RunIo<'a> {
    /// Receives all output live.
    pub sink: Option<&'a mut dyn OutputSink>,
    /// Transforms output before the sink and the capture see it.
    pub filter: Option<&'a mut dyn OutputFilter>,
    /// Ends the run early when cancelled.
    pub cancel: Option<&'a CancelHandle>,
    /// Ends the run with a pass once the program is ready (startup smoke tests).
    pub ready: Option<&'a mut dyn ReadyProbe>,
    /// Ends the run when a watched resource exceeds its limit.
    pub guard: Option<&'a mut dyn LimitGuard>,
    /// A descriptor the supervisor inherits at [`cordon_types::CHILD_NETWORK_FD`] (the
    /// socket on which the sandbox helper hands over the proxy's listener); supervised runs
    /// only. cordon's copy is closed once the supervisor is spawned.
    pub network_fd: Option<std::os::fd::OwnedFd>,
}

//! Cancelling a run from another thread or from a signal handler.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::pipe::{PipeFlags, pipe_with};

/// Ends a run early. Cheap to share; safe to trigger from a signal handler
/// ([`CancelHandle::cancel_from_signal`] only stores an integer and writes one byte).
#[derive(Debug)]
pub struct CancelHandle {
    read: OwnedFd,
    write: OwnedFd,
    /// 0 = not cancelled, -1 = cancelled without a signal, N = cancelled by signal N.
    state: AtomicI32,
}

const CANCELLED_WITHOUT_SIGNAL: i32 = -1;

impl CancelHandle {
    /// A fresh, not yet cancelled handle.
    pub fn new() -> std::io::Result<Self> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        Ok(CancelHandle {
            read,
            write,
            state: AtomicI32::new(0),
        })
    }

    /// Cancels the run (from any thread).
    pub fn cancel(&self) {
        let _ = self.state.compare_exchange(
            0,
            CANCELLED_WITHOUT_SIGNAL,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        let _ = rustix::io::write(&self.write, &[1]);
    }

    /// Cancels the run because cordon received `signal`. Async-signal-safe.
    pub fn cancel_from_signal(&self, signal: i32) {
        let _ = self
            .state
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
        let _ = rustix::io::write(&self.write, &[1]);
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::SeqCst) != 0
    }

    /// The signal that cancelled the run, if a signal did.
    pub fn signal(&self) -> Option<i32> {
        match self.state.load(Ordering::SeqCst) {
            s if s > 0 => Some(s),
            _ => None,
        }
    }

    /// The descriptor that becomes readable on cancellation (for `poll`).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }
}

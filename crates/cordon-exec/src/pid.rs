//! Process ids that can be signalled safely.
//!
//! `kill(2)` reads `0` as the caller's own process group and `-1` as every process the caller
//! may signal; rustix's `Pid::from_raw` refuses `0` but only debug-asserts against negative
//! values, so an id that went negative (a `u32` child id cast to `i32`, a parse of garbage)
//! would reach `kill(-N)`. [`ProcessId`] refuses zero and negative ids when it is made, and is
//! the only way this crate signals a process.

use rustix::process::{Pid, Signal};

/// The id of one process: always positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ProcessId(Pid);

impl ProcessId {
    /// The id `raw`, or `None` when it is zero or negative.
    pub(crate) fn new(raw: i32) -> Option<Self> {
        if raw > 0 {
            Pid::from_raw(raw).map(Self)
        } else {
            None
        }
    }

    /// The raw id.
    pub(crate) fn get(self) -> i32 {
        self.0.as_raw_nonzero().get()
    }

    /// The id as rustix's `Pid`.
    pub(crate) fn as_pid(self) -> Pid {
        self.0
    }

    /// Sends `signal` to this process only.
    pub(crate) fn signal(self, signal: Signal) -> rustix::io::Result<()> {
        rustix::process::kill_process(self.0, signal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_kill_would_broadcast_are_refused() {
        for raw in [0, -1, -2, i32::MIN] {
            assert_eq!(ProcessId::new(raw), None, "{raw}");
        }
        assert_eq!(ProcessId::new(42).map(ProcessId::get), Some(42));
        assert_eq!(ProcessId::new(i32::MAX).map(ProcessId::get), Some(i32::MAX));
    }
}

//! Process ids that can be signalled safely.
//!
//! `kill(2)` gives special meanings to ids that are not a single process: `0` is the caller's
//! own process group, `-1` every process the caller may signal, `-N` the group `N`. An id
//! read from `/proc`, `cgroup.procs` or a `clone` return value, or a group id negated by
//! hand, must never become one of those by accident: [`ProcessId`] and [`ProcessGroup`] refuse
//! them when they are made, so [`ProcessId::signal`] and [`ProcessGroup::signal`] reach one
//! process or one group and nothing else.

use rustix::process::{Pid, Signal};

/// The id of one process: always positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId(Pid);

impl ProcessId {
    /// The id `raw`, or `None` when it is zero or negative (which `kill` would read as a
    /// group or as "every process").
    pub fn new(raw: i32) -> Option<Self> {
        if raw > 0 {
            Pid::from_raw(raw).map(Self)
        } else {
            None
        }
    }

    /// The raw id.
    pub fn get(self) -> i32 {
        self.0.as_raw_nonzero().get()
    }

    /// Sends `signal` to this process only.
    pub fn signal(self, signal: Signal) -> rustix::io::Result<()> {
        rustix::process::kill_process(self.0, signal)
    }
}

/// A process group whose leader is a process other than init: its id is at least 2, since
/// `kill(-1, ...)` would signal every process rather than group 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessGroup(Pid);

impl ProcessGroup {
    /// The group led by `raw`, or `None` when `raw` is below 2.
    pub fn new(raw: i32) -> Option<Self> {
        if raw > 1 {
            Pid::from_raw(raw).map(Self)
        } else {
            None
        }
    }

    /// Sends `signal` to every process of the group.
    pub fn signal(self, signal: Signal) -> rustix::io::Result<()> {
        rustix::process::kill_process_group(self.0, signal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_kill_would_broadcast_are_refused() {
        for raw in [0, -1, -2, i32::MIN] {
            assert_eq!(ProcessId::new(raw), None, "{raw}");
            assert_eq!(ProcessGroup::new(raw), None, "{raw}");
        }
        // Group 1 would be `kill(-1, ...)`: every process.
        assert_eq!(ProcessGroup::new(1), None);
        assert_eq!(ProcessId::new(1).map(ProcessId::get), Some(1));
        assert!(ProcessGroup::new(2).is_some());
        assert_eq!(ProcessId::new(i32::MAX).map(ProcessId::get), Some(i32::MAX));
    }

    #[test]
    fn a_process_id_signals_that_process_only() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let pid = ProcessId::new(i32::try_from(child.id()).unwrap()).unwrap();
        pid.signal(Signal::KILL).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        // This test process is alive to say so: the signal reached the child only.
    }
}

//! [`ProcessIdentity`]: a process, told apart from a later one that reuses its pid.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A process id with the process's start time (clock ticks after boot, field 22 of
/// `/proc/<pid>/stat`), so that a new process reusing the pid is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessIdentity {
    /// The process id.
    pub pid: u32,
    /// The start time, `None` when it could not be read.
    pub start_time: Option<u64>,
}

/// Whether a recorded owner still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// The process runs (same pid and start time).
    Alive,
    /// No process has the pid, or another process (another start time) has it.
    Gone,
    /// It cannot be told (no `/proc`); treated as alive so nothing is collected by mistake.
    Unknown,
}

impl ProcessIdentity {
    /// The current process.
    pub fn current() -> ProcessIdentity {
        let pid = std::process::id();
        ProcessIdentity {
            pid,
            start_time: start_time(pid),
        }
    }

    /// The parent of the current process.
    pub fn parent() -> ProcessIdentity {
        let pid = std::os::unix::process::parent_id();
        ProcessIdentity {
            pid,
            start_time: start_time(pid),
        }
    }

    /// Whether the process still runs.
    pub fn liveness(&self) -> Liveness {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return Liveness::Unknown;
        }
        match (start_time(self.pid), self.start_time) {
            (None, _) => Liveness::Gone,
            (Some(now), Some(then)) if now != then => Liveness::Gone,
            (Some(_), _) => Liveness::Alive,
        }
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    cordon_types::proc_stat::number(&stat, 22)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessIdentity::current();
        assert!(me.start_time.is_some());
        assert_eq!(me.liveness(), Liveness::Alive);
        let reused = ProcessIdentity {
            start_time: me.start_time.map(|t| t + 1),
            ..me
        };
        assert_eq!(reused.liveness(), Liveness::Gone);
    }
}

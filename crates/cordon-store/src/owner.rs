//! Which process owns a run, and whether it is still alive — robust to pid reuse.
//!
//! A run records its cordon process's pid, the process's start time (field 22 of
//! `/proc/<pid>/stat`, clock ticks since boot), the kernel's boot id and the host name. The
//! owner is alive only when all of them still match: a reused pid has another start time, and
//! after a reboot the boot id differs.

/// The identity of a process on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) pid: i64,
    pub(crate) start_time: Option<i64>,
    pub(crate) boot_id: Option<String>,
    pub(crate) host: String,
}

impl Owner {
    /// This process.
    pub(crate) fn current() -> Self {
        let pid = i64::from(std::process::id());
        Self {
            pid,
            start_time: start_time(pid),
            boot_id: boot_id(),
            host: host_name(),
        }
    }

    /// Whether this owner (recorded on `host` == our host) is still running.
    pub(crate) fn is_alive(&self, here: &Owner) -> bool {
        if self.host != here.host {
            // Another machine's run: we cannot tell, so we never declare it dead.
            return true;
        }
        if self.boot_id.is_some() && here.boot_id.is_some() && self.boot_id != here.boot_id {
            return false;
        }
        match start_time(self.pid) {
            None => false,
            Some(now) => self.start_time.is_none_or(|recorded| recorded == now),
        }
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`, or `None` when there is no such process.
pub(crate) fn start_time(pid: i64) -> Option<i64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // A zombie has exited: it is not running the run any more.
    if cordon_types::proc_stat::has_ended(&stat) {
        return None;
    }
    cordon_types::proc_stat::number(&stat, 22)
}

fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_owned())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let here = Owner::current();
        assert!(here.start_time.is_some());
        assert!(here.is_alive(&here));
        let reused = Owner {
            start_time: here.start_time.map(|t| t + 1),
            ..here.clone()
        };
        assert!(!reused.is_alive(&here));
        let rebooted = Owner {
            boot_id: Some("another-boot".to_owned()),
            ..here.clone()
        };
        assert!(!rebooted.is_alive(&here));
        let elsewhere = Owner {
            host: "another-host".to_owned(),
            pid: i64::from(u32::MAX),
            ..here.clone()
        };
        assert!(elsewhere.is_alive(&here));
    }

    #[test]
    fn a_missing_process_has_no_start_time() {
        assert_eq!(start_time(i64::from(i32::MAX)), None);
    }
}

//! The cgroups that limit and measure the sandboxed tree (created and removed by the outer
//! helper, which stays in the host's namespaces).

use std::path::{Path, PathBuf};

use rustix::process::Signal;

use crate::error::Setup;
use crate::pid::ProcessId;
use crate::plan::CgroupPlan;
use crate::sys;

/// What the cgroup counters said when the tree was gone.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Peak memory of the tree.
    pub memory_peak: Option<u64>,
    /// Processes the OOM killer ended.
    pub oom_kills: u64,
    /// Forks refused by `pids.max`.
    pub pids_refused: u64,
}

/// Created cgroup directories; removed on [`Cgroups::finish`] or drop.
#[derive(Debug)]
pub struct Cgroups {
    v2: bool,
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
}

fn make(parent: &Path, name: &str) -> Setup<PathBuf> {
    sweep_stale(parent);
    let dir = parent.join(name);
    // A group with our own name was left by an earlier helper with the same pid (now reused):
    // its sandbox died with it, so the group is empty and can go.
    let _ = std::fs::remove_dir(&dir);
    std::fs::create_dir(&dir).map_err(|e| format!("create cgroup {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Removes `cordon-PID` groups whose helper is gone (it was SIGKILLed before cleaning up;
/// its sandbox died with it, so the groups are empty).
fn sweep_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("cordon-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

impl Cgroups {
    /// Creates the cgroups of a plan and writes the limits.
    pub fn create(plan: &CgroupPlan) -> Setup<Self> {
        let name = format!("cordon-{}", std::process::id());
        match plan {
            CgroupPlan::V2 {
                parent,
                memory_bytes,
                pids,
            } => {
                let dir = make(parent, &name)?;
                let cg = Self {
                    v2: true,
                    memory: Some(dir.clone()),
                    pids: None,
                };
                if let Some(m) = memory_bytes {
                    sys::write_file(&dir.join("memory.max"), m.to_string().as_bytes())?;
                    let _ = std::fs::write(dir.join("memory.swap.max"), b"0");
                }
                if let Some(p) = pids {
                    sys::write_file(&dir.join("pids.max"), p.to_string().as_bytes())?;
                }
                Ok(cg)
            }
            CgroupPlan::V1 {
                memory_parent,
                pids_parent,
                memory_bytes,
                pids,
            } => {
                let mut cg = Self {
                    v2: false,
                    memory: None,
                    pids: None,
                };
                if let (Some(parent), Some(m)) = (memory_parent, memory_bytes) {
                    let dir = make(parent, &name)?;
                    cg.memory = Some(dir.clone());
                    sys::write_file(&dir.join("memory.limit_in_bytes"), m.to_string().as_bytes())?;
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        sys::write_file(&memsw, m.to_string().as_bytes())?;
                    }
                }
                if let (Some(parent), Some(p)) = (pids_parent, pids) {
                    let dir = make(parent, &name)?;
                    cg.pids = Some(dir.clone());
                    sys::write_file(&dir.join("pids.max"), p.to_string().as_bytes())?;
                }
                Ok(cg)
            }
        }
    }

    fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.memory.iter().chain(self.pids.iter())
    }

    /// Moves a process (by host pid) into the cgroups.
    pub fn add(&self, pid: ProcessId) -> Setup<()> {
        for dir in self.dirs() {
            sys::write_file(&dir.join("cgroup.procs"), pid.get().to_string().as_bytes())?;
        }
        Ok(())
    }

    /// Reads the counters, kills what is left, removes the cgroups.
    pub fn finish(mut self) -> Counters {
        let c = self.counters();
        self.remove();
        c
    }

    fn counters(&self) -> Counters {
        let mut c = Counters::default();
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let key = |text: &str, k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.trim().parse::<u64>().ok()))
                .unwrap_or(0)
        };
        if let Some(m) = &self.memory {
            let (peak, events) = if self.v2 {
                ("memory.peak", read(m.join("memory.events")))
            } else {
                (
                    "memory.max_usage_in_bytes",
                    read(m.join("memory.oom_control")),
                )
            };
            c.memory_peak = read(m.join(peak)).trim().parse().ok();
            c.oom_kills = key(&events, "oom_kill ");
        }
        let pids_dir = if self.v2 {
            self.memory.as_ref()
        } else {
            self.pids.as_ref()
        };
        if let Some(p) = pids_dir {
            c.pids_refused = key(&read(p.join("pids.events")), "max ");
        }
        c
    }

    fn remove(&mut self) {
        let dirs: Vec<PathBuf> = self
            .memory
            .take()
            .into_iter()
            .chain(self.pids.take())
            .collect();
        for dir in dirs {
            if self.v2 {
                let _ = std::fs::write(dir.join("cgroup.kill"), b"1");
            }
            for _ in 0..200 {
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                // A process of another PID namespace may be listed as 0, which `kill` would
                // read as our own process group: `ProcessId` refuses it.
                for pid in procs
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                    .filter_map(ProcessId::new)
                {
                    let _ = pid.signal(Signal::KILL);
                }
                if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        self.remove();
    }
}

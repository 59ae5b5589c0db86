//! Finding and killing every process of a run, including daemons that left the tree.
//!
//! cordon makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process whose parent
//! dies is re-parented to cordon instead of init, so double-forked daemons stay reachable.
//! The tree is read from `/proc/<pid>/stat` (parent, session, state) — this kernel may lack
//! `/proc/<pid>/task/<tid>/children`, so the whole table is scanned, which costs well under a
//! millisecond for a few hundred processes.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, Once};
use std::time::Duration;

use rustix::process::{Signal, getpid};

use crate::pid::ProcessId;

/// One row of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcInfo {
    pub pid: i32,
    pub ppid: i32,
    pub sid: i32,
    pub zombie: bool,
}

/// The direct children that runs of this process spawned and still supervise.
static ACTIVE_RUNS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static SUBREAPER: Once = Once::new();

/// Makes this process the subreaper of its descendants (once per process).
pub(crate) fn become_subreaper() {
    SUBREAPER.call_once(|| {
        // Failure leaves orphans to init; the tree kill then only reaches the live tree.
        let _ = rustix::process::set_child_subreaper(Some(getpid()));
    });
}

/// Registers a run's direct child; unregistered on drop.
pub(crate) struct ActiveRun {
    pid: i32,
}

impl ActiveRun {
    pub(crate) fn register(pid: i32) -> Self {
        lock_runs().push(pid);
        ActiveRun { pid }
    }

    /// Number of runs active in this process right now (this one included).
    pub(crate) fn count() -> usize {
        lock_runs().len()
    }

    /// Direct children of other active runs.
    fn others(&self) -> Vec<i32> {
        lock_runs()
            .iter()
            .copied()
            .filter(|&p| p != self.pid)
            .collect()
    }
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        lock_runs().retain(|&p| p != self.pid);
    }
}

fn lock_runs() -> std::sync::MutexGuard<'static, Vec<i32>> {
    ACTIVE_RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parses the fields cordon needs from the text of `/proc/<pid>/stat`.
pub(crate) fn parse_stat(pid: i32, text: &[u8]) -> Option<ProcInfo> {
    use cordon_types::proc_stat;
    Some(ProcInfo {
        pid,
        ppid: proc_stat::number(text, 4)?,
        sid: proc_stat::number(text, 6)?,
        zombie: proc_stat::has_ended(text),
    })
}

/// Reads the process table: the rows with a pid at or above `floor` when that is provably
/// enough, else all of them.
///
/// Every descendant of a run was created after the run's root, so while the kernel's pid
/// counter has not wrapped since (`ns_last_pid` still at or above the root's pid) every member
/// has a pid in `floor..=ns_last_pid`, and the other rows need not be read. Callers pass no
/// floor when the run lasted long enough for the counter to have gone all the way around.
pub(crate) fn scan(floor: Option<i32>) -> Vec<ProcInfo> {
    let range = floor.and_then(|floor| {
        let last: i32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (last >= floor).then_some(floor..=last)
    });
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut table = Vec::with_capacity(64);
    let mut text = Vec::with_capacity(512);
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if range.as_ref().is_some_and(|r| !r.contains(&pid)) {
            continue;
        }
        text.clear();
        let Ok(mut file) = std::fs::File::open(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Bytes: a command name need not be UTF-8 (`PR_SET_NAME` takes any bytes).
        if std::io::Read::read_to_end(&mut file, &mut text).is_err() {
            continue;
        }
        if let Some(info) = parse_stat(pid, &text) {
            table.push(info);
        }
    }
    table
}

/// The live direct children of `parent`.
pub fn children_of(parent: i32) -> Vec<i32> {
    scan(None)
        .into_iter()
        .filter(|p| p.ppid == parent && !p.zombie)
        .map(|p| p.pid)
        .collect()
}

/// `root` and every live process below it (children, their children, …), `root` first. A
/// process that left the tree (re-parented after its parent died) is not found here.
pub fn descendants_of(root: i32) -> Vec<i32> {
    let all = scan(None);
    let mut tree = vec![root];
    let mut seen = std::collections::HashSet::from([root]);
    let mut next = 0;
    while next < tree.len() {
        let parent = tree[next];
        for child in all.iter().filter(|p| p.ppid == parent && !p.zombie) {
            if seen.insert(child.pid) {
                tree.push(child.pid);
            }
        }
        next += 1;
    }
    tree
}

/// Which processes belong to one run.
pub(crate) struct Tree<'a> {
    /// The run's direct child (alive or not yet reaped).
    pub root: i32,
    /// The session of the run: the root called `setsid`, so this is the root's pid.
    pub sid: i32,
    /// Orphans re-parented to this process belong to this run whatever their session.
    pub exclusive: bool,
    pub run: &'a ActiveRun,
    /// When the run started: after a long run the pid counter may have wrapped.
    pub started: std::time::Instant,
}

/// Whether the kernel's pid space is large enough (4M) that it cannot wrap within
/// [`PID_WRAP_SAFE`].
fn large_pid_space() -> bool {
    static LARGE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LARGE.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .is_some_and(|max| max >= 1 << 22)
    })
}

/// After this long, assume the pid counter may have wrapped and read the whole table.
const PID_WRAP_SAFE: Duration = Duration::from_secs(10);

impl Tree<'_> {
    fn table(&self) -> Vec<ProcInfo> {
        // The pid-range shortcut is only sound while the pid counter cannot have wrapped: a
        // large pid space (a fork-heavy program needs ~40 s to go around 4M pids) and a short
        // run. With a small `pid_max` (32768 on many hosts) every row is read.
        let floor =
            (large_pid_space() && self.started.elapsed() < PID_WRAP_SAFE).then_some(self.root);
        scan(floor)
    }

    /// The run's processes: the root's descendants and the orphans attributed to the run.
    /// The root itself is not included.
    pub(crate) fn members(&self, table: &[ProcInfo]) -> Vec<ProcInfo> {
        let me = getpid().as_raw_nonzero().get();
        let others: HashSet<i32> = self.run.others().into_iter().collect();
        let mut children: HashMap<i32, Vec<&ProcInfo>> = HashMap::new();
        for p in table {
            children.entry(p.ppid).or_default().push(p);
        }
        let mut queue: Vec<i32> = vec![self.root];
        // Orphans that reached cordon through the subreaper.
        for p in children.get(&me).into_iter().flatten() {
            if p.pid == self.root || others.contains(&p.pid) {
                continue;
            }
            if self.exclusive || p.sid == self.sid {
                queue.push(p.pid);
            }
        }
        let mut seen: HashSet<i32> = HashSet::new();
        let mut members = Vec::new();
        while let Some(pid) = queue.pop() {
            if !seen.insert(pid) {
                continue;
            }
            if pid != self.root
                && let Some(info) = table.iter().find(|p| p.pid == pid)
            {
                members.push(*info);
            }
            for child in children.get(&pid).into_iter().flatten() {
                queue.push(child.pid);
            }
        }
        members
    }

    /// Sends `signal` to every live member (not the root). Returns how many were signalled.
    pub(crate) fn signal_members(&self, signal: Signal) -> usize {
        let table = self.table();
        let mut sent = 0;
        for p in self.members(&table) {
            if p.zombie {
                continue;
            }
            if ProcessId::new(p.pid).is_some_and(|pid| pid.signal(signal).is_ok()) {
                sent += 1;
            }
        }
        sent
    }

    /// Waits up to `limit` for the members to end by themselves (a supervisor's helpers that
    /// are already exiting); returns early when none is left.
    pub(crate) fn settle(&self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if !has_children() {
                return;
            }
            let table = self.table();
            if self.members(&table).iter().all(|p| p.zombie) {
                return;
            }
            if std::time::Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Kills every member (not the root) until none is left alive, reaping the orphans among
    /// them. Stops processes first so a fork bomb cannot outrun the sweep. Returns the number
    /// of distinct processes killed.
    pub(crate) fn kill_members(&self) -> usize {
        // Every live member is the root's descendant or an orphan re-parented to this process
        // (the subreaper): with no child at all (the root reaped, nothing adopted) there is
        // none, and the process table need not be read.
        if !has_children() {
            return 0;
        }
        let me = getpid().as_raw_nonzero().get();
        let mut killed: HashSet<i32> = HashSet::new();
        for round in 0..200 {
            let table = self.table();
            let members = self.members(&table);
            let live: Vec<&ProcInfo> = members.iter().filter(|p| !p.zombie).collect();
            for p in &members {
                if p.zombie && p.ppid == me {
                    reap_nohang(p.pid);
                }
            }
            if live.is_empty() {
                if round == 0 && members.is_empty() {
                    return 0;
                }
                break;
            }
            for p in &live {
                if let Some(pid) = ProcessId::new(p.pid) {
                    let _ = pid.signal(Signal::STOP);
                }
            }
            for p in &live {
                if ProcessId::new(p.pid).is_some_and(|pid| pid.signal(Signal::KILL).is_ok()) {
                    killed.insert(p.pid);
                }
            }
            if round > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Orphans killed above are our children: reap what has died since.
        for p in self.members(&self.table()) {
            if p.zombie && p.ppid == me {
                reap_nohang(p.pid);
            }
        }
        killed.len()
    }
}

/// Whether this process has any child, live or zombie (without reaping any).
fn has_children() -> bool {
    // SAFETY: an all-zero siginfo is valid; waitid fills it. WNOWAIT leaves children as they are.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer; P_ALL ignores the id.
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
}

/// Reaps `pid` if it is a zombie child of this process (`waitpid` would read 0 or a negative
/// id as "any child of a group": those are refused).
fn reap_nohang(pid: i32) {
    let Some(pid) = ProcessId::new(pid) else {
        return;
    };
    let mut status = 0;
    // SAFETY: waitpid on one positive pid with WNOHANG; `status` is a valid out-pointer.
    unsafe {
        libc::waitpid(pid.get(), &mut status, libc::WNOHANG);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_hostile_command_names() {
        let text = b"1234 (evil) S 1 2 3 (x) Z 99 7 7 0) R 42 4242 4242 0 -1";
        let info = parse_stat(1234, text).expect("parses");
        assert_eq!(
            info,
            ProcInfo {
                pid: 1234,
                ppid: 42,
                sid: 4242,
                zombie: false
            }
        );
        let zombie = parse_stat(5, b"5 (a b) Z 1 5 5 0").expect("parses");
        assert!(zombie.zombie);
        let odd = parse_stat(6, b"6 (\xff\xfe) S 1 6 6 0").expect("parses");
        assert_eq!(odd.sid, 6);
        assert_eq!(parse_stat(5, b"garbage"), None);
    }

    #[test]
    fn scan_finds_this_process() {
        let me = getpid().as_raw_nonzero().get();
        assert!(scan(None).iter().any(|p| p.pid == me));
        assert!(scan(Some(me)).iter().any(|p| p.pid == me));
    }
}

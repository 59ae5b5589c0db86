//! The landlock tier: a sandbox without namespaces, for where none can be created (inside a
//! cordon sandbox, in a container whose seccomp profile refuses `CLONE_NEWUSER`, on a host
//! whose AppArmor restricts user namespaces).
//!
//! The outer helper is the supervisor itself, top to bottom in [`run`]: it becomes a child
//! subreaper (every orphan of the program's tree is re-parented to it, whatever `setsid` or
//! double fork the program does), forks the program's process, places it in the cgroups,
//! lets it go on, waits for it, and then kills and counts whatever of its tree is left. The
//! program's process confines itself exactly as in the namespace tier (`child::exec`: its
//! own session, no privileges, Landlock, seccomp, then `execve`); what the namespaces gave is
//! replaced where something can replace it: the files by Landlock rules on the host's own
//! paths, the network by seccomp's socket families and Landlock's TCP rules, a private home
//! and temporary directory by environment variables pointing at cordon's own directories.
//! What cannot be replaced (a private `/proc`, a private PID space, a loopback of its own)
//! is said in every result (`sandbox.not_enforced`).

use std::collections::HashSet;

use cordon_types::ChildReport;
use rustix::process::Signal;

use crate::cgroup::Cgroups;
use crate::error::Setup;
use crate::leftovers::{has_children, reap};
use crate::outer::{Prepared, read_status, report};
use crate::pid::ProcessId;
use crate::status::{self, Exit};
use crate::{child, sys};

/// Rounds of stop-and-kill of the leftovers before giving up (a fork bomb that outruns one
/// sweep is stopped by the next).
const ROUNDS: usize = 200;

/// Runs the program under the plan, without namespaces; returns what to report.
pub fn run(prepared: &Prepared, cgroups: Option<Cgroups>) -> Setup<ChildReport> {
    // 1. Every orphan of the program's tree comes to us.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("become the sandbox's subreaper: {e}"))?;
    let (go_r, go_w) = sys::pipe()?;
    let (status_r, status_w) = sys::pipe()?;
    // 2. The program's process. This process is single-threaded: `fork` is sound, and the
    //    child only waits for the go, confines itself and executes the program.
    // SAFETY: see above.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        sys::close(go_w);
        sys::close(status_r);
        sys::close(cordon_types::CHILD_REPORT_FD);
        let mut byte = [0u8; 1];
        // SAFETY: reading one byte into a live buffer.
        let n = unsafe { libc::read(go_r, byte.as_mut_ptr().cast(), 1) };
        sys::close(go_r);
        if n != 1 {
            status::send_error(
                status_w,
                status::FailureKind::Setup,
                "the helper went away before the program could start",
            );
            sys::exit_now(127)
        }
        child::exec(prepared, status_w)
    }
    let program = ProcessId::new(pid).ok_or_else(|| {
        format!(
            "fork the program's process: {}",
            std::io::Error::last_os_error()
        )
    })?;
    sys::close(go_r);
    sys::close(status_w);
    // 3. Into the cgroups before it runs anything, then go.
    if let Some(cg) = &cgroups
        && let Err(e) = cg.add(program)
    {
        let _ = program.signal(Signal::KILL);
        // SAFETY: reaping our own child, without a status pointer.
        unsafe { libc::waitpid(program.get(), std::ptr::null_mut(), 0) };
        return Err(e);
    }
    sys::write_all(go_w, b"1");
    sys::close(go_w);
    // 4. Its end (reaping every orphan that reaches us meanwhile), then what it left behind.
    let mut exit = wait_for(program);
    exit.leftovers_killed = kill_leftovers();
    let mut received = read_status(status_r);
    received.exit = Some(exit);
    let counters = cgroups.map(Cgroups::finish).unwrap_or_default();
    Ok(report(&prepared.plan, &received, 0, counters))
}

/// Waits for the program's process, reaping every other child that ends meanwhile (orphans
/// of its tree); its exit status and resource usage.
fn wait_for(program: ProcessId) -> Exit {
    loop {
        let mut st = 0;
        // SAFETY: a zeroed rusage is a valid out-buffer.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers.
        let pid = unsafe { libc::wait4(-1, &mut st, libc::__WALL, &mut ru) };
        if pid < 0 {
            if sys::errno() == libc::EINTR {
                continue;
            }
            // No child at all: the program cannot have been ours (never happens).
            return Exit {
                code: None,
                signal: Some(libc::SIGKILL),
                rusage: cordon_types::ChildRusage::default(),
                leftovers_killed: 0,
            };
        }
        if pid == program.get() {
            let us = |t: libc::timeval| {
                u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000
                    + u64::try_from(t.tv_usec).unwrap_or(0)
            };
            return Exit {
                code: libc::WIFEXITED(st).then(|| libc::WEXITSTATUS(st)),
                signal: libc::WIFSIGNALED(st).then(|| libc::WTERMSIG(st)),
                rusage: cordon_types::ChildRusage {
                    user_us: us(ru.ru_utime),
                    sys_us: us(ru.ru_stime),
                    max_rss_bytes: u64::try_from(ru.ru_maxrss).unwrap_or(0) * 1024,
                },
                leftovers_killed: 0,
            };
        }
    }
}

/// Kills every process still alive of the program's tree (as subreaper, this process is the
/// parent of every orphan; the tree is this process's descendants), stopping them first so
/// that none forks meanwhile, and reaps them all; how many distinct ones were killed.
fn kill_leftovers() -> u32 {
    // Every descendant has an ancestor among this process's children (orphans are re-parented
    // to it): with no child left, live or unreaped, the tree is empty and `/proc` (every
    // process of the host) need not be read.
    reap();
    if !has_children() {
        return 0;
    }
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut killed: HashSet<i32> = HashSet::new();
    for _ in 0..ROUNDS {
        reap();
        let live = descendants(me);
        if live.is_empty() {
            break;
        }
        for pid in &live {
            let _ = pid.signal(Signal::STOP);
        }
        for pid in &live {
            if pid.signal(Signal::KILL).is_ok() {
                killed.insert(pid.get());
            }
        }
    }
    // Whatever is still a child is dead or dying: wait for each.
    loop {
        // SAFETY: waitpid with a null status pointer only reaps.
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::__WALL) };
        if r < 0 && sys::errno() != libc::EINTR {
            break;
        }
    }
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// The live descendants of `root`, from the host's `/proc`.
fn descendants(root: i32) -> Vec<ProcessId> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let table: Vec<(i32, i32, bool)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
            let ppid = cordon_types::proc_stat::number::<i32>(&stat, 4)?;
            Some((pid, ppid, cordon_types::proc_stat::has_ended(&stat)))
        })
        .collect();
    let mut found = Vec::new();
    let mut queue = vec![root];
    let mut seen = HashSet::new();
    while let Some(parent) = queue.pop() {
        for &(pid, ppid, ended) in &table {
            if ppid == parent && seen.insert(pid) {
                queue.push(pid);
                if !ended && let Some(p) = ProcessId::new(pid) {
                    found.push(p);
                }
            }
        }
    }
    found
}

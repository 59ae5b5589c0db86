//! What PID 1 does when the program has ended: kill every process still alive in the
//! sandbox's PID namespace, and count them (the run result's `leaked.processes_killed`).
//!
//! PID 1's own exit would end them too (the kernel kills a PID namespace whose init dies), but
//! silently; killing them here makes the count exact and the report arrive when they are gone.

use std::collections::HashSet;
use std::path::Path;

use rustix::process::Signal;

use crate::pid::ProcessId;

/// Rounds of stop-and-kill before giving up (a fork bomb that outruns one sweep is stopped
/// by the next).
const ROUNDS: usize = 200;

/// Kills every live process of the namespace except PID 1; returns how many distinct ones.
/// `proc` is the namespace's own procfs (`/proc` inside the sandbox).
pub fn kill_all(proc: &Path) -> u32 {
    // Every process of a PID namespace descends from its PID 1 (an orphan is re-parented
    // to PID 1, or to a subreaper that itself descends from it; nothing can join from
    // outside: setns is refused): when PID 1 has no child left, the namespace is empty and
    // its process table need not be read.
    reap();
    if !has_children() {
        return 0;
    }
    let mut killed: HashSet<i32> = HashSet::new();
    for round in 0..ROUNDS {
        reap();
        let live = live_processes(proc);
        if live.is_empty() {
            break;
        }
        // Stopped first, so that none forks while the others are being killed.
        for pid in &live {
            let _ = pid.signal(Signal::STOP);
        }
        for pid in &live {
            if pid.signal(Signal::KILL).is_ok() {
                killed.insert(pid.get());
            }
        }
        if round > 0 {
            std::thread::yield_now();
        }
    }
    reap();
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// The live processes of the namespace other than PID 1 (zombies are already dead).
fn live_processes(proc: &Path) -> Vec<ProcessId> {
    let Ok(dir) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != 1)
        .filter(|pid| {
            // Bytes: a command name need not be UTF-8 (`PR_SET_NAME` takes any bytes).
            std::fs::read(proc.join(pid.to_string()).join("stat"))
                .is_ok_and(|stat| !cordon_types::proc_stat::has_ended(&stat))
        })
        .filter_map(ProcessId::new)
        .collect()
}

/// The backstop after [`kill_all`]: SIGKILL to every process of the namespace (`kill(-1)`
/// from its PID 1 reaches all but PID 1 itself, whatever `/proc` shows, and however many
/// rounds the sweep took), then every child reaped, blocking until none is left: nothing of
/// the sandbox outlives PID 1's report, and the CPU time of all of it is counted in it.
/// (What it kills is not counted as a leftover: those the sweep killed are still dying.)
pub fn kill_and_reap_the_rest() {
    // SAFETY: a signal to every process PID 1 may signal; no memory is involved.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    loop {
        // SAFETY: waitpid with a null status pointer only reaps.
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::__WALL) };
        if r < 0 && crate::sys::errno() != libc::EINTR {
            return;
        }
    }
}

/// Whether this process has any child, live or not yet reaped.
pub(crate) fn has_children() -> bool {
    // SAFETY: an all-zero siginfo is a valid out-buffer; WNOWAIT leaves children as they are.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer; P_ALL ignores the id.
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    !(r == -1 && crate::sys::errno() == libc::ECHILD)
}

/// Reaps every child that has ended without waiting (orphans of the namespace are PID 1's
/// children; in the landlock tier, orphans of the program's tree are the helper's).
pub(crate) fn reap() {
    loop {
        // SAFETY: waitpid with a null status pointer and WNOHANG only reaps.
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG | libc::__WALL) };
        if r <= 0 {
            return;
        }
    }
}

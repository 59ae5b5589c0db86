//! PID 1 of the sandbox's PID namespace: builds the root, starts the program, reaps every
//! orphan, forwards termination signals, kills what is left when the program ends, and
//! reports how it ended.

use std::path::Path;

use cordon_types::ChildRusage;
use rustix::process::Signal;

use crate::error::Setup;
use crate::outer::Prepared;
use crate::pid::{ProcessGroup, ProcessId};
use crate::status::{self, Exit};
use crate::{child, leftovers, mounts, network, sys};

/// Signals PID 1 forwards to the program's process group.
const FORWARDED: &[Signal] = &[
    Signal::TERM,
    Signal::INT,
    Signal::HUP,
    Signal::QUIT,
    Signal::USR1,
    Signal::USR2,
];

/// Runs in the cloned child (new namespaces) of the outer helper, to which it reports on
/// `status_fd`; never returns.
pub fn run(p: &Prepared, sync_fd: i32, status_fd: i32) -> ! {
    match start_and_wait(p, sync_fd, status_fd) {
        Ok(exit) => {
            status::send_exit(status_fd, &exit);
            sys::exit_now(0)
        }
        Err(message) => {
            status::send_error(status_fd, status::FailureKind::Setup, &message);
            sys::exit_now(1)
        }
    }
}

/// Builds the sandbox, starts the program and waits for it; returns how it ended, or why it
/// could not be started. (The program's process reports its own failures on `status_fd`.)
fn start_and_wait(p: &Prepared, sync_fd: i32, status_fd: i32) -> Result<Exit, String> {
    setup(p, sync_fd).map_err(|e| e.to_string())?;
    let set = signal_set();
    let mut old = sys::empty_sigset();
    // SAFETY: valid sigset pointers.
    unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) };
    // SAFETY: this process is single-threaded; the child only sets itself up and execs or
    // `_exit`s.
    let pid = unsafe { libc::fork() };
    let Some(program) = ProcessId::new(pid) else {
        if pid == 0 {
            // SAFETY: restores the inherited signal mask.
            unsafe { libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
            child::exec(p, status_fd)
        }
        return Err(format!(
            "fork the program: {}",
            std::io::Error::last_os_error()
        ));
    };
    let mut exit = supervise(program, &set);
    exit.leftovers_killed = leftovers::kill_all(Path::new("/proc"));
    leftovers::kill_and_reap_the_rest();
    Ok(exit)
}

/// PID 1's half of the set-up, top to bottom: wait for the outer helper, then build the
/// sandbox's world (cgroup view, network, root, proxy socket, host name).
fn setup(p: &Prepared, sync_fd: i32) -> Setup<()> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| format!("set the parent-death signal: {e}"))?;
    // Wait until the outer helper wrote our uid/gid maps and placed us in the cgroups.
    let mut byte = [0u8; 1];
    // SAFETY: reading one byte into a live buffer.
    let n = unsafe { libc::read(sync_fd, byte.as_mut_ptr().cast(), 1) };
    sys::close(sync_fd);
    if n != 1 {
        return Err("the outer helper went away before the sandbox was ready".into());
    }
    // Nothing of PID 1's memory (the plan, the program's environment) is the program's
    // business: no core dump, and the `/proc/1` files that expose memory belong to the host's
    // root. Only now: the uid and gid maps are written.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| format!("make the supervisor non-dumpable: {e}"))?;
    // A cgroup namespace rooted at the cgroup the outer helper placed us in.
    // SAFETY: integer argument only.
    let r = unsafe { libc::unshare(libc::CLONE_NEWCGROUP) };
    sys::check(r.into(), || "create the cgroup namespace".into())?;
    if p.plan.private_network {
        network::loopback_up()?;
    }
    mounts::build(&p.plan.mounts, &p.plan.noexec)?;
    if let Some(port) = p.plan.proxy_port {
        crate::proxy_socket::hand_over(port)?;
    }
    let name = mounts::HOSTNAME.as_bytes();
    // SAFETY: valid buffer of the given length.
    let r = unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
    sys::check(r.into(), || "set the host name".into())?;
    Ok(())
}

fn signal_set() -> libc::sigset_t {
    let mut s = sys::empty_sigset();
    for sig in FORWARDED.iter().map(|s| s.as_raw()).chain([libc::SIGCHLD]) {
        // SAFETY: `s` is initialized.
        unsafe { libc::sigaddset(&mut s, sig) };
    }
    s
}

/// Waits for signals: reaps every child (orphans included), forwards termination signals to
/// the program's process group, and returns when the program itself has ended.
fn supervise(program: ProcessId, set: &libc::sigset_t) -> Exit {
    // The program called `setsid`: its group id is its pid, never 1 (that is us).
    let group = ProcessGroup::new(program.get());
    loop {
        if let Some(exit) = reap(program) {
            return exit;
        }
        // SAFETY: a zeroed siginfo is a valid out-buffer.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid set and out-buffer.
        let sig = unsafe { libc::sigwaitinfo(set, &mut info) };
        if let Some(sig) = FORWARDED.iter().find(|s| s.as_raw() == sig) {
            if let Some(group) = group {
                let _ = group.signal(*sig);
            }
            let _ = program.signal(*sig);
        }
    }
}

fn reap(program: ProcessId) -> Option<Exit> {
    let mut found = None;
    loop {
        let mut st = 0;
        // SAFETY: a zeroed rusage is a valid out-buffer.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers.
        let pid = unsafe { libc::wait4(-1, &mut st, libc::WNOHANG | libc::__WALL, &mut ru) };
        if pid <= 0 {
            return found;
        }
        if pid == program.get() {
            let us = |t: libc::timeval| {
                u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000
                    + u64::try_from(t.tv_usec).unwrap_or(0)
            };
            found = Some(Exit {
                code: libc::WIFEXITED(st).then(|| libc::WEXITSTATUS(st)),
                signal: libc::WIFSIGNALED(st).then(|| libc::WTERMSIG(st)),
                rusage: ChildRusage {
                    user_us: us(ru.ru_utime),
                    sys_us: us(ru.ru_stime),
                    max_rss_bytes: u64::try_from(ru.ru_maxrss).unwrap_or(0) * 1024,
                },
                leftovers_killed: 0,
            });
        }
    }
}

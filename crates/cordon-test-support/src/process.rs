//! Processes seen from outside: pids written by test programs, liveness in `/proc`, signals,
//! and bounded waits.

use std::path::Path;
use std::time::{Duration, Instant};

/// Reads a pid written by a test program.
pub fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

/// Whether `pid` is a live (not zombie) process.
pub fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
            !matches!(state, Some('Z' | 'X'))
        }
        Err(_) => false,
    }
}

/// Waits up to `limit` for `pid` to die; true if it did (else kills it and returns false).
pub fn wait_dead(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !is_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if is_alive(pid) {
        signal(pid, libc::SIGKILL);
        return false;
    }
    true
}

/// Polls `done` every 10 ms until it holds; fails the test naming `what` after `limit` (a
/// generous bound: only a hang reaches it).
#[track_caller]
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `pid` is not only dead but reaped by its parent (gone from /proc).
#[track_caller]
pub fn wait_reaped(pid: i32, limit: Duration) {
    wait_until(&format!("process {pid} reaped"), limit, || {
        !Path::new(&format!("/proc/{pid}")).exists()
    });
}

/// Sends `sig` to `pid`.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: plain kill(2).
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Waits for child `pid`; returns its exit code and peak RSS in bytes.
pub fn wait4(pid: i32) -> (i32, u64) {
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills both out-pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    (libc::WEXITSTATUS(status), usage.ru_maxrss as u64 * 1024)
}

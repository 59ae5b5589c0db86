//! Shared helpers for the integration tests: the real binary, temp dirs, process checks.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cordon_types::RunResult;

/// The real `cordon` binary.
pub fn cordon() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cordon"));
    // Tests keep their workspaces and run history out of the user's: one shared throw-away
    // home (concurrent use of one home is part of what cordon supports); a test that needs
    // its own sets CORDON_HOME again.
    command.env(
        "CORDON_HOME",
        std::env::temp_dir().join("cordon-tests-home"),
    );
    command
}

/// Runs `cordon run --json ARGS`, parses the result, returns it with cordon's exit code.
pub fn run_json(args: &[&str]) -> (RunResult, i32) {
    let out = cordon()
        .arg("run")
        .arg("--json")
        .args(args)
        .output()
        .expect("cordon starts");
    let result: RunResult = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no run result ({e}); stdout: {} stderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (result, out.status.code().expect("cordon exited normally"))
}

/// A temporary directory removed at the end of the test.
pub struct TestDir(tempfile::TempDir);

impl TestDir {
    pub fn new() -> Self {
        TestDir(tempfile::tempdir().expect("temp dir"))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

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

/// Waits up to `limit` for `pid` to die; true if it did.
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

/// Runs git in `dir` (with an identity for commits); panics on failure; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

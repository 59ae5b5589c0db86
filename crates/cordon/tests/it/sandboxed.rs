//! Running the real `cordon run --json` sandboxed, for the sandbox escape suite, the limits
//! and the network tests: skip (with the reason) only when `cordon doctor` says the host lacks
//! a feature — and fail instead in CI or with `CORDON_REQUIRE_SANDBOX=1` (see
//! `support::capabilities_required`).

use std::path::{Path, PathBuf};

use cordon_types::RunResult;

/// The real `cordon` binary with the tests' throw-away `CORDON_HOME`, `cordon doctor`, and
/// whether the host can sandbox (failing instead of skipping when that is required).
pub use crate::support::{
    cgroup_limits_available, cordon, doctor, error_document, missing_capability, sandbox_available,
    wait_until,
};

/// Returns from the test (after printing why) when the sandbox is unavailable; fails it
/// instead when capabilities are required.
macro_rules! require_sandbox {
    () => {
        if !$crate::sandboxed::sandbox_available() {
            return;
        }
    };
}
pub(crate) use require_sandbox;

/// What one `cordon run --json` did.
#[derive(Debug)]
pub struct Ran {
    /// The parsed run result.
    pub result: RunResult,
    /// cordon's exit code.
    pub code: i32,
    /// cordon's stderr.
    #[expect(
        dead_code,
        reason = "shown by the failure messages, which print the whole `Ran`"
    )]
    pub stderr: String,
}

impl Ran {
    /// The program's stdout.
    pub fn stdout(&self) -> &str {
        &self.result.stdout.head
    }
}

/// A script that prints the program's network namespace, its PID, then every other PID it
/// sees (the shell's glob and `test` run in the shell itself). Checked by
/// [`private_network_and_pid`].
pub const NETNS_AND_PIDS: &str = "readlink /proc/self/ns/net; echo $$; \
    for d in /proc/[0-9]*; do test \"$d\" = /proc/$$ || echo \"${d#/proc/}\"; done";

/// Checks what [`NETNS_AND_PIDS`] printed: the program ran in a network namespace of its own
/// (not this test's), and saw no process but PID 1 besides itself (no thread of PID 1 left in
/// the host's namespace). Returns the program's PID.
pub fn private_network_and_pid(ran: &Ran) -> String {
    assert_passed(ran);
    let lines: Vec<&str> = ran.stdout().lines().collect();
    let host = std::fs::read_link("/proc/self/ns/net").expect("this test's network namespace");
    assert!(
        lines.first().is_some_and(|ns| ns.starts_with("net:[")),
        "{ran:#?}"
    );
    assert_ne!(Path::new(lines[0]), host, "the host's namespace: {ran:#?}");
    assert_eq!(
        lines.get(2..),
        Some(&["1"][..]),
        "another process in the sandbox (a thread outlived the set-up?): {ran:#?}"
    );
    lines[1].to_owned()
}

/// A temporary working directory (under the host's /tmp), removed at the end.
pub struct Work(tempfile::TempDir);

impl Work {
    /// A fresh directory.
    pub fn new() -> Self {
        Work(tempfile::tempdir().expect("temp dir"))
    }

    /// Its canonical path.
    pub fn path(&self) -> PathBuf {
        self.0.path().canonicalize().unwrap()
    }

    /// `cordon run --json --cwd DIR FLAGS -- sh -c SCRIPT`.
    pub fn run(&self, flags: &[&str], script: &str) -> Ran {
        self.run_env(flags, script, &[])
    }

    /// Like [`Work::run`], with extra variables in cordon's own environment.
    pub fn run_env(&self, flags: &[&str], script: &str, env: &[(&str, &str)]) -> Ran {
        run_in(&self.path(), flags, &["sh", "-c", script], env)
    }
}

/// `cordon run --json --cwd DIR FLAGS -- COMMAND...`.
pub fn run_in(dir: &Path, flags: &[&str], command: &[&str], env: &[(&str, &str)]) -> Ran {
    let out = run_command(dir, flags, command)
        .envs(env.iter().copied())
        .output()
        .expect("cordon starts");
    ran(&out)
}

/// Starts `cordon run --json --cwd DIR FLAGS -- COMMAND...` with its stdout piped; finish it
/// with [`ran`] on `wait_with_output()`.
pub fn spawn_in(dir: &Path, flags: &[&str], command: &[&str]) -> std::process::Child {
    run_command(dir, flags, command)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cordon starts")
}

fn run_command(dir: &Path, flags: &[&str], command: &[&str]) -> std::process::Command {
    let mut cmd = cordon();
    cmd.arg("run")
        .arg("--json")
        .arg("--cwd")
        .arg(dir)
        .args(flags)
        .arg("--")
        .args(command)
        .stdin(std::process::Stdio::null());
    cmd
}

/// What `cordon run --json` printed and how it exited.
pub fn ran(out: &std::process::Output) -> Ran {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result: RunResult = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no run result ({e}); stdout: {} stderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    Ran {
        result,
        code: out.status.code().unwrap_or(-1),
        stderr,
    }
}

/// Asserts the sandboxed program ran and exited 0.
pub fn assert_passed(ran: &Ran) {
    assert_eq!(ran.result.exit_code, Some(0), "{ran:#?}");
    assert!(ran.result.sandbox.enabled, "{ran:#?}");
}

/// An argument for `sleep` that no other test process uses (`N.PID`: GNU sleep takes
/// fractions), so a test can find its own sleepers among the host's processes even when
/// another test run shares the machine.
pub fn unique_sleep(n: u32) -> String {
    format!("{n}.{}", std::process::id())
}

/// Host processes whose command line is exactly `argv` (NUL-separated).
pub fn host_processes_with_cmdline(argv: &[&str]) -> Vec<i32> {
    let mut wanted = argv.join("\0").into_bytes();
    wanted.push(0);
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_string_lossy()
                .parse::<i32>()
                .ok()
                .map(|pid| (pid, e.path()))
        })
        .filter(|(_, p)| std::fs::read(p.join("cmdline")).is_ok_and(|c| c == wanted))
        .map(|(pid, _)| pid)
        .collect()
}

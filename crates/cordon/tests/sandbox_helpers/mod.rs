//! Shared helpers of the sandbox escape suite: run the real `cordon run --json` sandboxed,
//! skip (with the reason) only when `cordon doctor` says the host lacks a feature.
// Each test binary uses a different subset, so `expect` would be unfulfilled in one of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cordon_types::RunResult;

#[path = "../support/mod.rs"]
mod support;

/// The real `cordon` binary, with the tests' throw-away `CORDON_HOME`.
pub use support::cordon;

/// `cordon doctor --json`, parsed once per test process.
pub fn doctor() -> &'static serde_json::Value {
    static DOCTOR: OnceLock<serde_json::Value> = OnceLock::new();
    DOCTOR.get_or_init(|| {
        let out = cordon()
            .args(["doctor", "--json"])
            .output()
            .expect("cordon doctor runs");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "cordon doctor --json printed no report ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    })
}

/// Whether the environment demands that the sandbox be tested (`CI=true` or
/// `CORDON_REQUIRE_SANDBOX=1`): then a host that cannot sandbox fails the test.
pub fn sandbox_required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("CORDON_REQUIRE_SANDBOX").is_ok_and(|v| v == "1")
}

/// Whether the default sandbox can run here; prints why not (and panics when the sandbox is
/// required).
pub fn sandbox_available() -> bool {
    let d = doctor();
    if d["default_policy_ok"] == true {
        return true;
    }
    let reason =
        format!("`cordon doctor` says the default sandbox policy cannot be enforced here: {d}");
    assert!(
        !sandbox_required(),
        "the sandbox is required (CI=true or CORDON_REQUIRE_SANDBOX=1) but {reason}"
    );
    eprintln!("SKIP: {reason}");
    false
}

/// Whether cgroup limits (memory, pids) can be enforced here; prints why not (and panics when
/// the sandbox is required).
pub fn cgroup_limits_available() -> bool {
    let d = doctor();
    if d["cgroup"]["limits"]["ok"] == true {
        return true;
    }
    let reason = format!(
        "`cordon doctor` says no cgroup can enforce memory/pids limits here: {}",
        d["cgroup"]
    );
    assert!(
        !sandbox_required(),
        "the sandbox is required (CI=true or CORDON_REQUIRE_SANDBOX=1) but {reason}"
    );
    eprintln!("SKIP: {reason}");
    false
}

/// Returns from the test (after printing why) when the sandbox is unavailable.
#[macro_export]
macro_rules! require_sandbox {
    () => {
        if !$crate::helpers::sandbox_available() {
            return;
        }
    };
}

/// What one `cordon run --json` did.
#[derive(Debug)]
pub struct Ran {
    /// The parsed run result.
    pub result: RunResult,
    /// cordon's exit code.
    pub code: i32,
    /// cordon's stderr.
    pub stderr: String,
}

impl Ran {
    /// The program's stdout.
    pub fn stdout(&self) -> &str {
        &self.result.stdout.head
    }
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
    let out = cordon()
        .arg("run")
        .arg("--json")
        .arg("--cwd")
        .arg(dir)
        .args(flags)
        .arg("--")
        .args(command)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("cordon starts");
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

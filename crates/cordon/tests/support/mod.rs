//! Shared helpers for the integration tests: the real binary, temp dirs, process checks, and
//! whether the host can sandbox.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cordon_types::RunResult;

pub mod error_document;

/// The real `cordon` binary, with this test run's throw-away `CORDON_HOME` (see
/// [`test_home`]); a test that needs a home of its own sets `CORDON_HOME` again.
pub fn cordon() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cordon"));
    command.env("CORDON_HOME", test_home());
    command
}

/// How long a home of an earlier test run is kept (for a look after a failure). A full run
/// leaves about 16 MiB (recorded transcripts).
const OLD_HOMES: Duration = Duration::from_secs(60 * 60);

/// The `CORDON_HOME` of this test run, out of the user's: `target/tmp/cordon-test-homes/RUN`,
/// where RUN is nextest's run id (so every test process of one `cargo nextest run` shares the
/// home: concurrent use of one home is part of what cordon supports), or this process's id
/// under plain `cargo test`. Made once per process; homes of runs older than an hour are
/// removed then, so they do not pile up.
pub fn test_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let homes = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cordon-test-homes");
        let run = std::env::var("NEXTEST_RUN_ID")
            .ok()
            .filter(|id| !id.is_empty() && !id.contains('/') && !id.starts_with('.'))
            .unwrap_or_else(|| format!("pid-{}", std::process::id()));
        remove_old_homes(&homes, &run);
        let home = homes.join(run);
        std::fs::create_dir_all(&home)
            .unwrap_or_else(|e| panic!("test home {}: {e}", home.display()));
        home
    })
}

fn remove_old_homes(homes: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(homes) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > OLD_HOMES));
        if old && entry.file_name() != current {
            // Another process of an old run may be removing it too.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether a host that cannot do what a test needs (user namespaces, Landlock, seccomp, cgroup
/// limits, ...) fails the test rather than skips it: in CI (`CI=true` or `CI=1`) and when
/// `CORDON_REQUIRE_SANDBOX=1` (which `scripts/test` sets).
pub fn capabilities_required() -> bool {
    let is = |name: &str, values: &[&str]| {
        std::env::var(name).is_ok_and(|v| values.contains(&v.as_str()))
    };
    is("CI", &["true", "1"]) || is("CORDON_REQUIRE_SANDBOX", &["1"])
}

/// The host lacks what the calling test needs: fails the test when capabilities are required
/// (see [`capabilities_required`]), else prints `SKIP: reason` (the caller then returns).
#[track_caller]
pub fn missing_capability(reason: &str) {
    assert!(
        !capabilities_required(),
        "{reason}\n(CI or CORDON_REQUIRE_SANDBOX=1 is set: this host must support it)"
    );
    eprintln!("SKIP: {reason}");
}

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

/// Whether the default sandbox can run here; when not, fails or skips (see
/// [`missing_capability`]).
#[track_caller]
pub fn sandbox_available() -> bool {
    let d = doctor();
    if d["default_policy_ok"] == true {
        return true;
    }
    missing_capability(&format!(
        "`cordon doctor` says the default sandbox policy cannot be enforced here: {d}"
    ));
    false
}

/// Whether cgroup limits (memory, pids) can be enforced here; when not, fails or skips.
#[track_caller]
pub fn cgroup_limits_available() -> bool {
    let d = doctor();
    if d["cgroup"]["limits"]["ok"] == true {
        return true;
    }
    missing_capability(&format!(
        "`cordon doctor` says no cgroup can enforce memory/pids limits here: {}",
        d["cgroup"]
    ));
    false
}

/// Defines a shell function `drained` for a test program: it returns once everything the
/// program wrote to stdout so far has been read by cordon (the pipe is empty), so the next
/// write reaches cordon in a later read. A program that splits a secret across two writes uses
/// it to make the split certain rather than likely. Needs python3 (for FIONREAD); without it
/// the program exits 97.
pub const DRAINED_SH: &str = "drained() { python3 -c 'import fcntl, struct, termios, time\n\
while struct.unpack(\"i\", fcntl.ioctl(1, termios.FIONREAD, bytes(4)))[0]: time.sleep(0.001)' \
    || { echo 'drained: python3 failed' >&2; exit 97; }; }; ";

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

/// A new repository `dir/repo` on branch `main` with `files` (path, contents) in one commit.
pub fn repo_with(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for (path, contents) in files {
        let path = repo.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, contents).unwrap();
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "init"]);
    repo
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

/// Whether overlay workspaces work here (`cordon doctor`); else the overlay cases fail (or
/// skip outside CI, as [`missing_capability`] decides).
pub fn overlay_available() -> bool {
    sandbox_available() && {
        let home = TestDir::new();
        let out = cordon()
            .env("CORDON_HOME", home.path())
            .args(["doctor", "--json"])
            .output()
            .unwrap();
        let doctor: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if doctor["workspaces"]["overlay"]["ok"] == true {
            true
        } else {
            missing_capability(&format!("overlay workspaces: {doctor}"));
            false
        }
    }
}

//! Limits and process trees under the sandbox, through the real `cordon run`: fork bombs,
//! memory hogs, CPU burners, huge files, daemons and SIGTERM-ignorers all end, the result
//! says which limit held, and the host is unharmed. Plus `cordon doctor` and the refusals.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cordon_types::{Enforcement, LimitKind, RunStatus};

use crate::sandboxed::{
    self, Work, assert_passed, host_processes_with_cmdline, require_sandbox, unique_sleep,
    wait_until,
};

#[test]
fn fork_bomb_is_contained_by_pids() {
    require_sandbox!();
    if !sandboxed::cgroup_limits_available() {
        return;
    }
    let w = Work::new();
    let start = Instant::now();
    let ran = w.run(
        &["--pids", "64", "--timeout", "5s"],
        "bomb() { bomb | bomb & }; bomb; sleep 1; echo survived",
    );
    assert!(ran.result.limits_hit.contains(&LimitKind::Pids), "{ran:#?}");
    assert!(
        matches!(
            ran.result.sandbox.enforcement.pids,
            Enforcement::CgroupV1 | Enforcement::CgroupV2
        ),
        "{ran:#?}"
    );
    assert!(start.elapsed() < Duration::from_secs(20), "{ran:#?}");
    // The host can still fork.
    assert!(
        std::process::Command::new("true")
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn memory_hog_is_ended_by_the_memory_limit() {
    require_sandbox!();
    if !sandboxed::cgroup_limits_available() {
        return;
    }
    let w = Work::new();
    let ran = w.run(
        &["--memory", "64MiB"],
        "python3 -c 'x = bytearray(1 << 30); print(len(x))'",
    );
    assert_ne!(ran.result.status, RunStatus::Pass, "{ran:#?}");
    assert!(
        ran.result.limits_hit.contains(&LimitKind::Memory),
        "{ran:#?}"
    );
    assert!(
        matches!(
            ran.result.sandbox.enforcement.memory,
            Enforcement::CgroupV1 | Enforcement::CgroupV2
        ),
        "{ran:#?}"
    );
    let peak = ran.result.resource.tree_peak_memory_bytes;
    assert!(peak.is_some_and(|p| p <= 70 << 20), "{ran:#?}");
}

#[test]
fn cpu_time_limit_ends_a_busy_loop() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(
        &["--cpu-time", "1s", "--timeout", "30s"],
        "while :; do :; done",
    );
    assert_ne!(ran.result.status, RunStatus::Pass, "{ran:#?}");
    assert!(ran.result.limits_hit.contains(&LimitKind::Cpu), "{ran:#?}");
    assert_eq!(ran.result.sandbox.enforcement.cpu, Enforcement::Rlimit);
}

#[test]
fn file_size_limit_stops_a_huge_write() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(
        &["--file-size", "1MiB"],
        "exec dd if=/dev/zero of=big bs=64K count=64",
    );
    assert_ne!(ran.result.status, RunStatus::Pass, "{ran:#?}");
    assert!(
        ran.result.limits_hit.contains(&LimitKind::FileSize),
        "{ran:#?}"
    );
    assert!(std::fs::metadata(w.path().join("big")).unwrap().len() <= 1 << 20);
}

#[test]
fn open_files_limit_applies() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(&["--open-files", "20"], "ulimit -n");
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "20\n", "{ran:#?}");
}

#[test]
fn daemons_and_sigterm_ignorers_die_with_the_sandbox() {
    require_sandbox!();
    let w = Work::new();
    let (daemon, ignorer) = (unique_sleep(33301), unique_sleep(33302));
    // The program leaves a double-forked daemon and a SIGTERM-ignorer behind, and exits once
    // the test has seen them all running (it creates `go`).
    let child = sandboxed::spawn_in(
        &w.path(),
        &[],
        &[
            "sh",
            "-c",
            &format!(
                "setsid sh -c 'sleep {daemon} & sleep {daemon}' </dev/null >/dev/null 2>&1 & \
                 (trap '' TERM; exec sleep {ignorer}) </dev/null >/dev/null 2>&1 & \
                 while [ ! -e go ]; do sleep 0.01; done; echo started"
            ),
        ],
    );
    wait_until("the leftovers run", Duration::from_secs(30), || {
        host_processes_with_cmdline(&["sleep", &daemon]).len() == 2
            && host_processes_with_cmdline(&["sleep", &ignorer]).len() == 1
    });
    std::fs::write(w.path().join("go"), "").unwrap();
    let ran = sandboxed::ran(&child.wait_with_output().unwrap());
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "started\n", "{ran:#?}");
    // Gone by the time cordon reports: the PID namespace's init took them with it.
    assert!(
        host_processes_with_cmdline(&["sleep", &daemon]).is_empty(),
        "a daemon survived"
    );
    assert!(
        host_processes_with_cmdline(&["sleep", &ignorer]).is_empty(),
        "a SIGTERM-ignorer survived"
    );
}

#[test]
fn timeout_ends_the_whole_sandboxed_tree() {
    require_sandbox!();
    let w = Work::new();
    let sleeper = unique_sleep(33303);
    let start = Instant::now();
    let child = sandboxed::spawn_in(
        &w.path(),
        &["--timeout", "2s", "--grace", "500ms"],
        &[
            "sh",
            "-c",
            &format!(
                "trap '' TERM; setsid sleep {sleeper} & (trap '' TERM; sleep {sleeper}) & sleep {sleeper}"
            ),
        ],
    );
    // The whole tree runs before the timeout fires (it has 2 s to start three processes).
    wait_until("the three sleeps run", Duration::from_secs(30), || {
        host_processes_with_cmdline(&["sleep", &sleeper]).len() == 3
    });
    let ran = sandboxed::ran(&child.wait_with_output().unwrap());
    assert_eq!(ran.result.status, RunStatus::Timeout, "{ran:#?}");
    assert!(start.elapsed() < Duration::from_secs(30), "{ran:#?}");
    assert!(
        host_processes_with_cmdline(&["sleep", &sleeper]).is_empty(),
        "a process outlived the timeout"
    );
}

#[test]
fn cgroups_are_removed_after_the_run() {
    require_sandbox!();
    if !sandboxed::cgroup_limits_available() {
        return;
    }
    let w = Work::new();
    let ran = w.run(&["--memory", "256MiB", "--pids", "100"], "true");
    assert_passed(&ran);
    let d = sandboxed::doctor();
    for key in ["v1_memory", "v1_pids"] {
        if let Some(dir) = d["cgroup"][key].as_str() {
            let leftovers: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .filter(|e| {
                    e.file_name().to_string_lossy().starts_with("cordon-") && e.path().is_dir()
                })
                .filter(|e| {
                    // Only groups of processes that are gone are leftovers (other tests run in parallel).
                    let pid = e
                        .file_name()
                        .to_string_lossy()
                        .trim_start_matches("cordon-")
                        .parse::<u32>()
                        .unwrap_or(0);
                    !std::path::Path::new(&format!("/proc/{pid}")).exists()
                })
                .collect();
            assert!(leftovers.is_empty(), "{leftovers:?}");
        }
    }
}

#[test]
fn limits_need_the_sandbox() {
    let w = Work::new();
    let out = sandboxed::cordon()
        .args(["run", "--no-sandbox", "--memory", "1GiB", "--", "true"])
        .current_dir(w.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--memory cannot be combined with --no-sandbox"),
        "{err}"
    );
}

#[test]
fn no_sandbox_runs_unisolated() {
    let w = Work::new();
    let ran = sandboxed::run_in(
        &w.path(),
        &["--no-sandbox"],
        &["sh", "-c", "test -d /sys/fs && echo host-view"],
        &[],
    );
    assert_eq!(ran.result.exit_code, Some(0), "{ran:#?}");
    assert!(!ran.result.sandbox.enabled);
    assert_eq!(ran.stdout(), "host-view\n");
}

#[test]
fn doctor_reports_truthfully() {
    let out = sandboxed::cordon()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["schema"], "cordon.doctor/v1");
    // The printed document has exactly the shape of the types (which `deny_unknown_fields`
    // and the schema drift test tie to schema/doctor.v1.json).
    serde_json::from_slice::<cordon_sandbox::DoctorReport>(&out.stdout)
        .unwrap_or_else(|e| panic!("not a cordon.doctor/v1 document ({e}): {d}"));
    let ok = d["default_policy_ok"] == true;
    assert_eq!(out.status.code(), Some(if ok { 0 } else { 1 }), "{d}");
    let abi = std::fs::read_to_string("/sys/kernel/security/lsm")
        .map(|l| l.contains("landlock"))
        .unwrap_or(true);
    if !abi {
        assert_eq!(d["landlock_abi"], 0, "{d}");
    }
    assert_eq!(d["bwrap_free"], true);
    // The helper it names is the one beside cordon.
    let helper = PathBuf::from(env!("CARGO_BIN_EXE_cordon-sandbox-init"));
    assert_eq!(d["helper"]["ok"], true, "{d:#}");
    assert_eq!(d["helper"]["detail"].as_str(), helper.to_str(), "{d:#}");
    // Whether a cgroup hierarchy is mounted with favordynmods, read here from the mount table
    // itself (the super block's options, after " - ").
    let favordynmods = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(" - ").map(|(_, fs)| fs.to_owned()))
        .any(|fs| {
            let mut words = fs.split(' ');
            let kind = words.next().unwrap_or("");
            kind.starts_with("cgroup")
                && words
                    .nth(1)
                    .is_some_and(|o| o.split(',').any(|o| o == "favordynmods"))
        });
    assert_eq!(d["cgroup"]["favordynmods"], favordynmods, "{d:#}");
    let human = sandboxed::cordon().arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("user namespaces") && text.contains("cordon run will enforce"),
        "{text}"
    );
    // The slow cgroup moves are named, with the fix, exactly when limits use cgroups without it.
    let slow_moves = d["cgroup"]["limits"]["ok"] == true && !favordynmods;
    assert_eq!(
        text.contains("cgroup moves:") && text.contains("favordynmods"),
        slow_moves,
        "{text}"
    );
}

#[test]
fn the_sandbox_dies_with_cordon() {
    require_sandbox!();
    let w = Work::new();
    let sleeper = unique_sleep(33304);
    let mut child = sandboxed::cordon()
        .args(["run", "--json", "--"])
        .args([
            "sh",
            "-c",
            &format!("setsid sleep {sleeper} & exec sleep {sleeper}"),
        ])
        .current_dir(w.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the sandboxed sleeps run", Duration::from_secs(30), || {
        host_processes_with_cmdline(&["sleep", &sleeper]).len() == 2
    });
    child.kill().unwrap();
    let _ = child.wait();
    // SIGKILLed, cordon cannot clean up: the helper's parent-death signal and the PID
    // namespace end the tree, shortly after.
    wait_until(
        "sandboxed processes gone after cordon died",
        Duration::from_secs(10),
        || host_processes_with_cmdline(&["sleep", &sleeper]).is_empty(),
    );
}

#[test]
fn cancelling_cordon_ends_the_sandboxed_tree() {
    require_sandbox!();
    let w = Work::new();
    let sleeper = unique_sleep(33305);
    let child = sandboxed::cordon()
        .args(["run", "--json", "--grace", "500ms", "--"])
        .args([
            "sh",
            "-c",
            &format!("trap '' TERM; setsid sleep {sleeper} & sleep {sleeper}"),
        ])
        .current_dir(w.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the sandboxed sleeps run", Duration::from_secs(30), || {
        host_processes_with_cmdline(&["sleep", &sleeper]).len() == 2
    });
    // SAFETY: signalling the cordon process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result.status, RunStatus::Cancelled, "{result:#?}");
    // The program did not exit 0: its own end (killed) or nothing, never the supervisor's.
    assert_eq!(result.exit_code, None, "{result:#?}");
    assert!(
        host_processes_with_cmdline(&["sleep", &sleeper]).is_empty(),
        "a sandboxed process survived cancellation"
    );
}

/// Regression (issue 39): a sandboxed run cancelled by Ctrl-C was recorded with
/// `"exit_code": 0`, the supervisor's own exit, as if the program had succeeded.
#[test]
fn a_cancelled_sandboxed_program_is_not_reported_as_exiting_0() {
    require_sandbox!();
    let w = Work::new();
    let sleeper = unique_sleep(33306);
    let child = sandboxed::cordon()
        .args(["run", "--json", "--", "sleep", &sleeper])
        .current_dir(w.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the sandboxed sleep runs", Duration::from_secs(30), || {
        host_processes_with_cmdline(&["sleep", &sleeper]).len() == 1
    });
    // SAFETY: signalling the cordon process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result.status, RunStatus::Cancelled, "{result:#?}");
    assert_ne!(result.exit_code, Some(0), "{result:#?}");
    assert!(
        result.exit_code.is_none(),
        "a killed program has no exit code: {result:#?}"
    );
}

/// The common case on a developer machine: cordon run by an unprivileged user (`nobody`,
/// reached with `setpriv` when the tests run as root; else the user running them), with no
/// writable cgroup: the default
/// policy holds, limits are refused unless `--allow-degraded cgroup`, and then enforced by
/// rlimits.
#[test]
fn an_unprivileged_user_gets_the_sandbox_and_rlimit_fallbacks() {
    require_sandbox!();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let w = Work::new();
    // As root, the test becomes `nobody` (setpriv) and runs a copy of cordon that `nobody`
    // can reach (the build's own may sit under a private home). Otherwise the tests already run
    // unprivileged: cordon runs as this user.
    let (uid, exe, _bin_dir) = if me == 0 {
        if std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_err()
        {
            sandboxed::missing_capability(
                "needs setpriv (util-linux) to become an unprivileged user",
            );
            return;
        }
        let bin_dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // cordon and its sandbox helper, side by side as installed.
        for (name, built) in [
            ("cordon", env!("CARGO_BIN_EXE_cordon")),
            (
                "cordon-sandbox-init",
                env!("CARGO_BIN_EXE_cordon-sandbox-init"),
            ),
        ] {
            let copy = bin_dir.path().join(name);
            if std::fs::hard_link(built, &copy).is_err() {
                std::fs::copy(built, &copy).unwrap();
            }
        }
        let exe = bin_dir.path().join("cordon");
        std::os::unix::fs::chown(w.path(), Some(65534), Some(65534)).unwrap();
        (65534, exe, Some(bin_dir))
    } else {
        (me, PathBuf::from(env!("CARGO_BIN_EXE_cordon")), None)
    };
    let unprivileged = |args: &[&str]| {
        let mut cmd = if me == 0 {
            let mut cmd = std::process::Command::new("setpriv");
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(&exe);
            cmd
        } else {
            std::process::Command::new(&exe)
        };
        cmd.args(args)
            .current_dir(w.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", w.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let run = |flags: &[&str], script: &str| {
        let mut args = vec!["run", "--json"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let out = unprivileged(&args);
        (
            out.status.code(),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run(
        &[],
        "id -u; echo x > f && cat f; grep CapEff /proc/self/status",
    );
    assert_eq!(code, Some(0), "{stderr}");
    let result: cordon_types::RunResult = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(
        result.stdout.head,
        format!("{uid}\nx\nCapEff:\t0000000000000000\n"),
        "{result:#?}"
    );
    assert!(
        result.sandbox.landlock_abi.is_some() && result.sandbox.seccomp,
        "{result:#?}"
    );
    // What the unprivileged user's own `cordon doctor` says about cgroups.
    let doctor = unprivileged(&["doctor", "--json"]);
    let doctor: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    if doctor["cgroup"]["limits"]["ok"] == true {
        // Not a missing capability: this host has more than the fallback needs.
        eprintln!("SKIP (rlimit part): cgroups are writable for unprivileged users here");
        return;
    }
    let (code, _, stderr) = run(&["--pids", "20"], "true");
    assert_eq!(code, Some(125), "{stderr}");
    assert!(stderr.contains("--allow-degraded cgroup"), "{stderr}");
    let (_, stdout, stderr) = run(
        &[
            "--pids",
            "20",
            "--memory",
            "64MiB",
            "--allow-degraded",
            "cgroup",
            "--timeout",
            "10s",
        ],
        "python3 -c '\nimport os, signal, time\nkids = []\ntry:\n    for _ in range(40):\n        pid = os.fork()\n        if pid == 0:\n            time.sleep(5)\n            os._exit(0)\n        kids.append(pid)\nexcept OSError:\n    print(\"forks-refused\")\nfor pid in kids:\n    os.kill(pid, signal.SIGKILL)\n    os.waitpid(pid, 0)\n'; python3 -c 'x = bytearray(1 << 30)' 2>/dev/null || echo alloc-refused",
    );
    let result: cordon_types::RunResult =
        serde_json::from_slice(&stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(
        result.sandbox.enforcement.pids,
        Enforcement::Rlimit,
        "{result:#?}"
    );
    assert_eq!(
        result.sandbox.enforcement.memory,
        Enforcement::Rlimit,
        "{result:#?}"
    );
    assert!(
        result.stdout.head.contains("forks-refused")
            && result.stdout.head.contains("alloc-refused"),
        "{result:#?}"
    );
}

//! `cordon run --no-sandbox`: the bounded-execution contract, tested on the real binary with
//! hostile programs (runaway output, SIGTERM-ignoring children, double-forked daemons,
//! grandchildren holding pipes open).

use std::time::{Duration, Instant};

use cordon_types::{FailureCategory, LimitKind, RunStatus};
use pretty_assertions::assert_eq;

use crate::support;
use crate::support::{
    TestDir, cordon, read_pid, run_json, sandbox_available, wait_dead, wait_until,
};

#[test]
fn passes_through_the_programs_exit_code() {
    for code in [0, 1, 3, 42, 123, 255] {
        let (result, exit) = run_json(&["--no-sandbox", "--", "sh", "-c", &format!("exit {code}")]);
        assert_eq!(exit, code, "exit code");
        assert_eq!(result.exit_code, Some(code));
        let expected = if code == 0 {
            RunStatus::Pass
        } else {
            RunStatus::Fail
        };
        assert_eq!(result.status, expected);
        if code != 0 {
            assert_eq!(result.failure.unwrap().category, FailureCategory::Exit);
        } else {
            assert_eq!(result.failure, None);
        }
    }
}

#[test]
fn death_by_signal_exits_128_plus_n() {
    let (result, exit) = run_json(&["--no-sandbox", "--", "sh", "-c", "kill -SEGV $$"]);
    assert_eq!(exit, 128 + 11);
    assert_eq!(result.signal.as_deref(), Some("SIGSEGV"));
    assert_eq!(result.exit_code, None);
    assert_eq!(result.status, RunStatus::Fail);
    assert_eq!(result.failure.unwrap().category, FailureCategory::Signal);
}

#[test]
fn missing_and_non_executable_programs() {
    let (result, exit) = run_json(&["--no-sandbox", "--", "/definitely/not/here"]);
    assert_eq!(exit, 127);
    assert_eq!(result.status, RunStatus::Error);
    let failure = result.failure.unwrap();
    assert_eq!(failure.category, FailureCategory::Infra);
    assert!(failure.reason.contains("not found"), "{}", failure.reason);

    let dir = TestDir::new();
    let script = dir.write("script.sh", "#!/bin/sh\necho hi\n");
    let (result, exit) = run_json(&["--no-sandbox", "--", script.to_str().unwrap()]);
    assert_eq!(exit, 126);
    assert_eq!(result.status, RunStatus::Error);

    // The same codes inside the sandbox.
    if !sandbox_available() {
        return;
    }
    let cwd = dir.path().to_str().unwrap();
    let (result, exit) = run_json(&["--cwd", cwd, "--", "/definitely/not/here"]);
    assert_eq!(exit, 127, "{result:?}");
    assert!(result.failure.unwrap().reason.contains("not found"));
    let (result, exit) = run_json(&["--cwd", cwd, "--", script.to_str().unwrap()]);
    assert_eq!(exit, 126, "{result:?}");
}

#[test]
fn bad_flags_exit_2_with_a_clear_message() {
    for args in [
        vec!["run", "--no-sandbox", "--timeout", "soon", "--", "true"],
        vec!["run", "--no-sandbox", "--timeout", "10", "--", "true"],
        vec![
            "run",
            "--no-sandbox",
            "--output-limit",
            "12XB",
            "--",
            "true",
        ],
        vec!["run", "--no-sandbox", "--env", "NOEQUALS", "--", "true"],
        vec!["run", "--no-sandbox", "--bogus", "--", "true"],
        vec!["run", "--no-sandbox"],
    ] {
        let out = cordon().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("error"), "{args:?}: {stderr}");
    }
    let out = cordon()
        .args(["run", "--no-sandbox", "--cwd", "/no/such/dir", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/dir"));
}

#[test]
fn timeout_kills_the_tree_and_exits_124() {
    let dir = TestDir::new();
    let pid_file = dir.path().join("child.pid");
    let started = Instant::now();
    let (result, exit) = run_json(&[
        "--no-sandbox",
        "--timeout",
        "300ms",
        "--grace",
        "300ms",
        "--",
        "sh",
        "-c",
        &format!(
            "sleep 30 & echo $! > {p}.tmp; mv {p}.tmp {p}; wait",
            p = pid_file.display()
        ),
    ]);
    assert_eq!(exit, 124);
    assert_eq!(result.status, RunStatus::Timeout);
    assert_eq!(result.limits_hit, vec![LimitKind::Timeout]);
    assert_eq!(result.failure.unwrap().category, FailureCategory::Timeout);
    assert!(started.elapsed() < Duration::from_secs(10), "does not hang");
    // The program's child went with it.
    let child = read_pid(&pid_file);
    assert!(
        wait_dead(child, Duration::from_secs(5)),
        "child {child} survived"
    );
}

#[test]
fn sigterm_ignoring_daemons_and_double_forks_die_on_timeout() {
    let dir = TestDir::new();
    let pids = dir.path().join("pids");
    // A child that ignores SIGTERM, and a double-forked setsid daemon that ignores it too.
    let script = format!(
        r#"trap '' TERM
sh -c 'trap "" TERM; echo $$ >> {p}; while :; do sleep 1; done' &
setsid sh -c 'sh -c "trap \"\" TERM; echo \$\$ >> {p}; exec sleep 1000" &' </dev/null >/dev/null 2>&1 &
while [ "$(wc -l < {p} 2>/dev/null)" != "2" ]; do sleep 0.05; done
echo ready
while :; do sleep 1; done"#,
        p = pids.display()
    );
    let (result, exit) = run_json(&[
        "--no-sandbox",
        "--timeout",
        "1s",
        "--grace",
        "300ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(exit, 124, "{result:?}");
    assert_eq!(result.stdout.head, "ready\n");
    let pids = read_pid_lines(&pids);
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(
            wait_dead(pid, Duration::from_secs(5)),
            "process {pid} survived"
        );
    }
}

/// Runs, unsandboxed, a program that starts `daemon` in its own session and exits once the
/// daemon has written its pid to `{p}` (atomically); the run must pass, with that one daemon
/// killed and counted.
fn assert_leftover_daemon_is_killed(daemon: &str) {
    let dir = TestDir::new();
    let pid_file = dir.path().join("daemon.pid");
    let script = format!(
        "setsid {daemon} </dev/null >/dev/null 2>&1 &
         while [ ! -s {p} ]; do sleep 0.02; done; exit 0",
        daemon = daemon.replace("{p}", &pid_file.display().to_string()),
        p = pid_file.display()
    );
    let (result, exit) = run_json(&["--no-sandbox", "--", "sh", "-c", &script]);
    assert_eq!(exit, 0);
    assert_eq!(result.status, RunStatus::Pass);
    assert_eq!(result.leaked.processes_killed, 1, "{:?}", result.leaked);
    let pid = read_pid(&pid_file);
    assert!(
        wait_dead(pid, Duration::from_secs(5)),
        "daemon {pid} survived"
    );
}

#[test]
fn leftover_daemon_is_killed_when_the_program_exits() {
    assert_leftover_daemon_is_killed("sh -c 'echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 1000'");
}

#[test]
fn a_leftover_daemon_named_with_bytes_that_are_not_utf8_is_killed_too() {
    // Unsandboxed, the executor's own sweep reads the process table: a command name that is
    // not UTF-8 (`PR_SET_NAME`) must not hide the daemon from it.
    assert_leftover_daemon_is_killed(
        "python3 -c 'import ctypes, os, time\nctypes.CDLL(None).prctl(15, b\"\\xff\\xfe\", 0, 0, 0)\nopen(\"{p}.tmp\", \"w\").write(str(os.getpid()))\nos.rename(\"{p}.tmp\", \"{p}\")\ntime.sleep(1000)'",
    );
}

#[test]
fn grandchild_holding_stdout_open_does_not_make_cordon_wait() {
    let dir = TestDir::new();
    let pid_file = dir.path().join("gc.pid");
    let script = format!(
        "sh -c 'echo $$ > {p}; exec sleep 1000' & while [ ! -s {p} ]; do sleep 0.02; done; echo done",
        p = pid_file.display()
    );
    let started = Instant::now();
    let (result, exit) = run_json(&[
        "--no-sandbox",
        "--leak-timeout",
        "200ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(started.elapsed() < Duration::from_secs(10), "cordon waited");
    assert_eq!(exit, 0);
    assert_eq!(result.stdout.head, "done\n");
    assert!(result.leaked.output_held_open);
    assert!(result.leaked.processes_killed >= 1);
    assert!(wait_dead(read_pid(&pid_file), Duration::from_secs(5)));
}

#[test]
fn runaway_output_is_bounded_and_counted_exactly() {
    // 20 MiB on stdout and 1 MiB on stderr, interleaved, with a 64 KiB limit.
    let script = "head -c 20971520 /dev/zero | tr '\\0' 'a'; printf END; \
                  head -c 1048576 /dev/zero | tr '\\0' 'e' >&2";
    let (result, exit) = run_json(&[
        "--no-sandbox",
        "--output-limit",
        "64KiB",
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(exit, 0);
    assert_eq!(result.stdout.bytes_total, 20 * 1024 * 1024 + 3);
    assert!(result.stdout.truncated);
    assert_eq!(
        result.stdout.head.len() + result.stdout.tail.len(),
        64 * 1024
    );
    assert_eq!(
        result.stdout.omitted_bytes,
        result.stdout.bytes_total - 64 * 1024
    );
    assert!(result.stdout.head.bytes().all(|b| b == b'a'));
    assert!(result.stdout.tail.ends_with("aaaEND"));
    assert_eq!(result.stderr.bytes_total, 1024 * 1024);
    assert!(result.limits_hit.contains(&LimitKind::Output));
    assert_eq!(
        result.status,
        RunStatus::Pass,
        "truncation is not a failure"
    );
}

#[test]
#[expect(clippy::zombie_processes, reason = "reaped by wait4, for its rusage")]
fn cordon_memory_stays_flat_whatever_the_program_prints() {
    // cordon's peak RSS after the program printed `bytes` (a debug build redacts and records
    // about 30 MB/s).
    let peak = |bytes: u64| {
        let child = cordon()
            .args(["run", "--no-sandbox", "--json", "--", "sh", "-c"])
            .arg(format!("head -c {bytes} /dev/zero"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let (status, max_rss) = support::wait4(child.id() as i32);
        assert_eq!(status, 0);
        max_rss
    };
    // Four times the output must not grow the peak: what cordon holds is bounded (its
    // buffers, the transcript's limit), not proportional to what the program prints. The
    // fixed part (the binary's pages, the buffers at their bound) is measured, not assumed.
    let at_64_mib = peak(64 << 20);
    let at_256_mib = peak(256 << 20);
    assert!(
        at_256_mib <= at_64_mib + (8 << 20),
        "cordon's peak RSS grew with the output: {at_64_mib} bytes after 64 MiB, \
         {at_256_mib} after 256 MiB"
    );
    assert!(
        at_256_mib < 96 << 20,
        "cordon's peak RSS was {at_256_mib} bytes"
    );
}

#[test]
fn output_is_passed_through_live_without_json() {
    use std::io::BufRead;
    let dir = TestDir::new();
    // The program prints, then waits for `go`: the test reads both lines while it still runs.
    let mut child = cordon()
        .args(["run", "--no-sandbox", "--no-record", "--cwd"])
        .arg(dir.path())
        .args([
            "--",
            "sh",
            "-c",
            "echo to-out; echo to-err >&2; while [ ! -e go ]; do sleep 0.01; done; echo done",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let first_line = |pipe: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(pipe).lines();
            let _ = tx.send(lines.next().map(Result::unwrap));
            lines.map(Result::unwrap).collect::<Vec<String>>()
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a line while the program runs");
        line.expect("a line")
    };
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    assert_eq!(first_line(Box::new(stdout)), "to-out");
    assert_eq!(first_line(Box::new(stderr)), "to-err");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the program still runs"
    );
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn json_mode_prints_one_document_and_nothing_else() {
    let out = cordon()
        .args([
            "run",
            "--no-sandbox",
            "--json",
            "--",
            "sh",
            "-c",
            "echo noise; echo more >&2",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["schema"], "cordon.run-result/v1");
    assert_eq!(value["stdout"]["head"], "noise\n");
    assert_eq!(value["stderr"]["head"], "more\n");
    assert!(
        out.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    for field in [
        "status",
        "exit_code",
        "signal",
        "duration_ms",
        "limits_hit",
        "resource",
        "failure",
        "command",
        "cwd",
        "started_at",
    ] {
        assert!(value.get(field).is_some(), "missing {field}");
    }
}

#[test]
fn env_cwd_and_stdin_are_honoured() {
    let dir = TestDir::new();
    let (result, _) = run_json(&[
        "--no-sandbox",
        "--env",
        "GREETING=hello world",
        "--cwd",
        dir.path().to_str().unwrap(),
        "--stdin",
        "null",
        "--",
        "sh",
        "-c",
        "echo \"$GREETING\"; pwd; cat; echo eof",
    ]);
    let canonical = dir.path().canonicalize().unwrap();
    assert_eq!(
        result.stdout.head,
        format!("hello world\n{}\neof\n", canonical.display())
    );
    assert_eq!(result.cwd, canonical.to_str().unwrap());
}

#[test]
fn sigterm_to_cordon_kills_the_tree_and_still_reports() {
    let dir = TestDir::new();
    let pid_file = dir.path().join("child.pid");
    let script = format!(
        "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {p}; exec sleep 1000' & wait",
        p = pid_file.display()
    );
    let child = cordon()
        .args([
            "run",
            "--no-sandbox",
            "--json",
            "--grace",
            "300ms",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pid_file.exists()
        || std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .is_empty()
    {
        assert!(Instant::now() < deadline, "program never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let grandchild = read_pid(&pid_file);
    support::signal(child.id() as i32, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result.status, RunStatus::Cancelled);
    assert_eq!(result.failure.unwrap().category, FailureCategory::Cancelled);
    assert!(wait_dead(grandchild, Duration::from_secs(5)));
}

#[test]
fn a_sandboxed_runs_tree_cpu_counts_what_the_program_did_not_wait_for() {
    if !sandbox_available() {
        return;
    }
    // An orphan (re-parented to the sandbox's PID 1) burns 300 ms of CPU; the program only
    // waits for its file. The program's own CPU time is small; the tree's counts the orphan.
    let dir = TestDir::new();
    let (result, _) = run_json(&[
        "--cwd",
        dir.path().to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "(python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\nopen(\"done\", \"w\")' &); \
         until [ -e done ]; do sleep 0.01; done",
    ]);
    assert_eq!(result.status, RunStatus::Pass, "{result:?}");
    let r = &result.resource;
    assert!(
        r.tree_cpu_user_ms.unwrap() + r.tree_cpu_sys_ms.unwrap() >= 250,
        "{r:?}"
    );
    assert!(
        r.cpu_user_ms.unwrap() + r.cpu_sys_ms.unwrap() < 250,
        "{r:?}"
    );
}

#[test]
fn resource_usage_is_reported() {
    let (result, _) = run_json(&[
        "--no-sandbox",
        "--",
        "python3",
        "-c",
        "import time\nb = bytearray(64 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass",
    ]);
    assert_eq!(result.status, RunStatus::Pass, "{result:?}");
    assert!(result.resource.max_rss_bytes.unwrap() >= 64 * 1024 * 1024);
    // The loop burns 300 ms of process time (user + system).
    let r = &result.resource;
    assert!(
        r.cpu_user_ms.unwrap() + r.cpu_sys_ms.unwrap() >= 250,
        "{r:?}"
    );
    assert!(
        r.tree_cpu_user_ms.unwrap() + r.tree_cpu_sys_ms.unwrap() >= 250,
        "{r:?}"
    );
    assert!(result.duration_ms >= 300);
}

#[test]
fn a_program_flooding_both_pipes_never_blocks() {
    let (result, exit) = run_json(&[
        "--no-sandbox",
        "--timeout",
        "60s",
        "--",
        "sh",
        "-c",
        "for i in $(seq 1 2000); do printf '%01000d\\n' 0; printf '%01000d\\n' 1 >&2; done",
    ]);
    assert_eq!(exit, 0);
    assert_eq!(result.stdout.bytes_total, 2000 * 1001);
    assert_eq!(result.stderr.bytes_total, 2000 * 1001);
}

fn read_pid_lines(path: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

#[test]
fn sandbox_default_refuses_or_runs_but_never_silently_weakens() {
    let out = cordon()
        .args(["run", "--json", "--", "true"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    // Where `cordon doctor` says the sandbox cannot be had, the default mode refuses (125,
    // naming --no-sandbox); where it can, the program runs sandboxed. Never unsandboxed.
    if support::doctor()["default_policy_ok"] == true {
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out.stderr));
        let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout).unwrap();
        assert!(result.sandbox.enabled);
    } else {
        assert_eq!(code, 125);
        assert!(String::from_utf8_lossy(&out.stderr).contains("--no-sandbox"));
    }
}

#[test]
fn a_clean_sandboxed_run_reports_no_leftovers() {
    if !sandbox_available() {
        return;
    }
    for _ in 0..5 {
        let (result, exit) = run_json(&["--", "sh", "-c", "echo hi"]);
        assert_eq!(exit, 0, "{result:?}");
        assert_eq!(
            result.leaked.processes_killed, 0,
            "the sandbox's own helpers are not leaks"
        );
    }
}

#[test]
fn a_slow_reader_of_cordons_output_still_gets_every_byte() {
    use std::io::Read;
    let mut child = cordon()
        .args([
            "run",
            "--no-sandbox",
            "--no-record",
            "--",
            "head",
            "-c",
            "3000000",
            "/dev/zero",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut total = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let started = Instant::now();
    loop {
        // Slow for the first second (well past the 200 ms leak window), then fast.
        if started.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(50));
        }
        match stdout.read(&mut buf).unwrap() {
            0 => break,
            n => total += n,
        }
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(total, 3_000_000);
}

#[test]
fn a_closed_reader_ends_the_program_like_a_shell_pipeline() {
    use std::io::Read;
    let modes: &[&[&str]] = if sandbox_available() {
        &[&["--no-sandbox"], &[]]
    } else {
        &[&["--no-sandbox"]]
    };
    for &mode in modes {
        let started = Instant::now();
        let mut child = cordon()
            .args(["run", "--no-record"])
            .args(mode)
            .args(["--", "yes"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 2];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout);
        let status = child.wait().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{mode:?}: kept running"
        );
        assert_eq!(status.code(), Some(128 + libc::SIGPIPE), "{mode:?}");
    }
}

#[test]
fn ctrl_c_ends_the_leak_window() {
    let dir = TestDir::new();
    let pid_file = dir.path().join("program.pid");
    let started = Instant::now();
    // The program leaves `sleep` holding stdout open, and exits.
    let child = cordon()
        .args([
            "run",
            "--no-sandbox",
            "--no-record",
            "--json",
            "--leak-timeout",
            "20s",
            "--",
        ])
        .args([
            "sh",
            "-c",
            &format!(
                "sleep 100 & echo $$ > {p}.tmp; mv {p}.tmp {p}; echo hi",
                p = pid_file.display()
            ),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the program wrote its pid", Duration::from_secs(30), || {
        pid_file.exists()
    });
    // Reaped by cordon (gone from /proc): cordon is in the leak window, waiting for `sleep`.
    support::wait_reaped(read_pid(&pid_file), Duration::from_secs(30));
    support::signal(child.id() as i32, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "Ctrl-C did not end the wait"
    );
    let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result.leaked.processes_killed, 1);
}

#[test]
fn descriptors_cordon_inherited_do_not_reach_the_program() {
    // An inheritable descriptor in cordon's own process (fd 9, no close-on-exec).
    let file = std::fs::File::open("/dev/null").unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: dup2 onto a free descriptor number; the new one is not close-on-exec.
    unsafe { libc::dup2(fd, 9) };
    let (result, _) = run_json(&[
        "--no-sandbox",
        "--no-record",
        "--",
        "sh",
        "-c",
        "ls /proc/self/fd",
    ]);
    // SAFETY: closing the descriptor made above.
    unsafe { libc::close(9) };
    let fds: Vec<&str> = result.stdout.head.lines().collect();
    assert!(!fds.contains(&"9"), "{fds:?}");
}

#[test]
fn every_sandbox_is_built_by_the_helper_executable() {
    if !sandbox_available() {
        return;
    }
    let dir = TestDir::new();
    let out = cordon()
        .current_dir(dir.path())
        .args(["run", "--no-record", "--", "cat", "/proc/1/comm"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // PID 1 of the sandbox is the helper executable (the kernel keeps the first 15 bytes of
    // a process name), whether cordon is single-threaded (`cordon run`) or not
    // (`warm_cache::parallel_stages_are_built_by_the_helper`).
    assert_eq!(String::from_utf8_lossy(&out.stdout), "cordon-sandbox-\n");
}

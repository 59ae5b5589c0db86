//! Real-kernel tests of the helper, without the cordon CLI: a tiny supervised executor runs
//! prepared commands (the `cordon-sandbox-init` executable that `cargo build -p cordon`
//! builds) with the report pipe on fd 3. This binary also plays the system-call probes that
//! run inside the sandbox, hence its own `main`.
//!
//! Run with `cargo test -p cordon-sandbox --test init [FILTER]`. A host that cannot sandbox
//! skips every case, saying why, unless `CI=true` or `CORDON_REQUIRE_SANDBOX=1`: then it fails.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon_sandbox::{Access, Bind, EnvVar, SandboxPolicy, prepare};
use cordon_types::{ChildReport, LimitKind};

#[path = "init/syscalls.rs"]
mod syscalls;

struct Outcome {
    report: ChildReport,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "report={:?}\nstdout={}\nstderr={}",
            self.report, self.stdout, self.stderr
        )
    }
}

fn base_env() -> Vec<EnvVar> {
    ["PATH", "LANG"]
        .iter()
        .filter_map(|k| {
            std::env::var(k).ok().map(|v| EnvVar {
                name: (*k).into(),
                value: v,
                secret: false,
            })
        })
        .collect()
}

fn policy(workdir: &Path) -> SandboxPolicy {
    let mut p = SandboxPolicy::new(workdir);
    p.env = base_env();
    p.host_home = std::env::var_os("HOME").map(PathBuf::from);
    p
}

/// Runs `sh -c script` under `policy` like the supervised executor does.
fn run(policy: &SandboxPolicy, script: &str, timeout: Duration) -> Outcome {
    run_program(
        policy,
        "sh".as_ref(),
        &[OsString::from("-c"), script.into()],
        timeout,
    )
}

/// Runs `program args` under `policy` like the supervised executor does: the helper with the
/// report pipe on fd 3, in a session of its own. Past `timeout`, the whole session is killed
/// (an upper bound that only a hang reaches; the helper's exit is what the run waits for).
fn run_program(
    policy: &SandboxPolicy,
    program: &std::ffi::OsStr,
    args: &[OsString],
    timeout: Duration,
) -> Outcome {
    let prepared = prepare(policy, program, args).expect("prepare");
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (report_r, report_w) = (fds[0], fds[1]);
    let mut cmd = Command::new(&prepared.program);
    cmd.args(&prepared.args)
        .env_clear()
        .envs(prepared.env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(report_w, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::setsid();
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn helper");
    // SAFETY: our copy of the write end.
    unsafe { libc::close(report_w) };
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let pid = i32::try_from(child.id()).unwrap();
    // The helper's exit is the signal: a waiter thread reports it on a channel.
    let (exited_tx, exited) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = exited_tx.send(());
        status
    });
    if exited.recv_timeout(timeout).is_err() {
        // Kill the whole tree: every process in the helper's session.
        kill_session(pid);
    }
    waiter.join().unwrap().expect("wait for the helper");
    let elapsed = start.elapsed();
    // SAFETY: we own report_r; File closes it.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(report_r) };
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    let report: ChildReport =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad report {text:?}: {e}"));
    Outcome {
        report,
        stdout: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
        elapsed,
    }
}

fn kill_session(sid: i32) {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid <= 0 || pid == sid {
            continue;
        }
        // SAFETY: getsid has no memory preconditions.
        if unsafe { libc::getsid(pid) } == sid {
            // SAFETY: signalling a process of the helper's session.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cordon-init-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.canonicalize().unwrap()
}

const T: Duration = Duration::from_secs(20);

fn ok(o: &Outcome) {
    assert_eq!(o.report.setup_error, None, "{o:?}");
    assert_eq!(o.report.exit_code, Some(0), "{o:?}");
}

// ---- cases ----

fn true_runs_fast() {
    let w = tempdir("true");
    let o = run(&policy(&w), "true", T);
    ok(&o);
    assert!(o.report.rusage.is_some());
    eprintln!("    (sandboxed sh -c true took {:?})", o.elapsed);
}

fn host_secrets_and_home_are_invisible() {
    let w = tempdir("secrets");
    let o = run(
        &policy(&w),
        "cat /etc/shadow 2>/dev/null && echo SHADOW; ls -A /root 2>/dev/null | grep -v -x -e .cargo -e .rustup -e .npm -e .pyenv -e .nvm; \
         test -e /etc/ssh && echo SSH; echo HOME=$HOME; ls -A $HOME | wc -l; id -u; echo end",
        T,
    );
    ok(&o);
    assert!(
        !o.stdout.contains("SHADOW") && !o.stdout.contains("SSH"),
        "{o:?}"
    );
    assert!(o.stdout.contains("HOME=/home/cordon\n0\n"), "{o:?}");
}

fn secrets_under_a_bound_home_are_masked() {
    let home = tempdir("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    std::fs::write(home.join(".netrc"), "machine x password hunter2").unwrap();
    std::fs::write(home.join("notes.txt"), "visible").unwrap();
    let w = tempdir("maskwork");
    let mut p = policy(&w);
    p.host_home = Some(home.clone());
    p.binds.push(Bind {
        path: home.clone(),
        access: Access::ReadWrite,
    });
    let h = home.display();
    let o = run(
        &p,
        &format!(
            "cat {h}/notes.txt; cat {h}/.ssh/id_ed25519; cat {h}/.netrc; ls -A {h}/.ssh; echo x > {h}/.netrc; echo end"
        ),
        T,
    );
    ok(&o);
    assert!(o.stdout.contains("visible"), "{o:?}");
    assert!(
        !o.stdout.contains("PRIVATE") && !o.stdout.contains("hunter2"),
        "{o:?}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".netrc")).unwrap(),
        "machine x password hunter2"
    );
}

fn writes_outside_the_workdir_fail() {
    let w = tempdir("write");
    let marker = format!("cordon-escape-{}", std::process::id());
    let o = run(
        &policy(&w),
        &format!(
            "for d in /usr /etc /bin / /home /root /proc/sys/kernel; do touch $d/{marker} 2>/dev/null && echo WROTE $d; done; \
             echo 1 > /proc/sys/kernel/core_pattern 2>/dev/null && echo CORE; \
             echo hi > /tmp/{marker} && echo tmp-ok; echo data > made-here; echo end"
        ),
        T,
    );
    ok(&o);
    assert!(
        !o.stdout.contains("WROTE") && !o.stdout.contains("CORE"),
        "{o:?}"
    );
    assert!(o.stdout.contains("tmp-ok"), "{o:?}");
    assert!(
        !Path::new(&format!("/tmp/{marker}")).exists(),
        "private /tmp leaked to the host"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("made-here")).unwrap(),
        "data\n"
    );
}

fn host_tmp_is_invisible_and_workdir_in_tmp_works() {
    let w = tempdir("tmpvis");
    let outside = std::env::temp_dir().join(format!("cordon-outside-{}", std::process::id()));
    std::fs::write(&outside, "host tmp").unwrap();
    let o = run(
        &policy(&w),
        &format!("cat {} 2>&1; pwd; ls /tmp", outside.display()),
        T,
    );
    ok(&o);
    assert!(!o.stdout.contains("host tmp"), "{o:?}");
    assert!(o.stdout.contains(&w.display().to_string()), "{o:?}");
    std::fs::remove_file(outside).unwrap();
}

fn proc_shows_only_the_sandbox_and_privileges_are_gone() {
    let w = tempdir("proc");
    let o = run(
        &policy(&w),
        "ls /proc | grep -c '^[0-9]'; grep -E '^(NoNewPrivs|CapEff|CapBnd|CapPrm):' /proc/self/status; echo $$",
        T,
    );
    ok(&o);
    let lines: Vec<&str> = o.stdout.lines().collect();
    let count: u32 = lines[0].parse().unwrap();
    assert!(count <= 4, "{o:?}");
    assert!(o.stdout.contains("NoNewPrivs:\t1"), "{o:?}");
    assert!(o.stdout.contains("CapEff:\t0000000000000000"), "{o:?}");
    assert!(o.stdout.contains("CapBnd:\t0000000000000000"), "{o:?}");
}

/// (ptrace and the other denied calls are made for real in `seccomp_refuses_every_denied_call`.)
fn mount_and_unshare_are_refused() {
    let w = tempdir("mount");
    let o = run(
        &policy(&w),
        "mount -t tmpfs none /tmp 2>/dev/null && echo MOUNTED; mount -o remount,rw /usr 2>/dev/null && echo REMOUNTED; \
         unshare -U true 2>/dev/null && echo USERNS; unshare -r true 2>/dev/null && echo USERNS2; echo end",
        T,
    );
    ok(&o);
    assert_eq!(o.stdout.trim(), "end", "{o:?}");
}

fn kill_all_does_not_reach_the_host() {
    let w = tempdir("killall");
    let mut sentinel = Command::new("sleep").arg("30").spawn().unwrap();
    let parent = std::process::id();
    let o = run(
        &policy(&w),
        &format!("kill -9 -1; kill -9 {parent} 2>/dev/null && echo KILLED-PARENT; echo end"),
        T,
    );
    assert_eq!(o.report.setup_error, None, "{o:?}");
    assert!(
        sentinel.try_wait().unwrap().is_none(),
        "the host sentinel died"
    );
    assert!(!o.stdout.contains("KILLED-PARENT"), "{o:?}");
    sentinel.kill().unwrap();
    let _ = sentinel.wait();
}

fn network_is_private_unless_host() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            use std::io::Write;
            let mut s = s;
            let _ = s.write_all(b"HELLO-FROM-HOST\n");
        }
    });
    let w = tempdir("net");
    let script = format!(
        "python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\", {port}), 2); print(s.recv(64).decode())' 2>&1; echo end"
    );
    let o = run(&policy(&w), &script, T);
    ok(&o);
    assert!(!o.stdout.contains("HELLO-FROM-HOST"), "{o:?}");
    let bash =
        format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3' 2>/dev/null; echo end");
    let o = run(&policy(&w), &bash, T);
    assert!(!o.stdout.contains("HELLO-FROM-HOST"), "{o:?}");
    let mut p = policy(&w);
    p.network = cordon_types::NetworkMode::Host;
    let o = run(&p, &script, T);
    ok(&o);
    assert!(o.stdout.contains("HELLO-FROM-HOST"), "{o:?}");

    // The private namespace is the program's own (PID 1 makes it beside the root and joins
    // it before the program starts), with its loopback device up; `--network host` is the
    // host's namespace.
    let host_ns = std::fs::read_link("/proc/self/ns/net").unwrap();
    let o = run(&policy(&w), OWN_LOOPBACK, T);
    ok(&o);
    let (echo, ns) = o.stdout.trim().split_once('\n').expect("two lines");
    assert_eq!(echo, "LOOPBACK-OK", "{o:?}");
    assert!(ns.starts_with("net:["), "{o:?}");
    assert_ne!(Path::new(ns), host_ns, "{o:?}");
    let o = run(&p, OWN_LOOPBACK, T);
    ok(&o);
    assert_eq!(
        o.stdout.lines().nth(1).map(Path::new),
        Some(host_ns.as_path()),
        "{o:?}"
    );
    // The program is always PID 2, and sees no PID but PID 1 and its own.
    let o = run(
        &policy(&w),
        "echo $$; for d in /proc/[0-9]*; do test \"$d\" = /proc/$$ || echo \"${d#/proc/}\"; done",
        T,
    );
    ok(&o);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines, ["2", "1"], "{o:?}");
}

/// Serves and connects on the sandbox's loopback, then prints the network namespace.
const OWN_LOOPBACK: &str = "python3 -c 'import socket, os
s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), 2); a, _ = s.accept(); a.sendall(b\"LOOPBACK-OK\")
print(c.recv(16).decode()); print(os.readlink(\"/proc/self/ns/net\"))'";

fn tiocsti_is_refused() {
    let w = tempdir("tiocsti");
    let o = run(
        &policy(&w),
        "python3 -c 'import fcntl, termios, os, errno\nfd = os.open(\"/dev/ptmx\", os.O_RDWR)\ntry:\n    fcntl.ioctl(fd, termios.TIOCSTI, b\"x\")\n    print(\"INJECTED\")\nexcept OSError as e:\n    print(errno.errorcode[e.errno])'",
        T,
    );
    ok(&o);
    assert_eq!(o.stdout.trim(), "EPERM", "{o:?}");
}

fn symlinks_out_of_the_workdir_lead_nowhere() {
    let w = tempdir("symlink");
    std::os::unix::fs::symlink("/root", w.join("rootlink")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", w.join("shadowlink")).unwrap();
    let o = run(
        &policy(&w),
        "cat shadowlink 2>/dev/null && echo SHADOW; ls -A rootlink/ 2>/dev/null | grep -e ssh -e bash_history; echo end",
        T,
    );
    ok(&o);
    assert_eq!(o.stdout.trim(), "end", "{o:?}");
}

fn environment_is_cleared() {
    let w = tempdir("env");
    let mut p = policy(&w);
    p.env.push(EnvVar {
        name: "GIVEN".into(),
        value: "yes".into(),
        secret: false,
    });
    // SAFETY: single-threaded at this point of the test program.
    unsafe { std::env::set_var("CORDON_TEST_LEAK", "leaked-secret") };
    let o = run(&p, "env", T);
    ok(&o);
    assert!(!o.stdout.contains("leaked-secret"), "{o:?}");
    assert!(!o.stdout.contains("__CORDON_SANDBOX_PLAN"), "{o:?}");
    assert!(
        o.stdout.contains("GIVEN=yes") && o.stdout.contains("PATH="),
        "{o:?}"
    );
}

fn memory_limit_kills_a_hog() {
    let w = tempdir("mem");
    let mut p = policy(&w);
    p.limits.memory_bytes = Some(64 << 20);
    let o = run(&p, "python3 -c 'x = bytearray(1 << 30); print(len(x))'", T);
    assert_eq!(o.report.setup_error, None, "{o:?}");
    assert_ne!(o.report.exit_code, Some(0), "{o:?}");
    assert!(o.report.limits_hit.contains(&LimitKind::Memory), "{o:?}");
    assert!(
        o.report
            .tree_peak_memory_bytes
            .is_some_and(|b| b <= 70 << 20),
        "{o:?}"
    );
}

fn fork_bomb_is_contained() {
    let w = tempdir("forkbomb");
    let mut p = policy(&w);
    p.limits.pids = Some(64);
    // Every member of the bomb holds its slot (`sleep`), and the script itself starts
    // holders until a fork is refused, so the group fills to `pids.max` whatever the timing:
    // the refused fork (dash exits 2 with "Cannot fork") is the signal that the limit holds,
    // and what `pids.events` counts. No fixed wait.
    let o = run(
        &p,
        "bomb() { bomb & bomb & sleep 1000; }; bomb & while :; do sleep 1000 & done",
        T,
    );
    assert_eq!(o.report.setup_error, None, "{o:?}");
    assert!(o.elapsed < T, "the bomb was not contained: {o:?}");
    assert_eq!(o.report.exit_code, Some(2), "{o:?}");
    assert!(o.stderr.contains("Cannot fork"), "{o:?}");
    assert!(o.report.limits_hit.contains(&LimitKind::Pids), "{o:?}");
    // What filled the group is killed (and counted) when the script ends.
    assert!(o.report.processes_killed > 32, "{o:?}");
}

fn cpu_limit_ends_a_busy_loop() {
    let w = tempdir("cpu");
    let mut p = policy(&w);
    p.limits.cpu_time_ms = Some(1000);
    let o = run(&p, "while :; do :; done", T);
    assert!(o.report.limits_hit.contains(&LimitKind::Cpu), "{o:?}");
}

fn file_size_limit() {
    let w = tempdir("fsize");
    let mut p = policy(&w);
    p.limits.file_size_bytes = Some(1 << 20);
    let o = run(&p, "exec dd if=/dev/zero of=big bs=1M count=4", T);
    assert!(o.report.limits_hit.contains(&LimitKind::FileSize), "{o:?}");
}

fn allow_exec_is_an_allowlist() {
    let w = tempdir("exec");
    let mut p = policy(&w);
    p.allow_exec = vec!["/bin/sh".into(), "/bin/echo".into()];
    let o = run(
        &p,
        "/bin/echo allowed; /bin/cat /etc/hostname 2>/dev/null || echo refused",
        T,
    );
    ok(&o);
    assert_eq!(o.stdout, "allowed\nrefused\n", "{o:?}");
}

fn daemons_and_sigterm_ignorers_die_with_the_program() {
    let w = tempdir("daemon");
    let o = run(
        &policy(&w),
        "setsid sh -c 'sleep 3300 & sleep 3300' & (trap '' TERM; exec sleep 3300) & echo started",
        T,
    );
    ok(&o);
    assert!(o.elapsed < Duration::from_secs(10), "{o:?}");
    // PID 1 killed them before it reported (its namespace is gone once the helper has
    // reaped it): no sleep 3300 of ours survives on the host, with no wait needed.
    assert!(o.report.processes_killed >= 2, "{o:?}");
    let survivors = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x003300\x00")
        })
        .count();
    assert_eq!(survivors, 0);
}

fn rw_and_ro_binds() {
    let w = tempdir("binds-w");
    let ro = tempdir("binds-ro");
    let rw = tempdir("binds-rw");
    std::fs::write(ro.join("f"), "ro-content\n").unwrap();
    let mut p = policy(&w);
    p.binds.push(Bind {
        path: ro.clone(),
        access: Access::ReadOnly,
    });
    p.binds.push(Bind {
        path: rw.clone(),
        access: Access::ReadWrite,
    });
    let o = run(
        &p,
        &format!(
            "cat {r}/f; echo x > {r}/g 2>/dev/null && echo RO-WRITABLE; echo y > {w}/h && echo rw-ok",
            r = ro.display(),
            w = rw.display()
        ),
        T,
    );
    ok(&o);
    assert_eq!(o.stdout, "ro-content\nrw-ok\n", "{o:?}");
    assert_eq!(std::fs::read_to_string(rw.join("h")).unwrap(), "y\n");
}

/// The helper's own 127/126 path (not a shell's): the program is executed directly.
fn missing_program_is_a_setup_error() {
    let w = tempdir("missing");
    for program in ["definitely-not-a-program", "/nonexistent/prog"] {
        let o = run_program(&policy(&w), program.as_ref(), &[], T);
        assert_eq!(o.report.exit_code, None, "{o:?}");
        assert_eq!(o.report.setup_exit_code, Some(127), "{o:?}");
        let error = o.report.setup_error.as_deref().unwrap_or_default();
        assert!(
            error.starts_with("program not found in the sandbox"),
            "{o:?}"
        );
    }
    // A file that is there but not executable: 126.
    std::fs::write(w.join("not-exec.sh"), "#!/bin/sh\necho hi\n").unwrap();
    let o = run_program(&policy(&w), w.join("not-exec.sh").as_os_str(), &[], T);
    assert_eq!(o.report.setup_exit_code, Some(126), "{o:?}");
    assert!(
        o.report
            .setup_error
            .as_deref()
            .is_some_and(|e| e.starts_with("cannot execute")),
        "{o:?}"
    );
}

fn leftovers_are_killed_and_counted() {
    let w = tempdir("leftovers");
    let o = run(&policy(&w), "sleep 100 & echo hi", T);
    ok(&o);
    assert_eq!(o.stdout, "hi\n", "{o:?}");
    assert_eq!(o.report.processes_killed, 1, "{o:?}");
    let o = run(&policy(&w), "true", T);
    ok(&o);
    assert_eq!(o.report.processes_killed, 0, "{o:?}");
}

/// This test binary, copied into `w` (visible and executable in the sandbox), and a policy
/// for running it there.
fn probe_binary(w: &Path) -> (PathBuf, SandboxPolicy) {
    let exe = w.join("cordon-probe");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    (exe, policy(w))
}

fn seccomp_refuses_every_denied_call() {
    let w = tempdir("seccomp");
    let (exe, p) = probe_binary(&w);
    let o = run_program(&p, exe.as_os_str(), &[syscalls::PROBE_ARG.into()], T);
    ok(&o);
    let results = syscalls::parse(&o.stdout);
    let probes = syscalls::probes();
    assert_eq!(results.len(), probes.len(), "{o:?}");
    let wrong: Vec<String> = probes
        .iter()
        .zip(&results)
        .filter(|(probe, (name, result))| {
            probe.name != name || !syscalls::matches(probe.expect, *result)
        })
        .map(|(probe, (name, result))| {
            format!("{name}: expected {:?}, got {result:?}", probe.expect)
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Outside the sandbox the same calls fail otherwise (or succeed): the verdicts above are
    // the filter's.
    let control = Command::new(&exe)
        .arg(format!("{}-control", syscalls::PROBE_ARG))
        .output()
        .unwrap();
    let control = syscalls::parse(&String::from_utf8_lossy(&control.stdout));
    assert_eq!(control.len(), syscalls::CONTROLS.len(), "{control:?}");
    for (name, result) in control {
        let probe = probes.iter().find(|p| p.name == name).unwrap();
        assert!(
            !syscalls::matches(probe.expect, result),
            "{name} gives {result:?} without the filter too: the probe proves nothing"
        );
    }
}

#[cfg(target_arch = "x86_64")]
fn foreign_architecture_calls_kill_the_program() {
    let w = tempdir("int80");
    let (exe, p) = probe_binary(&w);
    let control = Command::new(&exe)
        .arg(syscalls::INT80_ARG)
        .output()
        .unwrap();
    if !control.status.success() {
        eprintln!(
            "    (no 32-bit emulation on this kernel: `int 0x80` fails without the filter too: {control:?})"
        );
        return;
    }
    let o = run_program(&p, exe.as_os_str(), &[syscalls::INT80_ARG.into()], T);
    assert_eq!(o.report.setup_error, None, "{o:?}");
    assert_eq!(o.report.signal, Some(libc::SIGSYS), "{o:?}");
    assert_eq!(o.stdout, "", "{o:?}");
}

/// Not a check: prints the median wall time of sandboxed `/bin/true` over 50 runs
/// (`cargo test --release -p cordon-sandbox --test init -- bench`).
fn bench() {
    let w = tempdir("bench");
    let p = policy(&w);
    let start = Instant::now();
    for _ in 0..100 {
        prepare(&p, "/bin/true".as_ref(), &[]).unwrap();
    }
    eprintln!("    prepare(): {:?} each", start.elapsed() / 100);
    let prepared = prepare(&p, "/bin/true".as_ref(), &[]).unwrap();
    let mut times = Vec::new();
    for _ in 0..50 {
        let mut fds = [0; 2];
        // SAFETY: fds has room for two descriptors.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let report_w = fds[1];
        let start = Instant::now();
        let mut cmd = Command::new(&prepared.program);
        cmd.args(&prepared.args)
            .env_clear()
            .envs(prepared.env.iter().map(|(k, v)| (k, v)));
        // SAFETY: only dup2 between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::dup2(report_w, 3);
                Ok(())
            });
        }
        let status = cmd.status().unwrap();
        times.push(start.elapsed());
        // SAFETY: closing our pipe ends.
        unsafe { libc::close(report_w) };
        // SAFETY: `fds[0]` is the pipe's read end, opened above and owned by nothing else.
        let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[0]) };
        let mut text = String::new();
        f.read_to_string(&mut text).unwrap();
        let report: ChildReport = serde_json::from_str(&text).unwrap();
        assert!(
            status.success() && report.exit_code == Some(0),
            "{report:?}"
        );
    }
    times.sort();
    eprintln!(
        "    sandboxed /bin/true: median {:?}, min {:?}",
        times[25], times[0]
    );
}

type Case = (&'static str, fn());

const CASES: &[Case] = &[
    ("true_runs_fast", true_runs_fast),
    (
        "host_secrets_and_home_are_invisible",
        host_secrets_and_home_are_invisible,
    ),
    (
        "secrets_under_a_bound_home_are_masked",
        secrets_under_a_bound_home_are_masked,
    ),
    (
        "writes_outside_the_workdir_fail",
        writes_outside_the_workdir_fail,
    ),
    (
        "host_tmp_is_invisible_and_workdir_in_tmp_works",
        host_tmp_is_invisible_and_workdir_in_tmp_works,
    ),
    (
        "proc_shows_only_the_sandbox_and_privileges_are_gone",
        proc_shows_only_the_sandbox_and_privileges_are_gone,
    ),
    (
        "mount_and_unshare_are_refused",
        mount_and_unshare_are_refused,
    ),
    (
        "kill_all_does_not_reach_the_host",
        kill_all_does_not_reach_the_host,
    ),
    (
        "network_is_private_unless_host",
        network_is_private_unless_host,
    ),
    ("tiocsti_is_refused", tiocsti_is_refused),
    (
        "symlinks_out_of_the_workdir_lead_nowhere",
        symlinks_out_of_the_workdir_lead_nowhere,
    ),
    ("environment_is_cleared", environment_is_cleared),
    ("memory_limit_kills_a_hog", memory_limit_kills_a_hog),
    ("fork_bomb_is_contained", fork_bomb_is_contained),
    ("cpu_limit_ends_a_busy_loop", cpu_limit_ends_a_busy_loop),
    ("file_size_limit", file_size_limit),
    ("allow_exec_is_an_allowlist", allow_exec_is_an_allowlist),
    (
        "daemons_and_sigterm_ignorers_die_with_the_program",
        daemons_and_sigterm_ignorers_die_with_the_program,
    ),
    ("rw_and_ro_binds", rw_and_ro_binds),
    (
        "missing_program_is_a_setup_error",
        missing_program_is_a_setup_error,
    ),
    (
        "leftovers_are_killed_and_counted",
        leftovers_are_killed_and_counted,
    ),
    (
        "seccomp_refuses_every_denied_call",
        seccomp_refuses_every_denied_call,
    ),
    #[cfg(target_arch = "x86_64")]
    (
        "foreign_architecture_calls_kill_the_program",
        foreign_architecture_calls_kill_the_program,
    ),
    ("bench", bench),
];

fn main() {
    let first = std::env::args().nth(1).unwrap_or_default();
    if first == syscalls::PROBE_ARG {
        syscalls::run(false);
    }
    if first == format!("{}-control", syscalls::PROBE_ARG) {
        syscalls::run(true);
    }
    #[cfg(target_arch = "x86_64")]
    if first == syscalls::INT80_ARG {
        syscalls::int80();
    }
    // A libtest-compatible surface, enough for `cargo test` and `cargo nextest`:
    // `--list [--ignored]`, `--exact NAME`, or substring filters.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            for (name, _) in CASES.iter().filter(|(n, _)| *n != "bench") {
                println!("{name}: test");
            }
        }
        return;
    }
    let report = cordon_sandbox::doctor();
    if !report.default_policy_ok {
        let missing: Vec<String> = [
            ("user namespaces", &report.user_namespaces),
            ("landlock", &report.landlock),
            ("seccomp", &report.seccomp),
            ("mount_setattr", &report.mount_setattr),
        ]
        .iter()
        .filter(|(_, c)| !c.ok)
        .map(|(name, c)| format!("{name}: {}", c.detail))
        .collect();
        let reason = format!(
            "`cordon doctor` says this host cannot enforce the default policy ({})",
            missing.join("; ")
        );
        if cordon_test_support::capabilities_required() {
            eprintln!(
                "error: the sandbox tests are required here (CI=true or CORDON_REQUIRE_SANDBOX=1) but {reason}"
            );
            let checks = CASES.iter().filter(|(name, _)| *name != "bench").count();
            println!("0 passed, {checks} failed");
            std::process::exit(1);
        }
        println!("skipping the sandbox tests: {reason}");
        println!("0 passed, 0 failed, {} skipped", CASES.len());
        return;
    }
    // The helper the cases run, built beside cordon: its absence fails here, saying how to
    // build it, rather than in every case.
    cordon_test_support::sandbox_helper();
    let (mut passed, mut failed) = (0, 0);
    for (name, case) in CASES {
        let wanted = if filters.is_empty() {
            *name != "bench"
        } else {
            filters.iter().any(|f| {
                if exact {
                    *name == f.as_str()
                } else {
                    name.contains(f.as_str())
                }
            })
        };
        if !wanted {
            continue;
        }
        // Each case in its own process would be ideal; a panic is caught per case instead.
        match std::panic::catch_unwind(case) {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok");
            }
            Err(_) => {
                failed += 1;
                println!("test {name} ... FAILED");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}

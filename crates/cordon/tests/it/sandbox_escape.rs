//! The sandbox escape suite: hostile programs run by the real `cordon run` (sandboxed by
//! default) must not read, change, signal or reach anything of the host the policy does not
//! expose. Each test skips, saying why, only when `cordon doctor` reports the feature missing.

use std::io::Write;
use std::net::TcpListener;
use std::process::Command;

use crate::sandboxed::{self, Work, assert_passed, require_sandbox, run_in};

/// A file in a host directory the sandbox does not expose (the directory lives as long as
/// this value).
struct HostFile(
    #[expect(dead_code, reason = "keeps the directory alive")] tempfile::TempDir,
    std::path::PathBuf,
);

fn host_file(name: &str, content: &str) -> HostFile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap().join(name);
    std::fs::write(&path, content).unwrap();
    HostFile(dir, path)
}

#[test]
fn host_files_outside_the_policy_are_unreadable() {
    require_sandbox!();
    let w = Work::new();
    let outside = host_file("private.txt", "HOST-PRIVATE");
    let ran = w.run(
        &[],
        &format!(
            "cat /etc/shadow /etc/gshadow 2>/dev/null; cat {} 2>/dev/null; cat /root/.bashrc /root/.profile 2>/dev/null | head -c 100; \
             ls -A /root 2>/dev/null; ls /etc/ssh 2>/dev/null; echo end",
            outside.1.display()
        ),
    );
    assert_passed(&ran);
    let out = ran.stdout();
    assert!(
        !out.contains("HOST-PRIVATE") && !out.contains("root:"),
        "{out}"
    );
    // Only toolchain homes (read-only) may appear under the host's home directory.
    for entry in out.lines().take_while(|l| *l != "end") {
        assert!(
            [
                ".cargo", ".rustup", ".npm", ".pyenv", ".nvm", ".cache", ".local", "go"
            ]
            .contains(&entry),
            "{out}"
        );
    }
}

#[test]
fn secrets_in_home_stay_hidden_even_when_home_is_bound() {
    require_sandbox!();
    let home = tempfile::tempdir().unwrap();
    let h = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "SSH-PRIVATE-KEY").unwrap();
    std::fs::create_dir_all(h.join(".aws")).unwrap();
    std::fs::write(h.join(".aws/credentials"), "AWS-SECRET").unwrap();
    std::fs::write(h.join(".netrc"), "machine x password NETRC-SECRET").unwrap();
    std::fs::write(h.join(".git-credentials"), "https://u:GIT-SECRET@x").unwrap();
    std::fs::create_dir_all(h.join(".cargo")).unwrap();
    std::fs::write(
        h.join(".cargo/credentials.toml"),
        "token = \"CARGO-SECRET\"",
    )
    .unwrap();
    std::fs::write(h.join("notes.txt"), "visible-notes").unwrap();
    let w = Work::new();
    let hs = h.display().to_string();
    let script = format!(
        "cat {hs}/notes.txt; cat {hs}/.ssh/id_ed25519 {hs}/.aws/credentials {hs}/.netrc {hs}/.git-credentials {hs}/.cargo/credentials.toml 2>/dev/null; \
         ls -A {hs}/.ssh {hs}/.aws; echo overwrite > {hs}/.netrc 2>/dev/null && echo WROTE; echo end"
    );
    let ran = w.run_env(&["--rw", &hs], &script, &[("HOME", &hs)]);
    assert_passed(&ran);
    let out = ran.stdout();
    assert!(out.contains("visible-notes"), "{ran:#?}");
    for secret in [
        "SSH-PRIVATE",
        "AWS-SECRET",
        "NETRC-SECRET",
        "GIT-SECRET",
        "CARGO-SECRET",
        "WROTE",
    ] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
    assert_eq!(
        std::fs::read_to_string(h.join(".netrc")).unwrap(),
        "machine x password NETRC-SECRET"
    );
}

#[test]
fn binding_a_secret_directly_is_refused() {
    require_sandbox!();
    let home = tempfile::tempdir().unwrap();
    let h = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    let w = Work::new();
    let out = sandboxed::cordon()
        .args(["run", "--json", "--ro"])
        .arg(h.join(".ssh"))
        .args(["--", "true"])
        .env("HOME", &h)
        .current_dir(w.path())
        .output()
        .unwrap();
    // Refused: a usage error (2), with the error document (--json).
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let document = sandboxed::error_document::error_document(&out);
    assert_eq!(document["kind"], "refused", "{document:#}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("credentials"),
        "{out:?}"
    );
}

#[test]
fn writes_outside_the_workdir_fail() {
    require_sandbox!();
    let w = Work::new();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().canonicalize().unwrap();
    let marker = format!("cordon-escape-{}", std::process::id());
    let ran = w.run(
        &[],
        &format!(
            "for d in {o} /tmp/.. /usr /usr/local/bin /etc /bin /home /root /proc/sys/kernel /dev; do \
               touch $d/{marker} 2>/dev/null && echo WROTE $d; done; \
             echo '|/bin/sh' > /proc/sys/kernel/core_pattern 2>/dev/null && echo CORE; \
             echo ok > inside && echo inside-ok; echo end",
            o = o.display()
        ),
    );
    assert_passed(&ran);
    assert!(
        !ran.stdout().contains("WROTE") && !ran.stdout().contains("CORE"),
        "{ran:#?}"
    );
    assert!(ran.stdout().contains("inside-ok"), "{ran:#?}");
    assert_eq!(
        std::fs::read_to_string(w.path().join("inside")).unwrap(),
        "ok\n"
    );
    for d in [
        o.as_path(),
        "/tmp".as_ref(),
        "/usr".as_ref(),
        "/etc".as_ref(),
        "/root".as_ref(),
    ] {
        assert!(!d.join(&marker).exists(), "{} was written", d.display());
    }
}

#[test]
fn read_only_binds_cannot_be_remounted_writable() {
    require_sandbox!();
    let w = Work::new();
    let ro = tempfile::tempdir().unwrap();
    let r = ro.path().canonicalize().unwrap().display().to_string();
    let ran = w.run(
        &["--ro", &r],
        &format!(
            "mount -o remount,rw {r} 2>/dev/null && echo REMOUNTED; mount -o remount,rw /usr 2>/dev/null && echo REMOUNTED; \
             mount --bind / /mnt 2>/dev/null && echo BOUND; mount -t tmpfs x /tmp 2>/dev/null && echo MOUNTED; \
             touch {r}/x 2>/dev/null && echo WROTE; umount /usr 2>/dev/null && echo UNMOUNTED; echo end"
        ),
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "end\n", "{ran:#?}");
}

#[test]
fn host_tmp_is_invisible_and_tmp_is_private() {
    require_sandbox!();
    let w = Work::new();
    let outside = host_file("in-host-tmp", "HOST-TMP");
    let marker = format!("/tmp/cordon-private-{}", std::process::id());
    let ran = w.run(
        &[],
        &format!(
            "cat {} 2>&1; echo x > {marker} && echo wrote-private; echo end",
            outside.1.display()
        ),
    );
    assert_passed(&ran);
    assert!(!ran.stdout().contains("HOST-TMP"), "{ran:#?}");
    assert!(ran.stdout().contains("wrote-private"), "{ran:#?}");
    assert!(
        !std::path::Path::new(&marker).exists(),
        "the sandbox's /tmp is the host's"
    );
}

#[test]
fn proc_shows_only_sandbox_processes() {
    require_sandbox!();
    let w = Work::new();
    let mut sentinel = Command::new("sleep").arg("31").spawn().unwrap();
    let ran = w.run(&[], "ls /proc | grep -c '^[0-9]'; cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '; cat /proc/1/environ >/dev/null 2>&1 && printf 'PID1-%s' ENV; echo");
    sentinel.kill().unwrap();
    let _ = sentinel.wait();
    assert_passed(&ran);
    let count: u32 = ran.stdout().lines().next().unwrap().parse().unwrap();
    assert!(count <= 4, "{ran:#?}");
    assert!(
        !ran.stdout().contains("sleep 31") && !ran.stdout().contains("PID1-ENV"),
        "{ran:#?}"
    );
}

#[test]
fn pid_1s_memory_environment_and_host_paths_stay_out_of_the_programs_reach() {
    require_sandbox!();
    let w = Work::new();
    // A value only cordon's own environment holds (not passed, not a secret it redacts).
    let value = "pid1-memory-value-7c1e";
    let ran = w.run_env(
        &[],
        "tr '\\0' ' ' < /proc/1/cmdline; echo; \
         for f in environ mem maps auxv; do cat /proc/1/$f >/dev/null 2>&1 && printf 'READ-%s ' $f; done; \
         (exec 3</proc/1/mem) 2>/dev/null && printf 'OPEN%s ' ED-mem; \
         grep -a -l pid1-memory /proc/1/environ /proc/1/mem 2>/dev/null; echo end",
        &[("CORDON_TEST_FRONT_ONLY", value)],
    );
    assert_passed(&ran);
    let out = ran.stdout();
    // PID 1 is the helper, under its bare name: its command line is the program's own, with
    // no host path (where the helper is installed) and none of cordon's options; its
    // environment and memory are out of reach.
    let mut lines = out.lines();
    let cmdline = lines.next().map(str::trim_end);
    assert!(
        cmdline.is_some_and(|c| c.starts_with("cordon-sandbox-init __sandbox-init -- sh -c tr ")),
        "{out}"
    );
    let helper_dir = std::path::Path::new(env!("CARGO_BIN_EXE_cordon-sandbox-init"))
        .parent()
        .unwrap();
    assert!(!out.contains(helper_dir.to_str().unwrap()), "{out}");
    assert_eq!(lines.collect::<Vec<_>>(), ["end"], "{out}");
    assert!(!out.contains(value), "{out}");
}

#[test]
fn a_leftover_named_with_bytes_that_are_not_utf8_is_killed_and_counted() {
    require_sandbox!();
    let w = Work::new();
    // A daemon that renames itself (`PR_SET_NAME`) to bytes that are not UTF-8, then sleeps;
    // the program waits until it has, and exits.
    let ran = w.run(
        &[],
        "python3 -c 'import ctypes, time\nctypes.CDLL(None).prctl(15, b\"\\xff\\xfe\", 0, 0, 0)\nopen(\"renamed\", \"w\")\ntime.sleep(1000)' </dev/null >/dev/null 2>&1 & \
         until [ -e renamed ]; do sleep 0.01; done; echo started",
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout().trim(), "started", "{ran:#?}");
    assert_eq!(ran.result.leaked.processes_killed, 1, "{ran:#?}");
}

#[test]
fn kill_minus_one_and_signals_to_the_host_do_not_hurt_it() {
    require_sandbox!();
    let w = Work::new();
    let mut sentinel = Command::new("sleep").arg("32").spawn().unwrap();
    let me = std::process::id();
    let sentinel_pid = sentinel.id();
    let ran = w.run(
        &[],
        &format!("kill -9 {sentinel_pid} 2>/dev/null && echo KILLED; kill -TERM {me} 2>/dev/null && echo SIGNALLED; kill -9 -1; echo after"),
    );
    assert!(
        sentinel.try_wait().unwrap().is_none(),
        "the host sentinel died: {ran:#?}"
    );
    assert!(
        !ran.stdout().contains("KILLED") && !ran.stdout().contains("SIGNALLED"),
        "{ran:#?}"
    );
    sentinel.kill().unwrap();
    let _ = sentinel.wait();
}

fn loopback_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten().take(16) {
            let _ = s.write_all(b"HELLO-FROM-HOST\n");
        }
    });
    port
}

#[test]
fn network_is_off_by_default_and_host_opts_in() {
    require_sandbox!();
    let port = loopback_server();
    let w = Work::new();
    let py = format!(
        "python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\", {port}), 2); print(s.recv(64).decode())' 2>&1; echo end"
    );
    let ran = w.run(&[], &py);
    assert_passed(&ran);
    assert!(!ran.stdout().contains("HELLO-FROM-HOST"), "{ran:#?}");
    assert_eq!(ran.result.sandbox.network, cordon_types::NetworkMode::None);
    assert!(ran.result.sandbox.namespaces.iter().any(|n| n == "net"));
    let ran = w.run(&["--network", "host"], &py);
    assert_passed(&ran);
    assert!(ran.stdout().contains("HELLO-FROM-HOST"), "{ran:#?}");

    // The private namespace is the program's own, joined before it starts, with its loopback
    // device up (PID 1 makes it beside the root); `--network host` is the host's.
    let own = "python3 -c 'import socket, os
s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), 2); a, _ = s.accept(); a.sendall(b\"LOOPBACK-OK\")
print(c.recv(16).decode()); print(os.readlink(\"/proc/self/ns/net\"))'";
    let host_ns = std::fs::read_link("/proc/self/ns/net").unwrap();
    let ran = w.run(&[], own);
    assert_passed(&ran);
    let stdout = ran.stdout();
    let (echo, ns) = stdout.trim().split_once('\n').expect("two lines");
    assert_eq!(echo, "LOOPBACK-OK", "{ran:#?}");
    assert!(ns.starts_with("net:["), "{ran:#?}");
    assert_ne!(std::path::Path::new(ns), host_ns, "{ran:#?}");
    let ran = w.run(&["--network", "host"], own);
    assert_passed(&ran);
    assert_eq!(
        ran.stdout().lines().nth(1).map(std::path::Path::new),
        Some(host_ns.as_path()),
        "{ran:#?}"
    );
    // The program is always PID 2 and sees no PID but PID 1 besides itself.
    let ran = w.run(&[], sandboxed::NETNS_AND_PIDS);
    assert_eq!(sandboxed::private_network_and_pid(&ran), "2", "{ran:#?}");
    // The thread ran on any CPU; nothing of it reaches the program, which may use every CPU
    // cordon may (run a few times: the thread's end and the program's start could race).
    let ours = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_owned())
    };
    for _ in 0..5 {
        let ran = w.run(&[], "cat /proc/self/status");
        assert_passed(&ran);
        assert_eq!(allowed(ran.stdout()), allowed(&ours), "{ran:#?}");
    }
}

#[test]
fn raw_dev_tcp_cannot_reach_the_host() {
    require_sandbox!();
    let port = loopback_server();
    let w = Work::new();
    let ran = w.run(
        &[],
        &format!(
            "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && head -1 <&3' 2>/dev/null; echo end"
        ),
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "end\n", "{ran:#?}");
    // Loopback inside the sandbox works (its own, not the host's).
    let ran = w.run(&[], "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); print(\"lo-ok\")'");
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "lo-ok\n", "{ran:#?}");
}

#[test]
fn nested_user_namespaces_are_refused() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(
        &[],
        "unshare -U true 2>/dev/null && echo USERNS; unshare -r true 2>/dev/null && echo ROOTNS; unshare -m true 2>/dev/null && echo MNTNS; \
         python3 -c 'import os; os.unshare(os.CLONE_NEWUSER); print(\"PYNS\")' 2>/dev/null; echo end",
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "end\n", "{ran:#?}");
}

#[test]
fn no_new_privs_no_capabilities_and_nosuid_mounts() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(
        &[],
        "grep -E '^(NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb|Seccomp):' /proc/self/status; \
         awk -v d=\"$PWD\" '$5 == d || $5 == \"/usr\" {print $5, $6}' /proc/self/mountinfo",
    );
    assert_passed(&ran);
    let out = ran.stdout();
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "{out}");
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            out.contains(&format!("{cap}:\t0000000000000000")),
            "{cap}: {out}"
        );
    }
    // Every exposed mount is nosuid (setuid binaries gain nothing), /usr read-only.
    let mounts: Vec<&str> = out.lines().filter(|l| l.starts_with('/')).collect();
    assert!(mounts.len() >= 2, "{out}");
    for m in &mounts {
        assert!(m.contains("nosuid") && m.contains("nodev"), "{m}");
    }
    assert!(mounts.iter().any(|m| m.starts_with("/usr ro,")), "{out}");
}

#[test]
fn a_setuid_binary_runs_without_privilege() {
    require_sandbox!();
    let w = Work::new();
    // A setuid copy of `grep` (owned by whoever runs the tests: root in CI) in the workdir; run
    // in the sandbox, it reports its own credentials. Exec'ing it must gain nothing: no
    // capabilities (an exec by uid 0, or of a setuid-root file, would otherwise get them all)
    // and no other effective uid.
    let suid = w.path().join("suid-grep");
    std::fs::copy("/bin/grep", &suid).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let ran = w.run(
        &[],
        "test -u suid-grep && echo setuid-bit; id -u; ./suid-grep -E '^(Uid|CapPrm|CapEff):' /proc/self/status",
    );
    assert_passed(&ran);
    let mut lines = ran.stdout().lines();
    assert_eq!(lines.next(), Some("setuid-bit"), "{ran:#?}");
    let uid = lines.next().expect("id -u");
    let status: Vec<&str> = lines.collect();
    assert_eq!(
        status,
        [
            format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}").as_str(),
            "CapPrm:\t0000000000000000",
            "CapEff:\t0000000000000000"
        ],
        "{ran:#?}"
    );
}

#[test]
fn tiocsti_injection_is_refused() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(
        &[],
        "python3 -c '\nimport errno, fcntl, os, termios\nfd = os.open(\"/dev/ptmx\", os.O_RDWR)\ntry:\n    fcntl.ioctl(fd, termios.TIOCSTI, b\"x\")\n    print(\"INJECTED\")\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n'",
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "EPERM\n", "{ran:#?}");
}

#[test]
fn symlinks_in_the_workdir_cannot_point_out() {
    require_sandbox!();
    let w = Work::new();
    let outside = host_file("target.txt", "OUTSIDE-TARGET");
    std::os::unix::fs::symlink("/root", w.path().join("root-link")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", w.path().join("shadow-link")).unwrap();
    std::os::unix::fs::symlink(&outside.1, w.path().join("file-link")).unwrap();
    let ran = w.run(
        &[],
        "cat shadow-link file-link 2>/dev/null; cat root-link/.bashrc 2>/dev/null | head -c 20; ln -s /etc/passwd p && echo x >> p 2>/dev/null && echo APPENDED; echo end",
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "end\n", "{ran:#?}");
    assert!(
        !std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .ends_with("x\n")
    );
}

#[test]
fn environment_does_not_leak_unless_passed() {
    require_sandbox!();
    let w = Work::new();
    let ran = sandboxed::run_in(
        &w.path(),
        &["--env", "GIVEN=given-value", "--secret", "PASSED_TOKEN"],
        &["env"],
        &[
            ("AWS_SECRET_ACCESS_KEY", "leak-me-not"),
            ("PASSED_TOKEN", "token-value"),
            ("LANG", "C.UTF-8"),
        ],
    );
    assert_passed(&ran);
    let out = ran.stdout();
    assert!(!out.contains("leak-me-not"), "{out}");
    assert!(!out.contains("token-value"), "{out}");
    assert!(!out.contains("__CORDON"), "{out}");
    for want in [
        "GIVEN=given-value",
        // Passed to the program, and redacted from what it prints.
        "PASSED_TOKEN=[REDACTED:PASSED_TOKEN]",
        "LANG=C.UTF-8",
        "PATH=",
        "HOME=/home/cordon",
    ] {
        assert!(out.contains(want), "{want} missing: {out}");
    }
}

#[test]
fn allow_exec_permits_only_the_listed_programs() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(
        &["--allow-exec", "/bin/sh", "--allow-exec", "/bin/echo"],
        "/bin/echo allowed; /bin/cat /etc/hostname 2>/dev/null || echo cat-refused; cp /bin/cat ./mycat 2>/dev/null; ./mycat /etc/passwd >/dev/null 2>&1 || echo copy-refused",
    );
    assert_passed(&ran);
    assert_eq!(
        ran.stdout(),
        "allowed\ncat-refused\ncopy-refused\n",
        "{ran:#?}"
    );
    // The program itself must be on the list.
    let ran = run_in(
        &w.path(),
        &["--allow-exec", "/bin/echo"],
        &["/bin/cat", "/etc/passwd"],
        &[],
    );
    assert_ne!(ran.result.exit_code, Some(0), "{ran:#?}");
}

#[test]
fn rw_and_ro_binds_do_what_they_say() {
    require_sandbox!();
    let w = Work::new();
    let ro = tempfile::tempdir().unwrap();
    let rw = tempfile::tempdir().unwrap();
    let (r, x) = (
        ro.path().canonicalize().unwrap(),
        rw.path().canonicalize().unwrap(),
    );
    std::fs::write(r.join("f"), "ro-content\n").unwrap();
    let ran = w.run(
        &["--ro", &r.display().to_string(), "--rw", &x.display().to_string()],
        &format!("cat {r}/f; echo no > {r}/g 2>/dev/null && echo RO-WRITTEN; echo yes > {x}/h && echo rw-ok", r = r.display(), x = x.display()),
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "ro-content\nrw-ok\n", "{ran:#?}");
    assert_eq!(std::fs::read_to_string(x.join("h")).unwrap(), "yes\n");
    assert!(!r.join("g").exists());
}

#[test]
fn the_result_says_what_held() {
    require_sandbox!();
    let w = Work::new();
    let ran = w.run(&[], "true");
    assert_passed(&ran);
    let s = &ran.result.sandbox;
    for ns in ["user", "mount", "pid", "ipc", "uts", "cgroup", "net"] {
        assert!(s.namespaces.iter().any(|n| n == ns), "{s:?}");
    }
    assert_eq!(
        s.landlock_abi,
        sandboxed::doctor()["landlock_abi"]
            .as_u64()
            .map(|v| v as u32)
    );
    assert!(s.seccomp);
    // The helper reaps its own namespace: nothing is left for cordon to clean up.
    assert_eq!(ran.result.leaked.processes_killed, 0, "{ran:#?}");
    assert!(!ran.result.leaked.output_held_open, "{ran:#?}");
}

#[test]
fn processes_left_behind_are_killed_and_counted() {
    require_sandbox!();
    let w = Work::new();
    // PID 1 of the sandbox kills the background sleep when `sh` ends, and says so: the same
    // count as without the sandbox, where cordon kills it.
    let ran = w.run(&[], "sleep 100 & echo hi");
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "hi\n", "{ran:#?}");
    assert_eq!(ran.result.leaked.processes_killed, 1, "{ran:#?}");
    let ran = sandboxed::run_in(&w.path(), &[], &["true"], &[]);
    assert_passed(&ran);
    assert_eq!(ran.result.leaked.processes_killed, 0, "{ran:#?}");
}

#[test]
fn host_abstract_unix_sockets_stay_unreachable_with_host_network() {
    require_sandbox!();
    if sandboxed::doctor()["landlock_abi"].as_u64().unwrap_or(0) < 6 {
        sandboxed::missing_capability(
            "`cordon doctor` reports Landlock ABI < 6 (no abstract-socket scoping)",
        );
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    let name = format!("cordon-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten().take(4) {
            let _ = s.write_all(b"HOST-ABSTRACT\n");
        }
    });
    let w = Work::new();
    let ran = w.run(
        &["--network", "host"],
        &format!(
            "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\"); print(s.recv(64).decode())' 2>/dev/null; echo end"
        ),
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "end\n", "{ran:#?}");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn dangerous_syscalls_are_refused_by_seccomp() {
    require_sandbox!();
    let w = Work::new();
    // (name, number, args) on x86_64; each must fail with the errno the filter chose.
    let script = r#"
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
calls = [
    ("ptrace", 101, (16, 1, 0, 0)), ("syslog", 103, (3, 0, 0)), ("personality", 135, (8,)),
    ("mount", 165, (0, 0, 0, 0, 0)), ("swapon", 167, (0, 0)), ("reboot", 169, (0, 0, 0, 0)),
    ("init_module", 175, (0, 0, 0)), ("kexec_load", 246, (0, 0, 0, 0)), ("add_key", 248, (0, 0, 0, 0, 0)),
    ("keyctl", 250, (0, 0)), ("unshare", 272, (0x10000000,)), ("perf_event_open", 298, (0, 0, 0, 0, 0)),
    ("open_by_handle_at", 304, (0, 0, 0)), ("setns", 308, (0, 0)), ("bpf", 321, (0, 0, 0)),
    ("userfaultfd", 323, (0,)), ("clone_newuser", 56, (0x10000000 | 17, 0, 0, 0, 0)),
    ("x32_unshare", 0x40000000 + 272, (0x10000000,)), ("clone3", 435, (0, 0)),
    ("io_uring_setup", 425, (0, 0)), ("io_uring_enter", 426, (-1, 0, 0, 0, 0, 0)),
    ("io_uring_register", 427, (-1, 0, 0, 0)), ("modify_ldt", 154, (0, 0, 0)),
    ("socket_vsock", 41, (40, 1, 0)),
]
for name, nr, args in calls:
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
"#;
    let ran = sandboxed::run_in(&w.path(), &[], &["python3", "-c", script], &[]);
    assert_passed(&ran);
    for line in ran.stdout().lines() {
        let want = if line.starts_with("clone3 ") {
            "ENOSYS"
        } else {
            "EPERM"
        };
        assert!(line.ends_with(want), "{line}: {}", ran.stdout());
    }
    assert_eq!(ran.stdout().lines().count(), 24, "{ran:#?}");
}

#[test]
fn ordinary_programs_still_work() {
    require_sandbox!();
    let w = Work::new();
    let script = "import subprocess, threading, os, tempfile\n\
                  out = []\n\
                  t = threading.Thread(target=lambda: out.append(1)); t.start(); t.join()\n\
                  p = subprocess.run(['sh', '-c', 'echo sub | tr a-z A-Z'], capture_output=True, text=True)\n\
                  pid = os.fork()\n\
                  if pid == 0: os._exit(7)\n\
                  _, st = os.waitpid(pid, 0)\n\
                  f = tempfile.NamedTemporaryFile(); f.write(b'x'); f.flush()\n\
                  from multiprocessing import shared_memory\n\
                  shm = shared_memory.SharedMemory(create=True, size=16); shm.close(); shm.unlink()\n\
                  import multiprocessing as mp\n\
                  q = mp.Queue(); c = mp.Process(target=q.put, args=(5,)); c.start(); got = q.get(); c.join()\n\
                  import pty\n\
                  m, s = pty.openpty(); os.write(s, b'x')\n\
                  import socket\n\
                  socket.gethostbyname(socket.gethostname())\n\
                  print(out, p.stdout.strip(), os.waitstatus_to_exitcode(st), got, os.read(m, 1))";
    let ran = sandboxed::run_in(&w.path(), &[], &["python3", "-c", script], &[]);
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "[1] SUB 7 5 b'x'\n", "{ran:#?}");
}

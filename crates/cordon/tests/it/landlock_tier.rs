//! The landlock tier (issue 36): the confinement suite against a sandbox without namespaces,
//! the tier chosen by itself inside a cordon sandbox (`cordon run` in `cordon run`, `cordon
//! verify` in `cordon session exec`), and a host whose seccomp filter refuses user
//! namespaces as Docker's default profile does.

use std::path::{Path, PathBuf};
use std::process::Command;

use cordon_types::IsolationTier;

use crate::sandboxed::{
    self, Work, assert_passed, cordon, require_sandbox, unique_sleep, wait_until,
};

const LANDLOCK: &[&str] = &["--isolation", "landlock"];

/// The directory of the built `cordon` and its helper, shown read-only to an outer sandbox
/// whose program runs them.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_cordon"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap()
}

#[test]
fn the_landlock_tier_reports_itself_and_what_it_does_not_enforce() {
    require_sandbox!();
    let ran = Work::new().run(
        LANDLOCK,
        "echo $HOME $TMPDIR; touch \"$TMPDIR/t\" \"$HOME/h\"",
    );
    assert_passed(&ran);
    let s = &ran.result.sandbox;
    assert_eq!(s.tier, Some(IsolationTier::Landlock), "{s:#?}");
    assert!(s.namespaces.is_empty(), "{s:#?}");
    assert!(s.landlock_abi.is_some() && s.seccomp, "{s:#?}");
    let said = s.not_enforced.join("\n");
    for gap in [
        "a private /proc",
        "a private PID space",
        "a private /tmp",
        "a private loopback",
    ] {
        assert!(said.contains(gap), "{said}");
    }
    // The private home and temporary directory are cordon's own, removed after the run.
    let dirs: Vec<&str> = ran.stdout().split_whitespace().collect();
    assert_eq!(dirs.len(), 2, "{ran:#?}");
    for dir in dirs {
        assert!(dir.contains("/run/"), "{dir}");
        assert!(!Path::new(dir).exists(), "{dir} was left behind");
    }
    // The namespace tier says nothing is missing.
    let ran = Work::new().run(&[], "true");
    assert_eq!(ran.result.sandbox.tier, Some(IsolationTier::Namespaces));
    assert!(ran.result.sandbox.not_enforced.is_empty());
}

#[test]
fn files_outside_the_view_are_unreadable_and_unwritable() {
    require_sandbox!();
    let w = Work::new();
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    std::fs::write(outside.join("private.txt"), "HOST-PRIVATE").unwrap();
    let script = format!(
        "cat {o}/private.txt; touch {o}/planted; echo inside > ok.txt; cat ok.txt; \
         touch /tmp/planted-by-landlock-tier; cat /etc/shadow; echo end",
        o = outside.display()
    );
    let ran = w.run(LANDLOCK, &script);
    let out = ran.stdout();
    assert!(!out.contains("HOST-PRIVATE"), "{out}");
    assert!(
        out.contains("inside\n") && out.ends_with("end\n"),
        "{ran:#?}"
    );
    assert!(!outside.join("planted").exists());
    assert!(!Path::new("/tmp/planted-by-landlock-tier").exists());
    assert_eq!(
        std::fs::read_to_string(w.path().join("ok.txt")).unwrap(),
        "inside\n"
    );
}

#[test]
fn secrets_in_a_readable_toolchain_home_stay_unreadable() {
    require_sandbox!();
    // A home with a toolchain directory cordon shows (~/.cargo) holding a credential.
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::write(home.join(".cargo/bin/tool"), "#!/bin/sh\necho TOOL\n").unwrap();
    std::fs::write(
        home.join(".cargo/credentials.toml"),
        "token = \"SECRET-TOKEN\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "SECRET-KEY").unwrap();
    let h = home.display();
    let script = format!(
        "cat {h}/.cargo/bin/tool; cat {h}/.cargo/credentials.toml; cat {h}/.ssh/id_rsa; echo end"
    );
    let cargo_home = home.join(".cargo").display().to_string();
    let ran = Work::new().run_env(
        LANDLOCK,
        &script,
        &[
            ("HOME", h.to_string().as_str()),
            ("CARGO_HOME", &cargo_home),
        ],
    );
    let out = ran.stdout();
    assert!(
        out.contains("echo TOOL"),
        "the toolchain is readable: {ran:#?}"
    );
    assert!(!out.contains("SECRET"), "{out}");
}

#[test]
fn no_network_without_the_flag_and_the_environment_is_scrubbed() {
    require_sandbox!();
    let probe = "import socket\n\
                 for fam, kind in [(socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_NETLINK, socket.SOCK_RAW)]:\n\
                 \x20   try:\n\
                 \x20       socket.socket(fam, kind); print('allowed')\n\
                 \x20   except OSError:\n\
                 \x20       print('refused')\n\
                 import os; print(os.environ.get('LANDLOCK_TIER_HOST_SECRET', 'scrubbed'))\n";
    let ran = Work::new().run_env(
        LANDLOCK,
        &format!("python3 -c \"{probe}\""),
        &[("LANDLOCK_TIER_HOST_SECRET", "leaked")],
    );
    assert_passed(&ran);
    assert_eq!(
        ran.stdout(),
        "refused\nrefused\nrefused\nrefused\nscrubbed\n"
    );
    // With the host's network, sockets are the program's.
    let ran = Work::new().run(
        &["--isolation", "landlock", "--network", "host"],
        &format!("python3 -c \"{probe}\""),
    );
    assert_passed(&ran);
    assert!(
        ran.stdout().starts_with("allowed\nallowed\nallowed\n"),
        "{ran:#?}"
    );
}

#[test]
fn host_processes_cannot_be_signalled_nor_abstract_sockets_reached() {
    require_sandbox!();
    if sandboxed::doctor()["landlock_abi"].as_u64().unwrap_or(0) < 6 {
        sandboxed::missing_capability("Landlock ABI 6 scopes signals and abstract sockets");
        return;
    }
    let mut victim = Command::new("sleep").arg(unique_sleep(60)).spawn().unwrap();
    // An abstract socket listening on the host.
    let name = format!("cordon-landlock-tier-{}", std::process::id());
    let address =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            name.as_bytes(),
        )
        .unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    let script = format!(
        "kill -TERM {pid} && echo SIGNALLED || echo refused; \
         python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
         s.connect(b'\\\\0{name}'); print('CONNECTED')\" 2>/dev/null || echo refused",
        pid = victim.id()
    );
    // Unix sockets allowed (Landlock below ABI 9 cannot confine pathname ones): the abstract
    // one is still out of reach by Landlock's scope.
    let ran = Work::new().run(
        &[
            "--isolation",
            "landlock",
            "--allow-degraded",
            "unix-sockets",
        ],
        &script,
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "refused\nrefused\n", "{ran:#?}");
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the host's process was signalled"
    );
    drop(listener);
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
fn the_whole_tree_dies_on_timeout_daemons_included() {
    require_sandbox!();
    let w = Work::new();
    let sleep = unique_sleep(61);
    let script = format!(
        "trap '' TERM; setsid sh -c 'sleep {sleep} & echo $! > daemon.pid' </dev/null >/dev/null 2>&1 & \
         while [ ! -s daemon.pid ]; do :; done; echo ready; while :; do sleep 1; done"
    );
    let ran = w.run(
        &[
            "--isolation",
            "landlock",
            "--timeout",
            "1s",
            "--grace",
            "200ms",
        ],
        &script,
    );
    assert_eq!(ran.code, 124, "{ran:#?}");
    assert_eq!(ran.stdout(), "ready\n");
    wait_until(
        "the daemon to be gone",
        std::time::Duration::from_secs(10),
        || sandboxed::host_processes_with_cmdline(&["sleep", &sleep]).is_empty(),
    );
}

#[test]
fn processes_left_behind_are_killed_and_counted_and_a_clean_run_has_none() {
    require_sandbox!();
    let w = Work::new();
    // A background sleep and a double-forked daemon in a session of its own both outlive
    // `sh` (which waits for the daemon's parent to end first, so that exactly two are left):
    // the helper, their subreaper, kills and counts both.
    let sleep = unique_sleep(62);
    let ran = w.run(
        LANDLOCK,
        &format!(
            "sleep {sleep} & setsid sh -c 'sleep {sleep} & echo $! > daemon.pid' \
             </dev/null >/dev/null 2>&1 & wait $!; test -s daemon.pid && echo hi"
        ),
    );
    assert_passed(&ran);
    assert_eq!(ran.stdout(), "hi\n", "{ran:#?}");
    assert_eq!(ran.result.leaked.processes_killed, 2, "{ran:#?}");
    assert!(
        sandboxed::host_processes_with_cmdline(&["sleep", &sleep]).is_empty(),
        "a leftover outlived the result"
    );
    // With nothing left behind, nothing is counted.
    for _ in 0..3 {
        let ran = w.run(LANDLOCK, "echo clean");
        assert_passed(&ran);
        assert_eq!(ran.result.leaked.processes_killed, 0, "{ran:#?}");
    }
}

#[test]
fn limits_hold_where_cgroups_are_writable() {
    require_sandbox!();
    if !sandboxed::cgroup_limits_available() {
        return;
    }
    let ran = Work::new().run(
        &["--isolation", "landlock", "--pids", "16"],
        "for i in $(seq 40); do sleep 2 & done 2>/dev/null; wait; echo done",
    );
    assert!(
        ran.result
            .limits_hit
            .contains(&cordon_types::LimitKind::Pids),
        "{ran:#?}"
    );
    assert_eq!(
        ran.result.sandbox.enforcement.pids,
        cordon_types::Enforcement::CgroupV1,
        "{ran:#?}"
    );
}

#[test]
fn cordon_inside_cordon_uses_the_landlock_tier_by_itself() {
    require_sandbox!();
    let w = Work::new();
    let bin = bin_dir();
    let inner = bin.join("cordon");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x"), "OUTER-ONLY").unwrap();
    // The inner cordon's own state lives in the outer sandbox's private home.
    let ran = sandboxed::run_in(
        &w.path(),
        &["--ro", bin.to_str().unwrap()],
        &[
            inner.to_str().unwrap(),
            "run",
            "--json",
            "--",
            "sh",
            "-c",
            "echo $$; cat /proc/1/cmdline | tr '\\0' ' '; echo; echo inner > inner.txt",
        ],
        &[],
    );
    assert_passed(&ran);
    let inner: cordon_types::RunResult = serde_json::from_str(ran.stdout()).unwrap();
    assert_eq!(inner.exit_code, Some(0), "{inner:#?}");
    assert_eq!(
        inner.sandbox.tier,
        Some(IsolationTier::Landlock),
        "{inner:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.path().join("inner.txt")).unwrap(),
        "inner\n"
    );
    // Asked for the namespace tier inside, the inner cordon refuses and says how to fix it.
    let ran = sandboxed::run_in(
        &w.path(),
        &["--ro", bin.to_str().unwrap()],
        &[
            bin.join("cordon").to_str().unwrap(),
            "run",
            "--isolation",
            "namespaces",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(ran.result.exit_code, Some(125), "{ran:#?}");
    assert!(
        ran.result.stderr.head.contains("--isolation landlock"),
        "{ran:#?}"
    );
}

#[test]
fn verify_inside_a_session_uses_the_landlock_tier_and_says_so() {
    require_sandbox!();
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(repo.path())
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    std::fs::write(
        repo.path().join("cordon.toml"),
        "[[stage]]\nname = \"check\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"test -f README && echo checked\"]\n",
    )
    .unwrap();
    std::fs::write(repo.path().join("README"), "hello\n").unwrap();
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-qm",
        "init",
    ]);
    let home = tempfile::tempdir().unwrap();
    let created = cordon()
        .env("CORDON_HOME", home.path())
        .current_dir(repo.path())
        .args(["session", "create", "--repo", "."])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let id = String::from_utf8_lossy(&created.stdout)
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let bin = bin_dir();
    let out = cordon()
        .env("CORDON_HOME", home.path())
        .args(["session", "exec", "--ro", bin.to_str().unwrap(), &id, "--"])
        .arg(bin.join("cordon"))
        .args(["verify", "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["promotion"]["allowed"], true, "{report:#}");
    assert_eq!(report["isolation"]["tier"], "landlock", "{report:#}");
    assert_eq!(
        report["stages"][0]["isolation"]["tier"], "landlock",
        "{report:#}"
    );
}

/// A Python program that installs a seccomp filter refusing `unshare` and `clone` with
/// `CLONE_NEWUSER` (`EPERM`) and `clone3` (`ENOSYS`, as container runtimes do), then executes
/// its arguments: the host of a container whose profile denies user namespaces.
const DENY_USERNS: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_clone, SYS_unshare, SYS_clone3 = 56, 272, 435
EPERM, ENOSYS = 1, 38
RET_ALLOW, RET_ERRNO = 0x7fff0000, 0x00050000
CLONE_NEWUSER = 0x10000000
def stmt(code, k): return struct.pack("HBBI", code, 0, 0, k)
def jump(code, k, jt, jf): return struct.pack("HBBI", code, jt, jf, k)
prog = b"".join([
    stmt(0x20, 0),                          # 0: A = nr
    jump(0x15, SYS_unshare, 5, 0),          # 1: unshare -> 7
    jump(0x15, SYS_clone3, 5, 0),           # 2: clone3 -> 8
    jump(0x15, SYS_clone, 0, 2),            # 3: clone -> 4, else -> 6
    stmt(0x20, 16),                         # 4: A = flags (low 32 bits)
    jump(0x45, CLONE_NEWUSER, 1, 0),        # 5: NEWUSER -> 7, else -> 6
    stmt(0x06, RET_ALLOW),                  # 6: allow
    stmt(0x06, RET_ERRNO | EPERM),          # 7: refuse
    stmt(0x06, RET_ERRNO | ENOSYS),         # 8: no clone3
])
buf = ctypes.create_string_buffer(bytes(prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
assert libc.prctl(38, 1, 0, 0, 0) == 0                      # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0     # PR_SET_SECCOMP, FILTER
os.execv(sys.argv[1], sys.argv[1:])
"#;

#[test]
fn a_container_that_refuses_user_namespaces_gets_the_remedy_or_the_landlock_tier() {
    require_sandbox!();
    if !cfg!(target_arch = "x86_64") {
        sandboxed::missing_capability("the filter above uses x86_64 system call numbers");
        return;
    }
    let w = Work::new();
    let in_container = |flags: &[&str]| {
        let mut cmd = Command::new("python3");
        cmd.current_dir(w.path())
            .envs(cordon().get_envs().filter_map(|(k, v)| Some((k, v?))))
            .args(["-c", DENY_USERNS])
            .arg(env!("CARGO_BIN_EXE_cordon"))
            .args(["run", "--json"])
            .args(flags)
            .args(["--", "sh", "-c", "echo ran"]);
        cmd.output().unwrap()
    };
    // Without a flag: refused, naming the container's seccomp profile and the other tier.
    let out = in_container(&[]);
    let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(125), "{result:#?}");
    let reason = result.failure.map(|f| f.reason).unwrap_or_default();
    assert!(
        reason.contains("seccomp filter") && reason.contains("--isolation landlock"),
        "{reason}"
    );
    // With the landlock tier asked for: it runs, and says how.
    let out = in_container(&["--isolation", "landlock"]);
    let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result.exit_code, Some(0), "{result:#?}");
    assert_eq!(result.stdout.head, "ran\n");
    assert_eq!(result.sandbox.tier, Some(IsolationTier::Landlock));
    // So does the job service's way of accepting it: --allow-degraded namespaces.
    let out = in_container(&["--allow-degraded", "namespaces"]);
    let result: cordon_types::RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result.sandbox.tier,
        Some(IsolationTier::Landlock),
        "{result:#?}"
    );
}

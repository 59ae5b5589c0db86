//! cordon's own output: bounded by the run's deadline when nobody reads it, ended by
//! SIGTERM, and safe for the terminal it reaches (round three's security review, W2 and W3).

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use crate::support::{TestDir, cordon, sandbox_available};

/// An upper bound that only a hang reaches.
const HANG: Duration = Duration::from_secs(30);

/// A FIFO in `dir` that is held open for reading (so writes succeed until it is full) and
/// never read: cordon's stdout behind it blocks once it is full.
fn unread_fifo(dir: &Path) -> (std::fs::File, std::fs::File) {
    let path = dir.join("out.fifo");
    let status = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(status.success());
    // Read-write: the open does not wait for a writer, and the FIFO has a reader.
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .unwrap();
    (holder, writer)
}

/// Waits for `child` to exit, at most [`HANG`]; how long it took.
fn wait_bounded(child: &mut std::process::Child) -> (std::process::ExitStatus, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, started.elapsed());
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            panic!("cordon did not end within {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_blocked_stdout_does_not_hold_cordon_past_the_deadline() {
    if !sandbox_available() {
        return;
    }
    let dir = TestDir::new();
    let (_holder, fifo) = unread_fifo(dir.path());
    let started = Instant::now();
    let mut child = cordon()
        .current_dir(dir.path())
        .args(["run", "--timeout", "2s", "--grace", "1s", "--", "yes"])
        .stdout(fifo)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, _) = wait_bounded(&mut child);
    let took = started.elapsed();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(124), "{stderr}");
    // Deadline (2 s), grace (1 s) and the leak window: cordon is gone soon after.
    assert!(took < Duration::from_secs(10), "took {took:?}: {stderr}");
    assert!(stderr.contains("bytes not passed through"), "{stderr}");
}

#[test]
fn sigterm_ends_cordon_while_its_stdout_is_blocked() {
    if !sandbox_available() {
        return;
    }
    let dir = TestDir::new();
    let (_holder, fifo) = unread_fifo(dir.path());
    let mut child = cordon()
        .current_dir(dir.path())
        .args(["run", "--timeout", "10m", "--grace", "1s", "--"])
        .args(["sh", "-c", "touch started; exec yes"])
        .stdout(fifo)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = dir.path().join("started");
    let deadline = Instant::now() + HANG;
    while !started.exists() {
        assert!(Instant::now() < deadline, "the program never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let the FIFO fill: then cordon's writer is blocked for good.
    std::thread::sleep(Duration::from_millis(300));
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let (status, took) = wait_bounded(&mut child);
    assert_eq!(status.code(), Some(143));
    // The grace period (1 s) and some slack.
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// Runs `cordon ARGS` with a pseudo-terminal as its stdout and stderr (python's `pty`), and
/// returns what reached the terminal. With `read` false the terminal is never read (as a
/// terminal stopped with Ctrl-S): the script only waits for cordon to end.
fn through_a_terminal(dir: &Path, args: &[&str], read: bool) -> (Option<i32>, Vec<u8>) {
    let script = r#"
import os, pty, sys, time
pid, master = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:-1])
out = b""
read = sys.argv[-1] == "read"
deadline = time.time() + 30
while True:
    if read:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            chunk = b""
        out += chunk
        if chunk:
            continue
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.time() > deadline:
        os.kill(pid, 9)
        sys.exit("cordon did not end")
    time.sleep(0.02)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(status) & 0xff)
"#;
    let out = Command::new("python3")
        .current_dir(dir)
        .env("CORDON_HOME", support::test_home())
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_cordon"))
        .args(args)
        .arg(if read { "read" } else { "stopped" })
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("did not end"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), out.stdout)
}

#[test]
fn a_stopped_terminal_does_not_hold_cordon_past_the_deadline() {
    if !sandbox_available() {
        return;
    }
    let dir = TestDir::new();
    let started = Instant::now();
    let (code, _) = through_a_terminal(
        dir.path(),
        &["run", "--timeout", "2s", "--grace", "1s", "--", "yes"],
        false,
    );
    assert_eq!(code, Some(124));
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn escape_sequences_that_act_on_the_terminal_never_reach_it() {
    if !sandbox_available() {
        return;
    }
    let dir = TestDir::new();
    // A window title, a clipboard write (OSC 52), a screen clear, a cursor-position query,
    // the alternate screen, then colour and a progress line that must arrive as they are.
    let hostile = r"printf '\033]0;owned\007\033]52;c;SGVsbG8=\007\033[2J\033[6n\033[?1049h'; \
                    printf '\033[1;31mred\033[0m 10%%\r\033[K20%%\n'";
    let (code, seen) = through_a_terminal(dir.path(), &["run", "--", "sh", "-c", hostile], true);
    assert_eq!(code, Some(0));
    let seen = String::from_utf8_lossy(&seen).replace("\r\n", "\n");
    assert_eq!(seen, "\u{1b}[1;31mred\u{1b}[0m 10%\r\u{1b}[K20%\n");
    // `--raw-output` passes everything.
    let (code, seen) = through_a_terminal(
        dir.path(),
        &["run", "--raw-output", "--", "sh", "-c", hostile],
        true,
    );
    assert_eq!(code, Some(0));
    assert!(
        String::from_utf8_lossy(&seen).contains("\u{1b}]52;c;SGVsbG8="),
        "{seen:?}"
    );
    // Not on a terminal: untouched.
    let out = cordon()
        .current_dir(dir.path())
        .args(["run", "--", "sh", "-c", hostile])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\u{1b}]52;c;SGVsbG8="),
        "{out:?}"
    );
}

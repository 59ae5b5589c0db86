//! What sits behind cordon's own stdin/stdout can neither stall its deadlines nor be taken
//! over by the program.

use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::{TestDir, cordon, git, is_alive, read_pid};

/// A FIFO opened for reading (so writers do not get ENXIO/EPIPE) that nobody reads.
fn stuck_reader(dir: &Path) -> (std::path::PathBuf, OwnedFd) {
    let fifo = dir.join("out.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    (fifo, reader.into())
}

/// Polls `check` until it holds or `limit` passes (a generous "does not hang" bound).
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check()
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

/// Regression: with cordon's stdout on a pipe nobody reads, the passthrough write blocked the
/// supervision loop, and `--timeout 2s` let the tree run 15 s and more.
#[test]
fn a_stdout_nobody_reads_does_not_stall_the_timeout() {
    let dir = TestDir::new();
    let home = TestDir::new();
    let (fifo, reader) = stuck_reader(dir.path());
    let pidfile = dir.path().join("pid");
    let script = format!(
        "echo $$ > {}; head -c 8000000 /dev/zero; sleep 100",
        pidfile.display()
    );
    let started = Instant::now();
    let mut child = cordon()
        .env("CORDON_HOME", home.path())
        .args([
            "run",
            "--no-sandbox",
            "--timeout",
            "1s",
            "--grace",
            "1s",
            "--",
        ])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(30), || pidfile.exists()
        && std::fs::read_to_string(&pidfile)
            .is_ok_and(|t| t.ends_with('\n'))));
    let pid = read_pid(&pidfile);
    assert!(
        eventually(Duration::from_secs(30), || !is_alive(pid)),
        "the program outlived its timeout while stdout was blocked"
    );
    // The run is recorded as timed out while the reader is still stuck.
    let recorded = eventually(Duration::from_secs(30), || {
        let out = cordon()
            .env("CORDON_HOME", home.path())
            .args(["runs", "list", "--json"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("\"status\": \"timeout\"")
    });
    assert!(
        recorded,
        "the run was not recorded before the output was flushed"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "does not hang: {:?}",
        started.elapsed()
    );
    // The reader goes away: cordon stops writing and exits with the timeout's code.
    drop(reader);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(30)), Some(124));
    let _ = std::fs::remove_file(&fifo);
}

/// A slow reader still gets every byte, in order (the pause is backpressure, not loss).
#[test]
fn a_slow_reader_gets_every_byte() {
    let mut child = cordon()
        .args(["run", "--no-record", "--", "sh", "-c", "seq 1 200000"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        use std::io::Read;
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
        if all.len() < 200_000 {
            // Slower than the program at first, so that the queue fills and reading pauses.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(child.wait().unwrap().success());
    let expected: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    assert!(
        all == expected.as_bytes(),
        "{} bytes, expected {}",
        all.len(),
        expected.len()
    );
}

/// `command` in a fresh pseudo-terminal (its controlling terminal), with `input` typed into
/// it. Returns its exit code, everything the terminal showed, and whether the terminal still
/// echoes afterwards.
fn in_pty(mut command: std::process::Command, input: &[u8]) -> (Option<i32>, String, bool) {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    use std::os::unix::process::CommandExt;
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty fills two descriptors; the name/termios/winsize arguments may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0);
    // SAFETY: both descriptors were just opened and are owned here.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    command
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap());
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    // The command holds copies of the terminal's slave side: the reader sees the end only
    // once every copy is closed.
    drop(command);
    let mut writer = std::fs::File::from(master.try_clone().unwrap());
    writer.write_all(input).unwrap();
    let reader_fd = master.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut reader = std::fs::File::from(reader_fd);
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once every slave descriptor is closed: the end.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let modes = rustix::termios::tcgetattr(&slave).unwrap();
    let echoes = modes
        .local_modes
        .contains(rustix::termios::LocalModes::ECHO);
    drop(slave);
    drop(writer);
    drop(master);
    let shown = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    (code, shown, echoes)
}

/// `cordon ARGS` in a fresh pseudo-terminal (see [`in_pty`]), with a throw-away home.
fn cordon_in_pty(args: &[&str], input: &[u8]) -> (Option<i32>, String, bool) {
    let home = TestDir::new();
    let mut command = cordon();
    command.env("CORDON_HOME", home.path()).args(args);
    in_pty(command, input)
}

/// Regression: the program inherited the user's terminal as stdin, could turn echo off (and
/// leave it off), and read keystrokes. By default it now reads a pipe cordon feeds.
#[test]
fn by_default_the_program_never_holds_cordons_terminal() {
    let script = "test -t 0 && echo IS-A-TTY || echo NOT-A-TTY; \
                  stty -echo 2>/dev/null && echo MODES-CHANGED; \
                  read line; echo got:$line";
    for mode in [&["--no-sandbox"][..], &[][..]] {
        let mut args = vec!["run", "--no-record"];
        args.extend_from_slice(mode);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let (code, shown, echoes) = cordon_in_pty(&args, b"typed-input\n");
        assert_eq!(code, Some(0), "{mode:?}: {shown}");
        assert!(shown.contains("NOT-A-TTY"), "{mode:?}: {shown}");
        assert!(!shown.contains("MODES-CHANGED"), "{mode:?}: {shown}");
        assert!(
            shown.contains("got:typed-input"),
            "input is forwarded: {shown}"
        );
        assert!(echoes, "{mode:?}: the terminal still echoes");
    }
}

/// With `--stdin inherit` the program gets the terminal itself; whatever modes it leaves,
/// cordon puts the terminal back as it was.
#[test]
fn inherited_terminal_modes_are_restored_when_the_program_ends() {
    let (code, shown, echoes) = cordon_in_pty(
        &[
            "run",
            "--no-record",
            "--stdin",
            "inherit",
            "--",
            "sh",
            "-c",
            "test -t 0 && echo IS-A-TTY; stty -echo && echo MODES-CHANGED",
        ],
        b"",
    );
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains("IS-A-TTY") && shown.contains("MODES-CHANGED"),
        "{shown}"
    );
    assert!(echoes, "echo was restored: {shown}");
}

/// cordon in the background of its terminal (a shell with job control) is not stopped by
/// SIGTTIN when it forwards input: the run completes and is reported.
#[test]
fn a_background_cordon_is_not_stopped_by_its_terminal() {
    let home = TestDir::new();
    let script = format!(
        "set -m; {} run --no-record --no-sandbox -- sh -c 'echo started; sleep 0.5; echo finished' & wait $!; echo status:$?",
        env!("CARGO_BIN_EXE_cordon")
    );
    let mut shell = std::process::Command::new("sh");
    shell.env("CORDON_HOME", home.path()).args(["-c", &script]);
    // Typed input waits in the terminal: reading it from the background would stop cordon.
    let (code, shown, _) = in_pty(shell, b"typed-ahead\n");
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("finished"), "{shown}");
    assert!(shown.contains("status:0"), "{shown}");
}

/// Issue 19 items 11 and 12. Regression: a stage's output with `ESC[2J…gate: PASSED` and
/// stage names with escape sequences reached the terminal raw (verify summary, live view,
/// `runs show`, `runs logs`), and stage names with backticks, emphasis, links and HTML
/// rendered as markup in the Markdown report. Now nothing cordon renders carries an escape
/// sequence of the program's, Markdown is inert, names with controls are refused — and the
/// recorded bytes stay exact.
#[test]
fn program_output_and_names_cannot_drive_the_terminal_or_the_markdown() {
    let repo = TestDir::new();
    let home = TestDir::new();
    let name = "**bold** [x](http://e) <img src=x> `tick`";
    repo.write(
        "cordon.toml",
        &format!(
            "[[stage]]\nname = \"{name}\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"printf '\\\\033[2J\\\\033[Hgate: PASSED\\\\n' >&2; printf '\\\\033]0;owned\\\\007out\\\\n'; exit 1\"]\n"
        ),
    );
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-qm", "init"]);
    let markdown = home.path().join("report.md");
    let mut command = cordon();
    command
        .env("CORDON_HOME", home.path())
        .args(["verify", "--repo"])
        .arg(repo.path())
        .arg("--markdown")
        .arg(&markdown);
    let (code, shown, _) = in_pty(command, b"");
    assert_eq!(code, Some(1), "{shown}");
    assert!(shown.contains("gate: BLOCKED"), "{shown}");
    for forged in ["\x1b[2J", "\x1b[H", "\x1b]0;"] {
        assert!(
            !shown.contains(forged),
            "{forged:?} reached the terminal: {shown:?}"
        );
    }
    let md = std::fs::read_to_string(&markdown).unwrap();
    // The name is escaped where it is text, and a code span (inert) where it is quoted.
    let quoted = format!("`` {name} ``");
    for line in md.lines() {
        let outside_code = line.replace(&quoted, "");
        assert!(!outside_code.contains("<img"), "{line}\n{md}");
        assert!(!outside_code.contains("**bold**"), "{line}\n{md}");
        assert!(
            !outside_code.contains(" [x](http"),
            "an unescaped link: {line}\n{md}"
        );
    }
    assert!(md.contains("\\*\\*bold\\*\\*"), "{md}");
    assert!(!md.contains('\x1b'), "{md:?}");

    // The recorded bytes are exact; a terminal gets them inert.
    let list = cordon()
        .env("CORDON_HOME", home.path())
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let id = list["runs"][0]["id"].as_str().unwrap().to_owned();
    let piped = cordon()
        .env("CORDON_HOME", home.path())
        .args(["runs", "logs", &id])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&piped.stdout).contains("\x1b]0;owned\x07out"),
        "{piped:?}"
    );
    for args in [&["runs", "logs", &id][..], &["runs", "show", &id]] {
        let mut command = cordon();
        command.env("CORDON_HOME", home.path()).args(args);
        let (code, shown, _) = in_pty(command, b"");
        assert_eq!(code, Some(0), "{shown}");
        assert!(!shown.contains('\x1b'), "{args:?}: {shown:?}");
    }

    // A stage name with a control character is refused.
    repo.write(
        "cordon.toml",
        "[[stage]]\nname = \"a\\u001b[2Jb\"\ncategory = \"test\"\nrun = [\"true\"]\n",
    );
    git(repo.path(), &["commit", "-qam", "escape"]);
    let out = cordon()
        .env("CORDON_HOME", home.path())
        .args(["verify", "--no-record", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("control character"));
}

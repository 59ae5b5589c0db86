//! What sits behind cordon's own stdin/stdout can neither stall its deadlines nor be taken
//! over by the program.

mod support;

use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::{TestDir, cordon, is_alive, read_pid};

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
        .args(["run", "--no-sandbox", "--timeout", "1s", "--grace", "1s", "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(30), || pidfile.exists()
        && std::fs::read_to_string(&pidfile).is_ok_and(|t| t.ends_with('\n'))));
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
    assert!(recorded, "the run was not recorded before the output was flushed");
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
    assert!(all == expected.as_bytes(), "{} bytes, expected {}", all.len(), expected.len());
}

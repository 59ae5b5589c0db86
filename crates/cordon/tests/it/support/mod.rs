//! What the tests of `cordon` share: the fixtures of `cordon-test-support` (re-exported, so
//! that a test names one module for its helpers), and what only these tests use: run results
//! and the `cordon.error/v1` documents of a failed `--json` command.

use cordon_types::RunResult;

pub use cordon_test_support::*;

pub mod error_document;

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

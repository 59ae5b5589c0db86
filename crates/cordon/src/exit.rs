//! Exit codes and the rendering of errors at the edge.
//!
//! | code | meaning |
//! |------|---------|
//! | 0    | success (`run`: the program exited 0) |
//! | 1–123| `run`: the program's own exit code |
//! | 124  | `run`: cordon's timeout fired |
//! | 125  | cordon itself failed (bad flag, cannot spawn, sandbox unavailable) |
//! | 126  | `run`: the program is not executable |
//! | 127  | `run`: the program was not found |
//! | 128+N| `run`: the program died of signal N, or cordon was stopped by signal N |
//! | 2    | other commands: bad usage |

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

/// cordon itself failed: bad flag, cannot spawn, a protection cannot be enforced.
pub const CORDON_FAILED: u8 = 125;
/// Bad usage of a command other than `run`.
pub const USAGE: u8 = 2;

/// Renders an error as `error:` plus its `Caused by:` chain, and returns exit code 125.
pub fn report_error(error: &anyhow::Error) -> ExitCode {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "error: {error}");
    let mut causes = error.chain().skip(1).peekable();
    if causes.peek().is_some() {
        let _ = writeln!(stderr, "Caused by:");
        for cause in causes {
            let _ = writeln!(stderr, "  {cause}");
        }
    }
    if let Some(hint) = error.downcast_ref::<Hinted>() {
        let _ = writeln!(stderr, "hint: {}", hint.hint);
    }
    ExitCode::from(CORDON_FAILED)
}

/// An error that carries a hint for the user (how to fix it).
#[derive(Debug)]
pub struct Hinted {
    /// What went wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl std::error::Error for Hinted {}

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Prints a clap error (or help/version) and picks the exit code: help and version exit 0;
/// bad usage of `run` exits 125 (its other codes belong to the program), of anything else 2.
pub fn clap_error(error: clap::Error, argv: &[OsString]) -> ExitCode {
    use clap::error::ErrorKind;
    let _ = error.print();
    match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => ExitCode::SUCCESS,
        _ => {
            let is_run = argv
                .iter()
                .skip(1)
                .find(|a| !a.to_string_lossy().starts_with('-'))
                .is_some_and(|a| a == "run");
            ExitCode::from(if is_run { CORDON_FAILED } else { USAGE })
        }
    }
}

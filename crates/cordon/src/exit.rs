//! Exit codes and the one renderer of errors at the edge.
//!
//! | code | `cordon run` | `cordon verify` | other commands |
//! |------|--------------|-----------------|----------------|
//! | 0    | the program exited 0 | gate passed | success |
//! | 1    | (the program's own) | gate blocked | the operation failed |
//! | 2    | (the program's own) | bad usage or config | bad usage, unknown id, refused patch |
//! | 3    | (the program's own) | infrastructure error | — |
//! | 124  | cordon's timeout fired | — | — |
//! | 125  | cordon failed (bad flag, cannot supervise, unenforceable protection) | — | cordon failed |
//! | 126/127 | not executable / not found | — | — |
//! | 128+N| died of signal N, or cordon got signal N | interrupted by signal N | — |
//!
//! Every command returns `Result<ExitCode, CliError>`; [`render`] prints a [`CliError`] the
//! same way everywhere: `error:` with the message, `Caused by:` with each cause that the
//! lines above do not already say, then `hint:` lines — never a hint as the headline.

use std::ffi::OsString;
use std::fmt::Display;
use std::io::Write;
use std::process::ExitCode;

/// The operation failed (other commands), or the gate blocked (`verify`).
pub const FAILED: u8 = 1;
/// Bad usage, bad configuration, an unknown id, a refused patch (commands other than `run`).
pub const USAGE: u8 = 2;
/// `verify`: cordon could not do its job.
pub const INFRA: u8 = 3;
/// cordon itself failed: bad flag of `run`, cannot spawn, a protection cannot be enforced.
pub const CORDON_FAILED: u8 = 125;

/// An error on its way to the user: what went wrong (with its causes), how to fix it, and
/// the exit code it means.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    error: anyhow::Error,
    hints: Vec<String>,
}

impl CliError {
    /// An error that exits with `code`.
    pub fn new(code: u8, error: impl Into<anyhow::Error>) -> Self {
        CliError {
            code,
            error: error.into(),
            hints: Vec::new(),
        }
    }

    /// An error made of a message, exiting with `code`.
    pub fn msg(code: u8, message: impl Display) -> Self {
        Self::new(code, anyhow::anyhow!("{message}"))
    }

    /// Adds a hint (shown after the error).
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// Adds a hint when there is one.
    pub fn maybe_hint(self, hint: Option<impl Into<String>>) -> Self {
        match hint {
            Some(hint) => self.hint(hint),
            None => self,
        }
    }

    /// Wraps the error with what was being done.
    pub fn context(mut self, context: impl Display + Send + Sync + 'static) -> Self {
        self.error = self.error.context(context);
        self
    }

    /// The exit code.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The error and its causes, each said once, without the `error:` prefix (for documents).
    pub fn message(&self) -> String {
        let mut lines = lines(self);
        lines.retain(|l| !l.starts_with("hint: ") && l != "Caused by:");
        lines
            .iter()
            .map(|l| l.strip_prefix("error: ").unwrap_or(l.trim()))
            .collect::<Vec<_>>()
            .join(": ")
            .trim_end_matches([':', ' '])
            .to_owned()
    }

    /// The hints.
    pub fn hints(&self) -> &[String] {
        &self.hints
    }
}

/// Any other error is cordon's own failure (125).
impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        CliError::new(CORDON_FAILED, error)
    }
}

impl From<std::io::Error> for CliError {
    fn from(error: std::io::Error) -> Self {
        CliError::new(CORDON_FAILED, error)
    }
}

impl From<serde_json::Error> for CliError {
    fn from(error: serde_json::Error) -> Self {
        CliError::new(CORDON_FAILED, error)
    }
}

/// The lines [`render`] prints for `error`.
pub fn lines(error: &CliError) -> Vec<String> {
    let mut lines = vec![format!("error: {}", error.error)];
    let mut said = error.error.to_string();
    let mut causes = Vec::new();
    for cause in error.error.chain().skip(1) {
        let text = cause.to_string();
        // A cause whose text the lines above already contain adds nothing (messages often
        // quote their source).
        if text.is_empty() || said.contains(&text) {
            continue;
        }
        said.push('\n');
        said.push_str(&text);
        causes.push(text);
    }
    if !causes.is_empty() {
        lines.push("Caused by:".to_owned());
        lines.extend(causes.into_iter().map(|c| format!("  {c}")));
    }
    lines.extend(error.hints.iter().map(|h| format!("hint: {h}")));
    lines
}

/// Prints `error` on stderr and returns its exit code.
pub fn render(error: &CliError) -> ExitCode {
    let mut stderr = std::io::stderr().lock();
    // Messages quote what they are about (a stage name, git's own error output): none of it
    // may drive the terminal.
    for line in lines(error) {
        let _ = writeln!(stderr, "{}", cordon_types::text::for_terminal(&line));
    }
    ExitCode::from(error.code)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("patch refused: {0}")]
    struct Quoting(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("a/../../x leaves the workspace")]
    struct Inner;

    #[test]
    fn a_cause_is_said_once_and_hints_come_last() {
        let error = CliError::new(USAGE, Quoting(Inner))
            .context("cannot apply the patch")
            .hint("the patch may only change files inside the workspace");
        assert_eq!(
            lines(&error),
            [
                "error: cannot apply the patch",
                "Caused by:",
                "  patch refused: a/../../x leaves the workspace",
                "hint: the patch may only change files inside the workspace",
            ]
        );
        assert_eq!(error.code(), USAGE);
    }

    #[test]
    fn other_errors_are_cordons_own_failure() {
        let error: CliError = anyhow::anyhow!("boom").into();
        assert_eq!(error.code(), CORDON_FAILED);
        assert_eq!(lines(&error), ["error: boom"]);
    }
}

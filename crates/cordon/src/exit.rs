//! Exit codes, one table for every command, and the one renderer of errors at the edge.
//!
//! | code    | [`Exit`]          | meaning |
//! |---------|-------------------|---------|
//! | 0       | `Success`         | success; `verify`: the gate passed; `doctor`: the default policy can be enforced |
//! | 1       | `Failed`          | the operation failed: `verify`'s gate blocked, `doctor`'s policy cannot be enforced, `gc` could not remove something, a session refused (diverged, busy), the job service refused or the job failed |
//! | 2       | `Usage`           | usage error: a bad flag or value, an unknown id, a bad configuration file, a refused patch — clap's own errors included |
//! | 124     | `TimedOut`, `Run(124)` | `session`: a `--wait` ran out; `run`: cordon's timeout fired |
//! | 125     | `CordonFailed`, `Run(125)` | cordon itself failed: it could not do its job (the host, the run history, git, a protection this host cannot enforce, a missing sandbox helper, a sandbox that could not be set up) |
//! | 126/127 | `Run(code)`       | `run`: the program is not executable / was not found |
//! | 128+N   | `Run(code)`, `Signal(N)` | `run`: the program died of signal N; any command: cordon got signal N and stopped (130 Ctrl-C, 143 SIGTERM); 141: the reader of its stdout went away ([`CliError::stdout_closed`]: nothing printed) |
//!
//! `cordon run` and `cordon session exec` exit with the program's own code when it ran
//! ([`Exit::Run`]): there 1 and 3–123 are the program's, while 2 and 124–127 may be either
//! the program's or cordon's (`--json` tells them apart: a `cordon.run-result/v1` document
//! when the program ran, a `cordon.error/v1` one when it did not).
//!
//! Every command returns `Result<Exit, CliError>`; [`render`] prints a [`CliError`] the same
//! way everywhere: on stderr `error:` with the message, `Caused by:` with each cause that the
//! lines above do not already say, then `hint:` lines — never a hint as the headline. When
//! the command was asked for `--json` (or `--json-events`), stdout also gets the error as one
//! `cordon.error/v1` document on one line ([`crate::documents::ErrorDocument`]), so a script
//! that parses stdout always gets a document.

use std::ffi::OsString;
use std::fmt::Display;
use std::io::Write;

use crate::documents::{ErrorDocument, ErrorDocumentTag, ErrorKind};

/// The exit codes as `cordon --help` shows them.
pub(crate) const EXIT_CODES_HELP: &str = "\
Exit codes (every command):
  0      success (verify: the gate passed)
  1      the operation failed (verify: the gate blocked)
  2      usage error: a bad flag or value, an unknown id, a bad configuration file
  124    a --wait ran out (run: its --timeout fired)
  125    cordon itself failed
  128+N  cordon got signal N and stopped (130 Ctrl-C, 143 SIGTERM); 141: its stdout
         was closed by its reader (`| head`), and it ended quietly
cordon run and session exec exit with the program's own code when it ran (126/127: not
executable / not found; 128+N: it died of signal N).

With --json, a failure prints one cordon.error/v1 document on stdout (`cordon schema error`);
the message stays on stderr.";

/// How cordon exits: the one table of exit codes (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success (`verify`: the gate passed).
    Success,
    /// 1: the operation failed, or the gate blocked.
    Failed,
    /// 2: a usage error — bad flag, bad value, unknown id, bad configuration.
    Usage,
    /// 124: a bounded wait ran out (`session --wait`; `run`'s own timeout is in [`Exit::Run`]).
    TimedOut,
    /// 125: cordon itself failed.
    CordonFailed,
    /// 128+N: cordon got signal N and stopped what it was doing.
    Signal(u8),
    /// The exit code of a run, as the runner decided it: the program's own, 124 timeout,
    /// 125 not started, 126/127 not executable / not found, 128+N died of signal N.
    Run(u8),
}

impl Exit {
    /// The numeric exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::TimedOut => 124,
            Exit::CordonFailed => 125,
            Exit::Signal(n) => 128u8.saturating_add(n),
            Exit::Run(code) => code,
        }
    }

    /// The exit of a library failure's class (its documented code).
    pub fn of_code(code: u8) -> Exit {
        use cordon_types::exit_code as c;
        match code {
            0 => Exit::Success,
            c::FAILED => Exit::Failed,
            c::USAGE => Exit::Usage,
            c::TIMED_OUT => Exit::TimedOut,
            c::CORDON_FAILED => Exit::CordonFailed,
            other => Exit::Run(other),
        }
    }

    /// The kind of error an error with this exit code is, unless it says more.
    fn default_kind(self) -> ErrorKind {
        match self {
            Exit::Usage => ErrorKind::Usage,
            Exit::Failed => ErrorKind::Refused,
            Exit::TimedOut => ErrorKind::Timeout,
            Exit::Success | Exit::CordonFailed | Exit::Signal(_) | Exit::Run(_) => {
                ErrorKind::Internal
            }
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

/// An error on its way to the user: what went wrong (with its causes), how to fix it, the
/// exit code it means, and what kind of error it is.
#[derive(Debug)]
pub struct CliError {
    exit: Exit,
    kind: ErrorKind,
    error: anyhow::Error,
    hints: Vec<String>,
    /// What else the document says, when there is more (boxed: errors travel by value).
    details: Option<Box<Details>>,
    /// Whether the error is that stdout's reader went away: then nothing is printed.
    quiet: bool,
}

/// The optional context of a [`CliError`], carried into its `cordon.error/v1` document.
#[derive(Debug, Default)]
struct Details {
    file: Option<String>,
    line: Option<u64>,
    http_status: Option<u16>,
    api_error: Option<cordon_types::ApiError>,
}

impl CliError {
    /// An error that exits with `exit`, of the kind that code usually means.
    pub fn new(exit: Exit, error: impl Into<anyhow::Error>) -> Self {
        CliError {
            exit,
            kind: exit.default_kind(),
            error: error.into(),
            hints: Vec::new(),
            details: None,
            quiet: false,
        }
    }

    /// cordon's standard output was closed by its reader (`cordon … | head -1`): the command
    /// ends quietly with 141 (128 + SIGPIPE), as `ls | head` does, printing nothing.
    pub fn stdout_closed() -> Self {
        CliError {
            quiet: true,
            ..CliError::new(
                Exit::Signal(SIGPIPE),
                anyhow::anyhow!("the reader of standard output went away"),
            )
        }
    }

    /// Whether this is [`CliError::stdout_closed`].
    pub fn is_stdout_closed(&self) -> bool {
        self.quiet
    }

    /// A library's failure, with the exit code and kind of its class (every door reports it
    /// the same way: see [`cordon_types::ErrorClass`]).
    pub fn classified(class: cordon_types::ErrorClass, error: impl Into<anyhow::Error>) -> Self {
        Self::new(Exit::of_code(class.code), error).kind(class.kind)
    }

    /// An error made of a message, exiting with `exit`.
    pub fn msg(exit: Exit, message: impl Display) -> Self {
        Self::new(exit, anyhow::anyhow!("{message}"))
    }

    /// A usage error (exit 2).
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self::new(Exit::Usage, error)
    }

    /// Says what kind of error this is (when the exit code alone does not).
    pub fn kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }

    /// Names the configuration file at fault, and its line when known.
    pub fn in_file(mut self, file: &std::path::Path, line: Option<usize>) -> Self {
        let details = self.details.get_or_insert_default();
        details.file = Some(file.display().to_string());
        details.line = line.and_then(|l| u64::try_from(l).ok());
        self
    }

    /// Attaches the job service's answer: its HTTP status and its error document.
    pub fn answered(mut self, status: u16, api_error: Option<cordon_types::ApiError>) -> Self {
        let details = self.details.get_or_insert_default();
        details.http_status = Some(status);
        details.api_error = api_error;
        self
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
    pub fn exit(&self) -> Exit {
        self.exit
    }

    /// The kind of error.
    pub fn error_kind(&self) -> ErrorKind {
        self.kind
    }

    /// The hints.
    pub fn hints(&self) -> &[String] {
        &self.hints
    }

    /// The causes below the message, each said once: a cause whose text the lines above
    /// already contain adds nothing (messages often quote their source).
    pub fn causes(&self) -> Vec<String> {
        cordon_types::error_causes(self.error.as_ref())
    }

    /// The error as a `cordon.error/v1` document.
    pub fn document(&self) -> ErrorDocument {
        let details = self.details.as_deref();
        ErrorDocument {
            schema: ErrorDocumentTag,
            code: self.exit.code(),
            kind: self.kind,
            message: self.error.to_string(),
            causes: self.causes(),
            hints: self.hints.clone(),
            file: details.and_then(|d| d.file.clone()),
            line: details.and_then(|d| d.line),
            http_status: details.and_then(|d| d.http_status),
            api_error: details.and_then(|d| d.api_error.clone()),
        }
    }
}

/// SIGPIPE's number: a closed stdout ends cordon with 128 + it.
const SIGPIPE: u8 = 13;

/// Any other error is cordon's own failure (125).
impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        CliError::new(Exit::CordonFailed, error)
    }
}

/// An I/O error of the command's own code: a write to a closed stdout (the only writes that
/// meet a closed pipe there) is [`CliError::stdout_closed`]; the rest cordon's failure (125).
impl From<std::io::Error> for CliError {
    fn from(error: std::io::Error) -> Self {
        if crate::stdout::is_closed(&error) {
            return CliError::stdout_closed();
        }
        CliError::new(Exit::CordonFailed, error)
    }
}

/// A document that could not be written: to a closed stdout, [`CliError::stdout_closed`].
impl From<serde_json::Error> for CliError {
    fn from(error: serde_json::Error) -> Self {
        if error.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) {
            return CliError::stdout_closed();
        }
        CliError::new(Exit::CordonFailed, error)
    }
}

/// The lines [`render`] prints on stderr for `error`.
pub fn lines(error: &CliError) -> Vec<String> {
    let mut lines = vec![format!("error: {}", error.error)];
    let causes = error.causes();
    if !causes.is_empty() {
        lines.push("Caused by:".to_owned());
        lines.extend(causes.into_iter().map(|c| format!("  {c}")));
    }
    lines.extend(error.hints.iter().map(|h| format!("hint: {h}")));
    lines
}

/// Prints `error` on stderr (and, when the command was asked for JSON, its `cordon.error/v1`
/// document on stdout) and returns its exit code.
pub fn render(error: &CliError, json: bool) -> std::process::ExitCode {
    if error.quiet {
        return error.exit.into();
    }
    let mut stderr = std::io::stderr().lock();
    // Messages quote what they are about (a stage name, git's own error output): none of it
    // may drive the terminal.
    for line in lines(error) {
        let _ = writeln!(stderr, "{}", cordon_types::text::for_terminal(&line));
    }
    drop(stderr);
    if json {
        print_document(&error.document());
    }
    error.exit.into()
}

/// Prints an error document on stdout, on one line (also a valid line of JSON Lines output).
fn print_document(document: &ErrorDocument) {
    let mut out = std::io::stdout().lock();
    if serde_json::to_writer(&mut out, document).is_ok() {
        let _ = writeln!(out);
        let _ = out.flush();
    }
}

/// Prints a clap error (or help/version) and picks the exit code: help and version exit 0;
/// everything else is a usage error (2) of whatever command, printed as a `cordon.error/v1`
/// document on stdout too when the command line asks for JSON ([`asks_for_json`]).
pub fn clap_error(error: clap::Error, argv: &[OsString]) -> std::process::ExitCode {
    let _ = error.print();
    if !error.use_stderr() {
        // --help, --version: printed on stdout, not errors.
        return std::process::ExitCode::SUCCESS;
    }
    if asks_for_json(argv) {
        print_document(&clap_document(&error));
    }
    Exit::Usage.into()
}

/// Whether a command line that clap refused asks for JSON output: `--json` or
/// `--json-events` before `--` (what follows `--` is the program's). The one place cordon
/// looks at the raw command line to decide how to fail.
pub fn asks_for_json(argv: &[OsString]) -> bool {
    argv.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json" || a == "--json-events")
}

/// clap's error as a `cordon.error/v1` document: its first line is the message, its `tip:`
/// lines and the usage line are the hints.
fn clap_document(error: &clap::Error) -> ErrorDocument {
    let text = error.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let message = lines
        .next()
        .map(|l| l.strip_prefix("error: ").unwrap_or(l).to_owned())
        .unwrap_or_else(|| "invalid command line".to_owned());
    let hints = lines
        .filter_map(|l| {
            l.strip_prefix("tip: ")
                .map(str::to_owned)
                .or_else(|| l.strip_prefix("Usage: ").map(|u| format!("usage: {u}")))
        })
        .collect();
    ErrorDocument {
        schema: ErrorDocumentTag,
        code: Exit::Usage.code(),
        kind: ErrorKind::Usage,
        message,
        causes: Vec::new(),
        hints,
        file: None,
        line: None,
        http_status: None,
        api_error: None,
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
        let error = CliError::new(Exit::Usage, Quoting(Inner))
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
        assert_eq!(error.exit(), Exit::Usage);
        let document = error.document();
        assert_eq!(document.code, 2);
        assert_eq!(document.kind, ErrorKind::Usage);
        assert_eq!(document.message, "cannot apply the patch");
        assert_eq!(
            document.causes,
            ["patch refused: a/../../x leaves the workspace"]
        );
    }

    #[test]
    fn other_errors_are_cordons_own_failure() {
        let error: CliError = anyhow::anyhow!("boom").into();
        assert_eq!(error.exit(), Exit::CordonFailed);
        assert_eq!(error.error_kind(), ErrorKind::Internal);
        assert_eq!(lines(&error), ["error: boom"]);
    }

    #[test]
    fn the_codes_are_the_documented_ones() {
        let codes = [
            Exit::Success,
            Exit::Failed,
            Exit::Usage,
            Exit::TimedOut,
            Exit::CordonFailed,
            Exit::Signal(2),
            Exit::Signal(15),
            Exit::Run(3),
        ]
        .map(Exit::code);
        assert_eq!(codes, [0, 1, 2, 124, 125, 130, 143, 3]);
    }

    #[test]
    fn only_options_before_the_separator_ask_for_json() {
        let argv = |items: &[&str]| items.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(asks_for_json(&argv(&[
            "cordon", "run", "--json", "--bogus"
        ])));
        assert!(asks_for_json(&argv(&[
            "cordon",
            "session",
            "watch",
            "--json-events"
        ])));
        assert!(!asks_for_json(&argv(&[
            "cordon", "run", "--", "jq", "--json"
        ])));
        assert!(!asks_for_json(&argv(&["cordon", "run", "--jsonx"])));
    }

    #[test]
    fn a_clap_error_is_a_usage_document() {
        use clap::CommandFactory;
        let error = crate::args::Cli::command()
            .try_get_matches_from(["cordon", "run", "--bogus", "--", "true"])
            .unwrap_err();
        let document = clap_document(&error);
        assert_eq!((document.code, document.kind), (2, ErrorKind::Usage));
        assert_eq!(document.message, "unexpected argument '--bogus' found");
        assert!(
            document
                .hints
                .iter()
                .any(|h| h.starts_with("usage: cordon run")),
            "{:?}",
            document.hints
        );
    }
}

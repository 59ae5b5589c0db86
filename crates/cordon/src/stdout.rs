//! cordon's own standard output. Everything a command prints there goes through
//! [`outln!`]/[`out!`] (or is an `io::Error` turned into a [`CliError`]): when the reader has
//! gone away — `cordon runs list | head -1` — the write fails with `EPIPE`, and the command ends
//! quietly with the conventional status, 141 (128 + SIGPIPE), as `ls | head` does: no panic,
//! no "Broken pipe" message (see [`CliError::stdout_closed`]).

use std::io::Write;

use crate::exit::CliError;

/// `println!` for command output: returns `Result<(), CliError>`.
macro_rules! outln {
    () => {
        $crate::stdout::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for command output: returns `Result<(), CliError>`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!($($arg)*))
    };
}

pub(crate) use {out, outln};

/// Writes `args` to stdout.
pub(crate) fn write_fmt(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)?;
    Ok(())
}

/// Whether `error` says the reader of a pipe has gone away.
pub(crate) fn is_closed(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::BrokenPipe
}

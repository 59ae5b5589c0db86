//! Errors of the executor itself (not of the program it runs).

use std::path::PathBuf;

/// cordon could not supervise the program at all. Failures of the program, and failures to
/// start it (not found, not executable), are reported in the [`cordon_types::RunResult`]
/// instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// A pipe for the program's output could not be created.
    #[error("cannot create an output pipe")]
    Pipe(#[source] std::io::Error),
    /// Polling the program's pipes failed.
    #[error("cannot poll the program's output")]
    Poll(#[source] std::io::Error),
    /// Waiting for the program failed.
    #[error("cannot wait for process {pid}")]
    Wait {
        /// The process that could not be waited for.
        pid: i32,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The working directory does not exist or is not a directory.
    #[error("working directory {path} is not a directory")]
    BadCwd {
        /// The directory that was asked for.
        path: PathBuf,
    },
}

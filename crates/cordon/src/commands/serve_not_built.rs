//! `cordon serve`, `worker`, `token` and `jobs` in a build without the job service (cordon
//! built without its `server` feature): the commands are still known, hidden from `--help`,
//! and each fails saying what this build lacks and how to get it.

use std::ffi::OsString;
use std::fmt::Display;

use clap::Args;

use crate::exit::{CliError, Exit};

/// The arguments of a job-service command in a build without it: taken as given, so that the
/// answer is about the build rather than about an option.
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct NotBuilt {
    /// Everything after the command's name.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    given: Vec<OsString>,
}

impl NotBuilt {
    /// Whether the command asks for JSON (`--json` before `--`, as `token` and `jobs` take
    /// it): then the refusal is a `cordon.error/v1` document on stdout too.
    pub(crate) fn json(&self) -> bool {
        self.given
            .iter()
            .take_while(|a| *a != "--")
            .any(|a| a == "--json")
    }
}

/// Arguments of `cordon serve` (not in this build).
pub type ServeArgs = NotBuilt;
/// Arguments of `cordon worker` (not in this build).
pub type WorkerArgs = NotBuilt;
/// Arguments of `cordon token` (not in this build).
pub type TokenArgs = NotBuilt;
/// Arguments of `cordon jobs` (not in this build).
pub type JobsArgs = NotBuilt;

/// `cordon serve`: not in this build.
pub(crate) fn serve(_: &ServeArgs) -> Result<Exit, CliError> {
    Err(not_built("`cordon serve`"))
}

/// `cordon worker`: not in this build.
pub(crate) fn worker(_: &WorkerArgs) -> Result<Exit, CliError> {
    Err(not_built("`cordon worker`"))
}

/// `cordon token`: not in this build.
pub(crate) fn token(_: &TokenArgs) -> Result<Exit, CliError> {
    Err(not_built("`cordon token`"))
}

/// `cordon jobs`: not in this build.
pub(crate) fn jobs(_: &JobsArgs) -> Result<Exit, CliError> {
    Err(not_built("`cordon jobs`"))
}

/// `what`, a part of the job service, is not in this build (exit 2, with how to get it).
pub(crate) fn not_built(what: impl Display) -> CliError {
    CliError::msg(
        Exit::Usage,
        format_args!(
            "{what} is not in this build: cordon was built without the job service (its \
             `server` feature)"
        ),
    )
    .hint(
        "install cordon's default build (`cargo install cordon`), or build it with \
         `--features server`",
    )
}

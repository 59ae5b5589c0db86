//! `cordon mcp` in a build without it (cordon built without its `mcp` feature): the command
//! is still known, hidden from `--help`, and fails saying what this build lacks.

use std::ffi::OsString;

use clap::Args;

use crate::exit::{CliError, Exit};

/// Arguments of `cordon mcp` in a build without it: taken as given, so that the answer is
/// about the build rather than about an option.
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct McpArgs {
    /// Everything after the command's name.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    given: Vec<OsString>,
}

/// `cordon mcp`: not in this build.
pub(crate) fn run(_: McpArgs) -> Result<Exit, CliError> {
    Err(CliError::msg(
        Exit::Usage,
        "`cordon mcp` is not in this build: cordon was built without its `mcp` feature",
    )
    .hint(
        "install cordon's default build (`cargo install cordon`), or build it with \
         `--features mcp`",
    ))
}

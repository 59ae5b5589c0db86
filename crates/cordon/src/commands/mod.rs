//! One module per subcommand; [`dispatch`] routes to them.

pub(crate) mod doctor;
mod run;
pub(crate) mod runs;
mod schema;
pub(crate) mod verify;
pub(crate) mod workspace;

use std::process::ExitCode;

use crate::args::{Cli, Command};

/// Runs the parsed command line.
pub(crate) fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Doctor(args) => doctor::run(&args),
        Command::Verify(args) => verify::run(args),
        Command::Workspace(args) => workspace::run(args),
        Command::Gc(args) => workspace::gc(&args),
        Command::Runs(args) => runs::run(&args),
        Command::Schema(args) => schema::run(&args),
    }
}

//! One module per subcommand; [`dispatch`] routes to them.

pub(crate) mod doctor;
mod run;
pub(crate) mod runs;
mod schema;
pub(crate) mod serve;
pub(crate) mod session;
mod session_watch;
pub(crate) mod verify;
pub(crate) mod workspace;

use std::process::ExitCode;

use crate::args::{Cli, Command};
use crate::exit::CliError;

/// Runs the parsed command line (`argv` is the raw one, for what clap does not keep).
pub(crate) fn dispatch(cli: Cli, argv: &[std::ffi::OsString]) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Run(args) => run::run(args, argv),
        Command::Doctor(args) => doctor::run(&args),
        Command::Verify(args) => verify::run(args),
        Command::Workspace(args) => workspace::run(args),
        Command::Session(args) => session::run(args),
        Command::Gc(args) => workspace::gc(&args),
        Command::Runs(args) => runs::run(&args),
        Command::Schema(args) => schema::run(&args),
        Command::Serve(args) => serve::serve(&args),
        Command::Worker(args) => serve::worker(&args),
        Command::Token(args) => serve::token(&args),
        Command::Jobs(args) => serve::jobs(&args),
    }
}

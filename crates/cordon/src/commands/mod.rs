//! One module per subcommand; [`dispatch`] routes to them.

pub(crate) mod doctor;
#[cfg(feature = "mcp")]
pub(crate) mod mcp;
#[cfg(not(feature = "mcp"))]
#[path = "mcp_not_built.rs"]
pub(crate) mod mcp;
mod run;
pub(crate) mod runs;
mod schema;
#[cfg(feature = "server")]
pub(crate) mod serve;
#[cfg(not(feature = "server"))]
#[path = "serve_not_built.rs"]
pub(crate) mod serve;
pub(crate) mod session;
mod session_compare;
mod session_watch;
pub(crate) mod verify;
mod verify_view;
pub(crate) mod workspace;

use crate::args::{Cli, Command};
use crate::exit::{CliError, Exit};

/// Runs the parsed command line (`argv` is the raw one, for what clap does not keep).
pub(crate) fn dispatch(cli: Cli, argv: &[std::ffi::OsString]) -> Result<Exit, CliError> {
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
        Command::Mcp(args) => mcp::run(args),
    }
}

/// Whether the command was given `--json` (or `--json-events`): then a failure is a
/// `cordon.error/v1` document on stdout too.
pub(crate) fn wants_json(command: &Command) -> bool {
    use crate::commands::runs::RunsCommand;
    use crate::commands::session::SessionCommand;
    use crate::commands::workspace::WorkspaceCommand;
    match command {
        Command::Run(args) => args.json,
        Command::Doctor(args) => args.json,
        Command::Verify(args) => args.json,
        Command::Workspace(args) => match &args.command {
            WorkspaceCommand::Create { json, .. }
            | WorkspaceCommand::List { json }
            | WorkspaceCommand::Show { json, .. }
            | WorkspaceCommand::Remove { json, .. }
            | WorkspaceCommand::Apply { json, .. }
            | WorkspaceCommand::Diff { json, .. } => *json,
            WorkspaceCommand::Shell { .. } | WorkspaceCommand::Export { .. } => false,
        },
        Command::Session(args) => match &args.command {
            SessionCommand::Create { json, .. }
            | SessionCommand::Push { json, .. }
            | SessionCommand::Pull { json, .. }
            | SessionCommand::List { json, .. }
            | SessionCommand::Poke { json, .. }
            | SessionCommand::Show { json, .. }
            | SessionCommand::Fork { json, .. }
            | SessionCommand::Remove { json, .. } => *json,
            SessionCommand::Exec(args) => args.run.json,
            SessionCommand::Compare(args) => args.json,
            SessionCommand::Watch(args) => args.json_events,
            SessionCommand::Resume { json_events, .. } => *json_events,
        },
        Command::Gc(args) => args.json,
        Command::Runs(args) => match &args.command {
            RunsCommand::List(list) => list.json,
            RunsCommand::Show(show) => show.json,
            RunsCommand::Logs(logs) => logs.json,
            RunsCommand::Export(export) => export.json,
        },
        #[cfg(feature = "server")]
        Command::Token(args) => args.json,
        #[cfg(feature = "server")]
        Command::Jobs(args) => args.json,
        #[cfg(not(feature = "server"))]
        Command::Token(args) | Command::Jobs(args) => args.json(),
        Command::Schema(_) | Command::Serve(_) | Command::Worker(_) | Command::Mcp(_) => false,
    }
}

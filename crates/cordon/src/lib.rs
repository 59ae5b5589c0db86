//! The `cordon` command-line interface.
//!
//! The binary is thin: [`main`] parses arguments with clap ([`args`]), calls the library crate
//! that does the work, renders the result, and maps it to a documented exit code
//! ([`exit::Exit`]); a failure is rendered once, at the edge, for people on stderr and — when
//! the command was asked for JSON — as a `cordon.error/v1` document on stdout ([`exit`]).
//!
//! Features, all on by default: `server` (the job service: `cordon serve`, `worker`, `token`,
//! `jobs`), `postgres` (PostgreSQL stores) and `mcp` (`cordon mcp`, the MCP server for coding
//! agents; with `server`, also at `/mcp` of `cordon serve`). Without them cordon is the local
//! tool alone, with no async runtime; the commands of a missing feature say that this build
//! lacks it.
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "server")]
mod allocator;
pub mod args;
mod commands;
pub mod documents;
pub mod exit;
mod render;
mod sandbox_args;
mod signals;
#[macro_use]
mod stdout;
mod terminal_guard;

use std::process::ExitCode;

/// Entry point of the `cordon` binary.
pub fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match args::parse(&argv) {
        Ok(cli) => cli,
        Err(error) => return exit::clap_error(error, &argv),
    };
    let json = commands::wants_json(&cli.command);
    match commands::dispatch(cli, &argv) {
        Ok(exit) => exit.into(),
        Err(error) => exit::render(&error, json),
    }
}

//! `cordon mcp`: the MCP server agents add as a tool provider (see `cordon-mcp`), over stdio,
//! within the bounds its operator starts it with.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use cordon_types::NetworkRule;
use cordon_types::units::{parse_duration, parse_size};

use crate::exit::{CliError, Exit};

/// Arguments of `cordon mcp`.
#[derive(Debug, Args)]
#[command(after_help = "\
Every bound is the operator's: a tool call asking for more is refused with a tool error naming
the bound. Set-up for Claude Code, Codex, Gemini CLI and Cursor: see docs/agents.md.

Examples:
  cordon mcp                                      the current repository, no network, 10m
  cordon mcp --repo ~/src/app --allow-network registry --max-timeout 15m --memory 4GiB")]
pub struct McpArgs {
    /// A repository the agent may open (repeatable; default: the current directory). Its
    /// workspaces, sessions and recorded runs come with it. The roots an MCP client declares
    /// may narrow these, never widen them.
    #[arg(long = "repo", value_name = "DIR")]
    pub repos: Vec<PathBuf>,
    /// The most network a program may have: `none`, `registry` (the package registries,
    /// through cordon's proxy), `host`, or host names `HOST[:PORT][,HOST...]`
    /// (`*.example.org` wildcards).
    #[arg(long, value_name = "NET", default_value = "none", value_parser = cordon_mcp::parse_network_bound)]
    pub allow_network: NetworkRule,
    /// The longest a program or a verification may run; also a program's default timeout.
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
    pub max_timeout: Duration,
    /// The most memory a program's (or a verification stage's) process tree may use; also the
    /// default. Without it, no limit but the host's.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<u64>,
    /// Let the agent run programs without the kernel sandbox (`run`'s `no_sandbox`: only the
    /// timeout and the tree kill hold). Without it the option does not exist for the agent.
    #[arg(long)]
    pub allow_no_sandbox: bool,
}

/// Serves the tools on stdin and stdout until the client goes away.
pub(crate) fn run(args: McpArgs) -> Result<Exit, CliError> {
    let repos = if args.repos.is_empty() {
        vec![std::env::current_dir().map_err(|e| {
            CliError::new(Exit::CordonFailed, e).context("cannot read the current directory")
        })?]
    } else {
        args.repos
    };
    if args.max_timeout.is_zero() || args.memory == Some(0) {
        return Err(CliError::msg(
            Exit::Usage,
            "--max-timeout and --memory must be more than 0",
        ));
    }
    let mut bounds = cordon_mcp::Bounds::new(&repos).map_err(CliError::usage)?;
    bounds.network = args.allow_network;
    bounds.max_timeout = args.max_timeout;
    bounds.memory = args.memory;
    bounds.allow_no_sandbox = args.allow_no_sandbox;
    match cordon_mcp::serve_stdio(bounds) {
        Ok(()) => Ok(Exit::Success),
        Err(cordon_mcp::ServeError::Setup(failure)) => {
            let document = failure.document;
            let mut error =
                CliError::msg(Exit::of_code(document.code), &document.message).kind(document.kind);
            for hint in document.hints {
                error = error.hint(hint);
            }
            Err(error)
        }
        Err(error) => Err(CliError::new(Exit::CordonFailed, error)),
    }
}

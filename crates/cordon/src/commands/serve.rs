//! `cordon serve` (the job service) and `cordon token` (its API tokens).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use cordon_server::{Policy, ServeOptions};
use cordon_store::Store;

use crate::exit::{CliError, USAGE};

/// Arguments of `cordon serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (loopback by default; port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// The policy file (cordon-server.toml); re-read on SIGHUP. Default: the built-in policy.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the built-in policy as a config file to start from, and exit.
    #[arg(long)]
    pub print_default_policy: bool,
    /// Request bodies above this size are refused (413).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = crate::args::parse_size)]
    pub max_body: usize,
    /// The first retry waits this long; each next one twice as long.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = crate::args::parse_duration)]
    pub retry_backoff: Duration,
}

/// Arguments of `cordon token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// The `cordon token` subcommands.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it once (the store keeps only its hash).
    Create {
        /// The project the token acts for.
        #[arg(long)]
        project: String,
        /// What it may do: submit, read, admin (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "submit,read")]
        scope: Vec<String>,
        /// It stops working after this long.
        #[arg(long, value_name = "DUR", value_parser = crate::args::parse_duration)]
        expires: Option<Duration>,
    },
    /// List tokens (ids, projects, scopes; never secrets).
    List,
    /// Revoke a token by id.
    Revoke {
        /// The token's id (t-…).
        id: String,
    },
}

fn open_store() -> Result<Store, CliError> {
    Store::open_default().map_err(|e| CliError::new(crate::exit::CORDON_FAILED, e))
}

/// Runs `cordon serve`.
pub(crate) fn serve(args: &ServeArgs) -> Result<ExitCode, CliError> {
    if args.print_default_policy {
        print!("{}", Policy::builtin_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let policy = match &args.config {
        Some(path) => Policy::load(path).map_err(|e| CliError::new(USAGE, e))?,
        None => Policy::builtin(),
    };
    let store = open_store()?;
    let home = cordon_types::cordon_home().map_err(|e| CliError::new(USAGE, e))?;
    let mut options = ServeOptions::new(store, policy, home.join("serve"));
    options.policy_path = args.config.clone();
    options.listen = args.listen;
    options.max_body = args.max_body;
    options.retry_backoff = args.retry_backoff;
    cordon_server::serve(options, |addr| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "cordon serve: listening on http://{addr}");
        let _ = out.flush();
    })
    .map_err(|e| CliError::new(crate::exit::CORDON_FAILED, e))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `cordon token`.
pub(crate) fn token(args: &TokenArgs) -> Result<ExitCode, CliError> {
    let store = open_store()?;
    match &args.command {
        TokenCommand::Create {
            project,
            scope,
            expires,
        } => {
            let (id, secret) = cordon_server::create_token(&store, project, scope, *expires)
                .map_err(|e| CliError::new(USAGE, e))?;
            eprintln!(
                "created token {id} for project {project} ({})",
                scope.join(",")
            );
            println!("{secret}");
        }
        TokenCommand::List => {
            let tokens = store
                .list_tokens()
                .map_err(|e| CliError::new(crate::exit::CORDON_FAILED, e))?;
            for t in tokens {
                let state = if t.revoked_at_ms.is_some() {
                    "revoked"
                } else {
                    "live"
                };
                println!("{}\t{}\t{}\t{state}", t.id, t.project, t.scopes.join(","));
            }
        }
        TokenCommand::Revoke { id } => {
            let revoked = store
                .revoke_token(id)
                .map_err(|e| CliError::new(crate::exit::CORDON_FAILED, e))?;
            if !revoked {
                return Err(CliError::msg(USAGE, format_args!("no live token {id}")));
            }
            let _ = store.audit("cli", "token.revoke", id, &serde_json::json!({}));
            eprintln!("revoked {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

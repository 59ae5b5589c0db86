//! Command-line arguments (clap). Raw values only; commands validate and resolve them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cordon_types::units::{parse_duration, parse_size};

/// Run code nobody has reviewed yet — an agent's patch, a contributor's branch — locally,
/// with hard bounds: a wall timeout, a kill of the whole process tree, bounded output capture.
#[derive(Debug, Parser)]
#[command(
    name = "cordon",
    version,
    about,
    long_about = None,
    max_term_width = 100,
    after_help = crate::exit::EXIT_CODES_HELP
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one program with hard bounds and report what happened.
    ///
    /// Exit code: the program's own; 124 when the timeout fired; 128+N when it died of
    /// signal N; 126/127 when the program is not executable / not found; 130/143 when cordon
    /// was interrupted (Ctrl-C / SIGTERM) and ended the program; 2 when the command line is
    /// wrong (a bad flag or value, an unknown workspace); 125 when cordon itself failed (it
    /// cannot supervise, or this host cannot enforce a protection). With --json, a run that
    /// did not happen prints a cordon.error/v1 document instead of the result.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Verify a candidate change stage by stage in an isolated, sandboxed workspace, and
    /// decide whether it may be promoted (fail-closed gate).
    Verify(crate::commands::verify::VerifyArgs),
    /// Isolated workspaces: copy-on-write copies of a repository at a ref (overlays, or git
    /// worktrees where overlays are unavailable), never touching the live checkout; they stay
    /// until removed or unused for their --idle-timeout.
    Workspace(crate::commands::workspace::WorkspaceArgs),
    /// Sessions: persistent sandboxes of a repository that agents share, with their own git
    /// history; commits go in as a verified bundle and come back as a fast-forward.
    Session(crate::commands::session::SessionArgs),
    /// Reconcile records with reality after crashes: remove workspaces unused past their
    /// idle timeout and transient ones whose owner is gone, end idle sessions (their unpulled
    /// commits kept), remove orphaned directories and git worktree metadata; safe at any time.
    Gc(crate::commands::workspace::GcArgs),
    /// The run history: every recorded `cordon run` and `cordon verify`, with transcripts.
    Runs(crate::commands::runs::RunsArgs),
    /// Report what isolation this host can enforce, and what `cordon run` will therefore do.
    ///
    /// Exit code: 0 when the default sandbox policy can be enforced, 1 otherwise.
    Doctor(crate::commands::doctor::DoctorArgs),
    /// Print the JSON Schema of one of cordon's documents (without a name: list them).
    Schema(SchemaArgs),
    /// Serve cordon's tools to a coding agent over MCP (stdio): run, verify, workspaces,
    /// sessions and the run history, within the bounds given here (the agent cannot change
    /// them).
    #[cfg_attr(not(feature = "mcp"), command(hide = true))]
    Mcp(crate::commands::mcp::McpArgs),
    /// Serve the job service: jobs over HTTP under a per-project policy, a persistent
    /// queue, live logs. Prints `cordon serve: listening on http://ADDR` once ready.
    #[cfg_attr(not(feature = "server"), command(hide = true))]
    Serve(crate::commands::serve::ServeArgs),
    /// Run the job service's jobs without its HTTP API, on this machine, from a store shared
    /// with `cordon serve` (PostgreSQL for several machines). Prints `cordon worker: NAME runs
    /// N slot(s)` once ready; SIGTERM puts its running jobs back in the queue and stops.
    #[cfg_attr(not(feature = "server"), command(hide = true))]
    Worker(crate::commands::serve::WorkerArgs),
    /// API tokens of the job service.
    #[cfg_attr(not(feature = "server"), command(hide = true))]
    Token(crate::commands::serve::TokenArgs),
    /// A client of the job service: submit, list, show, follow logs, cancel.
    #[cfg_attr(not(feature = "server"), command(hide = true))]
    Jobs(crate::commands::serve::JobsArgs),
}

const RUN_EXAMPLES: &str = "\
Examples:
  cordon run -- cargo test                          sandboxed: no network, only . writable
  cordon run --timeout 30s --json -- ./flaky-script.sh
  cordon run --memory 1GiB --pids 256 --network host -- npm ci
  cordon run --allow-exec /usr/bin/python3 -- python3 check.py
  cordon run --no-sandbox --output-limit 64KiB --env RUST_LOG=debug -- ./server --check";

/// `--timeout`'s default.
pub(crate) const DEFAULT_TIMEOUT: &str = "10m";
/// `--grace`'s default.
pub(crate) const DEFAULT_GRACE: &str = "2s";
/// `--output-limit`'s default.
pub(crate) const DEFAULT_OUTPUT_LIMIT: &str = "1MiB";
/// `--leak-timeout`'s default.
pub(crate) const DEFAULT_LEAK_TIMEOUT: &str = "200ms";
/// `--disk`'s default.
pub(crate) const DEFAULT_DISK: &str = "10GiB";
/// `--transcript-limit`'s default.
pub(crate) const DEFAULT_TRANSCRIPT_LIMIT: &str = "64MiB";

/// Arguments of `cordon run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Wall-clock limit; then SIGTERM to the whole process tree, SIGKILL after --grace.
    #[arg(long, value_name = "DUR", default_value = DEFAULT_TIMEOUT, value_parser = parse_duration)]
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL when the program must be stopped.
    #[arg(long, value_name = "DUR", default_value = DEFAULT_GRACE, value_parser = parse_duration)]
    pub grace: Duration,
    /// Bytes of each output stream kept in the result (head and tail together); the rest is
    /// counted, streamed to the terminal, and dropped from the result.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_OUTPUT_LIMIT, value_parser = parse_size_usize)]
    pub output_limit: usize,
    /// How long to keep reading output after the program exited, when a leftover process
    /// still holds its stdout/stderr open; then leftovers are killed.
    #[arg(long, value_name = "DUR", default_value = DEFAULT_LEAK_TIMEOUT, value_parser = parse_duration)]
    pub leak_timeout: Duration,
    /// The most the working tree (the workspace, or the working directory) may hold on disk;
    /// past it the program's tree is ended and the result says `limits_hit: ["disk"]`.
    /// Watched a few times a second; `0` turns the watch off.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_DISK, value_parser = parse_size)]
    pub disk: u64,
    /// Directory to run in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Run in this workspace (see `cordon workspace`): it becomes the writable root, and the
    /// source repository's git data is visible read-only. Running from a directory inside a
    /// workspace does the same.
    #[arg(long, value_name = "ID")]
    pub workspace: Option<String>,
    /// Set an environment variable for the program (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_env_pair)]
    pub env: Vec<(String, String)>,
    /// What the program reads on standard input: `pipe` (cordon forwards its own input; a
    /// terminal behind cordon never becomes the program's), `null` (nothing), `inherit`
    /// (the program gets cordon's input itself — a terminal then too: it can change its
    /// modes; cordon restores them when the program ends), or `tty` (a pseudo-terminal
    /// cordon owns, proxied to yours).
    #[arg(long, value_enum, default_value_t = StdinArg::Pipe)]
    pub stdin: StdinArg,
    /// Print the result as one JSON document (cordon.run-result/v1) on stdout instead of
    /// passing the program's output through.
    #[arg(long)]
    pub json: bool,
    /// Pass the program's output to a terminal exactly as it is. By default, on a terminal,
    /// colours and line editing pass but other escape sequences are dropped (window titles,
    /// clipboard writes, queries the terminal would answer, mode switches); output to a file
    /// or pipe is never changed.
    #[arg(long, conflicts_with = "json")]
    pub raw_output: bool,
    /// Do not record the run (result and transcript) in the run history (`cordon runs`).
    #[arg(long)]
    pub no_record: bool,
    /// Most bytes of output kept in the recorded transcript; the rest is counted and marked.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_TRANSCRIPT_LIMIT, value_parser = parse_size)]
    pub transcript_limit: u64,
    /// Pass the environment variable NAME from cordon's environment to the program, marked
    /// as a secret (repeatable). Fails when NAME is not set.
    #[arg(long = "secret", value_name = "NAME")]
    pub secrets: Vec<String>,
    /// A credential the network proxy adds to the requests to HOST (repeatable), which the
    /// program never sees: NAME is a variable of cordon's environment holding it; the
    /// program's NAME holds a placeholder (`cordon-credential-1`). HOW: `header:NAME:TEMPLATE`
    /// (`{}` is the value) or `basic:USER:{}`; default `header:Authorization:Bearer {}`. HOST
    /// (port 443 unless `HOST:PORT`) must be on --network allow=...; its HTTPS is terminated
    /// by the proxy with a per-run certificate authority the program trusts through
    /// SSL_CERT_FILE and the like.
    #[arg(long = "credential", value_name = "HOST=NAME[:HOW]", value_parser = parse_credential)]
    pub credentials: Vec<cordon_proxy::Credential>,
    /// The sandbox and its limits.
    #[command(flatten)]
    pub sandbox: crate::sandbox_args::SandboxArgs,
    /// The program and its arguments. `--` before the program is optional unless an argument
    /// after it looks like one of cordon's options (then cordon asks for it).
    #[arg(
        required = true,
        trailing_var_arg = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub command: Vec<std::ffi::OsString>,
}

/// `--credential`'s parser (also `--agent-credential`'s).
pub(crate) fn parse_credential(text: &str) -> Result<cordon_proxy::Credential, String> {
    cordon_proxy::Credential::parse(text).map_err(|e| e.kind.to_string())
}

/// Parses the command line.
///
/// `cordon run ...` (what agents call thousands of times a day) is parsed by `run`'s own clap
/// definition alone: building the whole command tree (every subcommand's arguments) cost
/// 0.3 ms of a 4 ms sandboxed run (BENCHMARKS.md). It is the same definition, so a line it
/// accepts means the same; anything it refuses (help, a usage error) is parsed again by the
/// whole tree, which reports it as always.
pub fn parse(argv: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    if argv.get(1).is_some_and(|a| a == "run")
        && let Some(args) = parse_run(&argv[1..])
    {
        return Ok(Cli {
            command: Command::Run(args),
        });
    }
    Cli::try_parse_from(argv)
}

/// `run ARGS...` parsed by [`run_command`]; `None` when it does not parse.
fn parse_run(argv: &[std::ffi::OsString]) -> Option<RunArgs> {
    use clap::FromArgMatches;
    let mut matches = run_command().try_get_matches_from(argv).ok()?;
    RunArgs::from_arg_matches_mut(&mut matches).ok()
}

/// The `run` subcommand alone: the arguments of [`RunArgs`].
pub fn run_command() -> clap::Command {
    RunArgs::augment_args(clap::Command::new("run"))
}

/// Standard input of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StdinArg {
    /// cordon forwards its standard input through a pipe.
    Pipe,
    /// The program reads cordon's standard input itself.
    Inherit,
    /// The program reads nothing (/dev/null).
    Null,
    /// The program's input, output and error are a pseudo-terminal cordon owns and proxies
    /// to yours (interactive programs): it never holds your terminal itself, so it cannot
    /// inject input into it (TIOCSTI) or change its modes; output and errors arrive together.
    Tty,
}

/// Arguments of `cordon schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which document; without one, the documents there are, one a line (name and what
    /// prints it).
    #[arg(value_enum)]
    pub document: Option<SchemaDocument>,
}

/// Documents with a published JSON Schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaDocument {
    /// cordon.run-result/v1, printed by `cordon run --json`.
    RunResult,
    /// cordon.run-report/v1, printed by `cordon verify --json`.
    RunReport,
    /// The `cordon.toml` configuration file.
    CordonToml,
    /// cordon.run-list/v1, printed by `cordon runs list --json`.
    RunList,
    /// cordon.run-record/v1, printed by `cordon runs show --json`.
    RunRecord,
    /// cordon.run-export/v1, printed by `cordon runs export`.
    RunExport,
    /// One line of `cordon runs logs --json` (a transcript chunk).
    RunChunk,
    /// cordon.workspace/v1, printed by `cordon workspace create --json`.
    Workspace,
    /// cordon.workspace-info/v1, printed by `cordon workspace show --json`.
    WorkspaceInfo,
    /// cordon.doctor/v1, printed by `cordon doctor --json`.
    Doctor,
    /// cordon.workspace-list/v1, printed by `cordon workspace list --json`.
    WorkspaceList,
    /// cordon.workspace-apply/v1, printed by `cordon workspace apply --json`.
    WorkspaceApply,
    /// cordon.workspace-diff/v1, printed by `cordon workspace diff --json`.
    WorkspaceDiff,
    /// cordon.gc/v1, printed by `cordon gc --json`.
    Gc,
    /// cordon.verify-plan/v1, printed by `cordon verify --explain --json`.
    VerifyPlan,
    /// cordon.session/v1, printed by `cordon session create|show|remove --json`.
    Session,
    /// cordon.session-list/v1, printed by `cordon session list --json`.
    SessionList,
    /// cordon.session-push/v1, printed by `cordon session push --json`.
    SessionPush,
    /// cordon.session-pull/v1, printed by `cordon session pull --json`.
    SessionPull,
    /// cordon.session-fork/v1, printed by `cordon session fork --json`.
    SessionFork,
    /// cordon.session-compare/v1, printed by `cordon session compare --json`.
    SessionCompare,
    /// cordon.review-event/v1, printed by `cordon session watch --json-events`, one a line.
    ReviewEvent,
    /// cordon.error/v1, printed on stdout by every command given `--json` when it fails.
    Error,
    /// cordon.job/v1, a job of the job service (`cordon jobs submit|show|cancel --json`).
    Job,
    /// cordon.job-list/v1, printed by `cordon jobs list --json`.
    JobList,
    /// cordon.job-request/v1, the body of `POST /v1/jobs` (`cordon jobs submit`).
    JobRequest,
    /// cordon.api-error/v1, the job service's error answers.
    ApiError,
    /// The job service's policy file, `cordon-server.toml`.
    CordonServerToml,
    /// cordon.token/v1, printed by `cordon token create|revoke --json`.
    Token,
    /// cordon.token-list/v1, printed by `cordon token list --json`.
    TokenList,
}

/// A size (see [`parse_size`]) that must fit in memory.
pub(crate) fn parse_size_usize(text: &str) -> Result<usize, String> {
    let bytes = parse_size(text)?;
    usize::try_from(bytes).map_err(|_| format!("size {text:?} is too large"))
}

pub(crate) fn parse_env_pair(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got {text:?}"))?;
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "invalid environment variable name {name:?} (letters, digits and _, not starting with a digit)"
        ));
    }
    if value.contains('\0') {
        return Err(format!("the value of {name} contains a NUL byte"));
    }
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// `run`'s own definition and the whole tree read a run line the same way, and the whole
    /// tree is left what `run`'s refuses (help, errors).
    #[test]
    fn run_is_parsed_as_the_whole_tree_parses_it() {
        let lines: &[&[&str]] = &[
            &["run", "--", "true"],
            &[
                "run",
                "--json",
                "--timeout",
                "5s",
                "--no-record",
                "--",
                "sh",
                "-c",
                "x",
            ],
            &[
                "run",
                "--network",
                "allow=a.test",
                "--memory",
                "1GiB",
                "--pids",
                "9",
                "make",
            ],
            &[
                "run",
                "--allow-exec",
                "/bin/sh",
                "--allow-jit",
                "--env",
                "A=b",
                "--",
                "sh",
            ],
            &[
                "run",
                "--no-sandbox",
                "--stdin",
                "null",
                "--raw-output",
                "ls",
                "-l",
                "--x",
            ],
        ];
        for line in lines {
            let argv: Vec<std::ffi::OsString> = std::iter::once("cordon")
                .chain(line.iter().copied())
                .map(Into::into)
                .collect();
            let run_only = parse_run(&argv[1..]).unwrap_or_else(|| panic!("refused {line:?}"));
            let Command::Run(whole) = Cli::try_parse_from(&argv).unwrap().command else {
                panic!("not run: {line:?}");
            };
            assert_eq!(format!("{run_only:?}"), format!("{whole:?}"), "{line:?}");
        }
        for line in [
            &["run"][..],
            &["run", "--help"],
            &["run", "--bogus", "--", "x"],
        ] {
            let argv: Vec<std::ffi::OsString> = std::iter::once("cordon")
                .chain(line.iter().copied())
                .map(Into::into)
                .collect();
            assert!(parse_run(&argv[1..]).is_none(), "{line:?}");
            assert!(Cli::try_parse_from(&argv).is_err(), "{line:?}");
        }
    }

    #[test]
    fn env_pairs_are_validated() {
        assert_eq!(parse_env_pair("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert_eq!(
            parse_env_pair("EMPTY="),
            Ok(("EMPTY".into(), String::new()))
        );
        assert!(parse_env_pair("novalue").is_err());
        assert!(parse_env_pair("=x").is_err());
        assert!(parse_env_pair("1A=x").is_err());
        assert!(parse_env_pair("A-B=x").is_err());
    }
}

//! `cordon serve` (the job service), `cordon worker` (its workers on more machines) and
//! `cordon token` (its API tokens).

use crate::stdout::{out, outln};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use cordon_server::{Policy, ServeOptions, WorkOptions, WorkerSettings};
use cordon_store::{Store, StoreLocation};

mod jobs_follow;

use crate::documents::ErrorKind;
use crate::exit::{CliError, Exit};

/// Arguments of `cordon serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen: HOST:PORT (loopback by default; port 0 picks a free port) or
    /// unix:/ABSOLUTE/PATH (a Unix socket only the server's user may connect to).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: cordon_server::Listen,
    /// The policy file (cordon-server.toml); re-read on SIGHUP. Default: the built-in policy.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the built-in policy as a config file to start from, and exit.
    #[arg(long)]
    pub print_default_policy: bool,
    /// Request bodies above this size are refused (413).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = crate::args::parse_size_usize)]
    pub max_body: usize,
    /// The first retry waits this long; each next one twice as long.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = cordon_types::units::parse_duration)]
    pub retry_backoff: Duration,
    /// Serve the API only: run no jobs here (`cordon worker` processes run them).
    #[arg(long, conflicts_with = "slots")]
    pub no_workers: bool,
    #[command(flatten)]
    pub common: WorkerFlags,
}

/// What `cordon serve` and `cordon worker` share: the store and the workers' settings.
#[derive(Debug, Args)]
pub struct WorkerFlags {
    /// How the log lines on stderr are written: `text`, or `json` (one object a line). One
    /// line per HTTP request (method, path, status, ms, project), per job start and end, and
    /// at shutdown.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: cordon_server::LogFormat,
    /// The store: a PostgreSQL URL (postgres://user@host/db) for several machines, or an
    /// SQLite file. Default: $CORDON_STORE, else cordon.db in the cordon home.
    #[arg(long, value_name = "URL|PATH")]
    pub store: Option<String>,
    /// Jobs this process runs at once. Default: the policy's `workers` (which also caps the
    /// running jobs of every process sharing the store).
    #[arg(long, value_name = "N")]
    pub slots: Option<u32>,
    /// This process's name in the store: unique among the live processes sharing it, and
    /// the same after a restart (the restarted process takes back its unfinished jobs at
    /// once). Default: the host name (serve), the host name and the process id (worker).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// How long a claimed job stays this process's without a renewal (renewed every third
    /// of it): a process that dies loses its jobs to others after at most this.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = cordon_types::units::parse_duration)]
    pub lease: Duration,
}

impl WorkerFlags {
    fn open_store(&self) -> Result<Store, CliError> {
        match &self.store {
            Some(text) => {
                let Ok(location) = text.parse::<StoreLocation>();
                Store::open(&location).map_err(|e| CliError::new(Exit::CordonFailed, e))
            }
            None => open_store(),
        }
    }

    fn settings(&self, default_name: String, slots: Option<u32>) -> WorkerSettings {
        WorkerSettings {
            slots: slots.or(self.slots),
            name: self.name.clone().unwrap_or(default_name),
            lease: self.lease,
        }
    }
}

/// Arguments of `cordon worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The policy file (cordon-server.toml, the same as the API servers'); re-read on SIGHUP.
    /// Default: the built-in policy.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The first retry waits this long; each next one twice as long.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = cordon_types::units::parse_duration)]
    pub retry_backoff: Duration,
    /// Ask the running worker named by --name to drain: it finishes its running jobs, takes
    /// no new ones, and stops. Returns at once (`GET /v1/workers` shows it `draining`).
    #[arg(long, requires = "name")]
    pub drain: bool,
    #[command(flatten)]
    pub common: WorkerFlags,
}

/// Arguments of `cordon token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// Print a JSON document (`cordon.token/v1`, `cordon.token-list/v1`) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
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
        #[arg(long, value_name = "DUR", value_parser = cordon_types::units::parse_duration)]
        expires: Option<Duration>,
        /// What people call it (`ci`, `alice's laptop`): shown by `token list`.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// List tokens: id, project, scopes, state, name, last use (never secrets).
    List,
    /// Revoke a token by id.
    Revoke {
        /// The token's id (t-…).
        id: String,
    },
}

fn open_store() -> Result<Store, CliError> {
    Store::open_default().map_err(|e| CliError::new(Exit::CordonFailed, e))
}

/// The policy file (`--config`), or the built-in policy; a bad file is a usage error naming it.
fn load_policy(config: Option<&PathBuf>) -> Result<Policy, CliError> {
    match config {
        Some(path) => Policy::load(path).map_err(|e| {
            CliError::usage(e)
                .kind(ErrorKind::Config)
                .in_file(path, None)
        }),
        None => Ok(Policy::builtin()),
    }
}

/// Runs `cordon worker`.
pub(crate) fn worker(args: &WorkerArgs) -> Result<Exit, CliError> {
    cordon_server::init_logging(args.common.log_format);
    crate::allocator::return_large_blocks();
    if args.drain {
        let name = args.common.name.as_deref().unwrap_or_default();
        let store = args.common.open_store()?;
        let found = cordon_server::drain_worker(&store, name)
            .map_err(|e| CliError::new(Exit::CordonFailed, e))?;
        if !found {
            return Err(CliError::usage(anyhow::anyhow!(
                "no worker named {name:?} is registered in the store"
            )));
        }
        outln!("cordon worker: {name} drains: it finishes its running jobs, then stops")?;
        return Ok(Exit::Success);
    }
    let policy = load_policy(args.config.as_ref())?;
    let store = args.common.open_store()?;
    let home = cordon_types::cordon_home().map_err(CliError::usage)?;
    let name = format!(
        "{}/worker-{}",
        cordon_server::default_name(),
        std::process::id()
    );
    let workers = args.common.settings(name, None);
    let shown = workers.name.clone();
    let options = WorkOptions {
        store,
        policy,
        policy_path: args.config.clone(),
        data_dir: home.join("serve"),
        retry_backoff: args.retry_backoff,
        workers,
    };
    cordon_server::work(options, |slots| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "cordon worker: {shown} runs {slots} slot(s)");
        let _ = out.flush();
    })
    .map_err(|e| CliError::new(Exit::CordonFailed, e))?;
    Ok(Exit::Success)
}

/// Runs `cordon serve`.
pub(crate) fn serve(args: &ServeArgs) -> Result<Exit, CliError> {
    if args.print_default_policy {
        out!("{}", Policy::builtin_toml())?;
        return Ok(Exit::Success);
    }
    cordon_server::init_logging(args.common.log_format);
    crate::allocator::return_large_blocks();
    let policy = load_policy(args.config.as_ref())?;
    let store = args.common.open_store()?;
    let home = cordon_types::cordon_home().map_err(CliError::usage)?;
    let mut options = ServeOptions::new(store, policy, home.join("serve"));
    options.workers = args
        .common
        .settings(cordon_server::default_name(), args.no_workers.then_some(0));
    options.policy_path = args.config.clone();
    options.listen = args.listen.clone();
    options.max_body = args.max_body;
    options.retry_backoff = args.retry_backoff;
    // The MCP tools at `/mcp`, each call a job of the token's project.
    #[cfg(feature = "mcp")]
    {
        options.routes = Some(cordon_mcp::http::routes());
    }
    cordon_server::serve(options, |listen| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "cordon serve: listening on {listen}");
        let _ = out.flush();
    })
    .map_err(|e| CliError::new(Exit::CordonFailed, e))?;
    Ok(Exit::Success)
}

/// Runs `cordon token`.
pub(crate) fn token(args: &TokenArgs) -> Result<Exit, CliError> {
    let store = open_store()?;
    let store_failed = |e| CliError::new(Exit::CordonFailed, e);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    };
    let described = |id: &str| -> Result<cordon_server::TokenDocument, CliError> {
        let row = store
            .list_tokens()
            .map_err(store_failed)?
            .into_iter()
            .find(|t| t.id == id)
            .ok_or_else(|| {
                CliError::msg(Exit::CordonFailed, format_args!("token {id} vanished"))
            })?;
        Ok(cordon_server::TokenDocument::of(&row, now()))
    };
    match &args.command {
        TokenCommand::Create {
            project,
            scope,
            expires,
            name,
        } => {
            let (id, secret) =
                cordon_server::create_token(&store, project, scope, *expires, name.as_deref())
                    .map_err(CliError::usage)?;
            if args.json {
                let mut doc = described(&id)?;
                doc.secret = Some(secret);
                crate::render::print_json(&doc)?;
            } else {
                eprintln!(
                    "created token {id} for project {project} ({})",
                    scope.join(",")
                );
                outln!("{secret}")?;
            }
        }
        TokenCommand::List => {
            let tokens: Vec<_> = store
                .list_tokens()
                .map_err(store_failed)?
                .iter()
                .map(|t| cordon_server::TokenDocument::of(t, now()))
                .collect();
            if args.json {
                crate::render::print_json(&cordon_server::TokenList {
                    schema: cordon_server::TokenListTag,
                    tokens,
                })?;
            } else {
                for t in tokens {
                    outln!(
                        "{}\t{}\t{}\t{}\t{}\t{}",
                        t.id,
                        t.project,
                        t.scopes.join(","),
                        t.state,
                        t.name.as_deref().unwrap_or("-"),
                        t.last_used_at
                            .map_or_else(|| "never used".to_owned(), |at| format!("used {at}"))
                    )?;
                }
            }
        }
        TokenCommand::Revoke { id } => {
            let revoked = store.revoke_token(id).map_err(store_failed)?;
            if !revoked {
                return Err(
                    CliError::msg(Exit::Usage, format_args!("no live token {id}"))
                        .kind(ErrorKind::NotFound),
                );
            }
            let _ = store.audit("cli", "token.revoke", id, &serde_json::json!({}));
            if args.json {
                crate::render::print_json(&described(id)?)?;
            } else {
                eprintln!("revoked {id}");
            }
        }
    }
    Ok(Exit::Success)
}

/// Arguments of `cordon jobs` (a client of `cordon serve`; the token comes from
/// `CORDON_TOKEN`).
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// The server (default: `$CORDON_SERVER`, else http://127.0.0.1:7878).
    #[arg(long, value_name = "URL", global = true)]
    pub server: Option<String>,
    /// Print the service's JSON documents (`cordon.job/v1`, `cordon.job-list/v1`) instead of
    /// text; `logs --json` prints the live log's events as JSON lines (`{"id", "event",
    /// "data"}`) until the job ends. A failure is a `cordon.error/v1` document (the service's
    /// `cordon.api-error/v1` answer in its `api_error`).
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// The `cordon jobs` subcommands.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Submit a job: a `POST /v1/jobs` body (JSON) from FILE, or standard input with `-`.
    /// Prints the job's id (with --json, the job document).
    Submit {
        /// The request file, or `-`.
        file: PathBuf,
    },
    /// List the token's project's jobs, newest first.
    List {
        /// Only jobs in this state.
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Describe a job (with --json, its document).
    Show {
        /// The job's id.
        id: String,
    },
    /// Print a job's output; with --follow, as it runs, until it ends (exit 0 when it
    /// succeeded, 1 otherwise).
    Logs {
        /// The job's id.
        id: String,
        /// Follow the live log.
        #[arg(long, short)]
        follow: bool,
    },
    /// Cancel a job (a running one's process tree dies).
    Cancel {
        /// The job's id.
        id: String,
    },
    /// Submit a `run` job of CMD ARGS… (`cordon jobs run -- make test`); prints its id, or
    /// with --wait follows it to its end (exit 0 when it succeeded, 1 otherwise).
    Run {
        /// The project (default: `$CORDON_PROJECT`).
        #[arg(long)]
        project: Option<String>,
        /// Follow the job's live log until it ends.
        #[arg(long)]
        wait: bool,
        /// The program and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        argv: Vec<String>,
    },
    /// Submit a `verify` job of a repository at a ref, with a patch on top; prints its id, or
    /// with --wait follows it (stages, output, verdict) to its end.
    Verify {
        /// The project (default: `$CORDON_PROJECT`).
        #[arg(long)]
        project: Option<String>,
        /// The repository to clone (a URL or a path the server reaches).
        #[arg(long, value_name = "URL")]
        repo: String,
        /// The ref to verify (default: the repository's HEAD).
        #[arg(long = "ref", value_name = "REF")]
        rev: Option<String>,
        /// A patch (unified diff) to apply on top before verifying.
        #[arg(long, value_name = "FILE")]
        patch: Option<PathBuf>,
        /// Follow the job's live log until it ends.
        #[arg(long)]
        wait: bool,
    },
}

/// Runs `cordon jobs`.
pub(crate) fn jobs(args: &JobsArgs) -> Result<Exit, CliError> {
    use std::io::{Read, Write};
    let token = std::env::var("CORDON_TOKEN").map_err(|_| {
        CliError::msg(Exit::Usage, "CORDON_TOKEN is not set")
            .hint("create one with `cordon token create --project P`")
    })?;
    let server = args
        .server
        .clone()
        .or_else(|| std::env::var("CORDON_SERVER").ok())
        .unwrap_or_else(|| "http://127.0.0.1:7878".into());
    let client = cordon_server::Client::new(&server, &token).map_err(client_error)?;
    // What answered, for errors: the server's URL and the request's path.
    let url = |path: &str| format!("{}{path}", server.trim_end_matches('/'));
    let mut path: String;
    let answer = match &args.command {
        JobsCommand::Submit { file } => {
            let mut body = Vec::new();
            if file.as_os_str() == "-" {
                std::io::stdin()
                    .read_to_end(&mut body)
                    .map_err(|e| CliError::usage(e).context("cannot read the request"))?;
            } else {
                body = std::fs::read(file).map_err(|e| {
                    CliError::usage(e).context(format!("cannot read {}", file.display()))
                })?;
            }
            path = "/v1/jobs".to_owned();
            client.request("POST", &path, &body).map_err(client_error)?
        }
        JobsCommand::List { state, limit } => {
            path = format!("/v1/jobs?limit={limit}");
            if let Some(state) = state {
                path.push_str(&format!("&state={state}"));
            }
            client.request("GET", &path, b"").map_err(client_error)?
        }
        JobsCommand::Show { id } => {
            path = format!("/v1/jobs/{id}");
            client.request("GET", &path, b"").map_err(client_error)?
        }
        JobsCommand::Cancel { id } => {
            path = format!("/v1/jobs/{id}/cancel");
            client.request("POST", &path, b"").map_err(client_error)?
        }
        JobsCommand::Run { project, argv, .. } => {
            let body = jobs_follow::run_request(&jobs_follow::project(project.as_ref())?, argv);
            path = "/v1/jobs".to_owned();
            client.request("POST", &path, &body).map_err(client_error)?
        }
        JobsCommand::Verify {
            project,
            repo,
            rev,
            patch,
            ..
        } => {
            let body = jobs_follow::verify_request(
                &jobs_follow::project(project.as_ref())?,
                repo,
                rev.as_deref(),
                patch.as_deref(),
            )?;
            path = "/v1/jobs".to_owned();
            client.request("POST", &path, &body).map_err(client_error)?
        }
        JobsCommand::Logs { id, follow: false } if !args.json => {
            path = format!("/v1/jobs/{id}/transcript");
            client.request("GET", &path, b"").map_err(client_error)?
        }
        JobsCommand::Logs { id, .. } if args.json => {
            let mut state = String::new();
            let mut closed = false;
            let status = client
                .follow(id, None, &mut |seq, kind, data| {
                    if kind == "end" {
                        state = data
                            .get("state")
                            .and_then(|s| s.as_str())
                            .unwrap_or("")
                            .into();
                    }
                    let line = serde_json::json!({"id": seq, "event": kind, "data": data});
                    // A reader that went away ends the following.
                    closed = outln!("{line}").is_err() || std::io::stdout().flush().is_err();
                    !closed
                })
                .map_err(client_error)?;
            if closed {
                return Err(CliError::stdout_closed());
            }
            if status != 200 {
                return Err(api_error(
                    status,
                    b"",
                    &url(&format!("/v1/jobs/{id}/events")),
                ));
            }
            return Ok(job_ended(&state));
        }
        JobsCommand::Logs { id, .. } => return follow_text(&client, id, &url),
    };
    // An error answer is not printed as it came: the edge prints it as cordon.error/v1.
    if answer.status >= 400 {
        return Err(api_error(answer.status, &answer.body, &url(&path)));
    }
    if let JobsCommand::Run { wait: true, .. } | JobsCommand::Verify { wait: true, .. } =
        &args.command
    {
        let job: cordon_server::JobDocument = serde_json::from_slice(&answer.body)
            .map_err(|e| CliError::msg(Exit::CordonFailed, format_args!("{e}")))?;
        eprintln!("job {} submitted", job.id);
        return follow_text(&client, &job.id, &url);
    }
    let is_transcript = matches!(args.command, JobsCommand::Logs { .. });
    if args.json || is_transcript {
        let mut out = std::io::stdout().lock();
        out.write_all(&answer.body)?;
        if !answer.body.is_empty() && !answer.body.ends_with(b"\n") {
            out.write_all(b"\n")?;
        }
    } else {
        print_jobs_text(&args.command, &answer.body)?;
    }
    Ok(Exit::Success)
}

/// Follows a job's live log as text (output, stages, verdict) until it ends.
fn follow_text(
    client: &cordon_server::Client,
    id: &str,
    url: &dyn Fn(&str) -> String,
) -> Result<Exit, CliError> {
    let mut state = String::new();
    let mut closed = false;
    let status = client
        .follow(id, None, &mut |_, kind, data| {
            match jobs_follow::print_event(kind, data) {
                Ok(Some(end)) => state = end,
                Ok(None) => {}
                Err(()) => closed = true,
            }
            !closed
        })
        .map_err(client_error)?;
    if closed {
        return Err(CliError::stdout_closed());
    }
    if status != 200 {
        return Err(api_error(
            status,
            b"",
            &url(&format!("/v1/jobs/{id}/events")),
        ));
    }
    eprintln!("job {id}: {state}");
    Ok(job_ended(&state))
}

/// How `jobs logs --follow` exits: 0 when the job succeeded, 1 otherwise.
fn job_ended(state: &str) -> Exit {
    if state == "succeeded" {
        Exit::Success
    } else {
        Exit::Failed
    }
}

/// A request that got no answer: a bad server URL is a usage error; a server that cannot be
/// reached, or answers something else than HTTP, leaves cordon unable to do its job (125).
fn client_error(error: cordon_server::ClientError) -> CliError {
    use cordon_server::ClientError as E;
    match &error {
        E::Url(_) => CliError::usage(error),
        E::Connect { .. } => CliError::new(Exit::CordonFailed, error).kind(ErrorKind::Unavailable),
        _ => CliError::new(Exit::CordonFailed, error),
    }
}

/// The job service's error answer, carried in the error (its `cordon.api-error/v1` document
/// when the body is one): a bad request or an unknown job is a usage error (2), a refusal
/// (policy, budget, scope, token, conflict, busy) a failed operation (1), the service's own
/// failure 125.
fn api_error(status: u16, body: &[u8], url: &str) -> CliError {
    let answer: Option<cordon_server::ApiError> = serde_json::from_slice(body).ok();
    let code = answer.as_ref().map(|e| e.error.as_str());
    let (exit, kind) = match (code, status) {
        (Some("bad_request" | "too_large"), _) | (None, 400 | 413) => {
            (Exit::Usage, ErrorKind::Usage)
        }
        (Some("not_found"), _) | (None, 404) => (Exit::Usage, ErrorKind::NotFound),
        (Some("conflict"), _) | (None, 409) => (Exit::Failed, ErrorKind::Conflict),
        (Some("busy" | "unavailable"), _) | (None, 503) => (Exit::Failed, ErrorKind::Unavailable),
        (Some("internal"), _) | (None, 500..) => (Exit::CordonFailed, ErrorKind::Internal),
        _ => (Exit::Failed, ErrorKind::Refused),
    };
    let message = match &answer {
        Some(e) => match &e.rule {
            Some(rule) => format!(
                "{url} answered {status}: {} ({rule}; {})",
                e.message, e.error
            ),
            None => format!("{url} answered {status}: {} ({})", e.message, e.error),
        },
        None => format!("{url} answered {status}"),
    };
    let hint = (status == 401).then_some(
        "this server does not accept CORDON_TOKEN (revoked, expired, or made for another server's store): `cordon token create --project P` where that server keeps its store; --server or CORDON_SERVER names the server",
    );
    CliError::msg(exit, message)
        .kind(kind)
        .answered(status, answer)
        .maybe_hint(hint)
}

/// The text form of an answer of the job service (a job or a list of jobs).
fn print_jobs_text(command: &JobsCommand, body: &[u8]) -> Result<(), CliError> {
    let protocol = |e: serde_json::Error| {
        CliError::msg(
            Exit::CordonFailed,
            format_args!("the server's answer is not a job document: {e}"),
        )
    };
    let state = |j: &cordon_server::JobDocument| {
        serde_json::to_value(j.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let line = |j: &cordon_server::JobDocument| {
        format!(
            "{}\t{}\t{}\t{}\tattempt {}/{}\t{}",
            j.id,
            j.project,
            j.job_type,
            state(j),
            j.attempt,
            j.max_attempts,
            j.created_at
        )
    };
    match command {
        JobsCommand::List { .. } => {
            let list: cordon_server::JobList = serde_json::from_slice(body).map_err(protocol)?;
            for job in &list.jobs {
                outln!("{}", line(job))?;
            }
            if let Some(cursor) = list.next_cursor {
                eprintln!("(more: GET /v1/jobs?cursor={cursor})");
            }
        }
        JobsCommand::Submit { .. } | JobsCommand::Run { .. } | JobsCommand::Verify { .. } => {
            let job: cordon_server::JobDocument = serde_json::from_slice(body).map_err(protocol)?;
            outln!("{}", job.id)?;
            eprintln!(
                "{} {}: {} in {}",
                job.id,
                state(&job),
                job.job_type,
                job.project
            );
        }
        JobsCommand::Show { .. } | JobsCommand::Cancel { .. } => {
            let job: cordon_server::JobDocument = serde_json::from_slice(body).map_err(protocol)?;
            outln!("{}", line(&job))?;
            if let Some(failure) = &job.failure {
                outln!("failure\t{}: {}", failure.category, failure.reason)?;
            }
        }
        JobsCommand::Logs { .. } => {}
    }
    Ok(())
}

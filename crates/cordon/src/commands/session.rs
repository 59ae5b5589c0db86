//! `cordon session`: persistent sandboxes that agents share (see `cordon-session`).
//!
//! Exit codes of `create`, `push`, `pull`, `fork`, `list`, `show`, `remove`: 0 success (merged or
//! already up to date for `pull`), 1 refused (diverged, a writer in the session, a hostile
//! bundle; nothing changed), 2 usage (bad id, bad branch, ended session), 124 a `--wait` ran
//! out, 125 cordon failed. `exec` exits like `cordon run` (the program's own code; 2 usage;
//! 124 a `--wait` ran out; 125 when cordon could not run it, another writer in the session
//! included). `watch`, `resume` and `poke`: see `session_watch`.

use crate::render::print_json;
use crate::stdout::outln;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use cordon_runner::Isolation;
use cordon_session::{
    Access, CreateRequest, ForkRequest, PullRequest, PushReport, PushReportTag, PushRequest,
    SessionError, SessionList, SessionListTag, SessionRecord, Sessions,
};
use cordon_types::units::{parse_duration, parse_size};
use cordon_workspace::ProcessIdentity;

use crate::args::RunArgs;
use crate::documents::ErrorKind;
use crate::exit::{CliError, Exit};

/// Arguments of `cordon session`.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: SessionCommand,
}

/// Options shared by the commands that create a session.
#[derive(Debug, Args)]
pub struct NewSessionArgs {
    /// The session's branch name (default: the host branch's).
    #[arg(long = "session-branch", value_name = "NAME")]
    pub session_branch: Option<String>,
    /// Only the last N commits of history (a shallow session).
    #[arg(long, value_name = "N")]
    pub depth: Option<u32>,
    /// End the session with the process that created it (your shell, your agent); `cordon
    /// gc` removes it once that process is gone.
    #[arg(long)]
    pub transient: bool,
    /// Idle this long, `cordon gc` ends the session.
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = parse_duration)]
    pub idle_timeout: Duration,
}

/// The session subcommands.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Create a session: the host branch, bundled and verified, imported into a repository
    /// of the session's own under $CORDON_HOME/sessions. Prints the id.
    Create {
        /// The host repository (any directory of its checkout).
        #[arg(long, value_name = "DIR", default_value = ".")]
        repo: PathBuf,
        /// The branch to start from (HEAD: the checked-out branch).
        #[arg(long = "ref", value_name = "REF", default_value = "HEAD")]
        rev: String,
        /// The session's branch name (default: the host branch's).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// Only the last N commits of history (a shallow session).
        #[arg(long, value_name = "N")]
        depth: Option<u32>,
        /// End the session with the process that created it.
        #[arg(long)]
        transient: bool,
        /// Idle this long, `cordon gc` ends the session.
        #[arg(long, value_name = "DUR", default_value = "24h", value_parser = parse_duration)]
        idle_timeout: Duration,
        /// The largest bundle accepted.
        #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
        max_bundle: u64,
        /// Print the session (cordon.session/v1) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Push a host branch into a session (a new one unless --session): `git bundle create`,
    /// verified, imported as a fast-forward. Prints the session's id on stdout. With a
    /// program after `--`, run it in the session right after (sandboxed, writable): its
    /// output goes to stderr, so `id=$(cordon session push -- ./agent.sh)` gets the id; the
    /// exit code is the program's.
    Push {
        /// The host repository.
        #[arg(long, value_name = "DIR", default_value = ".")]
        repo: PathBuf,
        /// The host branch (default: the checked-out one; for --session, the session's).
        #[arg(long, value_name = "BRANCH")]
        branch: Option<String>,
        /// An existing session to push into.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// How long to wait for a writer in the session (default: refuse at once).
        #[arg(long, value_name = "DUR", default_value = "0s", value_parser = parse_duration)]
        wait: Duration,
        /// The largest bundle accepted.
        #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
        max_bundle: u64,
        /// A new session's options.
        #[command(flatten)]
        new: NewSessionArgs,
        /// Print the push report (cordon.session-push/v1) as JSON.
        #[arg(long)]
        json: bool,
        /// The program to run in the session after the import.
        #[arg(last = true, value_name = "PROGRAM [ARGS]...")]
        command: Vec<std::ffi::OsString>,
    },
    /// Run one program in the session's tree, sandboxed, with the bounds, result and
    /// recording of `cordon run`. The session's own git repository is writable inside; the
    /// host repository is never visible. One writer at a time; readers never wait.
    Exec(Box<ExecArgs>),
    /// Bring the session's branch back as a fast-forward of a host branch: cordon bundles it
    /// in the session's sandbox, verifies the bundle against the host, fetches it into
    /// refs/cordon/sessions/ID and fast-forwards BRANCH. Exit 0 merged or up to date, 1
    /// refused (diverged: nothing changed), 2 usage, 124 --wait ran out, 125 cordon failed.
    Pull {
        /// The session id.
        id: String,
        /// The host repository (default: the session's).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// The host branch to fast-forward (default: the one pushed).
        #[arg(long, value_name = "BRANCH")]
        into: Option<String>,
        /// How long to wait for a writer in the session to finish.
        #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
        wait: Duration,
        /// The largest bundle accepted.
        #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
        max_bundle: u64,
        /// The most the change may write into the checkout, its new and changed files added
        /// up (checked before anything is written).
        #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
        max_checkout_size: u64,
        /// The largest file the change may write into the checkout.
        #[arg(long, value_name = "SIZE", default_value = "100MiB", value_parser = parse_size)]
        max_checkout_file: u64,
        /// Print the pull report (cordon.session-pull/v1) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the live sessions (with --all, ended ones too, until `cordon gc --older-than`
    /// deletes their records).
    List {
        /// Ended sessions too.
        #[arg(long)]
        all: bool,
        /// Print JSON (cordon.session-list/v1).
        #[arg(long)]
        json: bool,
    },
    /// Watch the session's review: poll a source for review comments (with backoff),
    /// run reviewers read-only and a fixer writable in rounds, until the change is merged
    /// or closed (session removed, exit 0), --max-rounds is reached (exit 1, session kept)
    /// or nothing happens for --idle-timeout (--on-timeout runs, session removed, exit 0).
    /// Survives its own crash: run it again, or `cordon session resume ID`.
    Watch(Box<super::session_watch::WatchArgs>),
    /// Run the watch recorded in the session again (after its watcher died).
    Resume {
        /// The session id.
        id: String,
        /// Print one JSON line per event (cordon.review-event/v1) on stdout.
        #[arg(long)]
        json_events: bool,
    },
    /// Make the session's watcher poll at once and reset its backoff; with --comment, add a
    /// review item (it waits in the session's state when no watcher runs).
    Poke {
        /// The session id.
        id: String,
        /// A comment for the fixer.
        #[arg(long, value_name = "TEXT")]
        comment: Option<String>,
        /// Print {session, item, watcher_pid} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fork the session into N new sessions that start from its exact current state (its
    /// committed, uncommitted and untracked files, its history, its branch) without copying
    /// its tree: its upper layer is frozen and shared, read-only, under a new layer for each
    /// fork and for the source, which goes on as it was. Each fork is an ordinary session
    /// that records its parent. Prints the new ids, one a line.
    Fork {
        /// The session to fork.
        id: String,
        /// How many sessions to make.
        #[arg(long, value_name = "N", default_value_t = 1)]
        count: u32,
        /// How long to wait for a writer in the session to finish (default: refuse at once).
        #[arg(long, value_name = "DUR", default_value = "0s", value_parser = parse_duration)]
        wait: Duration,
        /// End the forks with the process that made them (your shell, your agent).
        #[arg(long)]
        transient: bool,
        /// Print the fork's report (cordon.session-fork/v1) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify each session's current state as `cordon verify` would (its change against its
    /// base commit, with warm build caches), several at once, and print one ranked table:
    /// the gate, blocking findings, new lint findings, tests passed, diff size, duration.
    /// Exit 0 when a candidate passed the gate (the winner: `cordon session pull ID`), 1
    /// when none did.
    Compare(Box<super::session_compare::CompareArgs>),
    /// Show one session.
    Show {
        /// The session id.
        id: String,
        /// Print JSON (cordon.session/v1).
        #[arg(long)]
        json: bool,
    },
    /// End a session: stop whatever runs in it, keep its commits the host branch lacks in
    /// the host repository (refs/cordon/sessions/ID: `cordon session pull ID` still brings
    /// them), delete its tree; its record and its runs in the history stay.
    Remove {
        /// The session id.
        id: String,
        /// How long to wait for what runs in it to stop.
        #[arg(long, value_name = "DUR", default_value = "30s", value_parser = parse_duration)]
        wait: Duration,
        /// End it without keeping its commits (when they cannot be bundled: its branch was
        /// deleted, its repository broken).
        #[arg(long)]
        discard: bool,
        /// Print the ended session as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `cordon session exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The session id.
    pub id: String,
    /// Reviewer mode: the whole tree and its git data read-only, enforced by the kernel.
    #[arg(long)]
    pub read_only: bool,
    /// How long a writer waits for another writer (default: refuse at once).
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = parse_duration)]
    pub wait: Duration,
    /// Give the program a pseudo-terminal cordon owns and proxies to yours (interactive
    /// agents); the same as --stdin tty.
    #[arg(long)]
    pub tty: bool,
    /// The options of `cordon run`.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Maps a session error to its exit code and kind, with its hint.
pub(super) fn fail(error: SessionError) -> CliError {
    let (exit, kind) = classify(&error);
    let hint = error.hint();
    CliError::new(exit, error).kind(kind).maybe_hint(hint)
}

/// The exit code and kind of a session error, as every door reports it
/// ([`SessionError::error_class`]): refused 1, usage 2, a wait that ran out 124, the rest
/// cordon's failure (125).
fn classify(error: &SessionError) -> (Exit, ErrorKind) {
    let class = error.error_class();
    (Exit::of_code(class.code), class.kind)
}

/// A session's state as a word.
fn state_word(rec: &SessionRecord) -> &'static str {
    match rec.state {
        cordon_session::SessionStatus::Creating => "creating",
        cordon_session::SessionStatus::Active => "active",
        cordon_session::SessionStatus::Ended => "ended",
    }
}

fn describe(rec: &SessionRecord) -> String {
    cordon_types::text::for_terminal_line(&format!(
        "{}  {:<8}  {}  {}@{}  {} -> {}  {}",
        rec.id,
        state_word(rec),
        if rec.transient {
            "transient "
        } else {
            "persistent"
        },
        rec.repo.display(),
        &rec.base_commit.as_str()[..12],
        rec.host_branch,
        rec.branch,
        rec.path.display()
    ))
}

pub(crate) fn run(args: SessionArgs) -> Result<Exit, CliError> {
    let sessions = Sessions::from_env().map_err(fail)?;
    let _ = sessions.reconcile_on_start();
    match args.command {
        SessionCommand::Create {
            repo,
            rev,
            branch,
            depth,
            transient,
            idle_timeout,
            max_bundle,
            json,
        } => {
            let request = create_request(
                repo,
                rev,
                branch,
                depth,
                transient,
                idle_timeout,
                max_bundle,
            );
            create(&sessions, &request, json)
        }
        SessionCommand::Push {
            repo,
            branch,
            session,
            wait,
            max_bundle,
            new,
            json,
            command,
        } => push(
            &sessions,
            PushArgs {
                repo,
                branch,
                session,
                wait,
                max_bundle,
                new,
                json,
                command,
            },
        ),
        SessionCommand::Exec(args) => exec(&sessions, *args, super::run::Output::Passthrough),
        SessionCommand::Watch(args) => {
            super::session_watch::watch(&sessions, *args, super::session_watch::own_watch_args())
        }
        SessionCommand::Resume { id, json_events } => {
            super::session_watch::resume(&sessions, &id, json_events)
        }
        SessionCommand::Poke { id, comment, json } => {
            super::session_watch::poke(&sessions, &id, comment.as_deref(), json)
        }
        SessionCommand::Pull {
            id,
            repo,
            into,
            wait,
            max_bundle,
            max_checkout_size,
            max_checkout_file,
            json,
        } => {
            let request = PullRequest {
                repo,
                into,
                wait,
                max_bundle_bytes: max_bundle,
                max_checkout_bytes: max_checkout_size,
                max_checkout_file_bytes: max_checkout_file,
            };
            pull(&sessions, &id, &request, json)
        }
        SessionCommand::List { all, json } => list(&sessions, all, json),
        SessionCommand::Show { id, json } => show(&sessions, &id, json),
        SessionCommand::Compare(args) => super::session_compare::compare(&sessions, *args),
        SessionCommand::Fork {
            id,
            count,
            wait,
            transient,
            json,
        } => {
            let request = ForkRequest {
                count,
                wait,
                transient,
                // The CLI exits at once: transient forks belong to whoever ran it.
                owner: transient.then(ProcessIdentity::parent),
            };
            fork(&sessions, &id, &request, json)
        }
        SessionCommand::Remove {
            id,
            wait,
            discard,
            json,
        } => remove(&sessions, &id, wait, discard, json),
    }
}

/// `cordon session create`: prints the new session's id (or its record as JSON).
fn create(sessions: &Sessions, request: &CreateRequest, json: bool) -> Result<Exit, CliError> {
    let rec = sessions.create(request).map_err(fail)?;
    if json {
        print_json(&rec)?;
    } else {
        outln!("{}", rec.id)?;
        eprintln!(
            "created session {} of {} ({} at {}) at {}",
            rec.id,
            rec.repo.display(),
            rec.host_branch,
            &rec.base_commit.as_str()[..12],
            rec.path.display()
        );
    }
    Ok(Exit::Success)
}

/// `cordon session pull`: fast-forwards the host branch to the session's.
fn pull(
    sessions: &Sessions,
    id: &str,
    request: &PullRequest,
    json: bool,
) -> Result<Exit, CliError> {
    let session = sessions.open_str(id).map_err(fail)?;
    let report = session.pull(request).map_err(fail)?;
    if json {
        print_json(&report)?;
    } else {
        match report.outcome {
            cordon_session::PullOutcome::Merged => eprintln!(
                "{} fast-forwarded by {} commit(s) to {}{}",
                report.into,
                report.commits,
                report.to.as_ref().map_or("", |c| c.as_str()),
                if report.checked_out {
                    " (checked out: merged)"
                } else {
                    ""
                }
            ),
            cordon_session::PullOutcome::UpToDate => {
                eprintln!("{} is up to date with session {}", report.into, report.id)
            }
        }
    }
    Ok(Exit::Success)
}

/// `cordon session fork`: the new sessions' ids, one a line (or the report as JSON).
fn fork(
    sessions: &Sessions,
    id: &str,
    request: &ForkRequest,
    json: bool,
) -> Result<Exit, CliError> {
    let report = sessions
        .open_str(id)
        .and_then(|s| s.fork(request))
        .map_err(fail)?;
    if json {
        print_json(&report)?;
    } else {
        for rec in &report.sessions {
            outln!("{}", rec.id)?;
        }
        eprintln!(
            "forked session {} into {} session(s) ({} frozen layer(s) shared)",
            report.source,
            report.sessions.len(),
            report.depth
        );
        if let Some(done) = &report.flattened {
            eprintln!(
                "  its {} frozen layers were merged into one first ({} ms)",
                done.replaced.len(),
                done.duration_ms
            );
        }
        if let Some(why) = &report.flatten_failure {
            eprintln!("  warning: its frozen layers could not be merged into one: {why}");
        }
    }
    Ok(Exit::Success)
}

/// `cordon session list [--all]`.
fn list(sessions: &Sessions, all: bool, json: bool) -> Result<Exit, CliError> {
    let mut records = sessions.list().map_err(fail)?;
    if !all {
        records.retain(|r| r.state != cordon_session::SessionStatus::Ended);
    }
    if json {
        print_json(&SessionList {
            schema: SessionListTag,
            sessions: records,
        })?;
    } else if records.is_empty() {
        eprintln!("no {}sessions", if all { "" } else { "live " });
    } else {
        for rec in &records {
            outln!("{}", describe(rec))?;
        }
    }
    Ok(Exit::Success)
}

/// `cordon session show`: one session and its runs.
fn show(sessions: &Sessions, id: &str, json: bool) -> Result<Exit, CliError> {
    let rec = sessions
        .open_str(id)
        .and_then(|s| s.record())
        .map_err(fail)?;
    if json {
        print_json(&rec)?;
    } else {
        outln!("{}", describe(&rec))?;
        if let Some(parent) = &rec.parent {
            outln!(
                "  forked from {parent}; {} frozen layer(s) shared",
                rec.layers.len()
            )?;
        }
        for run in &rec.runs {
            outln!(
                "  {}  {}  {}  exit {}  {}",
                run.started_at,
                run.run_id.as_deref().unwrap_or("-"),
                if run.read_only {
                    "read-only"
                } else {
                    "writer   "
                },
                run.exit_code.map_or("?".to_owned(), |c| c.to_string()),
                crate::render::command_line(&run.command)
            )?;
        }
        super::session_watch::show_rounds(&rec)?;
    }
    Ok(Exit::Success)
}

/// `cordon session remove [--discard]`.
fn remove(
    sessions: &Sessions,
    id: &str,
    wait: Duration,
    discard: bool,
    json: bool,
) -> Result<Exit, CliError> {
    let rec = sessions
        .open_str(id)
        .and_then(|s| {
            if discard {
                s.discard(wait)
            } else {
                s.remove(wait)
            }
        })
        .map_err(fail)?;
    if json {
        print_json(&rec)?;
    } else {
        eprintln!("{}", ending(&rec));
    }
    Ok(Exit::Success)
}

/// What the end of a session says: that it ended, and where its unpulled commits are.
pub(crate) fn ending(rec: &SessionRecord) -> String {
    match &rec.kept {
        Some(kept) => format!("ended session {}; {}", rec.id, kept.describe()),
        None => format!(
            "ended session {} (nothing unpulled; its runs stay in `cordon runs`)",
            rec.id
        ),
    }
}

fn create_request(
    repo: PathBuf,
    rev: String,
    branch: Option<String>,
    depth: Option<u32>,
    transient: bool,
    idle_timeout: Duration,
    max_bundle: u64,
) -> CreateRequest {
    CreateRequest {
        repo,
        rev,
        branch,
        depth,
        transient,
        idle_timeout,
        // The CLI exits at once: a transient session belongs to whoever ran it.
        owner: transient.then(ProcessIdentity::parent),
        max_bundle_bytes: max_bundle,
    }
}

struct PushArgs {
    repo: PathBuf,
    branch: Option<String>,
    session: Option<String>,
    wait: Duration,
    max_bundle: u64,
    new: NewSessionArgs,
    json: bool,
    command: Vec<std::ffi::OsString>,
}

fn push(sessions: &Sessions, args: PushArgs) -> Result<Exit, CliError> {
    let report = match &args.session {
        Some(id) => sessions
            .open_str(id)
            .and_then(|s| {
                s.push(&PushRequest {
                    repo: Some(args.repo.clone()),
                    branch: args.branch.clone(),
                    wait: args.wait,
                    max_bundle_bytes: args.max_bundle,
                })
            })
            .map_err(fail)?,
        None => {
            let request = create_request(
                args.repo.clone(),
                args.branch.clone().unwrap_or_else(|| "HEAD".to_owned()),
                args.new.session_branch.clone(),
                args.new.depth,
                args.new.transient,
                args.new.idle_timeout,
                args.max_bundle,
            );
            let rec = sessions.create(&request).map_err(fail)?;
            PushReport {
                schema: PushReportTag,
                commit: rec.base_commit.clone(),
                session: rec,
                created: true,
                bundle_bytes: 0,
            }
        }
    };
    if args.json {
        print_json(&report)?;
    } else {
        outln!("{}", report.session.id)?;
        eprintln!(
            "pushed {} ({}) into {} session {}",
            report.session.host_branch,
            &report.commit.as_str()[..12],
            if report.created { "new" } else { "existing" },
            report.session.id
        );
    }
    if args.command.is_empty() {
        return Ok(Exit::Success);
    }
    // The program runs with `cordon run`'s defaults, writable, right after the import.
    let mut argv: Vec<std::ffi::OsString> = vec!["cordon".into(), "run".into(), "--".into()];
    argv.extend(args.command);
    let cli = <crate::args::Cli as clap::Parser>::try_parse_from(&argv).map_err(CliError::usage)?;
    let crate::args::Command::Run(run) = cli.command else {
        unreachable!("parsed as `cordon run`");
    };
    // Its output goes to stderr: stdout is the session's id (`id=$(cordon session push --
    // ./agent.sh)`), or the push report with --json.
    exec(
        sessions,
        ExecArgs {
            id: report.session.id.to_string(),
            read_only: false,
            wait: args.wait,
            tty: false,
            run,
        },
        super::run::Output::ToStderr,
    )
}

fn exec(sessions: &Sessions, args: ExecArgs, output: super::run::Output) -> Result<Exit, CliError> {
    // Like `cordon run`: 1 is the program's, so a refusal (another writer) is cordon's 125.
    let exec_fail = |e: SessionError| {
        let (exit, kind) = match classify(&e) {
            (Exit::Failed, kind) => (Exit::CordonFailed, kind),
            other => other,
        };
        let hint = e.hint();
        CliError::new(exit, e).kind(kind).maybe_hint(hint)
    };
    if args.run.workspace.is_some() {
        return Err(CliError::msg(
            Exit::Usage,
            "--workspace cannot be used with `session exec`: the session is the workspace",
        ));
    }
    let mut args = args;
    if args.tty {
        args.run.stdin = crate::args::StdinArg::Tty;
    }
    let session = sessions.open_str(&args.id).map_err(exec_fail)?;
    let here = std::env::current_dir()?;
    let options = match args.run.sandbox.resolve(&here).map_err(CliError::usage)? {
        Some(options) => options,
        None => {
            return Err(CliError::msg(
                Exit::Usage,
                "--no-sandbox cannot be used with `session exec`: a session runs only sandboxed (the session's state and the host repository stay out of reach)",
            ));
        }
    };
    let access = if args.read_only {
        Access::ReadOnly
    } else {
        Access::Write
    };
    let lease = session.begin_exec(access, args.wait).map_err(exec_fail)?;
    let cwd = match &args.run.cwd {
        Some(dir) if dir.is_relative() => lease.tree().join(dir),
        Some(dir) => dir.clone(),
        None => lease.tree().to_owned(),
    };
    let request = super::run::request_from(
        &args.run,
        cwd,
        Some(lease.mount()),
        Isolation::Sandboxed(options),
    );
    let tree = lease.tree().to_owned();
    let session_id = session.id().to_string();
    let executed = super::run::execute(&request, &args.run, &tree, Some(&session_id), output);
    let (run_id, command, exit) = match &executed {
        Ok(e) => (e.run_id.clone(), e.command.clone(), Some(e.exit_code)),
        Err(e) => (None, Vec::new(), Some(e.exit().code())),
    };
    if let Err(e) = lease.finish(run_id, command, exit) {
        eprintln!("cordon: warning: the session's record was not updated: {e}");
    }
    Ok(Exit::Run(executed?.exit_code))
}

//! `cordon session watch|resume|poke`: the review watcher (see `cordon_session::Session::watch`).
//!
//! Exit codes of `watch` and `resume`: 0 the change was merged or closed, or the idle timeout
//! ended the watch (the session is removed); 1 items were still pending after
//! `--max-rounds` rounds (the session is kept), or another watcher watches the session; 2
//! usage (a `--secret`/`--agent-secret` variable that is not set is refused at the start), or
//! the fixer failed the same way within a second on two tries in a row (a configuration
//! error: the session and its items are kept); 125 cordon failed (the state is kept: run
//! `resume` to continue).

use crate::stdout::outln;
use std::io::Write;
use std::time::Duration;

use clap::Args;
use cordon_session::{ReviewEvent, ReviewEventKind, SessionError, Sessions, WatchSettings};
use cordon_types::units::parse_duration;

use crate::exit::{CliError, Exit};

/// Arguments of `cordon session watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The session id.
    pub id: String,
    /// The source: a shell command run outside the session's sandbox with the bounds of
    /// `cordon run` (the operator's trusted script, e.g. calling a code host's API). It prints
    /// JSON lines: items `{"id", "body", "author", "url"}` and optionally one
    /// `{"state": "open"|"merged"|"closed"}`.
    #[arg(long, value_name = "CMD")]
    pub source: String,
    /// The fixer: a shell command run in the session, writable, with the pending items as a
    /// JSON array in the file named by $CORDON_REVIEW_ITEMS and on standard input. Exit 0:
    /// its items are handled; otherwise they stay pending (3 tries per item). Failing the
    /// same way within a second twice in a row ends the watch as a configuration error
    /// (exit 2).
    #[arg(long, value_name = "CMD")]
    pub fixer: String,
    /// A reviewer (repeatable): a shell command run in the session read-only before each
    /// round; the items it prints as JSON lines go to the pending queue at once. Its review
    /// is complete when it exits, prints an item containing `[REVIEW COMPLETE]`, times out
    /// or fails.
    #[arg(long = "reviewer", value_name = "CMD")]
    pub reviewers: Vec<String>,
    /// Items still pending after this many rounds end the watch with exit 1 (session kept).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_rounds: u32,
    /// The first polling interval (and the interval after a new item).
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = parse_duration)]
    pub backoff_min: Duration,
    /// The longest polling interval (it doubles up to this).
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = parse_duration)]
    pub backoff_max: Duration,
    /// No new item and no round for this long: run --on-timeout, remove the session, exit 0.
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// A shell command run like the source when the idle timeout ends the watch (e.g. to
    /// post "timed out after 24h of inactivity").
    #[arg(long, value_name = "CMD")]
    pub on_timeout: Option<String>,
    /// Pass the variable NAME of cordon's environment to the source and --on-timeout, as a
    /// secret (redacted everywhere; repeatable). Refused at the start when NAME is not set.
    #[arg(long = "secret", value_name = "NAME")]
    pub secrets: Vec<String>,
    /// Pass the variable NAME of cordon's environment to the reviewers and the fixer (e.g.
    /// their model's API key), as a secret (redacted everywhere; repeatable). Refused at the
    /// start when NAME is not set.
    #[arg(long = "agent-secret", value_name = "NAME")]
    pub agent_secrets: Vec<String>,
    /// A credential the network proxy adds to the reviewers' and the fixer's requests to
    /// HOST (repeatable; e.g. their model's API key), which they never see: as `cordon run
    /// --credential` (NAME from cordon's environment; the agents' NAME holds a placeholder).
    /// HOST must be on --network allow=...
    #[arg(long = "agent-credential", value_name = "HOST=NAME[:HOW]", value_parser = crate::args::parse_credential)]
    pub agent_credentials: Vec<cordon_proxy::Credential>,
    /// The source's (and --on-timeout's) time limit.
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = parse_duration)]
    pub source_timeout: Duration,
    /// A reviewer's time limit (then its review is complete, with a warning).
    #[arg(long, value_name = "DUR", default_value = "1h", value_parser = parse_duration)]
    pub reviewer_timeout: Duration,
    /// The fixer's time limit (then it failed: its items stay pending).
    #[arg(long, value_name = "DUR", default_value = "1h", value_parser = parse_duration)]
    pub fixer_timeout: Duration,
    /// Do not record the runs in the run history.
    #[arg(long)]
    pub no_record: bool,
    /// Print one JSON line per event (cordon.review-event/v1) on stdout.
    #[arg(long)]
    pub json_events: bool,
    /// The sandbox of the reviewers and the fixer.
    #[command(flatten)]
    pub sandbox: crate::sandbox_args::SandboxArgs,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn fail(error: SessionError) -> CliError {
    super::session::fail(error)
}

/// `cordon session watch`; `cli_args` are its options as given (recorded for `resume`).
pub(crate) fn watch(
    sessions: &Sessions,
    args: WatchArgs,
    cli_args: Vec<String>,
) -> Result<Exit, CliError> {
    let session = sessions.open_str(&args.id).map_err(fail)?;
    let here = std::env::current_dir()?;
    let Some(mut agents) = args.sandbox.resolve(&here).map_err(CliError::usage)? else {
        return Err(CliError::msg(
            Exit::Usage,
            "--no-sandbox cannot be used with `session watch`: reviewers and the fixer run only sandboxed",
        ));
    };
    agents.proxy.credentials = args.agent_credentials;
    agents
        .proxy
        .check_credentials()
        .map_err(|e| CliError::usage(e).hint("add the host to --network allow=..."))?;
    let settings = WatchSettings {
        source: args.source,
        fixer: args.fixer,
        reviewers: args.reviewers,
        max_rounds: args.max_rounds,
        backoff_min_ms: ms(args.backoff_min),
        backoff_max_ms: ms(args.backoff_max),
        idle_timeout_ms: ms(args.idle_timeout),
        on_timeout: args.on_timeout,
        secrets: args.secrets,
        agent_secrets: args.agent_secrets,
        source_timeout_ms: ms(args.source_timeout),
        reviewer_timeout_ms: ms(args.reviewer_timeout),
        fixer_timeout_ms: ms(args.fixer_timeout),
        cwd: here,
        record: !args.no_record,
        cli_args,
    };
    let json = args.json_events;
    let mut on_event = |event: &ReviewEvent| {
        if json {
            let mut out = std::io::stdout().lock();
            if serde_json::to_writer(&mut out, event).is_ok() {
                let _ = writeln!(out);
                let _ = out.flush();
            }
        } else {
            for line in describe(&event.event).lines() {
                eprintln!("cordon: {}", cordon_types::text::for_terminal(line));
            }
        }
    };
    let reason = session
        .watch(settings, agents, &mut on_event)
        .map_err(fail)?;
    Ok(match reason.exit_code() {
        0 => Exit::Success,
        2 => Exit::Usage,
        _ => Exit::Failed,
    })
}

/// `cordon session resume ID`: the watch recorded in the session, run again (in the
/// directory it was started in).
pub(crate) fn resume(sessions: &Sessions, id: &str, json_events: bool) -> Result<Exit, CliError> {
    let rec = sessions
        .open_str(id)
        .and_then(|s| s.record())
        .map_err(fail)?;
    let recorded = rec
        .review
        .settings
        .as_ref()
        .map(|s| (s.cli_args.clone(), s.cwd.clone()))
        .filter(|(a, _)| !a.is_empty());
    let Some((mut options, cwd)) = recorded else {
        return Err(CliError::msg(
            Exit::Usage,
            format_args!("session {id} has no recorded `cordon session watch` to resume"),
        )
        .hint("start one with `cordon session watch ID --source CMD --fixer CMD`"));
    };
    if json_events && !options.iter().any(|o| o == "--json-events") {
        options.push("--json-events".to_owned());
    }
    // The recorded options may name paths relative to where the watch was started.
    std::env::set_current_dir(&cwd).map_err(|e| {
        CliError::usage(e).context(format!(
            "the watch was started in {}, which cannot be entered",
            cwd.display()
        ))
    })?;
    let mut argv = vec![
        "cordon".to_owned(),
        "session".to_owned(),
        "watch".to_owned(),
    ];
    argv.extend(options.iter().cloned());
    let cli = <crate::args::Cli as clap::Parser>::try_parse_from(&argv)
        .map_err(|e| CliError::usage(e).context("the recorded watch"))?;
    let crate::args::Command::Session(super::session::SessionArgs {
        command: super::session::SessionCommand::Watch(args),
    }) = cli.command
    else {
        unreachable!("parsed as `cordon session watch`");
    };
    watch(sessions, *args, options)
}

/// The options after `cordon … session watch` in this process's command line.
pub(crate) fn own_watch_args() -> Vec<String> {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    argv.windows(2)
        .position(|w| w[0] == "session" && w[1] == "watch")
        .map(|at| argv[at + 2..].to_vec())
        .unwrap_or_default()
}

/// `cordon session poke ID [--comment TEXT]`.
pub(crate) fn poke(
    sessions: &Sessions,
    id: &str,
    comment: Option<&str>,
    json: bool,
) -> Result<Exit, CliError> {
    let session = sessions.open_str(id).map_err(fail)?;
    let item = session.poke(comment).map_err(fail)?;
    let watcher = session
        .record()
        .ok()
        .and_then(|r| r.review.watcher)
        .map(|w| w.pid);
    if json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({ "session": id, "item": item, "watcher_pid": watcher }),
        )?;
        writeln!(out)?;
    } else {
        if let Some(item) = &item {
            outln!("{item}")?;
        }
        match watcher {
            Some(pid) => eprintln!("poked the watcher of session {id} (pid {pid})"),
            None => eprintln!("no watcher runs in session {id}: the poke waits in its state"),
        }
    }
    Ok(Exit::Success)
}

/// One event as lines for people (no Rust names: every value is said in words). A failure
/// says its exit code and the last lines of its standard error, indented under it.
fn describe(event: &ReviewEventKind) -> String {
    let (head, stderr) = match event {
        ReviewEventKind::Started {
            resumed,
            rounds,
            pending,
        } => (
            format!(
                "watching{} ({rounds} round(s) so far, {pending} item(s) pending)",
                if *resumed { ", resuming" } else { "" }
            ),
            &[][..],
        ),
        ReviewEventKind::Poll {
            exit_code,
            new_items,
            state,
            stderr_tail,
            ..
        } => (
            format!(
                "polled the source: exit {exit_code}, {new_items} new item(s){}",
                state.map_or(String::new(), |s| format!(", the change is {s}"))
            ),
            stderr_tail.as_slice(),
        ),
        ReviewEventKind::Items { origin, ids } => (
            format!("new items from {origin}: {}", ids.join(", ")),
            &[][..],
        ),
        ReviewEventKind::Reviewer {
            command,
            exit_code,
            completion,
            stderr_tail,
            ..
        } => (
            format!("reviewer `{command}` {completion} (exit {exit_code})"),
            stderr_tail.as_slice(),
        ),
        ReviewEventKind::RoundStarted {
            round,
            items,
            resumed,
        } => (
            format!(
                "round {round}{}: the fixer on {}",
                if *resumed { " (again)" } else { "" },
                items.join(", ")
            ),
            &[][..],
        ),
        ReviewEventKind::RoundFinished {
            round,
            exit_code,
            handled,
            retry,
            dropped,
            stderr_tail,
            ..
        } => (
            format!(
                "round {round} finished: the fixer exited {exit_code}, {} handled, {} to retry, {} dropped{}",
                handled.len(),
                retry.len(),
                dropped.len(),
                if dropped.is_empty() {
                    String::new()
                } else {
                    format!(" (failed: {})", dropped.join(", "))
                }
            ),
            stderr_tail.as_slice(),
        ),
        ReviewEventKind::Backoff { delay_ms } => (format!("next poll in {delay_ms} ms"), &[][..]),
        ReviewEventKind::Poke => ("poked: polling now".to_owned(), &[][..]),
        ReviewEventKind::Warning { message } => (format!("warning: {message}"), &[][..]),
        ReviewEventKind::Ended {
            reason,
            exit_code,
            kept,
        } => (
            match kept {
                Some(kept) => format!(
                    "watch ended (exit {exit_code}): {reason}; {}",
                    kept.describe()
                ),
                None => format!("watch ended (exit {exit_code}): {reason}"),
            },
            &[][..],
        ),
    };
    let mut text = head;
    for line in stderr {
        text.push_str("\n  | ");
        text.push_str(line);
    }
    text
}

/// The rounds of a session, for `cordon session show`.
pub(crate) fn show_rounds(rec: &cordon_session::SessionRecord) -> Result<(), CliError> {
    let review = &rec.review;
    if review.settings.is_none() && review.pending.is_empty() && review.history.is_empty() {
        return Ok(());
    }
    outln!(
        "  review: {}, {} round(s), {} pending, {} handled, {} failed",
        review.phase,
        rec.rounds,
        review.pending.len(),
        review.handled.len(),
        review.failed.len()
    )?;
    for round in review.history.iter().chain(&review.current_round) {
        outln!(
            "  round {}  {}  reviewers {}  fixer {}  exit {}  items {}  handled {}  dropped {}",
            round.number,
            round.started_at,
            if round.reviewer_run_ids.is_empty() {
                "-".to_owned()
            } else {
                round.reviewer_run_ids.join(",")
            },
            round.fixer_run_id.as_deref().unwrap_or("-"),
            round.exit_code.map_or("?".to_owned(), |c| c.to_string()),
            round.items.join(","),
            round.handled.len(),
            round.dropped.len()
        )?;
    }
    Ok(())
}

//! `cordon run`: one program, hard bounds, an honest report.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use cordon_exec::{StdinMode, Stream};
use cordon_runner::{
    Bounds, Hooks, Isolation, OverlayMount, Recorder, RunError, RunRequest, TranscriptTarget,
    WorkspaceMount,
};

use crate::args::{RunArgs, StdinArg};
use crate::commands::workspace::fail as workspace_error;
use crate::exit::{CliError, Exit};
use crate::render::{Cancel, Passthrough, summary_line};
use crate::signals;

pub(crate) fn run(args: RunArgs, argv: &[OsString]) -> Result<Exit, CliError> {
    check_separator(&args.command, argv)?;
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir).map_err(|e| {
            CliError::usage(e).context(format!("cannot resolve --cwd {}", dir.display()))
        })?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let workspace = find_workspace(args.workspace.as_deref(), &cwd)?;
    let overlay = match &workspace {
        Some(ws) => overlay_of(ws)?,
        None => None,
    };
    let cwd = match (&workspace, &args.cwd) {
        (Some(ws), None) if args.workspace.is_some() => ws.path.clone(),
        _ => cwd,
    };
    match (&workspace, &overlay) {
        (Some(ws), Some((workspaces, _))) => check_overlay_cwd(workspaces, ws, &cwd)?,
        _ if !cwd.is_dir() => {
            return Err(CliError::msg(
                Exit::Usage,
                format_args!("--cwd {} is not a directory", cwd.display()),
            ));
        }
        _ => {}
    }
    let isolation = match args.sandbox.resolve(&cwd).map_err(CliError::usage)? {
        Some(options) => Isolation::Sandboxed(options),
        None => {
            if !args.credentials.is_empty() {
                return Err(CliError::msg(
                    Exit::Usage,
                    "--credential cannot be combined with --no-sandbox: the network proxy adds credentials, and it runs only with the sandbox",
                ));
            }
            if let Some(ws) = &workspace {
                if overlay.is_some() {
                    return Err(CliError::msg(
                        Exit::Usage,
                        format_args!(
                            "--no-sandbox: workspace {} is an overlay, whose files exist only inside the sandbox",
                            ws.id.as_str()
                        ),
                    )
                    .hint("run it sandboxed, or create a workspace with --strategy git-worktree"));
                }
                eprintln!(
                    "cordon: warning: --no-sandbox: the program can change the git data of {} (hooks, config, refs) that workspace {} shares with the live checkout",
                    ws.repo.display(),
                    ws.id.as_str()
                );
            }
            Isolation::Unsandboxed
        }
    };
    // One writer at a time in an overlay workspace (overlayfs's rule for an upper layer).
    let _mounted = match (&workspace, &overlay) {
        (Some(ws), Some((workspaces, _))) => Some(
            workspaces
                .mount_guard(ws, true)
                .map_err(|e| workspace_error(e).context(format!("--workspace {}", ws.id)))?,
        ),
        _ => None,
    };
    let workspace = workspace.as_ref().map(|ws| WorkspaceMount {
        root: ws.path.clone(),
        git_common_dir: Some(ws.git_common_dir.clone()),
        read_only: false,
        overlay: overlay.as_ref().map(|(_, parts)| OverlayMount {
            lowers: parts.lowers.clone(),
            layer: parts.layer.clone(),
            git_dir: Some(parts.git_dir.clone()),
            dot_git: Some(parts.dot_git.clone()),
            caches: Vec::new(),
        }),
    });
    let request = request_from(&args, cwd, workspace, isolation);
    let executed = execute(&request, &args, &request.cwd, None, Output::Passthrough)?;
    Ok(Exit::Run(executed.exit_code))
}

/// The layers of an overlay workspace (`None` for a git worktree).
fn overlay_of(
    record: &cordon_workspace::WorkspaceRecord,
) -> Result<Option<(cordon_workspace::Workspaces, cordon_workspace::OverlayParts)>, CliError> {
    let fail = |e| workspace_error(e).context(format!("--workspace {}", record.id));
    let workspaces = cordon_workspace::Workspaces::from_env().map_err(fail)?;
    Ok(workspaces
        .overlay_parts(record)
        .map_err(fail)?
        .map(|parts| (workspaces, parts)))
}

/// The working directory must be a directory of the overlay's merged tree (checked on its
/// layers: the host never mounts it).
fn check_overlay_cwd(
    workspaces: &cordon_workspace::Workspaces,
    record: &cordon_workspace::WorkspaceRecord,
    cwd: &Path,
) -> Result<(), CliError> {
    let not_dir = || {
        CliError::msg(
            Exit::Usage,
            format_args!(
                "--cwd {} is not a directory of workspace {}",
                cwd.display(),
                record.id.as_str()
            ),
        )
    };
    let rel = cwd.strip_prefix(&record.path).map_err(|_| not_dir())?;
    let tree = workspaces.tree(record).map_err(workspace_error)?;
    match tree.lstat(rel) {
        Ok(Some(entry)) if entry.kind == cordon_git::EntryKind::Dir => Ok(()),
        _ => Err(not_dir()),
    }
}

/// The run request of `cordon run`'s options, in `cwd`.
pub(crate) fn request_from(
    args: &RunArgs,
    cwd: std::path::PathBuf,
    workspace: Option<WorkspaceMount>,
    isolation: Isolation,
) -> RunRequest {
    let isolation = match isolation {
        Isolation::Sandboxed(mut options) => {
            options.proxy.credentials = args.credentials.clone();
            Isolation::Sandboxed(options)
        }
        Isolation::Unsandboxed => Isolation::Unsandboxed,
    };
    RunRequest {
        argv: args.command.clone(),
        cwd,
        workspace,
        isolation,
        env: args.env.clone(),
        secrets: args.secrets.clone(),
        secret_values: Vec::new(),
        bounds: Bounds {
            timeout: args.timeout,
            grace: args.grace,
            output_limit: args.output_limit,
            leak_window: args.leak_timeout,
            disk: (args.disk > 0).then_some(args.disk),
        },
        stdin: match args.stdin {
            StdinArg::Pipe => StdinMode::Forward,
            StdinArg::Inherit => StdinMode::Inherit,
            StdinArg::Null => StdinMode::Null,
            StdinArg::Tty => StdinMode::Terminal,
        },
        redact: Default::default(),
        exclusive_children: true,
    }
}

/// What [`execute`] ran.
pub(crate) struct Executed {
    /// cordon's exit code for the run.
    pub(crate) exit_code: u8,
    /// The run's id in the history, when recorded.
    pub(crate) run_id: Option<String>,
    /// The command line as shown and recorded (redacted).
    pub(crate) command: Vec<String>,
}

/// Where the program's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Its stdout to cordon's stdout, its stderr to cordon's stderr.
    Passthrough,
    /// Both to cordon's stderr: cordon's stdout says something else (`session push`).
    ToStderr,
}

/// Runs `request` the way `cordon run` does with `args`' output, recording and stdin
/// options: recorded under `record_repo` (and `session`, when it runs in one), output passed
/// through (as `output` says) or one JSON result.
pub(crate) fn execute(
    request: &RunRequest,
    args: &RunArgs,
    record_repo: &Path,
    session: Option<&str>,
    output: Output,
) -> Result<Executed, CliError> {
    let prepared = cordon_runner::prepare(request).map_err(run_error)?;
    for warning in prepared.warnings() {
        eprintln!("cordon: warning: {warning}");
    }
    let command = prepared.shown_command().to_vec();
    // The run is entered in the history before the program starts, so a crash never loses
    // it. The history is opened here, after the preparation, on this thread: opening it on
    // another thread while the sandbox was prepared measured 0.3 ms slower per recorded run
    // on this 2-core machine under load (BENCHMARKS.md, "Recording").
    let recorder = if args.no_record {
        None
    } else {
        Some(
            Recorder::begin_in(
                cordon_store::RunKind::Run,
                Some(record_repo),
                session,
                prepared.shown_command(),
                args.transcript_limit,
            )
            .map_err(|e| {
                let hint = e.hint();
                CliError::new(Exit::CordonFailed, e).hint(hint)
            })?,
        )
    };
    let run_id = recorder.as_ref().map(|r| r.id().to_owned());
    let cancel = signals::cancel_on_signals()?;
    let mut passthrough = match output {
        Output::Passthrough => Passthrough::new(args.raw_output),
        Output::ToStderr => Passthrough::to_stderr(args.raw_output),
    };
    // One line per refused connection on cordon's own stderr (the JSON result lists them
    // all).
    // At most as many lines as the result lists; one more says the rest is only counted.
    let json = args.json;
    let shown_notices = std::sync::atomic::AtomicUsize::new(0);
    let network_notice = move |denied: &cordon_types::DeniedConnection| {
        let n = shown_notices.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if json || n > cordon_types::MAX_DENIALS_REPORTED {
            return;
        }
        if n == cordon_types::MAX_DENIALS_REPORTED {
            eprintln!("cordon: network: further refusals are counted in the result, not shown");
            return;
        }
        eprintln!(
            "cordon: network: denied {} — {}",
            cordon_proxy::describe(denied),
            denied.reason
        );
    };
    let hooks = Hooks {
        sink: (!args.json).then_some(&mut passthrough as &mut dyn cordon_exec::OutputSink),
        cancel: Some(&cancel),
        ready: None,
        transcript: recorder.as_ref().map(|recorder| TranscriptTarget {
            recorder,
            stage: None,
        }),
        network_notice: Some(&network_notice),
    };
    // With `--stdin inherit`, the program may change the terminal's modes (echo off, raw):
    // they are put back when it ends, whatever it did.
    let terminal = matches!(args.stdin, StdinArg::Inherit | StdinArg::Tty)
        .then(TerminalModes::save)
        .flatten();
    // With `--stdin tty`, keystrokes go to the program's own terminal as they are typed.
    if args.stdin == StdinArg::Tty
        && let Some(saved) = &terminal
    {
        saved.make_raw();
    }
    let run_started = Instant::now();
    let ran = prepared.run(hooks);
    if let Some(terminal) = terminal {
        terminal.restore();
    }
    let ran = match ran {
        Ok(ran) => ran,
        Err(error) => {
            let error = run_error(error);
            if let Some(recorder) = recorder {
                let _ = recorder.finish(cordon_store::RunState::Error, &error.document());
            }
            return Err(error);
        }
    };
    // cordon's own writes are bounded by the run's deadline too: what a reader that stopped
    // reading (a FIFO nobody drains, a terminal stopped by Ctrl-S) never takes by then is
    // dropped and counted, and SIGINT/SIGTERM/SIGHUP end the wait at once.
    // (A run can end past its deadline: its leftovers killed, their output drained. What
    // it printed still gets a moment then.)
    let until = (run_started + args.timeout + args.grace + args.leak_timeout)
        .max(Instant::now() + NOTICE_WAIT);
    let stop = Cancel {
        handle: &cancel,
        grace: args.grace,
    };
    let mut result = ran.result;
    if args.json {
        // The result is shown first: a failure to record must not lose it.
        let mut text = serde_json::to_vec(&result)?;
        text.push(b'\n');
        passthrough.print(Stream::Stdout, &text);
        let left = passthrough.finish(until, Some(stop));
        if left.stdout > 0 {
            eprintln_bounded(
                &mut passthrough,
                "cordon: the JSON result could not be written: nobody read it before the run's deadline",
                stop,
            );
        }
        finish_recording(recorder, &result);
    } else {
        let left = passthrough.finish_stream(Stream::Stdout, until, Some(stop));
        result.stdout.undelivered_bytes = left;
        if let Some(line) = summary_line(&result) {
            passthrough.print(Stream::Stderr, format!("{line}\n").as_bytes());
        }
        // The summary gets a moment even past the deadline.
        let until = until.max(Instant::now() + NOTICE_WAIT);
        result.stderr.undelivered_bytes =
            passthrough.finish_stream(Stream::Stderr, until, Some(stop));
        finish_recording(recorder, &result);
    }
    Ok(Executed {
        exit_code: ran.exit_code,
        run_id,
        command,
    })
}

/// How long a last line of cordon's own may wait for a reader, past the run's deadline.
const NOTICE_WAIT: Duration = Duration::from_secs(1);

/// Writes `line` to stderr through `passthrough`, waiting at most [`NOTICE_WAIT`].
fn eprintln_bounded(passthrough: &mut Passthrough, line: &str, stop: Cancel<'_>) {
    passthrough.print(Stream::Stderr, format!("{line}\n").as_bytes());
    passthrough.finish_stream(Stream::Stderr, Instant::now() + NOTICE_WAIT, Some(stop));
}

/// The modes of the terminal on cordon's standard input, to restore.
struct TerminalModes(rustix::termios::Termios);

impl TerminalModes {
    fn save() -> Option<Self> {
        rustix::termios::tcgetattr(std::io::stdin())
            .ok()
            .map(TerminalModes)
    }

    /// Puts the terminal in raw mode (restored by [`TerminalModes::restore`]).
    fn make_raw(&self) {
        let mut raw = self.0.clone();
        raw.make_raw();
        let _ = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &raw,
        );
    }

    fn restore(self) {
        let _ = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &self.0,
        );
    }
}

/// Stores the result in the run history; problems are warnings (the result is shown anyway).
fn finish_recording(recorder: Option<Recorder>, result: &cordon_types::RunResult) {
    let Some(recorder) = recorder else { return };
    let state = cordon_store::RunState::from(result.status);
    // cordon ends after the run: the exit closes the store.
    match recorder.finish_before_exit(state, result) {
        Ok(stats) => {
            for note in cordon_runner::transcript_notes(&stats) {
                eprintln!("cordon: {note}");
            }
        }
        Err(error) => eprintln!("cordon: warning: the run was not fully recorded: {error}"),
    }
}

/// A run that did not happen, reported as every door reports it
/// ([`RunError::error_class`]).
fn run_error(error: RunError) -> CliError {
    let hint = error.hint();
    CliError::classified(error.error_class(), error).maybe_hint(hint)
}

/// `cordon run PROGRAM ARGS…` works without `--`, as `timeout` and `nice` do — unless an
/// argument after the program looks like one of cordon's own options: then it is ambiguous
/// (meant for cordon, or for the program?) and refused with the two ways to say it.
fn check_separator(command: &[OsString], argv: &[OsString]) -> Result<(), CliError> {
    let before = argv.len().checked_sub(command.len() + 1);
    let separated = before.is_some_and(|i| argv[i] == "--");
    if separated {
        return Ok(());
    }
    let options = run_options();
    let ambiguous = command.iter().skip(1).find_map(|arg| {
        let arg = arg.to_str()?;
        let name = arg.strip_prefix("--")?.split('=').next()?;
        options.iter().any(|o| o == name).then(|| arg.to_owned())
    });
    match ambiguous {
        None => Ok(()),
        Some(option) => {
            let program = command[0].to_string_lossy();
            Err(CliError::msg(
                Exit::Usage,
                format_args!(
                    "`{option}` after the program `{program}` is ambiguous: it is one of cordon's options"
                ),
            )
            .hint(format!(
                "put cordon's options before the program, and `--` before the program to pass it `{option}`: cordon run [OPTIONS] -- {program} ..."
            )))
        }
    }
}

/// The long option names of `cordon run`.
fn run_options() -> Vec<String> {
    crate::args::run_command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .chain(["help".to_owned()])
        .collect()
}

/// The workspace to run in: `--workspace ID`, or the one whose directory contains `cwd`.
fn find_workspace(
    id: Option<&str>,
    cwd: &Path,
) -> Result<Option<cordon_workspace::WorkspaceRecord>, CliError> {
    let lookup = |id: &str| -> Result<cordon_workspace::WorkspaceRecord, CliError> {
        let workspaces = cordon_workspace::Workspaces::from_env().map_err(workspace_error)?;
        id.parse::<cordon_workspace::WorkspaceId>()
            .and_then(|parsed| {
                let info = workspaces.show(&parsed)?;
                // A run is a use: the workspace's idle time starts again.
                workspaces.touch(&parsed);
                Ok(info)
            })
            .map(|info| info.record)
            .map_err(|e| workspace_error(e).context(format!("--workspace {id}")))
    };
    if let Some(id) = id {
        return lookup(id).map(Some);
    }
    let Ok(home) = cordon_types::cordon_home() else {
        return Ok(None);
    };
    let Ok(rest) = cwd.strip_prefix(home.join("workspaces")) else {
        return Ok(None);
    };
    let Some(first) = rest.components().next() else {
        return Ok(None);
    };
    let name = first.as_os_str().to_string_lossy();
    match lookup(&name) {
        Ok(record) if cwd.starts_with(&record.path) => Ok(Some(record)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(items: &[&str]) -> Vec<OsString> {
        items.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_separator_is_optional_unless_an_argument_looks_like_a_cordon_option() {
        let argv = os(&["cordon", "run", "ls", "-la", "/tmp"]);
        assert!(check_separator(&os(&["ls", "-la", "/tmp"]), &argv).is_ok());
        let argv = os(&["cordon", "run", "--json", "cargo", "test", "--release"]);
        assert!(check_separator(&os(&["cargo", "test", "--release"]), &argv).is_ok());
        let argv = os(&["cordon", "run", "cargo", "test", "--timeout=5s"]);
        let err = check_separator(&os(&["cargo", "test", "--timeout=5s"]), &argv).unwrap_err();
        let text = crate::exit::lines(&err).join("\n");
        assert!(
            text.contains("`--timeout=5s` after the program `cargo` is ambiguous"),
            "{text}"
        );
        assert!(
            text.contains("hint: put cordon's options before the program"),
            "{text}"
        );
        let argv = os(&["cordon", "run", "--", "cargo", "test", "--timeout", "5"]);
        assert!(check_separator(&os(&["cargo", "test", "--timeout", "5"]), &argv).is_ok());
    }

    #[test]
    fn run_options_are_read_from_the_cli_definition() {
        let options = run_options();
        for name in ["timeout", "json", "memory", "no-sandbox", "workspace"] {
            assert!(options.iter().any(|o| o == name), "{name}: {options:?}");
        }
    }
}

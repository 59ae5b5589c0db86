//! `cordon runs`: the history of recorded runs — list, show, logs, export.
//!
//! Exit codes: 0 on success, 2 when the run id is unknown (or not an id at all), 125 when
//! the store cannot be opened or read.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use clap::{Args, Subcommand, ValueEnum};
use cordon_store::{
    Chunk, ChunkBody, ChunkFilter, ExportedChunk, RunFilter, RunId, RunKind, RunList, RunListTag,
    RunRecord, RunState, RunSummary, Store, StoreError, Stream,
};

use crate::documents::ErrorKind;
use crate::exit::{CliError, Exit};

/// Arguments of `cordon runs`.
#[derive(Args, Debug)]
pub struct RunsArgs {
    /// What to do with the history.
    #[command(subcommand)]
    pub command: RunsCommand,
}

/// The subcommands of `cordon runs`.
#[derive(Subcommand, Debug)]
pub enum RunsCommand {
    /// List recorded runs, newest first.
    List(ListArgs),
    /// Show one run's stored result or report.
    Show(ShowArgs),
    /// Print one run's transcript (what its programs wrote), in the order it was written.
    Logs(LogsArgs),
    /// Print one run with its report and whole transcript as one JSON document
    /// (cordon.run-export/v1), e.g. to attach to a pull request or a ticket.
    Export(ExportArgs),
}

/// Arguments of `cordon runs list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Show at most N runs.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: u32,
    /// Only runs with this status.
    #[arg(long, value_name = "S", value_parser = parse_state)]
    pub status: Option<RunState>,
    /// Only runs about this repository or directory.
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Only runs made in this session (`cordon session exec`, and its review watcher's).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only runs of this kind: `run` (`cordon run`, `session exec`), `verify`, or `watch`
    /// (a review watcher's source polls, reviewers and fixer).
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    pub kind: Option<RunKind>,
    /// Print one JSON document (cordon.run-list/v1).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cordon runs show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The run's id (`r-...`, as `cordon runs list` shows it).
    pub id: String,
    /// Print the run, its stages and its document as one JSON document (cordon.run-record/v1).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cordon runs logs`.
#[derive(Args, Debug)]
pub struct LogsArgs {
    /// The run's id.
    pub id: String,
    /// Only this stage's output.
    #[arg(long, value_name = "NAME")]
    pub stage: Option<String>,
    /// Only this stream.
    #[arg(long, value_enum)]
    pub stream: Option<StreamArg>,
    /// Keep printing new output until the run ends (from another terminal while it runs).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print one JSON object per transcript chunk and line (JSON Lines) instead of the raw
    /// bytes.
    #[arg(long)]
    pub json: bool,
    /// Write the recorded bytes exactly, escape sequences included, also to a terminal. (By
    /// default a terminal gets the output without escape sequences and control characters, so
    /// that a recorded program cannot clear the screen or forge what you see; a pipe or a
    /// file always gets the exact bytes.)
    #[arg(long, conflicts_with = "json")]
    pub raw: bool,
}

/// Arguments of `cordon runs export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run's id.
    pub id: String,
    /// Accepted for symmetry: the export is always JSON.
    #[arg(long)]
    pub json: bool,
}

/// An output stream, as a flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamArg {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl From<StreamArg> for Stream {
    fn from(stream: StreamArg) -> Self {
        match stream {
            StreamArg::Stdout => Stream::Stdout,
            StreamArg::Stderr => Stream::Stderr,
        }
    }
}

fn parse_kind(text: &str) -> Result<RunKind, String> {
    RunKind::ALL
        .into_iter()
        .find(|k| k.as_str() == text)
        .ok_or_else(|| {
            let names: Vec<&str> = RunKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("expected one of: {}", names.join(", "))
        })
}

fn parse_state(text: &str) -> Result<RunState, String> {
    text.parse::<RunState>().map_err(|_| {
        let names: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
        format!("expected one of: {}", names.join(", "))
    })
}

/// Runs `cordon runs ...`.
pub fn run(args: &RunsArgs) -> Result<Exit, CliError> {
    let store = Store::open_default().map_err(store_error)?;
    // Runs whose cordon died are shown as what they are.
    store.mark_interrupted().map_err(store_error)?;
    match &args.command {
        RunsCommand::List(list) => list_runs(&store, list),
        RunsCommand::Show(show) => show_run(&store, show),
        RunsCommand::Logs(logs) => print_logs(&store, logs),
        RunsCommand::Export(export) => export_run(&store, export),
    }
}

/// A store error for the edge (cordon failed, 125), with its hint when it has one.
fn store_error(error: StoreError) -> CliError {
    let hint = error.hint();
    CliError::from(anyhow::Error::new(error)).maybe_hint(hint)
}

/// `no run with id ...`, exit code 2.
fn unknown_run(id: &str) -> CliError {
    CliError::msg(Exit::Usage, format_args!("no run with id {id}"))
        .kind(ErrorKind::NotFound)
        .hint("`cordon runs list` shows the recorded runs")
}

/// Looks a run up; `None` when the id is unknown or not an id.
fn find_run(store: &Store, id: &str) -> Result<Option<(RunId, RunRecord)>, CliError> {
    let Ok(run_id) = id.parse::<RunId>() else {
        return Ok(None);
    };
    let record = store.get_run(&run_id).map_err(store_error)?;
    Ok(record.map(|r| (run_id, r)))
}

fn list_runs(store: &Store, args: &ListArgs) -> Result<Exit, CliError> {
    let repo = args.repo.as_ref().map(|dir| {
        std::fs::canonicalize(dir)
            .or_else(|_| std::path::absolute(dir))
            .unwrap_or_else(|_| dir.clone())
            .display()
            .to_string()
    });
    let runs = store
        .list_runs(&RunFilter {
            limit: args.limit,
            status: args.status,
            repo,
            session: args.session.clone(),
            kind: args.kind,
        })
        .map_err(store_error)?;
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        let list = RunList {
            schema: RunListTag,
            runs,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&list)?)
    } else {
        out.write_all(render_table(&runs).as_bytes())
    };
    finish_output(written)
}

/// The human table of `cordon runs list`.
fn render_table(runs: &[RunSummary]) -> String {
    if runs.is_empty() {
        return "no runs recorded\n".to_owned();
    }
    let mut out = format!(
        "{:<12}  {:<11}  {:<6}  {:<20}  {:>9}  {}\n",
        "ID", "STATUS", "KIND", "STARTED", "DURATION", "COMMAND"
    );
    for run in runs {
        let kind = run.kind.as_str();
        let mut what = command_text(&run.command);
        if let Some(repo) = &run.repo {
            what.push_str("  (in ");
            what.push_str(repo);
            what.push(')');
        }
        out.push_str(&format!(
            "{:<12}  {:<11}  {:<6}  {:<20}  {:>9}  {}\n",
            run.id,
            run.status,
            kind,
            format_time(run.started_at_ms),
            run.duration_ms
                .map_or_else(|| "-".to_owned(), format_duration),
            truncate(&shown(&what), 80),
        ));
    }
    out
}

/// A command line for people: JSON arrays of strings joined by spaces (one line, see
/// [`crate::render::command_line`]).
fn command_text(command: &serde_json::Value) -> String {
    match command {
        serde_json::Value::Array(parts) => crate::render::command_line(
            &parts
                .iter()
                .map(|p| match p {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>(),
        ),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// `2026-11-22T03:08:44Z`.
fn format_time(ms: i64) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(time).to_string()
}

/// `850ms`, `12.3s`, `4m05s`, `1h02m`.
fn format_duration(ms: i64) -> String {
    let ms = u64::try_from(ms).unwrap_or(0);
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

fn show_run(store: &Store, args: &ShowArgs) -> Result<Exit, CliError> {
    let Some((_, record)) = find_run(store, &args.id)? else {
        return Err(unknown_run(&args.id));
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&record)?)
    } else {
        out.write_all(render_record(&record).as_bytes())
    };
    finish_output(written)
}

/// The human view of `cordon runs show`: a short header, then the document, pretty.
fn render_record(record: &RunRecord) -> String {
    let run = &record.run;
    let mut out = format!("run {}  {}\n", run.id, run.status);
    out.push_str(&format!(
        "command:  {}\n",
        shown(&command_text(&run.command))
    ));
    if let Some(repo) = &run.repo {
        out.push_str(&format!("repo:     {}\n", shown(repo)));
    }
    out.push_str(&format!(
        "started:  {} on {} (pid {})\n",
        format_time(run.started_at_ms),
        run.host,
        run.owner_pid
    ));
    if let Some(duration) = run.duration_ms {
        out.push_str(&format!("duration: {}\n", format_duration(duration)));
    }
    for stage in &record.stages {
        out.push_str(&format!(
            "stage {}: {} {}\n",
            stage.index,
            shown(&stage.name),
            stage.status.as_str()
        ));
    }
    match &record.document {
        Some(document) => {
            out.push('\n');
            out.push_str(&serde_json::to_string_pretty(document).unwrap_or_default());
            out.push('\n');
        }
        None => out.push_str("(no result document: the run did not finish)\n"),
    }
    out
}

fn print_logs(store: &Store, args: &LogsArgs) -> Result<Exit, CliError> {
    let Some((id, _)) = find_run(store, &args.id)? else {
        return Err(unknown_run(&args.id));
    };
    let filter = ChunkFilter {
        stage: args.stage.clone(),
        stream: args.stream.map(Stream::from),
    };
    let mut printer = LogPrinter {
        json: args.json,
        inert: !args.raw && std::io::IsTerminal::is_terminal(&std::io::stdout()),
        stdout: std::io::stdout().lock(),
        error: None,
    };
    let mut sink = |chunk: Chunk| printer.print(chunk);
    if args.follow {
        store
            .follow(&id, &filter, Duration::from_millis(250), &mut sink)
            .map_err(store_error)?;
    } else {
        // Stopping early only happens when stdout failed; `printer.error` says so.
        let _fed = store
            .for_each_chunk(&id, &filter, None, &mut sink)
            .map_err(store_error)?;
    }
    let error = printer.error.take();
    finish_output(match error {
        Some(error) => Err(error),
        None => printer.stdout.flush(),
    })
}

/// Writes transcript chunks to stdout: raw bytes, or JSON Lines with `--json`.
struct LogPrinter {
    json: bool,
    /// Drop escape sequences and controls (a terminal, without `--raw`).
    inert: bool,
    stdout: std::io::StdoutLock<'static>,
    error: Option<std::io::Error>,
}

impl LogPrinter {
    fn print(&mut self, chunk: Chunk) -> ControlFlow<()> {
        let written = if self.json {
            let line = serde_json::to_string(&ExportedChunk::from(chunk)).map_err(Into::into);
            line.and_then(|line| writeln!(self.stdout, "{line}"))
        } else {
            match chunk.body {
                ChunkBody::Data(bytes) if self.inert => self.stdout.write_all(
                    cordon_types::text::for_terminal(&String::from_utf8_lossy(&bytes)).as_bytes(),
                ),
                ChunkBody::Data(bytes) => self.stdout.write_all(&bytes),
                ChunkBody::Lost { bytes } => {
                    let _ = self.stdout.flush();
                    let _ = writeln!(
                        std::io::stderr(),
                        "[cordon: {bytes} bytes of {} were not recorded here]",
                        chunk.stream.as_str()
                    );
                    Ok(())
                }
            }
        };
        // Followers want output as it comes.
        match written.and_then(|()| self.stdout.flush()) {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => {
                self.error = Some(error);
                ControlFlow::Break(())
            }
        }
    }
}

fn export_run(store: &Store, args: &ExportArgs) -> Result<Exit, CliError> {
    let Ok(id) = args.id.parse::<RunId>() else {
        return Err(unknown_run(&args.id));
    };
    let Some(export) = store.export(&id).map_err(store_error)? else {
        return Err(unknown_run(&args.id));
    };
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer_pretty(&mut out, &export)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out));
    finish_output(written)
}

/// Success; when stdout was closed early (`cordon runs logs ID | head`), the quiet end of a
/// closed pipe (141, as `ls | head`).
fn finish_output(written: std::io::Result<()>) -> Result<Exit, CliError> {
    match written {
        Ok(()) => Ok(Exit::Success),
        Err(error) if crate::stdout::is_closed(&error) => Err(CliError::stdout_closed()),
        Err(error) => Err(CliError::from(error).context("cannot write to stdout")),
    }
}

/// Untrusted text (a recorded command, a stage name, a path) as one inert terminal line.
fn shown(text: &str) -> String {
    cordon_types::text::for_terminal_line(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_list_columns_align() {
        let run = |status: cordon_store::RunState, kind| RunSummary {
            id: cordon_store::RunId::generate(),
            kind,
            status,
            repo: Some("/src/app".into()),
            session: None,
            command: serde_json::json!(["verify"]),
            started_at_ms: 1_700_000_000_000,
            finished_at_ms: Some(1_700_000_001_000),
            duration_ms: Some(1_000),
            host: "h".into(),
            owner_pid: 1,
        };
        let table = render_table(&[
            run(cordon_store::RunState::Pass, cordon_store::RunKind::Run),
            run(
                cordon_store::RunState::Interrupted,
                cordon_store::RunKind::Verify,
            ),
        ]);
        let lines: Vec<&str> = table.lines().collect();
        for column in ["STATUS", "KIND", "STARTED", "COMMAND"] {
            let at = lines[0].find(column).unwrap();
            for line in &lines[1..] {
                assert_eq!(&line[at - 2..at], "  ", "{column} is aligned:\n{table}");
                assert_ne!(line.as_bytes()[at], b' ', "{column} is aligned:\n{table}");
            }
        }
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(850), "850ms");
        assert_eq!(format_duration(12_345), "12.3s");
        assert_eq!(format_duration(245_000), "4m05s");
        assert_eq!(format_duration(3_720_000), "1h02m");
    }

    #[test]
    fn commands_read_as_typed() {
        let command = serde_json::json!(["sh", "-c", "echo hi", ""]);
        assert_eq!(command_text(&command), r#"sh -c "echo hi" """#);
        assert_eq!(truncate("abcdef", 4), "abc…");
    }
}

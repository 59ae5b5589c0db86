//! `cordon workspace` and `cordon gc`: isolated copies of a repository at a ref.

use crate::render::print_json;
use crate::stdout::outln;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use cordon_types::units::parse_duration;
use cordon_workspace::{
    CreateRequest, ProcessIdentity, WorkspaceError, WorkspaceId, WorkspaceInfo, Workspaces,
};

use crate::documents::{GcRuns, GcSummary, GcSummaryTag};
use crate::exit::{CliError, Exit};

/// Arguments of `cordon workspace`.
#[derive(Debug, Args)]
pub struct WorkspaceArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: WorkspaceCommand,
}

/// The workspace subcommands.
#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create an isolated workspace: the committed content of REF under
    /// $CORDON_HOME/workspaces. The live checkout is never touched. Prints the id.
    ///
    /// By default an overlay: the commit's files are checked out once into a shared,
    /// read-only base ($CORDON_HOME/bases/<commit>), and each workspace is a private
    /// copy-on-write layer over it, made in milliseconds whatever the size of the repository
    /// and taking disk only for what changes. Its files exist only inside the sandbox
    /// (`cordon run --workspace ID`, `cordon workspace shell ID`) and to cordon's own
    /// `workspace apply`, `diff` and `export` (a plain copy in a directory of yours). Where
    /// this host cannot mount overlays (`cordon doctor` says why), a detached git worktree is
    /// made instead (its files on the host, the record's `path`), and `strategy_note` says so.
    ///
    /// The workspace stays until `cordon workspace remove`, or until it has not been used
    /// for --idle-timeout (then `cordon gc`, or the next cordon command, removes it). With
    /// --transient it belongs to the process that ran this command (your shell, your agent)
    /// and goes when that process is gone.
    Create {
        /// The source repository (any directory of its checkout).
        #[arg(long, value_name = "DIR", default_value = ".")]
        repo: PathBuf,
        /// The ref whose committed content the workspace gets.
        #[arg(long = "ref", value_name = "REF", default_value = "HEAD")]
        rev: String,
        /// Tie the workspace to the process that ran this command (your shell, your agent):
        /// removed once it is gone. Note that `id=$(cordon workspace create --transient)`
        /// ties it to the subshell, which is gone at once.
        #[arg(long)]
        transient: bool,
        /// Unused this long (no run, apply or diff in it), the workspace is removed.
        #[arg(long, value_name = "DUR", default_value = "24h", value_parser = parse_duration, conflicts_with = "transient")]
        idle_timeout: Duration,
        /// Accepted for older scripts: a workspace stays until removed (or idle) by default.
        #[arg(long, hide = true, conflicts_with = "transient")]
        persistent: bool,
        /// How to make it: `overlay`, `git-worktree` (a full checkout whose files are visible
        /// on the host), or `auto` (overlay where this host supports it). Default: auto, or
        /// $CORDON_WORKSPACE_STRATEGY. An explicit strategy this host cannot make fails.
        #[arg(long, value_name = "STRATEGY")]
        strategy: Option<String>,
        /// Print the record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// An interactive shell in the workspace, sandboxed as `cordon run --workspace ID` runs
    /// programs ($SHELL, else /bin/sh; a terminal of cordon's own when yours is one). Exits
    /// with the shell's exit code.
    Shell {
        /// The workspace id.
        id: String,
    },
    /// Copy the workspace's files (its tree as its programs see it, without `.git`) into
    /// DIR, a new or empty directory: a plain copy on the host, e.g. of an overlay
    /// workspace, whose files exist only inside the sandbox.
    Export {
        /// The workspace id.
        id: String,
        /// Where to copy the files: a directory that does not exist yet, or an empty one.
        dir: PathBuf,
    },
    /// List workspaces with their size on disk.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one workspace.
    Show {
        /// The workspace id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a workspace: its files, its git metadata, its record.
    Remove {
        /// The workspace id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Apply a unified or git diff to a workspace, all or nothing. Patches that touch paths
    /// outside the workspace, anything under .git, or write through symlinks are refused and
    /// change nothing.
    Apply {
        /// The workspace id.
        id: String,
        /// The patch file, or `-` for standard input.
        patch: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// What changed in a workspace against the commit it was created from (new files
    /// included); the patch, or only the names.
    Diff {
        /// The workspace id.
        id: String,
        /// Print only the changed paths (NUL-terminated with --json off and -z).
        #[arg(long)]
        name_only: bool,
        /// With --name-only: terminate names with NUL instead of newline (odd file names).
        #[arg(short = 'z')]
        nul: bool,
        /// Print JSON (paths and statuses; the patch is not included).
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `cordon gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Also remove workspaces idle for longer than this (persistent ones included), and runs
    /// (with their transcripts) that started longer ago, e.g. 7d.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A workspace error, reported as every door reports it ([`WorkspaceError::error_class`]):
/// unknown ids and refused patches are the user's (exit 2); the rest is cordon's failure (125).
pub(crate) fn fail(error: WorkspaceError) -> CliError {
    let hint = error.hint();
    CliError::classified(error.error_class(), error).maybe_hint(hint)
}

fn parse_id(text: &str) -> Result<WorkspaceId, WorkspaceError> {
    text.parse::<WorkspaceId>()
}

/// One line of `workspace list` and `show`: id, state, lifetime, source, size, and where the
/// files are (a git worktree's checkout; an overlay's exist only in the sandbox).
fn describe(info: &WorkspaceInfo) -> String {
    let r = &info.record;
    let life = match (r.persistent, r.idle_timeout_s) {
        (false, _) => "transient".to_owned(),
        (true, Some(s)) => format!(
            "idle limit {}",
            cordon_types::units::format_duration(Duration::from_secs(s))
        ),
        (true, None) => "persistent".to_owned(),
    };
    let place = match &r.checkout {
        Some(path) => path.display().to_string(),
        None => format!(
            "{} (in the sandbox: `cordon workspace shell {}`)",
            r.strategy, r.id
        ),
    };
    cordon_types::text::for_terminal_line(&format!(
        "{}  {:<13}  {:<16}  {}@{}  {}  {}",
        r.id.as_str(),
        r.state.to_string(),
        life,
        r.repo.display(),
        &r.commit.as_str()[..r.commit.as_str().len().min(12)],
        human_size(info.size_bytes),
        place
    ))
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

pub(crate) fn run(args: WorkspaceArgs) -> Result<Exit, CliError> {
    let workspaces = Workspaces::from_env().map_err(fail)?;
    let _ = workspaces.reconcile_on_start();
    match args.command {
        WorkspaceCommand::Create {
            repo,
            rev,
            transient,
            idle_timeout,
            persistent: _,
            strategy,
            json,
        } => {
            let mut request = CreateRequest::new(&repo, &rev, !transient);
            request.idle_timeout = (!transient).then_some(idle_timeout);
            request.strategy = match strategy.as_deref() {
                None | Some("auto") => None,
                Some(name) => Some(name.parse().map_err(|e: String| {
                    CliError::msg(Exit::Usage, format_args!("--strategy: {e}"))
                })?),
            };
            if transient {
                request.owner = Some(ProcessIdentity::parent());
            }
            create(&workspaces, &request, json)
        }
        WorkspaceCommand::List { json } => list(&workspaces, json),
        WorkspaceCommand::Show { id, json } => {
            let info = parse_id(&id)
                .and_then(|id| workspaces.show(&id))
                .map_err(fail)?;
            if json {
                print_json(&info)?;
            } else {
                outln!("{}", describe(&info))?;
            }
            Ok(Exit::Success)
        }
        WorkspaceCommand::Remove { id, json } => {
            let record = parse_id(&id)
                .and_then(|id| workspaces.remove(&id))
                .map_err(fail)?;
            if json {
                print_json(&record)?;
            } else {
                eprintln!("removed workspace {}", record.id.as_str());
            }
            Ok(Exit::Success)
        }
        WorkspaceCommand::Shell { id } => shell(&workspaces, &id),
        WorkspaceCommand::Export { id, dir } => export(&workspaces, &id, &dir),
        WorkspaceCommand::Apply { id, patch, json } => apply(&workspaces, &id, &patch, json),
        WorkspaceCommand::Diff {
            id,
            name_only,
            nul,
            json,
        } => diff(&workspaces, &id, name_only, nul, json),
    }
}

/// `cordon workspace create`: prints the id (or the record as JSON).
fn create(workspaces: &Workspaces, request: &CreateRequest, json: bool) -> Result<Exit, CliError> {
    let record = workspaces.create(request).map_err(fail)?;
    if json {
        print_json(&record)?;
        return Ok(Exit::Success);
    }
    outln!("{}", record.id.as_str())?;
    let life = match record.idle_timeout_s {
        _ if !record.persistent => {
            "transient: removed once the process that created it is gone".to_owned()
        }
        Some(s) => format!(
            "stays until `cordon workspace remove {}` or {} unused",
            record.id,
            cordon_types::units::format_duration(Duration::from_secs(s))
        ),
        None => format!("stays until `cordon workspace remove {}`", record.id),
    };
    let place = match &record.checkout {
        Some(path) => format!("files at {}", path.display()),
        None => "files in the sandbox only: `cordon workspace shell|export`".to_owned(),
    };
    eprintln!(
        "created {} workspace {} of {}@{} ({place}; {life})",
        record.strategy,
        record.id.as_str(),
        record.repo.display(),
        record.rev,
    );
    if let Some(note) = &record.strategy_note {
        eprintln!("cordon: note: {note}");
    }
    Ok(Exit::Success)
}

/// `cordon workspace list`.
fn list(workspaces: &Workspaces, json: bool) -> Result<Exit, CliError> {
    let infos = workspaces
        .list()
        .map_err(|e| fail(e).context("cannot list the workspaces"))?;
    if json {
        print_json(&cordon_workspace::WorkspaceList {
            schema: cordon_workspace::WorkspaceListTag,
            workspaces: infos,
        })?;
    } else if infos.is_empty() {
        eprintln!("no workspaces");
    } else {
        for info in &infos {
            outln!("{}", describe(info))?;
        }
    }
    Ok(Exit::Success)
}

/// `cordon workspace apply`.
fn apply(
    workspaces: &Workspaces,
    id: &str,
    patch: &std::path::Path,
    json: bool,
) -> Result<Exit, CliError> {
    let bytes = if patch.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .context("cannot read the patch from standard input")?;
        buf
    } else {
        std::fs::read(patch)
            .map_err(|e| CliError::usage(e).context(format!("cannot read {}", patch.display())))?
    };
    let report = parse_id(id)
        .and_then(|id| workspaces.apply(&id, &bytes))
        .map_err(fail)?;
    if json {
        print_json(&report)?;
    } else {
        for file in &report.files {
            outln!("{}\t{}", file.status, file.path.to_string_lossy())?;
        }
    }
    Ok(Exit::Success)
}

/// `cordon workspace diff`.
fn diff(
    workspaces: &Workspaces,
    id: &str,
    name_only: bool,
    nul: bool,
    json: bool,
) -> Result<Exit, CliError> {
    let diff = parse_id(id)
        .and_then(|id| workspaces.diff(&id, name_only || json))
        .map_err(fail)?;
    if json {
        print_json(&diff)?;
        return Ok(Exit::Success);
    }
    let mut out = std::io::stdout().lock();
    if name_only {
        for file in &diff.files {
            out.write_all(file.path.as_bytes())?;
            out.write_all(if nul { b"\0" } else { b"\n" })?;
        }
    } else if let Some(patch) = &diff.patch {
        out.write_all(patch)?;
    }
    out.flush()?;
    Ok(Exit::Success)
}

/// Runs `program` in workspace `id` as `cordon run --workspace ID OPTIONS -- PROGRAM` does.
fn run_in(id: &str, options: &[&str], program: &[std::ffi::OsString]) -> Result<Exit, CliError> {
    let mut argv: Vec<std::ffi::OsString> = vec![
        "cordon".into(),
        "run".into(),
        "--workspace".into(),
        id.into(),
    ];
    argv.extend(options.iter().map(Into::into));
    argv.push("--".into());
    argv.extend(program.iter().cloned());
    let cli = <crate::args::Cli as clap::Parser>::try_parse_from(&argv).map_err(CliError::usage)?;
    let crate::args::Command::Run(args) = cli.command else {
        unreachable!("parsed as `cordon run`");
    };
    super::run::run(args, &argv)
}

/// `cordon workspace shell ID`: an interactive shell in the workspace, sandboxed.
fn shell(workspaces: &Workspaces, id: &str) -> Result<Exit, CliError> {
    // An unknown or ended workspace is said as such, before anything starts.
    parse_id(id)
        .and_then(|parsed| workspaces.show(&parsed))
        .map_err(fail)?;
    let shell = std::env::var_os("SHELL")
        .filter(|s| std::path::Path::new(s).is_absolute() && std::path::Path::new(s).exists())
        .unwrap_or_else(|| "/bin/sh".into());
    let stdin = if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        "tty"
    } else {
        "pipe"
    };
    run_in(id, &["--stdin", stdin, "--timeout", "24h"], &[shell])
}

/// `cordon workspace export ID DIR`: a plain copy of the workspace's files in DIR.
fn export(workspaces: &Workspaces, id: &str, dir: &std::path::Path) -> Result<Exit, CliError> {
    let parsed = parse_id(id).map_err(fail)?;
    let info = workspaces.show(&parsed).map_err(fail)?;
    let dir = std::path::absolute(dir)
        .map_err(|e| CliError::usage(e).context(format!("cannot resolve {}", dir.display())))?;
    let usage = |why: &str| {
        CliError::msg(Exit::Usage, format_args!("{}: {why}", dir.display()))
            .hint("export into a new directory, or an empty one, outside CORDON_HOME")
    };
    match std::fs::read_dir(&dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => return Err(usage("is not empty")),
        Ok(false) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::usage(e).context(format!("cannot create {}", dir.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(usage("is not a directory"));
        }
        Err(e) => {
            return Err(CliError::usage(e).context(format!("cannot read {}", dir.display())));
        }
    }
    let dir = dir.canonicalize()?;
    if let Ok(home) = workspaces.home().canonicalize()
        && dir.starts_with(home)
    {
        return Err(usage("is inside cordon's own state (CORDON_HOME)"));
    }
    workspaces
        .export(&parsed, &dir)
        .map_err(|e| fail(e).context(format!("cannot export workspace {id}")))?;
    eprintln!(
        "exported workspace {} ({}@{}) to {}",
        info.record.id,
        info.record.repo.display(),
        info.record.rev,
        dir.display()
    );
    Ok(Exit::Success)
}

pub(crate) fn gc(args: &GcArgs) -> Result<Exit, CliError> {
    let workspaces = Workspaces::from_env().map_err(fail)?;
    // Sessions first: the base trees and frozen layers they let go of are collected below.
    let sessions = cordon_session::Sessions::from_env()
        .and_then(|s| s.gc(args.older_than))
        .map_err(|e| CliError::new(Exit::CordonFailed, e).context("cannot collect sessions"))?;
    let report = workspaces
        .gc(args.older_than)
        .map_err(|e| fail(e).context("cannot collect workspaces"))?;
    let store = cordon_store::Store::open_default().context("cannot open the run history")?;
    let interrupted = store
        .mark_interrupted()
        .context("cannot reconcile the run history")?;
    let deleted_runs = match args.older_than {
        Some(age) => store
            .delete_older_than(age)
            .context("cannot delete old runs")?,
        None => 0,
    };
    if args.json {
        print_json(&GcSummary {
            schema: GcSummaryTag,
            workspaces: report.clone(),
            sessions: sessions.clone(),
            runs: GcRuns {
                marked_interrupted: interrupted,
                deleted: deleted_runs,
            },
        })?;
    } else {
        if interrupted > 0 {
            eprintln!("marked {interrupted} run(s) interrupted (their cordon died)");
        }
        if deleted_runs > 0 {
            eprintln!("deleted {deleted_runs} old run(s) and their transcripts");
        }
        for removed in &report.removed {
            eprintln!("removed {} ({})", removed.id.as_str(), removed.reason);
        }
        for failure in &report.failures {
            eprintln!(
                "could not remove {}: {}",
                failure.id.as_str(),
                failure.message
            );
        }
        for ended in &sessions.ended {
            let why = ended
                .reason
                .map_or_else(|| "ended".to_owned(), |r| r.to_string());
            match &ended.kept {
                Some(kept) => eprintln!("ended session {} ({why}); {}", ended.id, kept.describe()),
                None => eprintln!("ended session {} ({why})", ended.id),
            }
        }
        for layer in &report.layers_removed {
            eprintln!(
                "removed frozen layer {} ({} bytes; no session over it is left)",
                layer.layer, layer.size_bytes
            );
        }
        for deleted in &sessions.deleted {
            eprintln!("deleted session record {deleted}");
        }
        for failure in &sessions.failures {
            eprintln!(
                "could not collect session {}: {}",
                failure.id, failure.message
            );
        }
        eprintln!(
            "gc: {} removed, {} kept, {} failed",
            report.removed.len(),
            report.kept,
            report.failures.len()
        );
    }
    Ok(
        if report.failures.is_empty() && sessions.failures.is_empty() {
            Exit::Success
        } else {
            Exit::Failed
        },
    )
}

//! `cordon workspace` and `cordon gc`: isolated copies of a repository at a ref.

use crate::render::print_json;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use cordon_types::units::parse_duration;
use cordon_workspace::{
    CreateRequest, ProcessIdentity, WorkspaceError, WorkspaceId, WorkspaceInfo, Workspaces,
};

use crate::documents::ErrorKind;
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
    /// $CORDON_HOME/workspaces. The live checkout is never touched.
    ///
    /// By default an overlay: the commit's files are checked out once into a shared,
    /// read-only base ($CORDON_HOME/bases/<commit>), and each workspace is a private
    /// copy-on-write layer over it, made in milliseconds whatever the size of the repository
    /// and taking disk only for what changes. Its files exist only inside the sandbox
    /// (`cordon run --workspace ID`, where it appears at /home/cordon/work) and to cordon's own
    /// `workspace apply` and `diff`; its directory on the host stays empty. Where this host
    /// cannot mount overlays (`cordon doctor` says why), a detached git worktree is made
    /// instead and the record's `strategy_note` says so.
    ///
    /// Without --persistent, the workspace belongs to the process that ran this command (your
    /// shell, your agent): once that process is gone, `cordon gc` removes it.
    Create {
        /// The source repository (any directory of its checkout).
        #[arg(long, value_name = "DIR", default_value = ".")]
        repo: PathBuf,
        /// The ref whose committed content the workspace gets.
        #[arg(long = "ref", value_name = "REF", default_value = "HEAD")]
        rev: String,
        /// Keep the workspace until `cordon workspace remove` (or `gc --older-than`).
        #[arg(long)]
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

/// Maps a workspace error: unknown ids and refused patches are the user's (exit 2); the
/// rest is cordon's failure (125).
pub(crate) fn fail(error: WorkspaceError) -> CliError {
    use cordon_workspace::WorkspaceErrorKind as K;
    let (exit, kind) = match &error.kind {
        K::NotFound => (Exit::Usage, ErrorKind::NotFound),
        K::InvalidId(_) => (Exit::Usage, ErrorKind::Usage),
        K::Git(g)
            if matches!(
                g.kind,
                cordon_git::GitErrorKind::PatchRefused { .. }
                    | cordon_git::GitErrorKind::PatchDoesNotApply { .. }
            ) =>
        {
            (Exit::Usage, ErrorKind::Refused)
        }
        K::NotReady(_) | K::InUse => (Exit::CordonFailed, ErrorKind::Conflict),
        K::OverlayUnavailable(_) => (Exit::CordonFailed, ErrorKind::Unsupported),
        K::Tampered { .. } => (Exit::CordonFailed, ErrorKind::Refused),
        K::HomeUnknown(_) | K::Git(_) | K::Io(_) | K::BaseMissing { .. } | K::Record(_) => {
            (Exit::CordonFailed, ErrorKind::Internal)
        }
        // A kind added later: cordon's failure until said otherwise.
        _ => (Exit::CordonFailed, ErrorKind::Internal),
    };
    let hint = error.hint();
    CliError::new(exit, error).kind(kind).maybe_hint(hint)
}

fn parse_id(text: &str) -> Result<WorkspaceId, WorkspaceError> {
    text.parse::<WorkspaceId>()
}

fn describe(info: &WorkspaceInfo) -> String {
    let r = &info.record;
    format!(
        "{}  {:<10}  {}  {}@{}  {}  {}",
        r.id.as_str(),
        format!("{:?}", r.state).to_lowercase(),
        if r.persistent {
            "persistent"
        } else {
            "transient "
        },
        r.repo.display(),
        &r.commit.as_str()[..r.commit.as_str().len().min(12)],
        human_size(info.size_bytes),
        r.path.display()
    )
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
            persistent,
            strategy,
            json,
        } => {
            let mut request = CreateRequest::new(&repo, &rev, persistent);
            request.strategy = match strategy.as_deref() {
                None | Some("auto") => None,
                Some(name) => Some(name.parse().map_err(|e: String| {
                    CliError::msg(Exit::Usage, format_args!("--strategy: {e}"))
                })?),
            };
            if !persistent {
                request.owner = Some(ProcessIdentity::parent());
            }
            let record = match workspaces.create(&request) {
                Ok(r) => r,
                Err(e) => return Err(fail(e)),
            };
            if json {
                print_json(&record)?;
            } else {
                println!("{}", record.id.as_str());
                eprintln!(
                    "created {} {} workspace {} of {}@{} at {}",
                    if persistent {
                        "persistent"
                    } else {
                        "transient"
                    },
                    record.strategy,
                    record.id.as_str(),
                    record.repo.display(),
                    record.rev,
                    record.path.display()
                );
                if let Some(note) = &record.strategy_note {
                    eprintln!("cordon: note: {note}");
                }
            }
        }
        WorkspaceCommand::List { json } => {
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
                    println!("{}", describe(info));
                }
            }
        }
        WorkspaceCommand::Show { id, json } => {
            let info = match parse_id(&id).and_then(|id| workspaces.show(&id)) {
                Ok(i) => i,
                Err(e) => return Err(fail(e)),
            };
            if json {
                print_json(&info)?;
            } else {
                println!("{}", describe(&info));
            }
        }
        WorkspaceCommand::Remove { id, json } => {
            let record = match parse_id(&id).and_then(|id| workspaces.remove(&id)) {
                Ok(r) => r,
                Err(e) => return Err(fail(e)),
            };
            if json {
                print_json(&record)?;
            } else {
                eprintln!("removed workspace {}", record.id.as_str());
            }
        }
        WorkspaceCommand::Apply { id, patch, json } => {
            let bytes = if patch.as_os_str() == "-" {
                let mut buf = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut buf)
                    .context("cannot read the patch from standard input")?;
                buf
            } else {
                match std::fs::read(&patch) {
                    Ok(b) => b,
                    Err(e) => {
                        return Err(
                            CliError::usage(e).context(format!("cannot read {}", patch.display()))
                        );
                    }
                }
            };
            let report = match parse_id(&id).and_then(|id| workspaces.apply(&id, &bytes)) {
                Ok(r) => r,
                Err(e) => return Err(fail(e)),
            };
            if json {
                print_json(&report)?;
            } else {
                for file in &report.files {
                    println!("{:?}\t{}", file.status, file.path.to_string_lossy());
                }
            }
        }
        WorkspaceCommand::Diff {
            id,
            name_only,
            nul,
            json,
        } => {
            let diff = match parse_id(&id).and_then(|id| workspaces.diff(&id, name_only || json)) {
                Ok(d) => d,
                Err(e) => return Err(fail(e)),
            };
            let mut out = std::io::stdout().lock();
            if json {
                drop(out);
                print_json(&diff)?;
            } else if name_only {
                for file in &diff.files {
                    out.write_all(file.path.as_bytes())?;
                    out.write_all(if nul { b"\0" } else { b"\n" })?;
                }
            } else if let Some(patch) = &diff.patch {
                out.write_all(patch)?;
            }
        }
    }
    Ok(Exit::Success)
}

pub(crate) fn gc(args: &GcArgs) -> Result<Exit, CliError> {
    let workspaces = Workspaces::from_env().map_err(fail)?;
    let report = workspaces
        .gc(args.older_than)
        .map_err(|e| fail(e).context("cannot collect workspaces"))?;
    let sessions = cordon_session::Sessions::from_env()
        .and_then(|s| s.gc(args.older_than))
        .map_err(|e| CliError::new(Exit::CordonFailed, e).context("cannot collect sessions"))?;
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
            eprintln!("removed {} ({:?})", removed.id.as_str(), removed.reason);
        }
        for failure in &report.failures {
            eprintln!(
                "could not remove {}: {}",
                failure.id.as_str(),
                failure.message
            );
        }
        for ended in &sessions.ended {
            eprintln!("ended session {} ({:?})", ended.id, ended.reason);
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

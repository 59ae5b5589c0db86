//! `cordon verify`: staged verification of a candidate change, with a fail-closed gate.

use crate::stdout::outln;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use cordon_types::units::parse_size;
use cordon_types::{Overall, RunReport};
use cordon_verify::{Plan, VerifyError, VerifyHooks, VerifyRequest};

use super::verify_view::{VerifyView, ViewSettings};
use crate::exit::{CliError, Exit};
use crate::signals;
use cordon_runner::Recorder;

/// Arguments of `cordon verify`.
#[derive(Debug, Args)]
#[command(after_help = "\
Exit codes: 0 gate passed, 1 gate blocked (a required stage did not pass), 2 bad usage or bad
config, 125 cordon itself failed (an infrastructure error: it could not do its job), 130/143
interrupted. With --json, stdout holds the report, or a cordon.error/v1 document when no
verdict was reached.

Examples:
  cordon verify                                   this checkout as it is: HEAD and its
                                                  uncommitted changes
  cordon verify --committed                       HEAD as committed
  cordon verify --repo ../app --patch agent.diff --junit report.xml
  git diff main | cordon verify --patch - --json > report.json
  cordon verify --project examples/rust-hello      a project inside the repository
  cordon verify --explain                         print the plan and why, run nothing")]
pub struct VerifyArgs {
    /// The repository to verify (any directory of its checkout).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// The ref whose committed content is verified, without the checkout's uncommitted
    /// changes. Without --ref, --patch or --committed, the checkout is verified as it is:
    /// HEAD plus its staged, unstaged and untracked (not ignored) changes, snapshotted without
    /// touching its files, index or stash.
    #[arg(long = "ref", value_name = "REF")]
    pub rev: Option<String>,
    /// Verify HEAD as committed, leaving the checkout's uncommitted changes out (the report
    /// says which it left out).
    #[arg(long, conflicts_with = "rev")]
    pub committed: bool,
    /// The base for changed files (targeting); default: the merge-base with the default branch.
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// A patch (unified or git diff) applied on top of the ref, all or nothing; `-` reads
    /// standard input.
    #[arg(long, value_name = "FILE|-")]
    pub patch: Option<PathBuf>,
    /// The project inside the repository (relative directory) whose cordon.toml or files
    /// define the stages, and where they run (monorepos, examples).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// A cordon.toml to use instead of the repository's.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Judge the ref by its own cordon.toml even when it differs from the base's. Without
    /// it, a ref that changes cordon.toml is judged by the base's plan (a candidate must not
    /// choose its own checks), and one that adds a cordon.toml is refused.
    #[arg(long)]
    pub trust_ref_plan: bool,
    /// Run only these stages (comma-separated names).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub stages: Option<Vec<String>>,
    /// Run every stage even after a required one failed (default: fail fast).
    #[arg(long)]
    pub keep_going: bool,
    /// The most `parallel = true` stages running at once (default: the CPU count, at most 4).
    /// 1 runs them one after another, each still on layers of its own.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub parallel_stages: Option<u16>,
    /// Print the report (cordon.run-report/v1) as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary (for a PR comment) to FILE.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Print the plan and why, without running any stage.
    #[arg(long)]
    pub explain: bool,
    /// Do not record the verification (report and transcripts) in the run history.
    #[arg(long)]
    pub no_record: bool,
    /// Most bytes of output (all stages together) kept in the recorded transcript.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_size)]
    pub transcript_limit: u64,
    /// Build caches: `warm` (default) uses the trusted build cache of the base commit and,
    /// when this verification is the base commit itself without a patch, makes it; `use`
    /// only uses one; `off` builds cold. A candidate's writes never reach a cache.
    #[arg(long, value_name = "MODE", default_value = "warm", value_parser = ["warm", "use", "off"])]
    pub cache: String,
    /// Bytes of each stage's output kept in the report (head and tail together).
    #[arg(long, value_name = "SIZE", default_value = "256KiB", value_parser = crate::args::parse_size_usize)]
    pub output_limit: usize,
    /// Stream each stage's output live on stderr, each line prefixed with the stage's name.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Without a terminal, how often a running stage says it is still running (its elapsed
    /// time and last output line).
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = cordon_types::units::parse_duration)]
    pub heartbeat: Duration,
}

/// Runs `cordon verify` (with `--json`, a failure is a `cordon.error/v1` document, printed at
/// the edge like every command's).
pub(crate) fn run(args: VerifyArgs) -> Result<Exit, CliError> {
    let patch = match &args.patch {
        None => None,
        Some(p) if p.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .context("cannot read the patch from standard input")?;
            Some(buf)
        }
        Some(p) => match std::fs::read(p) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                return Err(
                    CliError::usage(e).context(format!("cannot read --patch {}", p.display()))
                );
            }
        },
    };
    // The checkout as it is, unless a committed state (a ref, a patch on HEAD, HEAD alone)
    // is asked for: then what it leaves out is named.
    let uncommitted = if args.rev.is_some() || args.patch.is_some() || args.committed {
        cordon_verify::Uncommitted::Excluded
    } else {
        cordon_verify::Uncommitted::Included
    };
    let request = VerifyRequest {
        repo: args.repo.clone(),
        rev: args.rev.clone().unwrap_or_else(|| "HEAD".to_owned()),
        uncommitted,
        base: args.base.clone(),
        patch,
        config: args.config.clone(),
        only: args.stages.clone(),
        keep_going: args.keep_going,
        max_parallel_stages: args.parallel_stages.map(usize::from),
        output_limit: args.output_limit,
        project: args.project.clone(),
        run_id: None,
        trust_ref_plan: args.trust_ref_plan,
        cache: match args.cache.as_str() {
            "off" => cordon_verify::CacheMode::Off,
            "use" => cordon_verify::CacheMode::Use,
            _ => cordon_verify::CacheMode::Warm,
        },
        ..VerifyRequest::default()
    };
    if args.explain {
        let (plan, changed) = cordon_verify::explain(&request).map_err(verify_error)?;
        print_explain(&plan, &changed, args.json)?;
        return Ok(Exit::Success);
    }
    let cancel = signals::cancel_on_signals()?;
    let recorder = if args.no_record {
        None
    } else {
        let command: Vec<String> = std::env::args().skip(1).collect();
        Some(
            Recorder::begin(
                cordon_store::RunKind::Verify,
                Some(&args.repo),
                &command,
                args.transcript_limit,
            )
            .map_err(|e| {
                let hint = e.hint();
                CliError::new(Exit::CordonFailed, e).hint(hint)
            })?,
        )
    };
    let mut request = request;
    request.run_id = recorder.as_ref().map(|r| r.id().to_owned());
    let mut view = VerifyView::new(ViewSettings {
        verbose: args.verbose,
        heartbeat: args.heartbeat,
    });
    let hooks = VerifyHooks {
        observer: &mut view,
        cancel: Some(&cancel),
        recorder: recorder.as_ref(),
    };
    let verified = match cordon_verify::verify(&request, hooks) {
        Ok(v) => v,
        Err(e) => {
            view.finish();
            let error = verify_error(e);
            if let Some(recorder) = recorder {
                let _ = recorder.finish(cordon_store::RunState::Error, &error.document());
            }
            return Err(error);
        }
    };
    view.finish();
    for warning in &verified.warnings {
        eprintln!("cordon: warning: {warning}");
    }
    let report = &verified.report;
    if let Some(path) = &args.junit {
        std::fs::write(path, cordon_verify::render::junit(report))
            .with_context(|| format!("cannot write --junit {}", path.display()))
            .map_err(|e| CliError::new(Exit::CordonFailed, e))?;
    }
    if let Some(path) = &args.markdown {
        std::fs::write(path, cordon_verify::render::markdown(report))
            .with_context(|| format!("cannot write --markdown {}", path.display()))
            .map_err(|e| CliError::new(Exit::CordonFailed, e))?;
    }
    // The summary is for people (stderr), also beside `--json`'s document (stdout).
    print_summary(report);
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, report)?;
        writeln!(out)?;
    }
    if let Some(recorder) = recorder {
        let state = if cancel.is_cancelled() {
            cordon_store::RunState::Cancelled
        } else {
            match report.overall {
                Overall::Pass => cordon_store::RunState::Pass,
                Overall::Fail => cordon_store::RunState::Fail,
                Overall::Error => cordon_store::RunState::Error,
            }
        };
        match recorder.finish(state, report) {
            Ok(stats) => {
                for note in cordon_runner::transcript_notes(&stats) {
                    eprintln!("cordon: {note}");
                }
            }
            Err(error) => {
                eprintln!("cordon: warning: the verification was not fully recorded: {error}")
            }
        }
    }
    if let Some(signal) = cancel.signal() {
        return Ok(Exit::Signal(u8::try_from(signal).unwrap_or(u8::MAX)));
    }
    Ok(match report.overall {
        Overall::Pass => Exit::Success,
        Overall::Fail => Exit::Failed,
        Overall::Error => Exit::CordonFailed,
    })
}

/// A verification that could not be done, reported as every door reports it
/// ([`VerifyError::error_class`]): bad usage, bad config or a refused patch exit 2,
/// everything else is cordon's failure (125).
fn verify_error(error: VerifyError) -> CliError {
    let hint = error.hint();
    let config = match &error {
        VerifyError::Config(config) => Some((config.path.clone(), config.line)),
        _ => None,
    };
    let cli = CliError::classified(error.error_class(), error);
    match config {
        Some((file, line)) => cli.in_file(&file, line),
        None => cli,
    }
    .maybe_hint(hint)
}

fn print_explain(plan: &Plan, changed: &[String], json: bool) -> Result<(), CliError> {
    if json {
        outln!("{}", serde_json::to_string_pretty(&plan.document(changed))?)?;
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    if let Some(subject) = &plan.subject {
        writeln!(out, "Verifies: {}", shown(&subject.summary))?;
    }
    writeln!(
        out,
        "Plan ({}):",
        match plan.source {
            cordon_types::PlanSource::CordonToml => "cordon.toml",
            cordon_types::PlanSource::Detected => "detected",
        }
    )?;
    for reason in &plan.reasons {
        writeln!(out, "  - {}", shown(reason))?;
    }
    writeln!(
        out,
        "Changed files: {}",
        if changed.is_empty() {
            "none known".to_owned()
        } else {
            changed.len().to_string()
        }
    )?;
    for file in changed.iter().take(20) {
        writeln!(out, "  {}", shown(file))?;
    }
    writeln!(out, "Stages:")?;
    for (i, p) in plan.stages.iter().enumerate() {
        let s = &p.stage;
        let network = match cordon_verify::config::NetworkSetting::mode(s.network.as_ref()) {
            cordon_types::NetworkMode::Host => "network",
            cordon_types::NetworkMode::Allowlist => "allowlisted network",
            cordon_types::NetworkMode::None => "offline",
        };
        writeln!(
            out,
            "  {}. {} [{}{}{}; {network}] {}",
            i + 1,
            shown(&s.name),
            s.category.as_str(),
            if s.required {
                ", required"
            } else {
                ", optional"
            },
            if s.parallel {
                ", parallel: own layers"
            } else {
                ""
            },
            shown(&shell_words::join(&s.run))
        )?;
        if let Some(reason) = p.skip_reason() {
            writeln!(out, "     skipped: {}", shown(&reason))?;
        } else if let Some(t) = &p.targeting {
            writeln!(out, "     targeting: {}", shown(t))?;
        }
        if p.skip.is_none() && !plan.cache.is_empty() {
            writeln!(
                out,
                "     caches: build directories under a private layer{}",
                if s.writable_caches {
                    "; host caches writable (through a private layer)"
                } else {
                    "; host caches read-only"
                }
            )?;
        }
    }
    if !plan.cache.is_empty() || !plan.cache_reasons.is_empty() {
        writeln!(out, "Build caches:")?;
        for line in plan.cache.iter().chain(&plan.cache_reasons) {
            writeln!(out, "  - {}", shown(line))?;
        }
    }
    Ok(())
}

fn print_summary(report: &RunReport) {
    let _ = std::io::stderr().lock().write_all(
        cordon_types::text::for_terminal(&cordon_verify::render::terminal_summary(report))
            .as_bytes(),
    );
}

/// Untrusted text (stage names, reasons, output lines, file names) as one inert terminal
/// line: escape sequences and control characters never reach the terminal.
fn shown(text: &str) -> String {
    cordon_types::text::for_terminal_line(text)
}

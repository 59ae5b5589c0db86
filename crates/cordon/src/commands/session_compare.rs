//! `cordon session compare ID...`: verify each session's current state as `cordon verify`
//! would (its change against its base commit, as a patch on the host repository), several at
//! once, and print one ranked table (`cordon.session-compare/v1` with `--json`).
//!
//! Exit codes: 0 a candidate passed the gate (the first row, the winner), 1 none did, 2
//! usage, 125 cordon failed, 130/143 interrupted.

use std::io::Write;

use clap::Args;
use cordon_session::Sessions;
use cordon_verify::{Candidate, CompareRecording, CompareReport, VerifyRequest};

use crate::exit::{CliError, Exit};
use crate::render::print_json;
use crate::signals;

/// Arguments of `cordon session compare`.
#[derive(Debug, Args)]
#[command(after_help = "\
Ranking, best first: the gate (passed, blocked, no verdict), then fewer blocking findings,
fewer new lint findings, more tests passed, a smaller diff, a shorter verification. Pull the
winner with `cordon session pull ID`.

Exit codes: 0 a candidate passed the gate, 1 none did, 2 bad usage, 125 cordon failed,
130/143 interrupted.")]
pub struct CompareArgs {
    /// The sessions to compare (two or more forks of one session, typically).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// Run only these stages (comma-separated names), as `cordon verify --stages`.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub stages: Option<Vec<String>>,
    /// The most verifications at once (default: the CPU count).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub parallel: Option<u16>,
    /// Do not record the verifications in the run history.
    #[arg(long)]
    pub no_record: bool,
    /// Print the comparison (cordon.session-compare/v1, every report included) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Each candidate's verification in the run history, under its session.
struct History {
    repos: Vec<(String, std::path::PathBuf)>,
}

impl CompareRecording for History {
    fn begin(&self, candidate: &Candidate) -> Option<cordon_runner::Recorder> {
        let repo = self
            .repos
            .iter()
            .find(|(id, _)| *id == candidate.id)
            .map(|(_, repo)| repo.as_path());
        let command = vec![
            "session".to_owned(),
            "compare".to_owned(),
            candidate.id.clone(),
        ];
        cordon_runner::Recorder::begin_in(
            cordon_store::RunKind::Verify,
            repo,
            Some(&candidate.id),
            &command,
            256 << 20,
        )
        .map_err(|e| eprintln!("cordon: warning: {} is not recorded: {e}", candidate.id))
        .ok()
    }

    fn finish(&self, recorder: cordon_runner::Recorder, report: &cordon_types::RunReport) {
        let state = match report.overall {
            cordon_types::Overall::Pass => cordon_store::RunState::Pass,
            cordon_types::Overall::Fail => cordon_store::RunState::Fail,
            cordon_types::Overall::Error => cordon_store::RunState::Error,
        };
        if let Err(e) = recorder.finish(state, report) {
            eprintln!("cordon: warning: a verification was not fully recorded: {e}");
        }
    }
}

pub(crate) fn compare(sessions: &Sessions, args: CompareArgs) -> Result<Exit, CliError> {
    // Each candidate's change, read in its own sandbox, all at once.
    let prepared: Vec<Result<(Candidate, std::path::PathBuf), CliError>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = args
                .ids
                .iter()
                .map(|id| scope.spawn(|| candidate(sessions, id, args.stages.clone())))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(CliError::msg(
                            Exit::CordonFailed,
                            "reading a candidate's change panicked",
                        ))
                    })
                })
                .collect()
        });
    let mut candidates = Vec::with_capacity(prepared.len());
    let mut repos = Vec::with_capacity(prepared.len());
    for item in prepared {
        let (candidate, repo) = item?;
        repos.push((candidate.id.clone(), repo));
        candidates.push(candidate);
    }
    let parallel = args.parallel.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        usize::from,
    );
    let cancel = signals::cancel_on_signals()?;
    let report = if args.no_record {
        cordon_verify::compare(
            candidates,
            parallel,
            Some(&cancel),
            &cordon_verify::NoRecording,
        )
    } else {
        cordon_verify::compare(candidates, parallel, Some(&cancel), &History { repos })
    };
    print_table(&report)?;
    if args.json {
        print_json(&report)?;
    }
    if let Some(signal) = cancel.signal() {
        return Ok(Exit::Signal(u8::try_from(signal).unwrap_or(u8::MAX)));
    }
    Ok(match report.winner {
        Some(_) => Exit::Success,
        None => Exit::Failed,
    })
}

/// One session as a candidate: the verification of its change (commits, edits and new files,
/// read in its sandbox) as a patch on its base commit; and its host repository.
fn candidate(
    sessions: &Sessions,
    id: &str,
    stages: Option<Vec<String>>,
) -> Result<(Candidate, std::path::PathBuf), CliError> {
    let session = sessions.open_str(id).map_err(super::session::fail)?;
    let rec = session.record().map_err(super::session::fail)?;
    let mut request = VerifyRequest {
        repo: rec.repo.clone(),
        rev: rec.base_commit.to_string(),
        base: Some(rec.base_commit.to_string()),
        only: stages,
        output_limit: 256 * 1024,
        ..VerifyRequest::default()
    };
    let unavailable = match session.compare_patch() {
        Ok(patch) => {
            request.patch = patch;
            None
        }
        Err(why) => Some(why),
    };
    let candidate = Candidate {
        id: session.id().to_string(),
        request,
        unavailable,
    };
    Ok((candidate, rec.repo))
}

/// The table, for people (stderr, also beside `--json`'s document on stdout).
fn print_table(report: &CompareReport) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "{:>4}  {:<8}  {:<8}  {:>8}  {:>8}  {:>6}  {:>6}  {:>8}  run",
        "rank", "session", "gate", "blocking", "new lint", "tests", "diff", "time"
    )?;
    for row in &report.candidates {
        let gate = match row.verdict {
            cordon_verify::Verdict::Passed => "passed",
            cordon_verify::Verdict::Blocked => "blocked",
            cordon_verify::Verdict::Error => "error",
        };
        writeln!(
            err,
            "{:>4}  {:<8}  {:<8}  {:>8}  {:>8}  {:>6}  {:>6}  {:>7.1}s  {}",
            row.rank,
            row.id,
            gate,
            row.blocking_findings,
            row.new_lint_findings,
            row.tests_passed,
            row.diff_lines,
            row.duration_ms as f64 / 1000.0,
            row.report.as_ref().map_or("-", |r| r.run_id.as_str())
        )?;
        writeln!(err, "      {}", row.reason)?;
    }
    match &report.winner {
        Some(winner) => writeln!(
            err,
            "winner: {winner} (`cordon session pull {winner}` brings its commits)"
        ),
        None => writeln!(err, "no candidate passed the gate"),
    }
}

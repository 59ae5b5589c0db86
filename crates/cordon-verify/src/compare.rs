//! Comparing candidates ([`compare`]): each verified as [`crate::verify`] verifies a change,
//! several at once, then ranked into one table (`cordon.session-compare/v1`).
//!
//! The ranking, best first, by these keys in turn:
//! 1. the promotion gate: passed, then blocked, then no verdict (cordon failed);
//! 2. blocking findings, fewer first: the distinct findings of the required stages that did
//!    not pass (the same problem reported by two tools counts once; a findings' base copy,
//!    `existing`, does not count; a failed stage without findings counts as one);
//! 3. new lint findings, fewer first (lint findings the base commit does not have);
//! 4. tests passed, more first;
//! 5. the diff's size (lines added and removed), smaller first;
//! 6. the verification's duration, shorter first.
//!
//! Each candidate's row says why it is where it is ([`RankedCandidate::reason`]).

use std::collections::BTreeSet;
use std::time::Instant;

use cordon_exec::CancelHandle;
use cordon_types::{Baseline, FindingKind, Overall, RunReport, StageStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::pipeline::{Quiet, VerifyHooks, VerifyRequest};

cordon_types::schema_tag!(
    /// The `schema` tag of a comparison: always `"cordon.session-compare/v1"`.
    CompareReportTag,
    "cordon.session-compare/v1"
);

/// One candidate to verify: a name (a session's id) and the verification.
#[derive(Debug, Clone, Default)]
pub struct Candidate {
    /// The candidate's name in the table.
    pub id: String,
    /// Its verification (the repository at its base commit with its change as a patch).
    pub request: VerifyRequest,
    /// Why it could not be verified, when that is known before (its change could not be
    /// read): it is ranked last with this as its reason.
    pub unavailable: Option<String>,
}

/// How a candidate came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The promotion gate passed.
    Passed,
    /// A required stage did not pass.
    Blocked,
    /// No verdict: cordon could not verify it.
    Error,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankedCandidate {
    /// Its place, 1 for the best.
    pub rank: u32,
    /// The candidate (a session's id).
    pub id: String,
    /// How it came out.
    pub verdict: Verdict,
    /// Distinct findings of required stages that did not pass.
    pub blocking_findings: u64,
    /// Lint findings the base commit does not have.
    pub new_lint_findings: u64,
    /// Tests that passed.
    pub tests_passed: u64,
    /// Lines its change adds and removes.
    pub diff_lines: u64,
    /// How long its verification took, in milliseconds.
    pub duration_ms: u64,
    /// Why it is where it is, in one line.
    pub reason: String,
    /// Its verification's report (`cordon.run-report/v1`; `cordon runs show RUN_ID`), when
    /// there is one.
    pub report: Option<RunReport>,
    /// Why there is no report.
    pub error: Option<String>,
}

/// The comparison: `cordon.session-compare/v1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompareReport {
    /// Always `cordon.session-compare/v1`.
    pub schema: CompareReportTag,
    /// The best candidate whose gate passed, if any.
    pub winner: Option<String>,
    /// Every candidate, best first.
    pub candidates: Vec<RankedCandidate>,
    /// How many verifications ran at once.
    pub parallel: usize,
    /// Wall-clock time of the whole comparison, in milliseconds.
    pub duration_ms: u64,
}

/// Where each candidate's verification is recorded (the run history), if anywhere.
pub trait CompareRecording: Sync {
    /// Begins the record of `candidate`'s verification (`None`: not recorded).
    fn begin(&self, candidate: &Candidate) -> Option<cordon_runner::Recorder>;
    /// Ends it with the report.
    fn finish(&self, recorder: cordon_runner::Recorder, report: &RunReport);
}

/// Records nothing.
pub struct NoRecording;

impl CompareRecording for NoRecording {
    fn begin(&self, _: &Candidate) -> Option<cordon_runner::Recorder> {
        None
    }

    fn finish(&self, _: cordon_runner::Recorder, _: &RunReport) {}
}

/// Verifies every candidate (at most `parallel` at once, each as [`crate::verify`] would,
/// on its own workspace; build caches shared read-only) and ranks them; `recording` keeps
/// each verification in the run history.
pub fn compare(
    candidates: Vec<Candidate>,
    parallel: usize,
    cancel: Option<&CancelHandle>,
    recording: &dyn CompareRecording,
) -> CompareReport {
    let started = Instant::now();
    let parallel = parallel.clamp(1, candidates.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<RunReport, String>>>> = candidates
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(candidate) = candidates.get(i) else {
                        break;
                    };
                    let outcome = verify_one(candidate, cancel, recording);
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(outcome);
                    }
                }
            });
        }
    });
    let outcomes: Vec<(&Candidate, Result<RunReport, String>)> = candidates
        .iter()
        .zip(results)
        .map(|(c, slot)| {
            let outcome = slot
                .into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err("the verification did not finish".to_owned()));
            (c, outcome)
        })
        .collect();
    let mut rows: Vec<RankedCandidate> = outcomes
        .into_iter()
        .map(|(candidate, outcome)| row(candidate, outcome))
        .collect();
    rank(&mut rows);
    CompareReport {
        schema: CompareReportTag,
        winner: rows
            .first()
            .filter(|r| r.verdict == Verdict::Passed)
            .map(|r| r.id.clone()),
        candidates: rows,
        parallel,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

fn verify_one(
    candidate: &Candidate,
    cancel: Option<&CancelHandle>,
    recording: &dyn CompareRecording,
) -> Result<RunReport, String> {
    if let Some(why) = &candidate.unavailable {
        return Err(why.clone());
    }
    let recorder = recording.begin(candidate);
    let mut request = candidate.request.clone();
    request.run_id = recorder.as_ref().map(|r| r.id().to_owned());
    let hooks = VerifyHooks {
        observer: &mut Quiet,
        cancel,
        recorder: recorder.as_ref(),
    };
    match crate::verify(&request, hooks) {
        Ok(verified) => {
            if let Some(recorder) = recorder {
                recording.finish(recorder, &verified.report);
            }
            Ok(verified.report)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// A candidate's row (rank 0 until [`rank`]).
fn row(candidate: &Candidate, outcome: Result<RunReport, String>) -> RankedCandidate {
    let diff_lines = candidate.request.patch.as_deref().map_or(0, changed_lines);
    let report = match outcome {
        Ok(report) => report,
        Err(error) => {
            return RankedCandidate {
                rank: 0,
                id: candidate.id.clone(),
                verdict: Verdict::Error,
                blocking_findings: 0,
                new_lint_findings: 0,
                tests_passed: 0,
                diff_lines,
                duration_ms: 0,
                reason: format!("not verified: {error}"),
                report: None,
                error: Some(error),
            };
        }
    };
    let verdict = match (report.overall, report.promotion.allowed) {
        (Overall::Error, _) => Verdict::Error,
        (_, true) => Verdict::Passed,
        (_, false) => Verdict::Blocked,
    };
    let blocking_findings = blocking(&report);
    let new_lint_findings = report
        .stages
        .iter()
        .flat_map(|s| &s.findings)
        .filter(|f| f.kind == FindingKind::Lint && f.baseline != Some(Baseline::Existing))
        .count() as u64;
    let tests_passed = report
        .stages
        .iter()
        .filter_map(|s| s.tests.as_ref())
        .map(|t| t.passed)
        .sum();
    let mut row = RankedCandidate {
        rank: 0,
        id: candidate.id.clone(),
        verdict,
        blocking_findings,
        new_lint_findings,
        tests_passed,
        diff_lines,
        duration_ms: report.duration_ms,
        reason: String::new(),
        report: None,
        error: None,
    };
    row.reason = reason(&row, &report);
    row.report = Some(report);
    row
}

/// The distinct findings of the required stages that did not pass (a failed one without
/// findings counts as one).
fn blocking(report: &RunReport) -> u64 {
    let mut distinct = BTreeSet::new();
    let mut bare = 0;
    for stage in report
        .stages
        .iter()
        .filter(|s| s.required && !matches!(s.status, StageStatus::Pass | StageStatus::Skipped))
    {
        let before = distinct.len();
        for f in stage
            .findings
            .iter()
            .filter(|f| f.baseline != Some(Baseline::Existing))
        {
            distinct.insert((
                f.kind.as_str(),
                f.file.clone(),
                f.line,
                f.column,
                f.code.clone(),
                f.test.clone(),
                f.message.clone(),
            ));
        }
        if distinct.len() == before && stage.findings.is_empty() {
            bare += 1;
        }
    }
    distinct.len() as u64 + bare
}

/// Lines a patch adds and removes (its `+`/`-` lines, headers left out).
fn changed_lines(patch: &[u8]) -> u64 {
    patch
        .split(|&b| b == b'\n')
        .filter(|l| {
            (l.starts_with(b"+") && !l.starts_with(b"+++ "))
                || (l.starts_with(b"-") && !l.starts_with(b"--- "))
        })
        .count() as u64
}

/// Why the row is where it is: its verdict, what blocked it (the first failure's reason),
/// then the keys that separate it from its neighbours.
fn reason(row: &RankedCandidate, report: &RunReport) -> String {
    let mut parts = vec![match row.verdict {
        Verdict::Passed => "gate passed".to_owned(),
        Verdict::Blocked => format!(
            "blocked by {}{}",
            report.promotion.blocking.join(", "),
            report
                .failure
                .as_ref()
                .map_or(String::new(), |f| format!(": {}", f.reason))
        ),
        Verdict::Error => format!(
            "no verdict{}",
            report
                .failure
                .as_ref()
                .map_or(String::new(), |f| format!(": {}", f.reason))
        ),
    }];
    parts.push(format!("{} blocking finding(s)", row.blocking_findings));
    parts.push(format!("{} new lint finding(s)", row.new_lint_findings));
    parts.push(format!("{} test(s) passed", row.tests_passed));
    parts.push(format!("{} changed line(s)", row.diff_lines));
    cordon_types::text::for_terminal_line(&parts.join("; "))
}

/// Sorts the rows best first (see the module documentation) and numbers them.
pub fn rank(rows: &mut [RankedCandidate]) {
    let verdict_order = |v: Verdict| match v {
        Verdict::Passed => 0,
        Verdict::Blocked => 1,
        Verdict::Error => 2,
    };
    rows.sort_by(|a, b| {
        verdict_order(a.verdict)
            .cmp(&verdict_order(b.verdict))
            .then(a.blocking_findings.cmp(&b.blocking_findings))
            .then(a.new_lint_findings.cmp(&b.new_lint_findings))
            .then(b.tests_passed.cmp(&a.tests_passed))
            .then(a.diff_lines.cmp(&b.diff_lines))
            .then(a.duration_ms.cmp(&b.duration_ms))
            .then(a.id.cmp(&b.id))
    });
    for (i, row) in rows.iter_mut().enumerate() {
        row.rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, verdict: Verdict, keys: [u64; 5]) -> RankedCandidate {
        RankedCandidate {
            rank: 0,
            id: id.to_owned(),
            verdict,
            blocking_findings: keys[0],
            new_lint_findings: keys[1],
            tests_passed: keys[2],
            diff_lines: keys[3],
            duration_ms: keys[4],
            reason: String::new(),
            report: None,
            error: None,
        }
    }

    #[test]
    fn the_gate_comes_first_then_each_key_in_turn() {
        let mut rows = vec![
            row("error", Verdict::Error, [0, 0, 9, 0, 0]),
            row("lint", Verdict::Blocked, [1, 1, 5, 1, 10]),
            row("compile", Verdict::Blocked, [1, 0, 0, 1, 10]),
            row("test", Verdict::Blocked, [1, 0, 4, 1, 10]),
            row("slow", Verdict::Passed, [0, 0, 5, 1, 20]),
            row("fast", Verdict::Passed, [0, 0, 5, 1, 10]),
            row("big", Verdict::Passed, [0, 0, 5, 9, 1]),
        ];
        rank(&mut rows);
        let order: Vec<(&str, u32)> = rows.iter().map(|r| (r.id.as_str(), r.rank)).collect();
        assert_eq!(
            order,
            vec![
                ("fast", 1),
                ("slow", 2),
                ("big", 3),
                ("test", 4),
                ("compile", 5),
                ("lint", 6),
                ("error", 7)
            ]
        );
    }

    #[test]
    fn changed_lines_leave_the_headers_out() {
        let patch = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\n+b\n+c\n context\n";
        assert_eq!(changed_lines(patch), 3);
    }
}

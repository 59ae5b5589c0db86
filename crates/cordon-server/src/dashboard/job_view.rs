//! What a job's page shows above its log: the header (state, inputs, commit, patch id, the
//! promotion verdict of a verify), the stage timeline, why it failed and the findings (the
//! failing test, `file:line`), each stage's output tails, and the downloads.

use cordon_store::{JobRow, JobState};
use cordon_types::{CapturedOutput, RunReport, RunResult, StageResult, StageStatus};
use maud::{Markup, html};

use super::auth::Viewer;
use super::layout;
use super::timeline::Timeline;
use crate::service::now_ms;

/// The tail shown of a stream (the whole output is in the log and the report).
const TAIL_BYTES: usize = 8 * 1024;

/// The job's typed result, when it has one this page knows.
pub(crate) enum Outcome {
    /// A verify's report.
    Report(Box<RunReport>),
    /// A run's result.
    Run(Box<RunResult>),
    /// A `session.compare`'s ranked candidates.
    Compare(Box<cordon_verify::CompareReport>),
    /// A `session.fork`'s new sessions.
    Fork(Box<cordon_session::ForkReport>),
    /// Anything else (a clone's, a patch's), or nothing.
    Other,
}

impl Outcome {
    /// Reads the job's result, by its `schema` (a verify's report; the run result of a `run`
    /// or a `session.exec`).
    pub(crate) fn of(job: &JobRow) -> Outcome {
        let Some(result) = job.result.clone() else {
            return Outcome::Other;
        };
        match result.get("schema").and_then(|s| s.as_str()) {
            Some("cordon.run-report/v1") => serde_json::from_value(result)
                .map(|r| Outcome::Report(Box::new(r)))
                .unwrap_or(Outcome::Other),
            Some("cordon.run-result/v1") => serde_json::from_value(result)
                .map(|r| Outcome::Run(Box::new(r)))
                .unwrap_or(Outcome::Other),
            Some("cordon.session-compare/v1") => serde_json::from_value(result)
                .map(|r| Outcome::Compare(Box::new(r)))
                .unwrap_or(Outcome::Other),
            Some("cordon.session-fork/v1") => serde_json::from_value(result)
                .map(|r| Outcome::Fork(Box::new(r)))
                .unwrap_or(Outcome::Other),
            _ => Outcome::Other,
        }
    }
}

fn input<'a>(job: &'a JobRow, key: &str) -> Option<&'a serde_json::Value> {
    job.inputs.get(key).filter(|v| !v.is_null())
}

fn input_str<'a>(job: &'a JobRow, key: &str) -> Option<&'a str> {
    input(job, key).and_then(|v| v.as_str())
}

fn result_str<'a>(job: &'a JobRow, key: &str) -> Option<&'a str> {
    job.result.as_ref()?.get(key)?.as_str()
}

/// A list of strings in the inputs, joined for reading.
fn words(value: Option<&serde_json::Value>) -> Option<String> {
    let list = value?.as_array()?;
    (!list.is_empty()).then(|| {
        list.iter()
            .map(|w| w.as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// An argv as a shell would read it (quoted where needed).
fn command(value: Option<&serde_json::Value>) -> Option<String> {
    let argv: Vec<String> = serde_json::from_value(value?.clone()).ok()?;
    (!argv.is_empty()).then(|| shell_words::join(&argv))
}

/// A value's name on the wire (`"detected"`, `"fail"`).
fn wire_name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn commit(id: &str) -> Markup {
    html! { code title=(id) { (id.get(..12).unwrap_or(id)) } }
}

/// One `dt`/`dd` pair.
fn fact(name: &str, value: Markup) -> Markup {
    html! { div { dt { (name) } dd { (value) } } }
}

fn facts(job: &JobRow, outcome: &Outcome) -> Markup {
    let workspace = input(job, "workspace")
        .and_then(|w| w.get("from_job"))
        .and_then(|w| w.as_str());
    let session = input(job, "session")
        .and_then(|w| w.get("from_job"))
        .and_then(|w| w.as_str());
    let ran_for = job.started_at_ms.map(|started| {
        let end = if job.state == JobState::Running {
            now_ms()
        } else {
            job.finished_at_ms.unwrap_or(started)
        };
        u64::try_from(end - started).unwrap_or(0)
    });
    html! {
        dl.facts {
            (fact("Project", html! { (job.project) }))
            (fact("Type", html! { (job.job_type) }))
            (fact("Attempt", html! { (job.attempt) " of " (job.max_attempts) }))
            (fact("Queued", layout::when(job.created_at_ms)))
            @if let Some(at) = job.started_at_ms { (fact("Started", layout::when(at))) }
            @if let Some(at) = job.finished_at_ms { (fact("Finished", layout::when(at))) }
            @if let Some(ms) = ran_for { (fact("Duration", html! { (layout::duration(ms)) })) }
            (fact("Timeout", html! { (layout::duration(job.timeout_ms)) }))
            @if let Some(argv) = command(input(job, "argv")) {
                (fact("Command", html! { code { (layout::short(&argv, 300)) } }))
            }
            @if let Some(from) = workspace {
                (fact("Workspace of", html! { a href={ "/jobs/" (from) } { code { (from) } } }))
            }
            @if let Some(from) = session {
                (fact("Session of", html! {
                    a href={ "/jobs/" (from) } { code { (from) } }
                    @if let Some(i) = input(job, "session").and_then(|s| s.get("fork")).and_then(|f| f.as_u64()) {
                        ", fork " (i)
                    }
                }))
            }
            @if let Some(count) = input(job, "count").and_then(|c| c.as_u64()) {
                (fact("Forks asked", html! { (count) }))
            }
            @if let Some(list) = input(job, "sessions").and_then(|s| s.as_array()) {
                (fact("Candidates", html! { (list.len()) " sessions, " (job.slots) " verified at once" }))
            }
            @if let Some(url) = input_str(job, "url").or(input_str(job, "repo")) {
                (fact("Repository", html! { code { (url) } }))
            }
            @if let Some(rev) = input_str(job, "ref") { (fact("Ref", html! { code { (rev) } })) }
            @if let Some(patch) = input_str(job, "patch") {
                (fact("Patch", html! { (patch.lines().count()) " lines, " (patch.len()) " bytes" }))
            }
            @if let Some(stages) = words(input(job, "stages")) { (fact("Stages asked", html! { (stages) })) }
            @if let Some(categories) = words(input(job, "categories")) {
                (fact("Categories asked", html! { (categories) }))
            }
            @if input(job, "read_only").and_then(|v| v.as_bool()) == Some(true) {
                (fact("Access", html! { "read-only" }))
            }
            @if let Some(names) = words(input(job, "secrets")) { (fact("Secrets", html! { (names) })) }
            @if let Some(key) = &job.idempotency_key { (fact("Idempotency key", html! { code { (key) } })) }
            @match outcome {
                Outcome::Report(report) => {
                    (fact("Commit", commit(&report.commit)))
                    @if let Some(patch) = &report.patch { (fact("Patch id", commit(patch))) }
                    (fact("Promotion", promotion(report)))
                    (fact("Plan", html! {
                        (wire_name(&report.plan.source))
                        @if report.plan.targeted { ", targeted" }
                    }))
                }
                Outcome::Run(run) => {
                    (fact("Exit", html! {
                        @if let Some(code) = run.exit_code { "code " (code) }
                        @if let Some(signal) = &run.signal { " signal " (signal) }
                        " (" (wire_name(&run.status)) ")"
                    }))
                }
                Outcome::Compare(report) => {
                    (fact("Winner", html! {
                        @match &report.winner {
                            Some(id) => code { (id) },
                            None => "none: no candidate passed the gate",
                        }
                    }))
                }
                Outcome::Fork(report) => {
                    (fact("Source", html! { code { (report.source.as_str()) } }))
                    (fact("Layers", html! { (report.depth) }))
                }
                Outcome::Other => {
                    @if let Some(id) = result_str(job, "commit") { (fact("Commit", commit(id))) }
                    @if let Some(id) = result_str(job, "patch_id") { (fact("Patch id", commit(id))) }
                    @if let Some(files) = job.result.as_ref().and_then(|r| words(r.get("applied_files"))) {
                        (fact("Files changed", html! { (files) }))
                    }
                }
            }
        }
    }
}

fn promotion(report: &RunReport) -> Markup {
    html! {
        @if report.promotion.allowed {
            span.verdict.verdict-allowed { span aria-hidden="true" { "✓" } " allowed" }
        } @else {
            span.verdict.verdict-blocked { span aria-hidden="true" { "✗" } " blocked" }
            @if !report.promotion.blocking.is_empty() {
                " by " (report.promotion.blocking.join(", "))
            }
        }
    }
}

fn failure(job: &JobRow, outcome: &Outcome) -> Markup {
    let failure = job.failure.as_ref();
    let category = failure
        .and_then(|f| f.get("category"))
        .and_then(|c| c.as_str());
    let reason = failure
        .and_then(|f| f.get("reason"))
        .and_then(|r| r.as_str())
        .unwrap_or("");
    let findings: Vec<(&StageResult, &cordon_types::Finding)> = match outcome {
        Outcome::Report(report) => report
            .stages
            .iter()
            .flat_map(|s| s.findings.iter().map(move |f| (s, f)))
            .collect(),
        _ => Vec::new(),
    };
    let blocking_stage = match outcome {
        Outcome::Report(report) => report.failure.as_ref().and_then(|f| f.stage.as_deref()),
        _ => None,
    };
    html! {
        @if let Some(category) = category {
            section.failure aria-labelledby="failure-h" {
                h2 #failure-h {
                    @if job.state.is_final() { "Why it failed" } @else { "Why the previous attempt failed" }
                }
                p { span.category { (category) } " " span.reason { (layout::clean(reason)) } }
                @if let Some(stage) = blocking_stage {
                    p { "First blocking stage: " strong { (stage) } }
                }
                (findings_table(&findings))
            }
        }
    }
}

/// The findings of a report's stages, one row each.
fn findings_table(findings: &[(&StageResult, &cordon_types::Finding)]) -> Markup {
    html! {
                @if !findings.is_empty() {
                    table.findings {
                        caption { "Findings" }
                        thead {
                            tr {
                                th scope="col" { "Stage" }
                                th scope="col" { "Kind" }
                                th scope="col" { "Test" }
                                th scope="col" { "Where" }
                                th scope="col" { "Message" }
                            }
                        }
                        tbody {
                            @for (stage, finding) in findings {
                                tr {
                                    td data-label="Stage" { (stage.name) }
                                    td data-label="Kind" {
                                        (finding.kind.as_str()) " (" (finding.tool) ")"
                                    }
                                    td.test data-label="Test" {
                                        @if let Some(test) = &finding.test { code { (layout::clean(test)) } }
                                    }
                                    td.where data-label="Where" {
                                        @if let Some(at) = finding.location() { code { (layout::clean(&at)) } }
                                    }
                                    td.msg data-label="Message" { (layout::clean(&finding.message)) }
                                }
                            }
                        }
                    }
                }
    }
}

/// The end of a captured stream, at most [`TAIL_BYTES`].
fn tail(output: &CapturedOutput) -> (String, u64) {
    let mut text = output.head.clone();
    if output.truncated {
        text = output.tail.clone();
    }
    let cut = text.len().saturating_sub(TAIL_BYTES);
    let start = (cut..=text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    (layout::clean(&text[start..]), output.bytes_total)
}

fn stream(name: &str, output: &CapturedOutput) -> Markup {
    let (text, total) = tail(output);
    html! {
        @if total > 0 {
            h4 { (name) " " span.muted { "(last " (text.len().min(TAIL_BYTES)) " of " (total) " bytes)" } }
            pre.tail tabindex="0" { (text) }
        }
    }
}

fn stages(job: &JobRow, outcome: &Outcome) -> Markup {
    html! {
        @match outcome {
            Outcome::Report(report) => {
                section.stages aria-labelledby="stages-h" {
                    h2 #stages-h { "Stage output" }
                    @for stage in report.stages.iter().filter(|s| s.status != StageStatus::Skipped) {
                        details.stage open[!matches!(stage.status, StageStatus::Pass)] data-stage=(stage.name) {
                            summary {
                                (stage.name) " " (layout::status_badge(stage.status.as_str()))
                                " " span.muted { (stage.category.as_str()) ", " (layout::duration(stage.duration_ms)) }
                            }
                            p { code { (layout::short(&shell_words::join(&stage.command), 400)) } }
                            @if let Some(f) = &stage.failure { p.reason { (layout::clean(&f.reason)) } }
                            @if let Some(t) = &stage.tests {
                                p { (t.passed) " passed, " (t.failed) " failed, " (t.ignored) " ignored" }
                            }
                            (stream("stdout", &stage.stdout))
                            (stream("stderr", &stage.stderr))
                        }
                    }
                    @for stage in report.stages.iter().filter(|s| s.status == StageStatus::Skipped) {
                        p.skipped {
                            (stage.name) " " (layout::status_badge("skipped")) " "
                            (layout::clean(stage.skip_reason.as_deref().unwrap_or("")))
                        }
                    }
                }
            }
            Outcome::Run(run) => {
                section.stages aria-labelledby="stages-h" {
                    h2 #stages-h { "Output" }
                    (stream("stdout", &run.stdout))
                    (stream("stderr", &run.stderr))
                }
            }
            Outcome::Compare(report) => { (comparison(job, report)) }
            Outcome::Fork(report) => { (forks(report)) }
            Outcome::Other => {}
        }
    }
}

/// A verdict as the comparison's table names it.
fn gate(verdict: cordon_verify::Verdict) -> (&'static str, &'static str) {
    match verdict {
        cordon_verify::Verdict::Passed => ("passed", "pass"),
        cordon_verify::Verdict::Blocked => ("blocked", "fail"),
        cordon_verify::Verdict::Error => ("no verdict", "error"),
    }
}

/// A candidate's gate as a badge coloured as a stage's status.
fn gate_badge(gate_name: &str, status: &str) -> Markup {
    let icon = match status {
        "pass" => "✓",
        "fail" => "✗",
        _ => "⚠",
    };
    html! {
        span class={ "status status-" (status) } {
            span.icon aria-hidden="true" { (icon) } " " (gate_name)
        }
    }
}

/// A `session.compare`'s ranked table, each candidate linked to its own report.
fn comparison(job: &JobRow, report: &cordon_verify::CompareReport) -> Markup {
    html! {
        section.comparison aria-labelledby="comparison-h" {
            h2 #comparison-h { "Comparison" }
            p.muted {
                (report.candidates.len()) " candidates, " (report.parallel) " verified at once, in "
                (layout::duration(report.duration_ms)) ". Ranked by the gate, then blocking findings, \
                new lint findings, tests passed, diff size, duration."
            }
            table.compare {
                thead {
                    tr {
                        th scope="col" { "Rank" }
                        th scope="col" { "Session" }
                        th scope="col" { "Gate" }
                        th scope="col" { "Blocking findings" }
                        th scope="col" { "New lint findings" }
                        th scope="col" { "Tests passed" }
                        th scope="col" { "Diff (lines)" }
                        th scope="col" { "Duration" }
                        th scope="col" { "Why" }
                    }
                }
                tbody {
                    @for row in &report.candidates {
                        @let (gate_name, status) = gate(row.verdict);
                        tr data-candidate=(row.id) {
                            td data-label="Rank" { (row.rank) }
                            th scope="row" data-label="Session" {
                                a href={ "/jobs/" (job.id) "/candidates/" (row.id) } { code { (row.id) } }
                            }
                            td data-label="Gate" { (gate_badge(gate_name, status)) }
                            td data-label="Blocking findings" { (row.blocking_findings) }
                            td data-label="New lint findings" { (row.new_lint_findings) }
                            td data-label="Tests passed" { (row.tests_passed) }
                            td data-label="Diff (lines)" { (row.diff_lines) }
                            td data-label="Duration" { (layout::duration(row.duration_ms)) }
                            td.msg data-label="Why" { (layout::short(&layout::clean(&row.reason), 300)) }
                        }
                    }
                }
            }
            @if let Some(winner) = &report.winner {
                p { "The winner, " code { (winner) } ", comes back with a " code { "session.pull" } " job." }
            }
        }
    }
}

/// A `session.fork`'s new sessions.
fn forks(report: &cordon_session::ForkReport) -> Markup {
    html! {
        section.forks aria-labelledby="forks-h" {
            h2 #forks-h { "New sessions" }
            p.muted {
                (report.sessions.len()) " sessions with the exact state of " code { (report.source.as_str()) }
                "; name each in later jobs as " code { "{\"from_job\": JOB, \"fork\": N}" } "."
            }
            table.forks {
                thead {
                    tr {
                        th scope="col" { "Fork" }
                        th scope="col" { "Session" }
                        th scope="col" { "Branch" }
                        th scope="col" { "Base commit" }
                    }
                }
                tbody {
                    @for (i, record) in report.sessions.iter().enumerate() {
                        tr data-session=(record.id.as_str()) {
                            td data-label="Fork" { (i) }
                            th scope="row" data-label="Session" { code { (record.id.as_str()) } }
                            td data-label="Branch" { code { (record.branch) } }
                            td data-label="Base commit" { (commit(record.base_commit.as_str())) }
                        }
                    }
                }
            }
        }
    }
}

/// The page of one candidate of a `session.compare` job: its verification's report, as a
/// verify job's page shows one (verdict, findings, each stage's output).
pub(crate) fn candidate(job: &JobRow, row: &cordon_verify::RankedCandidate) -> Markup {
    let (gate_name, status) = gate(row.verdict);
    let findings: Vec<(&StageResult, &cordon_types::Finding)> = row
        .report
        .iter()
        .flat_map(|r| r.stages.iter())
        .flat_map(|s| s.findings.iter().map(move |f| (s, f)))
        .collect();
    html! {
        p.crumbs { a href={ "/jobs/" (job.id) } { "← Comparison " code { (job.id) } } }
        div.job-head {
            h1 { "Candidate " code { (row.id) } " " (gate_badge(gate_name, status)) }
        }
        dl.facts {
            (fact("Rank", html! { (row.rank) }))
            (fact("Gate", html! { (gate_name) }))
            (fact("Why", html! { (layout::clean(&row.reason)) }))
            (fact("Blocking findings", html! { (row.blocking_findings) }))
            (fact("New lint findings", html! { (row.new_lint_findings) }))
            (fact("Tests passed", html! { (row.tests_passed) }))
            (fact("Diff", html! { (row.diff_lines) " lines" }))
            (fact("Duration", html! { (layout::duration(row.duration_ms)) }))
            @if let Some(report) = &row.report {
                (fact("Commit", commit(&report.commit)))
                @if let Some(patch) = &report.patch { (fact("Patch id", commit(patch))) }
                (fact("Promotion", promotion(report)))
            }
            @if let Some(error) = &row.error { (fact("Error", html! { (layout::clean(error)) })) }
        }
        @if let Some(report) = &row.report {
            @if let Some(f) = &report.failure {
                section.failure aria-labelledby="failure-h" {
                    h2 #failure-h { "Why it did not pass" }
                    p { span.reason { (layout::clean(&f.reason)) } }
                    @if let Some(stage) = &f.stage { p { "First blocking stage: " strong { (stage) } } }
                    (findings_table(&findings))
                }
            }
            (stages(job, &Outcome::Report(Box::new(report.clone()))))
        }
    }
}

fn downloads(job: &JobRow, outcome: &Outcome) -> Markup {
    let link = |file: &str, text: &str| {
        html! { li { a href={ "/jobs/" (job.id) "/download/" (file) } download { (text) } } }
    };
    html! {
        section.downloads aria-labelledby="downloads-h" {
            h2 #downloads-h { "Downloads" }
            ul {
                (link("job.json", "Job (JSON)"))
                @if job.result.is_some() { (link("report.json", "Report (JSON)")) }
                @if let Outcome::Report(_) = outcome {
                    (link("report.xml", "JUnit (XML)"))
                    (link("report.md", "Markdown"))
                }
                (link("log.txt", "Log (text)"))
            }
        }
    }
}

/// Everything above the log (what the script swaps when the job changes).
pub(crate) fn summary(
    job: &JobRow,
    timeline: &Timeline,
    waiting: Option<&str>,
    viewer: &Viewer,
) -> Markup {
    let outcome = Outcome::of(job);
    let cancellable = !job.state.is_final() && viewer.may_cancel();
    html! {
        div.job-head {
            h1 { "Job " code { (job.id) } " " (layout::state_badge(job.state)) }
            @if cancellable {
                form.cancel method="post" action={ "/jobs/" (job.id) "/cancel" } {
                    input type="hidden" name="csrf" value=(viewer.csrf);
                    button.danger type="submit" { "Cancel job" }
                }
            }
            @if job.state.is_final() && viewer.may_cancel() {
                form.rerun method="post" action={ "/jobs/" (job.id) "/rerun" } {
                    input type="hidden" name="csrf" value=(viewer.csrf);
                    button type="submit" { "Re-run" }
                }
            }
        }
        @if let Some(why) = waiting {
            p.waiting role="status" { strong { "Waiting: " } (layout::clean(why)) }
        }
        (facts(job, &outcome))
        section.timeline-section aria-labelledby="timeline-h" {
            h2 #timeline-h { "Stage timeline" }
            (timeline.render())
        }
        (failure(job, &outcome))
        (stages(job, &outcome))
        (downloads(job, &outcome))
    }
}

/// The job's attempts, oldest first: who ran each, when, how it ended, and its own log.
pub(crate) fn attempts(job: &JobRow, attempts: &[cordon_store::AttemptRow]) -> Markup {
    html! {
        @if !attempts.is_empty() {
            section.attempts-section aria-labelledby="attempts-h" {
                h2 #attempts-h { "Attempts" }
                table.attempts {
                    thead {
                        tr {
                            th scope="col" { "Attempt" }
                            th scope="col" { "Worker" }
                            th scope="col" { "Started (UTC)" }
                            th scope="col" { "Took" }
                            th scope="col" { "Outcome" }
                            th scope="col" { "Log" }
                        }
                    }
                    tbody {
                        @for a in attempts {
                            tr data-attempt=(a.attempt) {
                                th scope="row" data-label="Attempt" { (a.attempt) }
                                td data-label="Worker" { code { (a.worker.as_deref().unwrap_or("?")) } }
                                td data-label="Started (UTC)" { (layout::when(a.started_at_ms)) }
                                td data-label="Took" {
                                    @match a.finished_at_ms {
                                        Some(end) => (layout::duration(u64::try_from(end - a.started_at_ms).unwrap_or(0))),
                                        None => "running",
                                    }
                                }
                                td data-label="Outcome" {
                                    (a.outcome.as_deref().unwrap_or("running"))
                                    @if let Some(reason) = a.failure.as_ref().and_then(|f| f.get("reason")).and_then(|r| r.as_str()) {
                                        " " span.muted { (layout::short(reason, 200)) }
                                    }
                                }
                                td data-label="Log" {
                                    a href={ "/jobs/" (job.id) "/download/log-" (a.attempt) ".txt" } { "log-" (a.attempt) ".txt" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

//! A stage's findings judged: a lint stage's compared with the base commit's (only `new` ones
//! block), all ordered by what matters (new errors, new warnings, then what the base has too),
//! bounded for the report, and a failed stage explained by its first finding that matters —
//! or, when no finding explains it, by the last lines of its output that say what went wrong.

use cordon_types::{
    Baseline, CapturedOutput, Finding, FindingKind, MAX_FINDINGS, Severity, StageBaseline,
    StageFailureCategory, StageResult, StageStatus,
};

use crate::baseline::BaseFindings;
use crate::findings::PathContext;

/// Lines of output a failure without findings is explained by.
const REASON_LINES: usize = 3;
/// The longest reason made of output lines.
const MAX_REASON: usize = 400;

/// What a stage's tools reported: the findings (paths cleaned, at most
/// [`crate::baseline::MAX_COMPARED`]), how many more there were, and the text of the line each
/// finding points at.
pub(crate) struct Found {
    pub(crate) findings: Vec<Finding>,
    pub(crate) omitted: u64,
    pub(crate) texts: Vec<Option<String>>,
}

/// Judges `result`'s findings (see the module documentation). `base`: the base's findings of
/// a lint stage (`None`: not compared); `block_existing`: whether findings the base has too
/// still fail the stage.
pub(crate) fn judge(
    result: &mut StageResult,
    found: Found,
    base: Option<BaseFindings>,
    block_existing: bool,
    paths: &PathContext,
) {
    let Found {
        mut findings,
        omitted,
        texts,
    } = found;
    if let Some(base) = base {
        compare(result, &mut findings, &texts, omitted, base, block_existing);
    }
    // New errors, new warnings, then the base's; in the order they came within each.
    findings.sort_by_key(|f| (f.baseline == Some(Baseline::Existing), f.severity));
    let total = findings.len() as u64 + omitted;
    findings.truncate(MAX_FINDINGS);
    result.findings_omitted = total - findings.len() as u64;
    result.findings = findings;
    explain_failure(result, omitted, paths);
    for out in [&mut result.stdout, &mut result.stderr] {
        rendered(out);
    }
}

/// Marks the findings against the base's and records the comparison; a lint failure whose
/// findings the base all has, on a base that fails the same stage, is the base's and does not
/// fail the stage (unless `block_existing`).
fn compare(
    result: &mut StageResult,
    findings: &mut [Finding],
    texts: &[Option<String>],
    omitted: u64,
    base: BaseFindings,
    block_existing: bool,
) {
    use cordon_types::BaselineSource;
    let fails = matches!(result.status, StageStatus::Fail);
    let base_fails = match base.source {
        BaselineSource::Unchanged => fails,
        _ => base.fails,
    };
    match base.source {
        BaselineSource::Unchanged => {
            for f in findings.iter_mut() {
                f.baseline = Some(Baseline::Existing);
            }
        }
        BaselineSource::Recorded | BaselineSource::Ran => {
            crate::baseline::classify(findings, texts, &base.findings);
        }
        BaselineSource::Unavailable => {
            for f in findings.iter_mut() {
                f.baseline = Some(Baseline::New);
            }
        }
    }
    let existing = findings
        .iter()
        .filter(|f| f.baseline == Some(Baseline::Existing))
        .count() as u64;
    // Findings beyond those compared count as new: what was not seen cannot be excused.
    let new = findings.len() as u64 - existing + omitted;
    result.baseline = Some(StageBaseline {
        commit: base.commit,
        source: base.source,
        existing,
        new,
        base_fails,
        note: base.note,
    });
    let inherited = fails
        && base_fails
        && new == 0
        && existing > 0
        && !block_existing
        && result
            .failure
            .as_ref()
            .is_some_and(|f| f.category == StageFailureCategory::Lint);
    if inherited {
        result.status = StageStatus::Pass;
        result.failure = None;
    }
}

/// A failed stage's reason: its first new error ("test `tests::adds` failed at
/// src/lib.rs:9:9: ..."), else its first new warning, rather than its exit code; without
/// such a finding, the exit code and the last lines of its output that say what went wrong.
fn explain_failure(result: &mut StageResult, omitted: u64, paths: &PathContext) {
    let Some(failure) = &mut result.failure else {
        return;
    };
    if result.status != StageStatus::Fail || !failure.category.author_must_fix() {
        return;
    }
    let new: Vec<&Finding> = result
        .findings
        .iter()
        .filter(|f| f.baseline != Some(Baseline::Existing))
        .collect();
    let first = new
        .iter()
        .find(|f| f.severity == Severity::Error)
        .or_else(|| new.iter().find(|f| f.severity == Severity::Warning));
    if let Some(first) = first {
        let alike = new.iter().filter(|f| f.severity == first.severity).count() as u64
            + if first.severity == Severity::Error {
                omitted
            } else {
                0
            };
        let more = match alike {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        failure.reason = format!("{}{more}", first.headline());
        // A test stage that builds what it tests (`cargo test`) fails to compile: a compile
        // failure, as a build stage's would be.
        if failure.category == StageFailureCategory::Test && first.kind == FindingKind::Compile {
            failure.category = StageFailureCategory::Compile;
        }
        return;
    }
    let lines = last_error_lines(&result.stderr, &result.stdout);
    if !lines.is_empty() {
        let text = paths.rewrite(&lines.join(" / "));
        failure.reason = format!("{}: {}", failure.reason, cut(&text, MAX_REASON));
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Whether `line` says something went wrong.
fn is_error_line(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    [
        "error",
        "exception",
        "failed",
        "failure",
        "fatal",
        "panicked",
        "traceback",
        "cannot",
        "could not",
        "not found",
        "denied",
        "refused",
        "abort",
        "segmentation fault",
        "killed",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// Whether `line` is noise when explaining a failure: a warning, a note, the package
/// manager's own trailer (`npm error code 1`, `npm error path …`), decoration.
fn is_noise(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let t = lower.trim_start();
    t.is_empty()
        || t.starts_with("warning")
        || t.starts_with("warn ")
        || t.starts_with("npm warn")
        || t.starts_with("npm error")
        || t.starts_with("npm err!")
        || t.starts_with("note:")
        || t.starts_with("= note")
        || t.starts_with("= help")
        || t.starts_with("help:")
        || t.starts_with("elifecycle")
        || t.starts_with(" elifecycle")
        || t.contains("a complete log of this run")
        || t.chars().all(|c| !c.is_alphanumeric())
}

/// The last lines of the output that say what went wrong (at most [`REASON_LINES`], in
/// order): of standard error, else of standard output; lines that say "error", "failed",
/// "traceback" and the like when there are some, else the last lines that are not noise.
pub(crate) fn last_error_lines(stderr: &CapturedOutput, stdout: &CapturedOutput) -> Vec<String> {
    for out in [stderr, stdout] {
        let text = crate::render::text::clean(&crate::render::text::readable(if out.truncated {
            &out.tail
        } else {
            &out.head
        }));
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim_end)
            .filter(|l| !is_noise(l))
            .collect();
        if lines.is_empty() {
            continue;
        }
        let errors: Vec<&str> = lines.iter().copied().filter(|l| is_error_line(l)).collect();
        let chosen = if errors.is_empty() { &lines } else { &errors };
        let start = chosen.len().saturating_sub(REASON_LINES);
        return chosen[start..]
            .iter()
            .map(|l| l.trim().to_owned())
            .collect();
    }
    Vec::new()
}

/// A captured stream with cargo's `--message-format=json` lines (parsed into findings
/// already) replaced by the text cargo would have printed: reports keep what people read,
/// not megabytes of JSON. A JSON line cut where the capture was cut is dropped.
fn rendered(out: &mut CapturedOutput) {
    const JSON: &str = "{\"reason\":";
    if !out.head.contains(JSON) && !out.tail.contains(JSON) {
        return;
    }
    let keep = |text: &str| -> String {
        let mut kept = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let cut_json = line.starts_with(JSON) && !line.ends_with('\n');
            if !cut_json {
                kept.push_str(line);
            }
        }
        crate::render::text::readable(&kept)
    };
    out.head = keep(&out.head);
    // The tail starts wherever the capture was cut: its first line may be a JSON fragment.
    let tail = if out.truncated {
        match out.tail.split_once('\n') {
            Some((first, rest)) if first.contains("\"reason\":") || first.contains("\":{") => rest,
            _ => &out.tail,
        }
    } else {
        &out.tail
    };
    out.tail = keep(tail);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(text: &str) -> CapturedOutput {
        CapturedOutput {
            bytes_total: text.len() as u64,
            head: text.to_owned(),
            ..CapturedOutput::default()
        }
    }

    #[test]
    fn a_failure_without_findings_is_explained_by_its_last_error_lines_not_its_warnings() {
        let npm = captured(concat!(
            "npm warn deprecated inflight@1.0.6: leaks memory\n",
            "\n",
            "> demo@1.0.0 test\n",
            "> node main.js\n",
            "\n",
            "node:internal/modules/cjs/loader:1228\n",
            "Error: Cannot find module './missing'\n",
            "    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)\n",
            "npm error Lifecycle script `test` failed with error:\n",
            "npm error code 1\n",
            "npm error path /home/cordon/workspace\n",
        ));
        assert_eq!(
            last_error_lines(&npm, &CapturedOutput::default()),
            ["Error: Cannot find module './missing'"]
        );
        // Nothing says "error": the last lines that are not warnings.
        let quiet = captured("warning: unused import\nstep 1\nstep 2\nwarning: x\n");
        assert_eq!(
            last_error_lines(&CapturedOutput::default(), &quiet),
            ["step 1", "step 2"]
        );
        assert!(last_error_lines(&captured("\n\n"), &captured("---\n")).is_empty());
    }

    #[test]
    fn cargo_json_lines_become_the_text_cargo_prints() {
        let mut out = captured(concat!(
            "{\"reason\":\"compiler-artifact\",\"target\":{}}\n",
            "{\"reason\":\"compiler-message\",\"message\":{\"rendered\":\"warning: unused\\n\"}}\n",
            "plain\n",
            "{\"reason\":\"compiler-mess",
        ));
        rendered(&mut out);
        assert_eq!(out.head, "warning: unused\nplain\n");
    }
}

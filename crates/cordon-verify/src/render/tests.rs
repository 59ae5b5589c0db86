//! The renderings of one report with a failing test stage, a failed optional lint, a targeted
//! stage, hostile output (ANSI escapes, control characters, workspace paths).

use cordon_types::RunReport;
use serde_json::json;

fn stage(name: &str, category: &str, status: &str, required: bool) -> serde_json::Value {
    json!({
        "name": name, "category": category, "status": status, "required": required,
        "command": ["cargo", "test", "--offline", "-p", "smallvec"], "cwd": "/ws/tree",
        "exit_code": null, "signal": null, "duration_ms": 1200,
        "stdout": {"bytes_total": 0, "truncated": false, "omitted_bytes": 0, "head": "", "tail": ""},
        "stderr": {"bytes_total": 0, "truncated": false, "omitted_bytes": 0, "head": "", "tail": ""},
        "limits_hit": [], "resource": {"max_rss_bytes": 0, "cpu_user_ms": 0, "cpu_sys_ms": 0,
            "tree_cpu_user_ms": 0, "tree_cpu_sys_ms": 0, "tree_peak_memory_bytes": null},
        "failure": null, "skip_reason": null, "targeting": null, "tests": null
    })
}

fn report() -> RunReport {
    let mut lint = stage("clippy", "lint", "fail", false);
    lint["failure"] = json!({"category": "lint", "reason": "exited with code 101"});
    lint["stderr"]["head"] = json!("\u{1b}[31merror\u{1b}[0m: at /ws/tree/src/lib.rs:1\u{7}\n");
    let mut test = stage("cargo-test", "test", "fail", true);
    test["targeting"] = json!("changed packages and their dependents: smallvec");
    test["failure"] = json!({"category": "test",
        "reason": "test `tests::adds` failed at src/lib.rs:9:9: assertion failed (and 1 more)"});
    test["stdout"]["head"] = json!(
        "test tests::adds ... FAILED\n\u{1b}[1mpanicked\u{1b}[0m at /ws/tree/src/lib.rs:9:9\n"
    );
    test["findings"] = json!([
        {"kind": "test", "severity": "error", "tool": "libtest", "test": "tests::adds",
         "file": "src/lib.rs", "line": 9, "column": 9, "message": "assertion failed\n  left: 6\n right: 5"},
        {"kind": "test", "severity": "error", "tool": "libtest", "test": "tests::<odd> & \"name\"",
         "file": "src/lib.rs", "line": 14, "message": "boom"}
    ]);
    let quiet = stage("silent", "test", "fail", true);
    serde_json::from_value(json!({
        "schema": "cordon.run-report/v1", "run_id": "v-1", "overall": "fail",
        "repo": "/src/app", "ref": "HEAD", "commit": "0123456789abcdef", "patch": null,
        "workspace": {"path": "/ws/tree", "strategy": "git-worktree", "isolated": true},
        "started_at": "2026-11-24T07:00:00.000Z", "duration_ms": 5000,
        "stages": [lint, test, quiet],
        "failure": {"category": "test", "stage": "cargo-test",
            "reason": "test `tests::adds` failed at src/lib.rs:9:9: assertion failed (and 1 more)"},
        "promotion": {"allowed": false, "blocking": ["cargo-test", "silent"]},
        "changed_files": ["src/lib.rs"],
        "plan": {"source": "detected", "targeted": true, "reasons": []}
    }))
    .unwrap()
}

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains('\u{1b}'), "{what} holds ESC:\n{text}");
    assert!(!text.contains('\u{7}'), "{what} holds BEL:\n{text}");
    assert!(
        !text.contains("/ws/tree"),
        "{what} shows the workspace path:\n{text}"
    );
}

#[test]
fn terminal_shows_findings_targeting_and_no_empty_blocks() {
    let text = super::terminal_summary(&report());
    assert_clean("terminal", &text);
    assert!(text.contains("--- cargo-test (2 finding(s)) ---\n  test `tests::adds` failed at src/lib.rs:9:9: assertion failed (left: 6, right: 5)\n"), "{text}");
    assert!(
        text.contains("targeted: changed packages and their dependents: smallvec (cargo test --offline -p smallvec)"),
        "{text}"
    );
    assert!(
        text.contains(
            "--- clippy (last lines of stderr, optional) ---\nerror: at /src/app/src/lib.rs:1\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("--- silent"),
        "a stage that printed nothing has no block:\n{text}"
    );
    assert!(
        text.contains("gate: BLOCKED by cargo-test, silent"),
        "{text}"
    );
}

#[test]
fn markdown_lists_findings_cleanly() {
    let text = super::markdown(&report());
    assert_clean("markdown", &text);
    assert!(
        text.contains(
            "- ``test `tests::adds` failed at src/lib.rs:9:9: assertion failed (left: 6, right: 5)``\n"
        ),
        "{text}"
    );
    // A hostile test name is shown, not rendered.
    assert!(
        text.contains("- ``test `tests::<odd> & \"name\"` failed at src/lib.rs:14: boom``\n"),
        "{text}"
    );
    // An optional stage that failed is a warning, never a failure.
    assert!(
        text.contains("| clippy | lint | no | ⚠️ warning |"),
        "{text}"
    );
    assert!(!text.contains("| clippy | lint | no | ❌"), "{text}");
    assert!(
        text.contains("panicked at /src/app/src/lib.rs:9:9"),
        "tails point at the repository:\n{text}"
    );
    assert!(
        !text.contains("silent output"),
        "no empty output block:\n{text}"
    );
}

#[test]
fn junit_has_a_testcase_per_failing_test_and_skips_optional_failures() {
    let xml = super::junit(&report());
    assert_clean("junit", &xml);
    assert!(
        xml.contains("<testcase name=\"tests::adds\" classname=\"cordon.cargo-test\">"),
        "{xml}"
    );
    assert!(
        xml.contains("<testcase name=\"tests::&lt;odd&gt; &amp; &quot;name&quot;\""),
        "names are escaped:\n{xml}"
    );
    assert!(
        xml.contains("<skipped message=\"optional: exited with code 101\""),
        "{xml}"
    );
    // cargo-test, its two tests, silent: 4 failures; clippy is skipped, not failed.
    assert_eq!(xml.matches("<failure").count(), 4, "{xml}");
    assert!(xml.contains("skipped=\"1\""), "{xml}");
}

#[test]
fn cargo_json_messages_are_shown_as_cargo_would_print_them() {
    let raw = concat!(
        "{\"reason\":\"compiler-artifact\",\"target\":{}}\n",
        "{\"reason\":\"compiler-message\",\"message\":{\"rendered\":\"error[E0308]: mismatched types\\n --> src/lib.rs:2:22\\n\"}}\n",
        "{\"reason\":\"build-finished\",\"success\":false}\n",
        "plain line\n",
    );
    assert_eq!(
        super::text::readable(raw),
        "error[E0308]: mismatched types\n --> src/lib.rs:2:22\nplain line\n"
    );
    assert_eq!(super::text::readable("no json\n"), "no json\n");
}

/// A report whose gate passed with an optional lint stage that failed on one new finding
/// among sixteen, and a test stage that passed.
fn passed_with_a_new_lint() -> RunReport {
    let mut report = report();
    let mut lint = stage("clippy", "lint", "fail", false);
    lint["failure"] = json!({"category": "lint", "reason": "lint warning unused_variables at src/lib.rs:3:9: unused variable: `y`"});
    let mut findings = vec![
        json!({"kind": "lint", "severity": "warning", "tool": "rustc",
        "file": "src/lib.rs", "line": 3, "column": 9, "code": "unused_variables",
        "message": "unused variable: `y`", "baseline": "new"}),
    ];
    for i in 0..15 {
        findings.push(
            json!({"kind": "lint", "severity": "warning", "tool": "clippy",
            "file": "src/old.rs", "line": 10 + i, "code": "clippy::needless_return",
            "message": "unneeded `return` statement", "baseline": "existing"}),
        );
    }
    lint["findings"] = json!(findings);
    lint["baseline"] = json!({"commit": "0123", "source": "recorded", "existing": 15, "new": 1,
        "base_fails": true});
    let mut test = stage("cargo-test", "test", "pass", true);
    test["tests"] = json!({"passed": 95, "failed": 0, "ignored": 0});
    report.stages = serde_json::from_value(json!([test, lint])).unwrap();
    report.overall = cordon_types::Overall::Pass;
    report.failure = None;
    report.promotion = serde_json::from_value(json!({"allowed": true, "blocking": []})).unwrap();
    report.subject = Some(
        serde_json::from_value(json!({"kind": "working_tree",
            "summary": "HEAD 0123456 + 2 modified, 1 untracked",
            "changes": {"modified": 2, "added": 0, "deleted": 0, "renamed": 0, "untracked": 1}}))
        .unwrap(),
    );
    report
}

#[test]
fn every_rendering_starts_with_what_was_verified() {
    let report = passed_with_a_new_lint();
    let md = super::markdown(&report);
    assert_eq!(
        md.lines().next().unwrap(),
        "**cordon verify** of `HEAD 0123456 + 2 modified, 1 untracked`: **✅ passed — promotion allowed**"
    );
    let text = super::terminal_summary(&report);
    assert!(
        text.contains("\nverified: HEAD 0123456 + 2 modified, 1 untracked\ngate: PASSED"),
        "{text}"
    );
    let xml = super::junit(&report);
    assert!(
        xml.contains("name=\"cordon verify /src/app: HEAD 0123456 + 2 modified, 1 untracked\""),
        "{xml}"
    );
}

#[test]
fn new_findings_come_first_and_existing_ones_are_counted() {
    let report = passed_with_a_new_lint();
    let md = super::markdown(&report);
    assert!(
        md.contains(concat!(
            "**clippy** (optional: ⚠ does not block):\n\n",
            "- `` lint warning unused_variables at src/lib.rs:3:9: unused variable: `y` ``\n",
            "- 15 existing finding(s): the base has them too (not listed)\n"
        )),
        "{md}"
    );
    assert!(!md.contains("needless_return"), "{md}");
    // Code spans are padded only where CommonMark needs it.
    assert!(md.contains("`95 passed, 0 failed, 0 ignored`"), "{md}");
    let text = super::terminal_summary(&report);
    assert!(
        text.contains(concat!(
            "--- clippy (1 new finding(s), 15 existing, optional) ---\n",
            "  lint warning unused_variables at src/lib.rs:3:9: unused variable: `y`\n",
            "  (15 existing finding(s) the base has too: not listed)\n"
        )),
        "{text}"
    );
}

#[test]
fn blocking_findings_come_before_optional_ones() {
    let mut report = report();
    // The optional stage comes first in the plan; its findings come after the blocking ones.
    let mut lint = stage("fmt", "lint", "fail", false);
    lint["failure"] = json!({"category": "lint", "reason": "not formatted"});
    lint["findings"] = json!([{"kind": "lint", "severity": "error", "tool": "rustfmt",
        "file": "src/a.rs", "line": 1, "message": "not formatted"}]);
    lint["stdout"]["head"] = json!("Diff in src/a.rs:1:\n");
    let stages = serde_json::to_value(&report.stages).unwrap();
    let mut all = vec![lint];
    all.extend(stages.as_array().unwrap().iter().skip(1).cloned());
    report.stages = serde_json::from_value(json!(all)).unwrap();
    let md = super::markdown(&report);
    let test = md.find("**cargo-test**").expect("blocking findings");
    let fmt = md.find("**fmt** (optional").expect("optional findings");
    assert!(test < fmt, "{md}");
    let test_out = md.find("cargo-test output (end)").unwrap();
    let fmt_out = md.find("fmt output (end), optional").unwrap();
    assert!(test_out < fmt_out, "{md}");
    let text = super::terminal_summary(&report);
    assert!(
        text.find("--- cargo-test").unwrap() < text.find("--- fmt").unwrap(),
        "{text}"
    );
}

#[test]
fn junit_names_each_failed_assertion_once() {
    let mut report = report();
    let finding = json!({"kind": "test", "severity": "error", "tool": "tap", "test": "nums",
        "file": "test/a.js", "line": 3, "message": "should be equal"});
    let mut second = finding.clone();
    second["line"] = json!(4);
    let mut third = finding.clone();
    third["line"] = json!(5);
    let mut stages = serde_json::to_value(&report.stages).unwrap();
    stages[1]["findings"] = json!([finding, second, third]);
    report.stages = serde_json::from_value(stages).unwrap();
    let xml = super::junit(&report);
    for name in ["nums", "nums #2", "nums #3"] {
        assert_eq!(
            xml.matches(&format!("<testcase name=\"{name}\" ")).count(),
            1,
            "{name}:\n{xml}"
        );
    }
}

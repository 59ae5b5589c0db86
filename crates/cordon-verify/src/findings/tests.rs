//! The parsers on real output captured from the real tools (`testdata/`), and the bounds on
//! hostile output.

use std::path::PathBuf;

use cordon_types::{
    CapturedOutput, Finding, FindingKind, MAX_FINDING_MESSAGE_BYTES, MAX_FINDINGS, Severity,
};
use pretty_assertions::assert_eq;

use super::{PathContext, Tool, collect, parse_text};

/// Where the fixtures were captured: `/tmp/cap/<project>`.
fn at(project: &str) -> PathContext {
    PathContext {
        workspace: vec![PathBuf::from(format!("/tmp/cap/{project}"))],
        cwd: PathBuf::new(),
        go_module: Some("example.com/demo".into()),
    }
}

fn findings(tool: Tool, text: &str, project: &str) -> Vec<Finding> {
    parse_text(tool, text, &at(project)).into_parts().0
}

/// (test, file:line[:col], first message line) of each finding.
fn summary(found: &[Finding]) -> Vec<(Option<String>, Option<String>, String)> {
    found
        .iter()
        .map(|f| {
            (
                f.test.clone(),
                f.location(),
                f.message.lines().next().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn s(text: &str) -> Option<String> {
    Some(text.to_owned())
}

#[test]
fn cargo_test_failures_name_the_test_the_panic_and_its_place() {
    let found = findings(
        Tool::CargoTest,
        include_str!("testdata/cargo-test.stdout"),
        "rs",
    );
    assert_eq!(
        summary(&found),
        vec![
            (
                s("tests::adds"),
                s("src/lib.rs:9:9"),
                "assertion `left == right` failed".into()
            ),
            (
                s("tests::panics_plainly"),
                s("src/lib.rs:19:9"),
                "boom: the \"quoted\" value was 42".into()
            ),
        ]
    );
    assert_eq!(
        found[0].message,
        "assertion `left == right` failed\n  left: 6\n right: 5"
    );
    assert_eq!(
        found[0].headline(),
        "test `tests::adds` failed at src/lib.rs:9:9: assertion `left == right` failed (left: 6, right: 5)"
    );
    assert!(
        found
            .iter()
            .all(|f| f.kind == FindingKind::Test && f.tool == "libtest")
    );
    // With RUST_BACKTRACE set, the backtrace is not part of the message.
    let with_bt = findings(
        Tool::CargoTest,
        include_str!("testdata/cargo-test-backtrace.stdout"),
        "rs",
    );
    assert_eq!(summary(&with_bt), summary(&found));
}

#[test]
fn nextest_failures_are_read_once_each() {
    let found = findings(
        Tool::CargoNextest,
        include_str!("testdata/nextest.stderr"),
        "rs",
    );
    assert_eq!(
        summary(&found),
        vec![
            (
                s("tests::adds"),
                s("src/lib.rs:9:9"),
                "assertion `left == right` failed".into()
            ),
            (
                s("tests::panics_plainly"),
                s("src/lib.rs:19:9"),
                "boom: the \"quoted\" value was 42".into()
            ),
        ]
    );
}

#[test]
fn rustc_human_and_json_diagnostics_agree() {
    let human = findings(
        Tool::CargoTest,
        include_str!("testdata/cargo-test-compile.stderr"),
        "rs",
    );
    let json = findings(
        Tool::Rustc,
        include_str!("testdata/cargo-build-json.stdout"),
        "rs",
    );
    let expected = vec![(
        None,
        s("src/lib.rs:3:7"),
        "cannot add `&str` to `u32`".to_owned(),
    )];
    assert_eq!(summary(&human), expected);
    assert_eq!(
        summary(&json),
        expected,
        "the lib and lib-test duplicates are one finding"
    );
    for f in human.iter().chain(&json) {
        assert_eq!(
            (f.kind, f.severity, f.code.as_deref()),
            (FindingKind::Compile, Severity::Error, Some("E0277"))
        );
    }
    assert_eq!(
        human[0].headline(),
        "compile error E0277 at src/lib.rs:3:7: cannot add `&str` to `u32`"
    );
}

#[test]
fn clippy_lints_carry_their_code() {
    let found = findings(
        Tool::Rustc,
        include_str!("testdata/cargo-clippy-json.stdout"),
        "rs",
    );
    let codes: Vec<(Option<&str>, Option<String>)> = found
        .iter()
        .map(|f| (f.code.as_deref(), f.location()))
        .collect();
    assert_eq!(
        codes,
        vec![
            (Some("clippy::needless_return"), s("src/lib.rs:3:5")),
            (Some("clippy::clone_on_copy"), s("src/lib.rs:2:13")),
        ]
    );
    assert!(
        found
            .iter()
            .all(|f| f.kind == FindingKind::Lint && f.tool == "clippy")
    );
}

#[test]
fn pytest_failures_subtests_and_assertion_lines() {
    let found = findings(
        Tool::Pytest,
        include_str!("testdata/pytest-fail.stdout"),
        "py",
    );
    assert_eq!(
        summary(&found),
        vec![
            (
                s("tests/test_demo.py::test_add"),
                s("tests/test_demo.py:7"),
                "assert 6 == 5".into()
            ),
            (
                s("tests/test_demo.py::TestGroup::test_method"),
                s("tests/test_demo.py:17"),
                "AssertionError: a should be two".into()
            ),
            (
                s("tests/test_demo.py::test_sub_fails [even] (i=1)"),
                s("tests/test_demo.py:29"),
                "assert (1 % 2) == 0".into()
            ),
        ]
    );
}

#[test]
fn pytest_collection_syntax_error_is_a_compile_finding_at_the_broken_file() {
    let found = findings(
        Tool::Pytest,
        include_str!("testdata/pytest-collect-error.stdout"),
        "py",
    );
    assert_eq!(
        summary(&found),
        vec![(
            s("tests/test_broken.py"),
            s("demo/broken.py:1"),
            "expected ':'".into()
        )]
    );
    assert_eq!(found[0].kind, FindingKind::Compile);
    assert_eq!(found[0].code.as_deref(), Some("SyntaxError"));
}

#[test]
fn compileall_syntax_errors() {
    let found = findings(
        Tool::PythonCompile,
        include_str!("testdata/compileall.stdout"),
        "py",
    );
    assert_eq!(
        summary(&found),
        vec![(None, s("demo/broken.py:1"), "expected ':'".into())]
    );
}

#[test]
fn node_test_runner_tap() {
    let found = findings(Tool::Tap, include_str!("testdata/node-test.stdout"), "js");
    assert_eq!(
        summary(&found),
        vec![
            (
                s("adds"),
                s("test/add.test.js:6:10"),
                "Expected values to be strictly equal:".into()
            ),
            (
                s("suite > inner fails"),
                s("test/add.test.js:15:11"),
                "inner broke".into()
            ),
        ]
    );
    assert!(found[0].message.contains("6 !== 5"), "{}", found[0].message);
    let syntax = findings(
        Tool::Tap,
        include_str!("testdata/node-test-syntax.stdout"),
        "js",
    );
    assert_eq!(
        summary(&syntax),
        vec![(
            s("test/b.test.js"),
            s("broken.js:2"),
            "Unexpected token ';'".into()
        )]
    );
    assert_eq!(syntax[0].kind, FindingKind::Compile);
}

#[test]
fn tape_names_the_test_by_its_comment() {
    let found = findings(Tool::Tap, include_str!("testdata/tape.stdout"), "tools");
    assert_eq!(
        summary(&found),
        vec![(s("adds"), s("t/tape.test.js:5:5"), "two plus three".into())]
    );
    assert_eq!(found[0].message, "two plus three\nexpected: 5\nactual: 6");
}

#[test]
fn node_check_syntax_error() {
    let found = findings(
        Tool::NodeCheck,
        include_str!("testdata/node-check.stderr"),
        "js",
    );
    assert_eq!(
        summary(&found),
        vec![(None, s("broken.js:2"), "Unexpected token ';'".into())]
    );
}

#[test]
fn tsc_plain_and_pretty() {
    let plain = findings(Tool::Tsc, include_str!("testdata/tsc.stdout"), "tools/ts");
    let expected = vec![
        (
            None,
            s("src/index.ts:5:26"),
            "Argument of type 'string' is not assignable to parameter of type 'number'.".to_owned(),
        ),
        (
            None,
            s("src/index.ts:6:7"),
            "Type 'number' is not assignable to type 'string'.".to_owned(),
        ),
    ];
    assert_eq!(summary(&plain), expected);
    assert_eq!(plain[0].code.as_deref(), Some("TS2345"));
    assert_eq!(plain[0].kind, FindingKind::Type);
    let pretty = findings(
        Tool::Tsc,
        include_str!("testdata/tsc-pretty.stdout"),
        "tools/ts",
    );
    assert_eq!(
        summary(&pretty),
        expected,
        "ANSI colours are stripped before parsing"
    );
}

#[test]
fn eslint_stylish() {
    let found = findings(
        Tool::Eslint,
        include_str!("testdata/eslint.stdout"),
        "tools/es",
    );
    let got: Vec<_> = found
        .iter()
        .map(|f| (f.location(), f.severity, f.code.clone(), f.message.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                s("a.js:1:7"),
                Severity::Error,
                s("no-unused-vars"),
                "'unused' is assigned a value but never used".into()
            ),
            (
                s("a.js:2:1"),
                Severity::Warning,
                s("no-undef"),
                "'foo' is not defined".into()
            ),
        ]
    );
}

#[test]
fn unknown_tools_give_nothing_even_for_familiar_output() {
    let found = findings(
        Tool::Unknown,
        include_str!("testdata/cargo-test.stdout"),
        "rs",
    );
    assert!(found.is_empty());
}

fn captured(text: &str) -> CapturedOutput {
    CapturedOutput {
        bytes_total: text.len() as u64,
        truncated: false,
        omitted_bytes: 0,
        head: text.to_owned(),
        tail: String::new(),
    }
}

#[test]
fn at_most_50_findings_the_rest_counted_errors_first() {
    let mut text = String::new();
    for i in 0..30 {
        text.push_str(&format!("warning: w{i}\n --> src/a.rs:{}:1\n\n", i + 1));
    }
    for i in 0..5000 {
        text.push_str(&format!(
            "error[E0308]: e{i}\n --> src/b.rs:{}:1\n\n",
            i + 1
        ));
    }
    let (found, omitted) = collect(
        Tool::Rustc,
        &captured(&text),
        &CapturedOutput::default(),
        &at("rs"),
    )
    .into_parts();
    assert_eq!(found.len(), MAX_FINDINGS);
    assert!(
        found.iter().all(|f| f.severity == Severity::Error),
        "errors are kept first"
    );
    assert_eq!(found[0].message, "e0");
    // The parser holds at most 1000 raw findings: 30 warnings + 970 errors seen, 50 kept.
    assert_eq!(omitted, 1000 - 50);
}

#[test]
fn hostile_output_is_bounded_and_clean() {
    // An enormous panic message full of ANSI escapes, control characters and lies.
    let huge = "\x1b[31mboom\x1b[0m\x07".repeat(100_000);
    let text = format!(
        "test tests::evil ... FAILED\ntest \x1b[1mtests::lies\x1b[0m ... FAILED\n---- tests::evil stdout ----\nthread 'tests::evil' panicked at ../../../../etc/passwd:99999999999:1:\n{huge}\n\n"
    );
    let (found, _) = collect(
        Tool::CargoTest,
        &captured(&text),
        &CapturedOutput::default(),
        &at("rs"),
    )
    .into_parts();
    assert_eq!(found.len(), 2);
    let evil = &found[0];
    assert_eq!(evil.test.as_deref(), Some("tests::evil"));
    assert!(
        evil.message.len() <= MAX_FINDING_MESSAGE_BYTES,
        "{}",
        evil.message.len()
    );
    assert!(evil.message.ends_with('…'));
    assert!(evil.message.starts_with("boomboom"));
    assert_eq!(evil.file, None, "an overflowing line number is no place");
    assert_eq!(found[1].test.as_deref(), Some("tests::lies"));
    for f in &found {
        let all = format!("{f:?}");
        assert!(!all.contains('\u{1b}') && !all.contains('\u{7}'), "{all}");
    }
    // Invalid UTF-8 reaches cordon as U+FFFD; a path that climbs out of the repository is
    // dropped rather than guessed.
    let lossy = String::from_utf8_lossy(b"error[E0001]: bad \xff\xfe bytes\n --> ../../x.rs:1:1\n")
        .into_owned();
    let (found, _) = collect(
        Tool::Rustc,
        &captured(&lossy),
        &CapturedOutput::default(),
        &at("rs"),
    )
    .into_parts();
    assert_eq!(found[0].message, "bad \u{fffd}\u{fffd} bytes");
    assert_eq!(found[0].file, None);
    // One line of 1 MiB: no finding, no trouble.
    let line = "x".repeat(1 << 20);
    assert!(findings(Tool::Pytest, &line, "py").is_empty());
    assert!(
        findings(Tool::Tap, &format!("not ok 1 - {line}"), "js")[0]
            .test
            .as_ref()
            .unwrap()
            .len()
            <= MAX_FINDING_MESSAGE_BYTES
    );
}

#[test]
fn truncated_captures_are_parsed_head_and_tail_apart() {
    let out = CapturedOutput {
        bytes_total: 10_000,
        truncated: true,
        omitted_bytes: 9_000,
        head: "test tests::a ... FAILED\ntest tests::b".into(),
        tail: " ... FAILED\ntest tests::c ... FAILED\n".into(),
    };
    let (found, _) =
        collect(Tool::CargoTest, &out, &CapturedOutput::default(), &at("rs")).into_parts();
    let tests: Vec<_> = found.iter().map(|f| f.test.clone().unwrap()).collect();
    assert_eq!(
        tests,
        ["tests::a", "tests::c"],
        "the line cut at the gap is not made up"
    );
}

#[test]
fn ruff_full_and_concise() {
    let expected = vec![
        (
            None,
            s("pkg/mod.py:1:8"),
            "`os` imported but unused".to_owned(),
        ),
        (
            None,
            s("pkg/mod.py:5:5"),
            "Local variable `unused` is assigned to but never used".to_owned(),
        ),
    ];
    let full = findings(Tool::Ruff, include_str!("testdata/ruff.stdout"), "rm");
    assert_eq!(summary(&full), expected);
    assert_eq!(full[0].code.as_deref(), Some("F401"));
    let concise = findings(
        Tool::Ruff,
        include_str!("testdata/ruff-concise.stdout"),
        "rm",
    );
    assert_eq!(summary(&concise), expected);
}

#[test]
fn mypy_errors_with_codes() {
    let found = findings(Tool::Mypy, include_str!("testdata/mypy.stdout"), "rm");
    let got: Vec<_> = found
        .iter()
        .map(|f| (f.location(), f.code.clone(), f.kind))
        .collect();
    assert_eq!(
        got,
        vec![
            (s("pkg/mod.py:6"), s("return-value"), FindingKind::Type),
            (s("pkg/mod.py:9"), s("assignment"), FindingKind::Type),
        ]
    );
    assert_eq!(
        found[0].message,
        "Incompatible return value type (got \"int\", expected \"str\")"
    );
}

#[test]
fn jest_vitest_and_mocha_name_the_test_at_the_assertion() {
    let jest = findings(Tool::Jest, include_str!("testdata/jest.stderr"), "tools2");
    assert_eq!(
        summary(&jest),
        vec![
            (
                s("math > adds"),
                s("jt/add.test.js:5:23"),
                "expect(received).toBe(expected) // Object.is equality".into()
            ),
            (
                s("top level fails"),
                s("jt/add.test.js:14:9"),
                "top broke".into()
            ),
        ]
    );
    assert!(
        jest[0].message.contains("Received: 6"),
        "{}",
        jest[0].message
    );
    let mut both = include_str!("testdata/vitest.stdout").to_owned();
    both.push_str(include_str!("testdata/vitest.stderr"));
    let vitest = findings(Tool::Vitest, &both, "tools2");
    assert_eq!(
        summary(&vitest),
        vec![(
            s("math > adds"),
            s("vt/add.test.mjs:6:23"),
            "AssertionError: expected 6 to be 5 // Object.is equality".into()
        )]
    );
    let mocha = findings(Tool::Mocha, include_str!("testdata/mocha.stdout"), "tools2");
    assert_eq!(
        summary(&mocha),
        vec![(
            s("math > adds"),
            s("mo/add.test.js:6:12"),
            "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:".into()
        )]
    );
    assert!(mocha[0].message.contains("6 !== 5"), "{}", mocha[0].message);
    assert!(
        !mocha[0].message.contains("+ expected"),
        "{}",
        mocha[0].message
    );
}

#[test]
fn go_test_vet_and_build() {
    let test = findings(Tool::GoTest, include_str!("testdata/gotest.stdout"), "gop");
    assert_eq!(
        summary(&test),
        vec![
            (
                s("TestAdd"),
                s("add_test.go:7"),
                "Add(2, 3) = 6, want 5".into()
            ),
            (
                s("TestSub/inner"),
                s("add_test.go:19"),
                "inner broke".into()
            ),
        ]
    );
    let vet = findings(Tool::GoVet, include_str!("testdata/govet.stderr"), "gop");
    assert_eq!(
        summary(&vet),
        vec![(
            None,
            s("add.go:10:9"),
            "fmt.Sprintf format %d has arg \"n\" of wrong type string".into()
        )]
    );
    assert_eq!(vet[0].kind, FindingKind::Lint);
    let build = findings(
        Tool::GoBuild,
        include_str!("testdata/gobuild.stderr"),
        "gop",
    );
    let under_test = findings(
        Tool::GoTest,
        include_str!("testdata/gotest-build.out"),
        "gop",
    );
    let expected = vec![(
        None,
        s("broken.go:4:9"),
        "cannot use \"x\" (untyped string constant) as int value in return statement".to_owned(),
    )];
    assert_eq!(summary(&build), expected);
    assert_eq!(
        summary(&under_test),
        expected,
        "go test's build errors, once"
    );
    assert_eq!(under_test[0].kind, FindingKind::Compile);
    // Without the package line, the bare file name is not passed off as a path.
    let cut = findings(
        Tool::GoTest,
        "--- FAIL: TestAdd (0.00s)\n    add_test.go:7: bad\n",
        "gop",
    );
    assert_eq!(
        summary(&cut),
        vec![(s("TestAdd"), None, "add_test.go:7: bad".into())]
    );
}

mod hostile {
    //! Any output, in pieces of real tools' output mixed with junk, for every parser: no
    //! panic, and the bounds hold.
    use super::*;
    use proptest::prelude::*;

    const TOOLS: &[Tool] = &[
        Tool::CargoTest,
        Tool::CargoNextest,
        Tool::Rustc,
        Tool::Pytest,
        Tool::PythonCompile,
        Tool::Tap,
        Tool::NodeCheck,
        Tool::Tsc,
        Tool::Eslint,
        Tool::Jest,
        Tool::Vitest,
        Tool::Mocha,
        Tool::Ruff,
        Tool::Mypy,
        Tool::GoTest,
        Tool::GoVet,
        Tool::GoBuild,
    ];

    /// Lines of the captured real outputs, to be shuffled, cut and repeated.
    fn real_lines() -> Vec<String> {
        [
            include_str!("testdata/cargo-test.stdout"),
            include_str!("testdata/cargo-test-compile.stderr"),
            include_str!("testdata/nextest.stderr"),
            include_str!("testdata/pytest-fail.stdout"),
            include_str!("testdata/pytest-collect-error.stdout"),
            include_str!("testdata/node-test.stdout"),
            include_str!("testdata/tape.stdout"),
            include_str!("testdata/tsc.stdout"),
            include_str!("testdata/eslint.stdout"),
            include_str!("testdata/jest.stderr"),
            include_str!("testdata/mocha.stdout"),
            include_str!("testdata/gotest.stdout"),
            include_str!("testdata/ruff.stdout"),
            include_str!("testdata/mypy.stdout"),
        ]
        .iter()
        .flat_map(|t| t.lines().map(str::to_owned))
        .collect()
    }

    fn piece() -> impl Strategy<Value = String> {
        let lines = real_lines();
        prop_oneof![
            4 => proptest::sample::select(lines),
            1 => "\\PC{0,200}",
            1 => "[ \t\x1b\x07\r:()\\[\\]0-9a-z./>-]{0,80}",
            1 => Just("\u{1b}[31m".to_owned()),
            1 => Just("x".repeat(5000)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        #[test]
        fn parsers_never_panic_and_stay_bounded(pieces in proptest::collection::vec(piece(), 0..80), cut in 0usize..64) {
            let mut text = pieces.join("\n");
            // Cut at an arbitrary char boundary, as a capture's head does.
            let mut at = text.len().saturating_sub(cut);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.truncate(at);
            for tool in TOOLS {
                let (found, _) = parse_text(*tool, &text, &at_project()).into_parts();
                prop_assert!(found.len() <= MAX_FINDINGS);
                for f in &found {
                    prop_assert!(f.message.len() <= MAX_FINDING_MESSAGE_BYTES);
                    for text in [Some(&f.message), f.test.as_ref(), f.file.as_ref(), f.code.as_ref()].into_iter().flatten() {
                        prop_assert!(!text.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{f:?}");
                    }
                    if let Some(file) = &f.file {
                        // Never a path into the workspace (`at_project`'s).
                        prop_assert!(!file.starts_with("/tmp/cap/rs"), "{f:?}");
                    } else {
                        prop_assert!(f.line.is_none() && f.column.is_none(), "{f:?}");
                    }
                    prop_assert!(f.line != Some(0) && f.column != Some(0));
                }
            }
        }
    }

    fn at_project() -> PathContext {
        at("rs")
    }
}

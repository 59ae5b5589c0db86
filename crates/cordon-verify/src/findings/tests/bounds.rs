//! The bounds, on hostile output: counts, sizes, escapes, lies, cut captures.

use super::*;
use pretty_assertions::assert_eq;

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
        undelivered_bytes: 0,
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
        &[Tool::Rustc],
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
        &[Tool::CargoTest],
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
        &[Tool::Rustc],
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
        undelivered_bytes: 0,
    };
    let (found, _) = collect(
        &[Tool::CargoTest],
        &out,
        &CapturedOutput::default(),
        &at("rs"),
    )
    .into_parts();
    let tests: Vec<_> = found.iter().map(|f| f.test.clone().unwrap()).collect();
    assert_eq!(
        tests,
        ["tests::a", "tests::c"],
        "the line cut at the gap is not made up"
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
        Tool::Rustfmt,
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

//! cargo test, nextest, rustc and clippy (human and JSON).

use super::*;
use pretty_assertions::assert_eq;

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
    // `-D warnings` raised them to errors: the tool's own level is kept.
    assert!(found.iter().all(|f| f.severity == Severity::Warning));
}

#[test]
fn a_rustc_warning_clippy_raised_to_an_error_is_a_lint_warning() {
    // `cargo clippy -- -D warnings` on an unused variable and a needless return, in JSON and
    // as cargo prints it.
    for (text, what) in [
        (
            include_str!("testdata/cargo-clippy-raised-json.stdout"),
            "json",
        ),
        (include_str!("testdata/cargo-clippy-raised.stderr"), "human"),
    ] {
        let found = findings(Tool::Rustc, text, "rs");
        type Seen<'a> = (
            FindingKind,
            Severity,
            &'a str,
            Option<&'a str>,
            Option<String>,
        );
        let got: Vec<Seen<'_>> = found
            .iter()
            .map(|f| {
                (
                    f.kind,
                    f.severity,
                    f.tool.as_str(),
                    f.code.as_deref(),
                    f.location(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    FindingKind::Lint,
                    Severity::Warning,
                    "rustc",
                    Some("unused_variables"),
                    s("src/lib.rs:2:9")
                ),
                (
                    FindingKind::Lint,
                    Severity::Warning,
                    "clippy",
                    Some("clippy::needless_return"),
                    s("src/lib.rs:3:5")
                ),
            ],
            "{what}"
        );
    }
}

#[test]
fn rustfmt_names_each_file_to_format() {
    // Captured with its colours (SGR and `ESC ( B` charset designations).
    let found = findings(
        Tool::Rustfmt,
        include_str!("testdata/cargo-fmt.stdout"),
        "rs",
    );
    assert_eq!(
        summary(&found),
        vec![(
            None,
            s("src/lib.rs:1"),
            "not formatted as rustfmt formats it (`cargo fmt` fixes it)".into()
        )]
    );
    assert_eq!(found[0].kind, FindingKind::Lint);
    let older = findings(
        Tool::Rustfmt,
        "Diff in /tmp/cap/rs/src/main.rs at line 7:\n",
        "rs",
    );
    assert_eq!(older[0].location().as_deref(), Some("src/main.rs:7"));
}

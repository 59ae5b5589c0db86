//! node's test runner, tape, node --check, tsc, eslint, jest, vitest, mocha.

use super::*;
use pretty_assertions::assert_eq;

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

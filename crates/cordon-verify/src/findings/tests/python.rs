//! pytest, compileall, ruff, mypy.

use super::*;
use pretty_assertions::assert_eq;

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
fn pytest_places_a_failure_in_the_project_not_in_the_standard_library() {
    // six 1.16.0 from PyPI, with a patch that breaks `six.b` (test_b), on a Python built
    // without `_dbm` (test_move_items[dbm_ndbm] fails inside the standard library, called from
    // six.py:87: the test's own line is the place, the deepest frame in the project the `via`).
    let found = findings(
        Tool::Pytest,
        include_str!("testdata/pytest-six.stdout"),
        "sixpkg/six-1.16.0",
    );
    assert_eq!(
        summary(&found),
        vec![
            (
                s("test_six.py::test_move_items[dbm_ndbm]"),
                s("test_six.py:121"),
                "ModuleNotFoundError: No module named '_dbm'".into()
            ),
            (
                s("test_six.py::test_b"),
                s("test_six.py:479"),
                "AssertionError: assert 2 == 1".into()
            ),
        ]
    );
    assert_eq!(found[0].via.as_deref(), Some("six.py:87"));
    assert_eq!(found[1].via, None);
}

#[test]
fn pytest_names_the_tests_own_line_first_and_the_helper_it_asserted_through_second() {
    let found = findings(
        Tool::Pytest,
        include_str!("testdata/pytest-helper.stdout"),
        "py2",
    );
    let places: Vec<(Option<String>, Option<String>, Option<String>)> = found
        .iter()
        .map(|f| (f.test.clone(), f.location(), f.via.clone()))
        .collect();
    assert_eq!(
        places,
        vec![
            (
                s("test/test_output.py::test_render_two"),
                s("test/test_output.py:14"),
                s("test/common.py:2")
            ),
            (
                s("test/test_output.py::test_direct"),
                s("test/test_output.py:18"),
                None
            ),
        ]
    );
    assert_eq!(
        found[0].headline(),
        "test `test/test_output.py::test_render_two` failed at test/test_output.py:14 (via test/common.py:2): AssertionError: 'xx' != 'xxx'"
    );
}

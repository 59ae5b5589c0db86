//! `cordon verify` on projects shaped like the published packages it got wrong (issue 33), one
//! test per problem, through the real binary, real git, the real sandbox and real toolchains:
//! the developer's uncommitted edit, a crate with nightly-only benches, re-verifying a clean
//! commit, an npm project whose `pretest` lints (no lockfile), pytest tests asserting through a
//! helper, a patch adding one lint finding to a base with fifteen, renderings, a repository of
//! bare `tests/test_*.py`, the timeline of verify's own phases, progress without a terminal.

use std::path::Path;
use std::process::Output;

use crate::support;
use crate::support::{TestDir, cordon, git};
use cordon_types::{
    Baseline, BaselineSource, FindingKind, Overall, RunReport, Severity, StageResult, StageStatus,
    SubjectKind,
};
use pretty_assertions::assert_eq;

/// A git repository on `main` in a temp dir, with a CORDON_HOME of its own.
struct Project {
    dir: TestDir,
    home: TestDir,
}

impl Project {
    fn new(files: &[(&str, &str)]) -> Project {
        let project = Project {
            dir: TestDir::new(),
            home: TestDir::new(),
        };
        git(project.path(), &["init", "-q", "-b", "main"]);
        project.write(files);
        git(project.path(), &["add", "-A"]);
        git(project.path(), &["commit", "-q", "-m", "base"]);
        project
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `files` into the checkout (nothing staged or committed).
    fn write(&self, files: &[(&str, &str)]) {
        for (name, text) in files {
            let path = self.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    /// `cordon verify --json --repo DIR ARGS` with this project's home: the report (the test
    /// fails without one) and the process's output.
    fn verify(&self, args: &[&str]) -> (RunReport, Output) {
        let out = cordon()
            .env("CORDON_HOME", self.home.path())
            .args(["verify", "--json", "--repo"])
            .arg(self.path())
            .args(args)
            .output()
            .unwrap();
        let report: RunReport = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no report ({e}); exit {:?}; stderr:\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (report, out)
    }

    /// Verifies with `args`; the gate must pass.
    #[track_caller]
    fn passes(&self, args: &[&str]) -> (RunReport, Output) {
        let (report, out) = self.verify(args);
        assert_eq!(
            (report.overall, out.status.code()),
            (Overall::Pass, Some(0)),
            "{}\n{:#?}",
            String::from_utf8_lossy(&out.stderr),
            report.stages
        );
        (report, out)
    }

    /// The checkout's observable state: status, HEAD, the index's bytes, the stash.
    fn state(&self) -> (String, String, Vec<u8>, String) {
        (
            git(
                self.path(),
                &["status", "--porcelain=v1", "--untracked-files=all"],
            ),
            git(self.path(), &["rev-parse", "HEAD"]),
            std::fs::read(self.path().join(".git/index")).unwrap(),
            git(self.path(), &["stash", "list"]),
        )
    }
}

fn stage<'a>(report: &'a RunReport, name: &str) -> &'a StageResult {
    report
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}: {:#?}", report.stages))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A Python package tested by bare `tests/test_*.py` files: no pyproject.toml, setup.py or
/// setup.cfg (problem 8: pytest runs it as it is).
const CALC: &[(&str, &str)] = &[
    ("calc/__init__.py", "def add(a, b):\n    return a + b\n"),
    (
        "tests/test_calc.py",
        "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
    ),
    (".gitignore", "__pycache__/\n*.log\n"),
];

/// Problems 1 and 8: an uncommitted edit that breaks a test is what `cordon verify` judges, and
/// says so first; the checkout, its index and its stash stay as they were; `--committed`
/// judges HEAD alone and names what it left out. The project is bare `tests/test_*.py`.
#[test]
fn an_uncommitted_edit_that_breaks_a_test_is_verified_and_named_first() {
    if !support::sandbox_available() {
        return;
    }
    let p = Project::new(CALC);
    let head = git(p.path(), &["rev-parse", "--short=7", "HEAD"]);
    let head = head.trim();
    let (clean, _) = p.passes(&[]);
    assert_eq!(
        clean.subject.as_ref().unwrap().summary,
        format!("HEAD {head} (no uncommitted changes)")
    );

    // The edit (unstaged), a new test (untracked), an ignored log, a stash entry of the
    // user's own.
    p.write(&[("calc/__init__.py", "def add(a, b):\n    return a - b\n")]);
    git(p.path(), &["stash", "-q"]);
    p.write(&[
        ("calc/__init__.py", "def add(a, b):\n    return a - b\n"),
        (
            "tests/test_more.py",
            "import calc\n\n\ndef test_zero():\n    assert calc.add(0, 0) == 0\n",
        ),
        ("debug.log", "ignored\n"),
    ]);
    let before = p.state();
    let markdown = p.home.path().join("comment.md");
    let (report, out) = p.verify(&["--markdown", markdown.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let subject = report.subject.as_ref().unwrap();
    assert_eq!(subject.kind, SubjectKind::WorkingTree);
    assert_eq!(
        subject.summary,
        format!("HEAD {head} + 1 modified, 1 untracked")
    );
    assert_eq!(
        stderr(&out).lines().next().unwrap(),
        format!("cordon verify: HEAD {head} + 1 modified, 1 untracked — 2 stage(s)")
    );
    assert!(
        stderr(&out).contains(&format!(
            "\nverified: HEAD {head} + 1 modified, 1 untracked\ngate: BLOCKED by pytest"
        )),
        "{}",
        stderr(&out)
    );
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert_eq!(
        md.lines().next().unwrap(),
        format!(
            "**cordon verify** of `HEAD {head} + 1 modified, 1 untracked`: **❌ blocked — promotion not allowed**"
        )
    );
    let pytest = stage(&report, "pytest");
    assert_eq!(pytest.status, StageStatus::Fail);
    assert!(
        pytest.failure.as_ref().unwrap().reason.starts_with(
            "test `tests/test_calc.py::test_add` failed at tests/test_calc.py:5: assert -1 == 5"
        ),
        "{pytest:#?}"
    );
    let tests = pytest.tests.unwrap();
    assert_eq!(
        (tests.passed, tests.failed),
        (1, 1),
        "the untracked test ran"
    );
    let mut changed = report.changed_files.clone();
    changed.sort();
    assert_eq!(changed, ["calc/__init__.py", "tests/test_more.py"]);
    assert!(report.cache.unwrap().promoted.is_none(), "never promoted");
    assert_eq!(p.state(), before, "checkout, index and stash untouched");

    // HEAD alone: passes, and says what it did not see.
    let (committed, out) = p.passes(&["--committed"]);
    let subject = committed.subject.unwrap();
    assert_eq!(subject.kind, SubjectKind::Commit);
    assert_eq!(
        subject.summary,
        format!(
            "HEAD {head}, committed only (not verified: the checkout's 1 modified, 1 untracked)"
        )
    );
    assert!(
        stderr(&out).contains(&format!("verified: {}", subject.summary)),
        "{}",
        stderr(&out)
    );
    assert_eq!(p.state(), before);

    // What detection found, named as found.
    let explain = cordon()
        .env("CORDON_HOME", p.home.path())
        .args(["verify", "--explain", "--repo"])
        .arg(p.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    assert!(
        text.starts_with(&format!(
            "Verifies: HEAD {head} + 1 modified, 1 untracked\n"
        )),
        "{text}"
    );
    assert!(text.contains("pytest (test files under tests/)"), "{text}");
}

/// A crate whose benches need nightly (`#![feature(test)]`), as published crates often have.
const NIGHTLY_BENCHES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        "[package]\nname = \"fast\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    ),
    (
        "src/lib.rs",
        "pub fn double(x: u32) -> u32 {\n    x * 2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() {\n        assert_eq!(super::double(2), 4);\n    }\n}\n",
    ),
    (
        "benches/bench.rs",
        "#![feature(test)]\nextern crate test;\n\n#[bench]\nfn bench_double(b: &mut test::Bencher) {\n    b.iter(|| fast::double(test::black_box(21)));\n}\n",
    ),
    (
        "examples/show.rs",
        "fn main() {\n    println!(\"{}\", fast::double(2));\n}\n",
    ),
    (".gitignore", "target/\n"),
];

/// Problems 2 and 3: a clean crate with nightly-only benches passes on stable, as its own
/// `cargo test` does; verifying the same commit again uses the cache its first verification
/// kept instead of building cold.
#[test]
fn a_crate_with_nightly_benches_passes_and_reverifying_it_is_warm() {
    if !support::overlay_available() {
        return;
    }
    let p = Project::new(NIGHTLY_BENCHES);
    let (first, _) = p.passes(&["--committed"]);
    for name in ["cargo-test", "cargo-clippy"] {
        let s = stage(&first, name);
        assert_eq!(s.status, StageStatus::Pass, "{s:#?}");
        assert!(
            !s.findings
                .iter()
                .any(|f| f.code.as_deref() == Some("E0554")),
            "{s:#?}"
        );
    }
    for s in &first.stages {
        assert!(
            !s.command
                .iter()
                .any(|a| a == "--all-targets" || a == "--benches"),
            "{:?}",
            s.command
        );
    }
    let key = first
        .cache
        .as_ref()
        .unwrap()
        .promoted
        .clone()
        .expect("kept");

    let (again, _) = p.passes(&["--committed"]);
    let cache = again.cache.as_ref().unwrap();
    assert_eq!(cache.used.as_deref(), Some(key.as_str()), "{cache:#?}");
    assert!(
        cache
            .reasons
            .iter()
            .any(|r| r.contains("was kept: re-verifying it uses that cache")),
        "{cache:#?}"
    );
    assert_eq!(cache.promoted, None);
    assert_eq!(stage(&again, "cargo-fetch").status, StageStatus::Skipped);
    // Nothing rebuilds: the build's own messages name no crate compiled.
    let built = stage(&again, "cargo-test");
    assert!(
        !built.stderr.head.contains("Compiling fast"),
        "{}",
        built.stderr.head
    );
}

/// The eslint version the npm test installs (no lockfile: npm resolves it from the registry).
const ESLINT: &str = "9.39.4";

/// Problems 3 and 4 on an npm project with no lockfile whose `pretest` runs its lint: the
/// second verification of an unchanged commit does not install again; an unused variable
/// fails the required test stage with eslint's finding, not "exited with code 1"; JUnit names
/// each failed assertion once.
#[test]
fn an_npm_pretest_lint_failure_carries_its_finding_and_an_unchanged_project_does_not_reinstall() {
    if !support::overlay_available() {
        return;
    }
    let package = format!(
        r#"{{
  "name": "hooked",
  "version": "1.0.0",
  "main": "index.js",
  "devDependencies": {{ "eslint": "{ESLINT}" }},
  "scripts": {{
    "lint": "eslint .",
    "pretest": "npm run lint",
    "test": "node --test test/"
  }}
}}
"#
    );
    let p = Project::new(&[
        ("package.json", &package),
        (
            "eslint.config.js",
            "module.exports = [{ rules: { \"no-unused-vars\": \"error\" } }];\n",
        ),
        (
            "index.js",
            "exports.nums = () => [1, 2, 3];\nexports.sum = (xs) => xs.reduce((a, b) => a + b, 0);\n",
        ),
        (
            "test/nums.test.js",
            "const test = require(\"node:test\");\nconst assert = require(\"node:assert\");\nconst m = require(\"../index.js\");\n\ntest(\"nums\", () => assert.deepStrictEqual(m.nums(), [1, 2, 3]));\ntest(\"sum\", () => assert.strictEqual(m.sum(m.nums()), 6));\n",
        ),
        (".gitignore", "node_modules/\n"),
    ]);
    let (first, _) = p.passes(&[]);
    assert_eq!(stage(&first, "npm-install").status, StageStatus::Pass);
    assert!(first.cache.as_ref().unwrap().promoted.is_some());
    let (again, _) = p.passes(&[]);
    let install = stage(&again, "npm-install");
    assert_eq!(install.status, StageStatus::Skipped, "{install:#?}");
    assert!(
        install
            .skip_reason
            .as_deref()
            .unwrap()
            .contains("no lockfile: keyed by package.json"),
        "{install:#?}"
    );

    // An unused variable, uncommitted: `npm test` fails in its pretest hook.
    p.write(&[(
        "index.js",
        "exports.nums = () => [1, 2, 3];\nexports.sum = (xs) => {\n  const unused = 1;\n  return xs.reduce((a, b) => a + b, 0);\n};\n",
    )]);
    let (report, out) = p.verify(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(report.promotion.blocking, ["npm-test"]);
    let test = stage(&report, "npm-test");
    let reason = &test.failure.as_ref().unwrap().reason;
    assert!(
        reason.starts_with("lint error no-unused-vars at index.js:3:9: "),
        "{reason}"
    );
    let finding = &test.findings[0];
    assert_eq!(
        (finding.tool.as_str(), finding.kind, finding.severity),
        ("eslint", FindingKind::Lint, Severity::Error)
    );
    assert_eq!(report.failure.as_ref().unwrap().reason, *reason);

    // Two failed assertions named alike: two testcases, unique names.
    p.write(&[
        (
            "index.js",
            "exports.nums = () => [1, 2, 4];\nexports.sum = (xs) => xs.reduce((a, b) => a + b, 0);\n",
        ),
        (
            "test/more.test.js",
            "const test = require(\"node:test\");\nconst assert = require(\"node:assert\");\nconst m = require(\"../index.js\");\n\ntest(\"nums\", () => assert.strictEqual(m.nums()[2], 3));\n",
        ),
    ]);
    let junit = p.home.path().join("report.xml");
    let (report, out) = p.verify(&["--junit", junit.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(
        stage(&report, "npm-test")
            .findings
            .iter()
            .filter(|f| f.test.as_deref() == Some("nums"))
            .count(),
        2,
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase name=\"nums\" ").count(), 1, "{xml}");
    assert_eq!(
        xml.matches("<testcase name=\"nums #2\" ").count(),
        1,
        "{xml}"
    );
}

/// Problem 5: pytest tests that assert through a shared helper are named at their own line
/// first, the helper's second.
#[test]
fn pytest_findings_name_the_tests_own_line_before_the_helper() {
    if !support::sandbox_available() {
        return;
    }
    let p = Project::new(&[
        (
            "test/common.py",
            "def assert_equal(actual, expected):\n    assert actual == expected, f\"{actual!r} != {expected!r}\"\n",
        ),
        (
            "test/test_output.py",
            "from common import assert_equal\n\n\ndef render(n):\n    return \"x\" * n\n\n\ndef test_one():\n    assert_equal(render(1), \"x\")\n\n\ndef test_two():\n    out = render(2)\n    assert_equal(out, \"xxx\")\n",
        ),
    ]);
    let markdown = p.home.path().join("comment.md");
    let (report, out) = p.verify(&["--markdown", markdown.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let pytest = stage(&report, "pytest");
    let finding = &pytest.findings[0];
    assert_eq!(
        (
            finding.test.as_deref(),
            finding.location().as_deref(),
            finding.via.as_deref()
        ),
        (
            Some("test/test_output.py::test_two"),
            Some("test/test_output.py:14"),
            Some("test/common.py:2")
        )
    );
    let expected = "test `test/test_output.py::test_two` failed at test/test_output.py:14 (via test/common.py:2): AssertionError: 'xx' != 'xxx'";
    assert_eq!(pytest.failure.as_ref().unwrap().reason, expected);
    assert!(
        std::fs::read_to_string(&markdown)
            .unwrap()
            .contains(expected),
        "the Markdown names both"
    );
    // --explain names the folder it found.
    let explain = cordon()
        .env("CORDON_HOME", p.home.path())
        .args(["verify", "--explain", "--repo"])
        .arg(p.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    assert!(text.contains("pytest (test files under test/)"), "{text}");
}

/// A crate whose base has fifteen clippy findings (needless returns), none of them blocking.
fn fifteen_findings() -> String {
    let functions: Vec<String> = (1..=15)
        .map(|i| format!("pub fn f{i}(x: u32) -> u32 {{\n    return x + {i};\n}}\n"))
        .collect();
    functions.join("\n")
}

/// Problem 6: a patch adding one lint finding to a base that has fifteen: the new one is
/// `new`, listed first and named the optional stage's reason; the fifteen are `existing` and
/// counted; a rustc warning clippy raised stays a lint warning; the report keeps rendered
/// compiler text, not JSON lines; Markdown marks the optional failure a warning under a
/// passed gate. Compared with a record of the base's verification, and, in a home without
/// one, with the stage run on the base.
#[test]
fn a_new_lint_finding_comes_first_and_the_bases_fifteen_are_counted() {
    if !support::overlay_available() {
        return;
    }
    let base = fifteen_findings();
    let p = Project::new(&[
        (
            "Cargo.toml",
            "[package]\nname = \"lints\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        ("src/lib.rs", &base),
        (".gitignore", "target/\n"),
    ]);
    // The base itself: every finding is its own, the optional stage passes.
    let (verified, _) = p.passes(&[]);
    let clippy = stage(&verified, "cargo-clippy");
    assert_eq!(clippy.status, StageStatus::Pass, "{clippy:#?}");
    let baseline = clippy.baseline.as_ref().unwrap();
    assert_eq!(
        (baseline.source, baseline.existing, baseline.new),
        (BaselineSource::Unchanged, 15, 0)
    );

    // The patch: one unused variable, in a line added above the fifteen.
    let patched = format!("pub fn g() -> u32 {{\n    let unused = 1;\n    7\n}}\n\n{base}");
    p.write(&[("src/lib.rs", &patched)]);
    let patch = git(p.path(), &["diff"]);
    git(p.path(), &["checkout", "--", "src/lib.rs"]);
    let patch_file = p.home.path().join("one.diff");
    std::fs::write(&patch_file, patch).unwrap();
    let markdown = p.home.path().join("comment.md");
    for (home, source) in [
        (None, BaselineSource::Recorded),
        (Some(TestDir::new()), BaselineSource::Ran),
    ] {
        let mut args = vec!["--patch", patch_file.to_str().unwrap()];
        args.extend(["--markdown", markdown.to_str().unwrap()]);
        let (report, out) = match &home {
            None => p.verify(&args),
            Some(home) => {
                let out = cordon()
                    .env("CORDON_HOME", home.path())
                    .args(["verify", "--json", "--repo"])
                    .arg(p.path())
                    .args(&args)
                    .output()
                    .unwrap();
                (serde_json::from_slice(&out.stdout).unwrap(), out)
            }
        };
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let clippy = stage(&report, "cargo-clippy");
        assert_eq!(clippy.status, StageStatus::Fail, "{source:?}: {clippy:#?}");
        let baseline = clippy.baseline.as_ref().unwrap();
        assert_eq!(
            (
                baseline.source,
                baseline.existing,
                baseline.new,
                baseline.base_fails
            ),
            (source, 15, 1, true),
            "{baseline:#?}"
        );
        let first = &clippy.findings[0];
        assert_eq!(
            (
                first.code.as_deref(),
                first.kind,
                first.severity,
                first.baseline,
                first.location().as_deref()
            ),
            (
                Some("unused_variables"),
                FindingKind::Lint,
                Severity::Warning,
                Some(Baseline::New),
                Some("src/lib.rs:2:9")
            )
        );
        assert!(
            clippy.findings[1..]
                .iter()
                .all(|f| f.baseline == Some(Baseline::Existing)),
            "{clippy:#?}"
        );
        assert!(
            clippy.failure.as_ref().unwrap().reason.starts_with(
                "lint warning unused_variables at src/lib.rs:2:9: unused variable: `unused`"
            ),
            "{clippy:#?}"
        );
        assert!(
            !clippy.stdout.head.contains("{\"reason\":")
                && !clippy.stdout.tail.contains("{\"reason\":"),
            "the report keeps rendered text: {}",
            clippy.stdout.head
        );
        assert!(
            clippy.stdout.head.contains("unused variable: `unused`")
                || clippy.stderr.head.contains("unused variable: `unused`"),
            "{clippy:#?}"
        );
        let md = std::fs::read_to_string(&markdown).unwrap();
        assert!(
            md.contains("| cargo-clippy | lint | no | ⚠️ warning |"),
            "{md}"
        );
        assert!(!md.contains("❌"), "{md}");
        assert!(
            md.contains("- 15 existing finding(s): the base has them too (not listed)"),
            "{md}"
        );
        let listed = &md[md.find("**cargo-clippy**").unwrap()..md.find("<details>").unwrap()];
        assert!(!listed.contains("needless_return"), "{listed}");
        let terminal = stderr(&out);
        assert!(
            terminal.contains("--- cargo-clippy (1 new finding(s), 15 existing, optional) ---\n  lint warning unused_variables"),
            "{terminal}"
        );
    }
}

/// A crate whose base has a rustc warning (an unused variable).
const WARNED: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        "[package]\nname = \"warned\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    ),
    (
        "src/lib.rs",
        "pub fn g() -> u32 {\n    let unused = 1;\n    7\n}\n",
    ),
    (".gitignore", "target/\n"),
];

/// Problem 9 on a crate with a warning: the detected clippy stage fails on warnings by its
/// findings, not by `-D warnings`, so cargo records the crate as checked and re-verifying the
/// unchanged commit checks nothing again; cargo replays the fresh crate's warning, so both
/// verifications report it (the base's own: the optional stage passes).
#[test]
fn a_crate_with_a_warning_is_checked_once_and_its_warning_reported_every_time() {
    if !support::overlay_available() {
        return;
    }
    let p = Project::new(WARNED);
    for run in ["first", "again"] {
        let (report, _) = p.passes(&["--committed"]);
        let clippy = stage(&report, "cargo-clippy");
        assert_eq!(
            (clippy.status, clippy.exit_code),
            (StageStatus::Pass, Some(0)),
            "{run}: {clippy:#?}"
        );
        assert!(
            !clippy.command.iter().any(|a| a == "-D" || a == "warnings"),
            "{:?}",
            clippy.command
        );
        let found: Vec<_> = clippy
            .findings
            .iter()
            .map(|f| (f.code.as_deref(), f.severity, f.baseline, f.location()))
            .collect();
        assert_eq!(
            found,
            [(
                Some("unused_variables"),
                Severity::Warning,
                Some(Baseline::Existing),
                Some("src/lib.rs:2:9".to_owned())
            )],
            "{run}: {clippy:#?}"
        );
        let baseline = clippy.baseline.as_ref().unwrap();
        assert_eq!(
            (baseline.existing, baseline.new, baseline.base_fails),
            (1, 0, true),
            "{run}"
        );
        let checked = clippy.stderr.head.contains("Checking warned");
        if run == "first" {
            assert!(checked, "{run}: {}", clippy.stderr.head);
        } else {
            assert!(
                report.cache.as_ref().unwrap().used.is_some(),
                "{:#?}",
                report.cache
            );
            assert!(!checked, "{run}: {}", clippy.stderr.head);
        }
    }
}

/// A required lint stage that fails on warnings (`fail_on_warnings`, no `-D warnings`): the
/// base's own warning does not fail it, a patch's new warning blocks the gate with that
/// finding as the reason, though clippy exited with 0.
#[test]
fn a_required_lint_stage_failing_on_warnings_blocks_only_a_new_one() {
    if !support::overlay_available() {
        return;
    }
    let toml = concat!(
        "[[stage]]\nname = \"clippy\"\ncategory = \"lint\"\n",
        "run = [\"cargo\", \"clippy\", \"--offline\", \"--message-format=json\"]\n",
        "fail_on_warnings = true\n",
    );
    let mut files = WARNED.to_vec();
    files.push(("cordon.toml", toml));
    let p = Project::new(&files);
    let (base, _) = p.passes(&["--committed"]);
    let clippy = stage(&base, "clippy");
    assert_eq!(clippy.status, StageStatus::Pass, "{clippy:#?}");
    assert_eq!(clippy.findings.len(), 1, "{clippy:#?}");

    // A new warning below the base's: another unused variable.
    p.write(&[(
        "src/lib.rs",
        "pub fn g() -> u32 {\n    let unused = 1;\n    7\n}\n\npub fn h() -> u32 {\n    let spare = 2;\n    8\n}\n",
    )]);
    let (report, out) = p.verify(&[]);
    assert_eq!(
        (report.overall, out.status.code()),
        (Overall::Fail, Some(1)),
        "{}",
        stderr(&out)
    );
    let clippy = stage(&report, "clippy");
    assert_eq!(
        (clippy.status, clippy.exit_code, clippy.required),
        (StageStatus::Fail, Some(0), true),
        "{clippy:#?}"
    );
    let baseline = clippy.baseline.as_ref().unwrap();
    assert_eq!((baseline.existing, baseline.new), (1, 1), "{baseline:#?}");
    let failure = report.failure.as_ref().unwrap();
    assert_eq!(failure.stage.as_deref(), Some("clippy"));
    assert!(
        failure.reason.starts_with(
            "lint warning unused_variables at src/lib.rs:7:9: unused variable: `spare`"
        ),
        "{failure:#?}"
    );
}

/// Problem 9's measure: `--json` carries a timeline of the verification's phases.
/// Problem 10: without a terminal a running stage says so on a heartbeat, with its elapsed
/// time and last line; `--verbose` streams each line with the stage's name.
#[test]
fn a_running_stage_is_never_silent_and_the_report_says_where_the_time_went() {
    if !support::sandbox_available() {
        return;
    }
    let p = Project::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"slow\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"echo first step; sleep 2; echo second step\"]\n",
    )]);
    let (report, out) = p.passes(&["--heartbeat", "300ms"]);
    let text = stderr(&out);
    let beats: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("… slow (test) still running, "))
        .collect();
    assert!(beats.len() >= 2, "{text}");
    assert!(beats.iter().any(|l| l.ends_with(": first step")), "{text}");
    assert!(text.contains("▶ slow (test) ...\n"), "{text}");
    assert!(text.contains("✓ pass slow ("), "{text}");

    let phases: Vec<(&str, Option<&str>)> = report
        .timeline
        .iter()
        .map(|p| (p.phase.as_str(), p.stage.as_deref()))
        .collect();
    for phase in [
        "resolve",
        "snapshot",
        "workspace",
        "plan",
        "cache",
        "cleanup",
    ] {
        assert!(phases.contains(&(phase, None)), "{phase}: {phases:?}");
    }
    let slow = report
        .timeline
        .iter()
        .find(|p| p.stage.as_deref() == Some("slow"))
        .expect("the stage's phase");
    assert!(slow.duration_ms >= 2000, "{slow:?}");
    assert!(
        report
            .timeline
            .iter()
            .all(|p| p.start_ms + p.duration_ms <= report.duration_ms + 50),
        "{:?}",
        report.timeline
    );

    let (_, out) = p.passes(&["--verbose"]);
    let text = stderr(&out);
    assert!(
        text.contains("[slow] first step\n[slow] second step\n"),
        "{text}"
    );
}

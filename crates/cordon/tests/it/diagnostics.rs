//! Diagnostics an agent can act on: real failing projects verified by the real `cordon verify`
//! (real git, the real sandbox, the real tools), and the failing test or `file:line` named in
//! every rendering — the terminal summary, `failure.reason`, the JSON report, Markdown and
//! JUnit — with repository-relative paths and no escape sequences.

use std::path::{Path, PathBuf};

use cordon_types::{Finding, FindingKind, Overall, RunReport, StageResult};

use crate::support;
use crate::support::{TestDir, cordon, git};

/// A git repository in a temp dir with its own `CORDON_HOME`.
struct Repo {
    dir: TestDir,
    home: TestDir,
}

/// Everything one failing verification produced.
struct Outcome {
    exit: i32,
    terminal: String,
    report: RunReport,
    markdown: String,
    junit: String,
    /// The workspace's path while the stages ran (it must appear nowhere).
    workspace: String,
}

impl Repo {
    fn new(files: &[(&str, &str)]) -> Repo {
        let repo = Repo {
            dir: TestDir::new(),
            home: TestDir::new(),
        };
        for (name, text) in files {
            let path = repo.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(repo.path(), &["init", "-q", "-b", "main"]);
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", "initial"]);
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `cordon verify --json --junit FILE --markdown FILE`: the report on stdout, the
    /// terminal summary on stderr; the run history kept the same report.
    fn verify(&self, args: &[&str]) -> Outcome {
        let junit = self.home.path().join("report.xml");
        let markdown = self.home.path().join("report.md");
        let out = cordon()
            .env("CORDON_HOME", self.home.path())
            .args(["verify", "--json", "--repo"])
            .arg(self.path())
            .arg("--junit")
            .arg(&junit)
            .arg("--markdown")
            .arg(&markdown)
            .args(args)
            .output()
            .unwrap();
        let terminal = String::from_utf8_lossy(&out.stderr).into_owned();
        let report: RunReport = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no report on stdout ({e}): {}\n{terminal}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        assert!(
            terminal.contains(&format!(", run {})", report.run_id)),
            "the terminal summary closes with the verdict:\n{terminal}"
        );
        let shown = cordon()
            .env("CORDON_HOME", self.home.path())
            .args(["runs", "show", "--json", &report.run_id])
            .output()
            .unwrap();
        let record: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap_or_else(|e| {
            panic!(
                "runs show {}: {e}: {}",
                report.run_id,
                String::from_utf8_lossy(&shown.stderr)
            )
        });
        let recorded: RunReport = serde_json::from_value(record["document"].clone()).unwrap();
        assert_eq!(
            recorded, report,
            "the history keeps the report --json printed"
        );
        Outcome {
            exit: out.status.code().unwrap(),
            workspace: report.workspace.path.clone(),
            terminal,
            report,
            markdown: std::fs::read_to_string(markdown).unwrap(),
            junit: std::fs::read_to_string(junit).unwrap(),
        }
    }
}

/// What a fixture's first finding must say.
struct Want<'a> {
    stage: &'a str,
    kind: FindingKind,
    test: Option<&'a str>,
    /// `file:line` or `file:line:col`, repository-relative.
    place: &'a str,
    /// A piece of the message.
    message: &'a str,
}

impl Outcome {
    fn stage(&self, name: &str) -> &StageResult {
        self.report
            .stages
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no stage {name} in {:#?}", self.report.stages))
    }

    /// The finding is in the report, named by `failure.reason`, shown on the terminal, in
    /// Markdown and in JUnit; no rendering holds an escape sequence or a workspace path.
    fn names(&self, want: &Want<'_>) -> &Finding {
        assert_eq!(self.exit, 1, "the gate blocks:\n{}", self.terminal);
        assert_eq!(self.report.overall, Overall::Fail);
        let stage = self.stage(want.stage);
        let finding = stage
            .findings
            .iter()
            .find(|f| f.location().as_deref() == Some(want.place))
            .unwrap_or_else(|| {
                panic!(
                    "no finding at {} in stage {}: {:#?}\n{}",
                    want.place, want.stage, stage.findings, self.terminal
                )
            });
        assert_eq!(finding.kind, want.kind, "{finding:#?}");
        assert_eq!(finding.test.as_deref(), want.test, "{finding:#?}");
        assert!(finding.message.contains(want.message), "{finding:#?}");
        let failure = self.report.failure.as_ref().expect("a failure");
        assert_eq!(failure.stage.as_deref(), Some(want.stage));
        assert!(
            failure.reason.contains(want.place),
            "failure.reason names {}: {}",
            want.place,
            failure.reason
        );
        if let Some(test) = want.test {
            assert!(
                failure.reason.contains(&format!("`{test}`")),
                "{}",
                failure.reason
            );
        }
        for (what, text) in [
            ("terminal", &self.terminal),
            ("markdown", &self.markdown),
            ("junit", &self.junit),
        ] {
            assert!(
                text.contains(want.place),
                "{what} names {}:\n{text}",
                want.place
            );
            if let Some(test) = want.test {
                assert!(text.contains(test), "{what} names {test}:\n{text}");
            }
            assert!(
                !text.contains('\u{1b}'),
                "{what} holds an ESC byte:\n{text}"
            );
        }
        if let Some(test) = want.test {
            let testcase = format!("<testcase name=\"{}\"", xml_escape(test));
            assert!(
                self.junit.contains(&testcase),
                "the failing test is a JUnit testcase of its own ({testcase}):\n{}",
                self.junit
            );
        }
        self.paths_are_repository_relative();
        junit_parses(&self.junit);
        finding
    }

    fn paths_are_repository_relative(&self) {
        let mut rendered = vec![self.markdown.clone(), self.junit.clone()];
        rendered.push(
            self.report
                .failure
                .as_ref()
                .map(|f| f.reason.clone())
                .unwrap_or_default(),
        );
        for stage in &self.report.stages {
            rendered.push(serde_json::to_string(&stage.findings).unwrap());
            rendered.extend(stage.failure.as_ref().map(|f| f.reason.clone()));
        }
        for text in rendered {
            assert!(
                !text.contains(&self.workspace),
                "the workspace path {} is shown:\n{text}",
                self.workspace
            );
            assert!(
                !text.contains("/home/cordon"),
                "a sandbox path is shown:\n{text}"
            );
        }
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The JUnit document is well-formed XML (python's parser says so).
fn junit_parses(junit: &str) {
    let dir = TestDir::new();
    let file = dir.write("junit.xml", junit);
    let check = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "invalid JUnit XML: {}\n{junit}",
        String::from_utf8_lossy(&check.stderr)
    );
}

const CARGO_TOML: &str =
    "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";

const RUST_FAILING_TEST: &str = "pub fn add(a: u32, b: u32) -> u32 {
    a * b
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(2, 3), 5);
    }

    #[test]
    fn adds_one() {
        assert_eq!(super::add(1, 1), 2);
    }
}
";

#[test]
fn rust_failing_test_is_named_with_its_panic_everywhere() {
    let repo = Repo::new(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", RUST_FAILING_TEST),
    ]);
    let outcome = repo.verify(&[]);
    let finding = outcome.names(&Want {
        stage: "cargo-test",
        kind: FindingKind::Test,
        test: Some("tests::adds"),
        place: "src/lib.rs:9:9",
        message: "assertion `left == right` failed",
    });
    assert_eq!(finding.tool, "libtest");
    assert_eq!(
        outcome.report.failure.as_ref().unwrap().reason,
        "test `tests::adds` failed at src/lib.rs:9:9: assertion `left == right` failed (left: 6, right: 5) (and 1 more)"
    );
    assert!(
        outcome
            .terminal
            .contains("--- cargo-test (2 finding(s)) ---"),
        "{}",
        outcome.terminal
    );
    assert!(
        outcome.junit.contains("<testcase name=\"tests::adds_one\""),
        "{}",
        outcome.junit
    );
}

#[test]
fn rust_type_error_is_a_compile_finding_at_its_column() {
    let repo = Repo::new(&[
        ("Cargo.toml", CARGO_TOML),
        (
            "src/lib.rs",
            "pub fn add(a: u32, b: u32) -> u32 {\n    let total: u32 = \"a + b\";\n    total + a + b\n}\n",
        ),
    ]);
    let outcome = repo.verify(&[]);
    let finding = outcome.names(&Want {
        stage: "cargo-test",
        kind: FindingKind::Compile,
        test: None,
        place: "src/lib.rs:2:22",
        message: "mismatched types",
    });
    assert_eq!(finding.code.as_deref(), Some("E0308"));
    assert!(
        outcome
            .report
            .failure
            .as_ref()
            .unwrap()
            .reason
            .starts_with("compile error E0308 at src/lib.rs:2:22: mismatched types"),
        "{:?}",
        outcome.report.failure
    );
}

const PYPROJECT: &str = "[project]\nname = \"demo\"\nversion = \"0.1\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n";

const PY_TESTS: &str = "import sys, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))
import demo


def test_add():
    assert demo.add(2, 3) == 5


def test_ok():
    assert demo.add(2, 2) == 4


def test_even(subtests):
    for i in range(3):
        with subtests.test(msg=\"even\", i=i):
            assert i % 2 == 0
";

#[test]
fn pytest_failures_and_subtests_in_a_subproject_have_repository_paths() {
    let repo = Repo::new(&[
        ("README.md", "a monorepo\n"),
        ("py/pyproject.toml", PYPROJECT),
        ("py/demo/__init__.py", "def add(a, b):\n    return a * b\n"),
        ("py/tests/test_demo.py", PY_TESTS),
    ]);
    let outcome = repo.verify(&["--project", "py"]);
    outcome.names(&Want {
        stage: "pytest",
        kind: FindingKind::Test,
        test: Some("tests/test_demo.py::test_add"),
        place: "py/tests/test_demo.py:7",
        message: "assert 6 == 5",
    });
    let stage = outcome.stage("pytest");
    let subtest = stage
        .findings
        .iter()
        .find(|f| f.test.as_deref() == Some("tests/test_demo.py::test_even [even] (i=1)"))
        .unwrap_or_else(|| panic!("no subtest finding: {:#?}", stage.findings));
    assert_eq!(
        subtest.location().as_deref(),
        Some("py/tests/test_demo.py:17")
    );
    let counts = stage.tests.expect("pytest's counts with subtests are read");
    // As pytest counts them: test_add, the failed subtest and the test that holds it.
    assert_eq!((counts.passed, counts.failed), (1, 3), "{counts:?}");
    assert_eq!(counts.subtests_passed, 2, "{counts:?}");
}

#[test]
fn python_syntax_error_is_a_compile_finding() {
    let repo = Repo::new(&[
        ("pyproject.toml", PYPROJECT),
        ("demo/__init__.py", "def add(a, b)\n    return a + b\n"),
        ("tests/test_demo.py", PY_TESTS),
    ]);
    let outcome = repo.verify(&[]);
    let failed: Vec<&StageResult> = outcome
        .report
        .stages
        .iter()
        .filter(|s| !s.findings.is_empty())
        .collect();
    let stage = failed.first().expect("a stage with findings").name.clone();
    outcome.names(&Want {
        stage: &stage,
        kind: FindingKind::Compile,
        test: None,
        place: "demo/__init__.py:1",
        message: "expected ':'",
    });
}

const NODE_PACKAGE: &str =
    r#"{"name":"demo","version":"1.0.0","main":"index.js","scripts":{"test":"node --test"}}"#;

const NODE_TEST: &str = "const test = require('node:test');
const assert = require('node:assert');
const { add } = require('..');

test('adds', () => {
  assert.strictEqual(add(2, 3), 5);
});

test('multiplies', () => {
  assert.strictEqual(add(2, 2), 4);
});
";

#[test]
fn node_test_failure_is_named_at_the_assertion() {
    let repo = Repo::new(&[
        ("package.json", NODE_PACKAGE),
        ("index.js", "exports.add = (a, b) => a * b;\n"),
        ("test/add.test.js", NODE_TEST),
    ]);
    let outcome = repo.verify(&[]);
    outcome.names(&Want {
        stage: "npm-test",
        kind: FindingKind::Test,
        test: Some("adds"),
        place: "test/add.test.js:6:10",
        message: "6 !== 5",
    });
}

#[test]
fn node_syntax_error_is_a_compile_finding() {
    let repo = Repo::new(&[
        ("package.json", NODE_PACKAGE),
        ("index.js", "exports.add = (a, b) => {\n  return a +;\n};\n"),
        ("test/add.test.js", NODE_TEST),
    ]);
    let outcome = repo.verify(&[]);
    let failed: Vec<&StageResult> = outcome
        .report
        .stages
        .iter()
        .filter(|s| !s.findings.is_empty())
        .collect();
    let stage = failed.first().expect("a stage with findings").name.clone();
    outcome.names(&Want {
        stage: &stage,
        kind: FindingKind::Compile,
        test: None,
        place: "index.js:2",
        message: "Unexpected token",
    });
}

/// The TypeScript package `scripts/test` installed (`CORDON_TEST_TYPESCRIPT`). A machine
/// without it fails this test: it is never skipped.
fn typescript() -> PathBuf {
    let dir = std::env::var_os("CORDON_TEST_TYPESCRIPT")
        .map(PathBuf::from)
        .expect(
            "CORDON_TEST_TYPESCRIPT is not set: run the tests through scripts/test, which installs \
         TypeScript from the npm registry into target/test-tools",
        );
    assert!(
        dir.join("bin/tsc").is_file(),
        "CORDON_TEST_TYPESCRIPT={} holds no bin/tsc",
        dir.display()
    );
    dir
}

/// What `tsc` needs of the TypeScript package (its compiler and the standard `lib*.d.ts`),
/// copied into `to`.
fn copy_typescript(from: &Path, to: &Path) {
    for dir in ["bin", "lib"] {
        std::fs::create_dir_all(to.join(dir)).unwrap();
    }
    for file in ["package.json", "bin/tsc", "lib/tsc.js", "lib/_tsc.js"] {
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
    for entry in std::fs::read_dir(from.join("lib")).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_string_lossy();
        if name.starts_with("lib.") && name.ends_with(".d.ts") {
            std::fs::copy(from.join("lib").join(&*name), to.join("lib").join(&*name)).unwrap();
        }
    }
}

#[test]
fn tsc_type_error_is_named_with_its_code() {
    let typescript = typescript();
    let repo = Repo::new(&[
        (
            "package.json",
            r#"{"name":"demo","version":"1.0.0","scripts":{"typecheck":"tsc --noEmit -p ."}}"#,
        ),
        (
            "tsconfig.json",
            r#"{"compilerOptions":{"strict":true,"noEmit":true,"target":"es2020","module":"commonjs"},"include":["src"]}"#,
        ),
        (
            "src/index.ts",
            "export function add(a: number, b: number): number {\n  return a + b;\n}\n\nexport const n: number = add(1, \"2\");\n",
        ),
        (
            "cordon.toml",
            "[[stage]]\nname = \"typecheck\"\ncategory = \"typecheck\"\nrun = [\"npm\", \"run\", \"--silent\", \"typecheck\"]\n",
        ),
    ]);
    // The project's own node_modules, committed (the stage runs offline).
    let modules = repo.path().join("node_modules");
    copy_typescript(&typescript, &modules.join("typescript"));
    std::fs::create_dir_all(modules.join(".bin")).unwrap();
    std::os::unix::fs::symlink("../typescript/bin/tsc", modules.join(".bin/tsc")).unwrap();
    git(repo.path(), &["add", "-A", "-f"]);
    git(repo.path(), &["commit", "-q", "-m", "typescript"]);
    let outcome = repo.verify(&[]);
    let finding = outcome.names(&Want {
        stage: "typecheck",
        kind: FindingKind::Type,
        test: None,
        place: "src/index.ts:5:33",
        message: "not assignable to parameter of type 'number'",
    });
    assert_eq!(finding.code.as_deref(), Some("TS2345"));
}

#[test]
fn failed_optional_stages_are_not_junit_failures_and_streams_with_text_are_shown() {
    let repo = Repo::new(&[(
        "cordon.toml",
        r#"
[[stage]]
name = "style"
category = "lint"
run = ["sh", "-c", "printf '\\033[31mstyle: bad\\033[0m\\n'; exit 1"]
required = false

[[stage]]
name = "check"
category = "test"
run = ["sh", "-c", "echo 'only stdout says why'; exit 3"]
"#,
    )]);
    let outcome = repo.verify(&["--keep-going"]);
    assert_eq!(outcome.exit, 1);
    assert!(
        outcome
            .junit
            .contains("<skipped message=\"optional: exited with code 1: style: bad\""),
        "{}",
        outcome.junit
    );
    assert_eq!(
        outcome.junit.matches("<failure").count(),
        1,
        "{}",
        outcome.junit
    );
    assert!(!outcome.junit.contains('\u{1b}') && !outcome.markdown.contains('\u{1b}'));
    // A failure without findings is explained by its last lines of output.
    assert_eq!(
        outcome.report.failure.as_ref().unwrap().reason,
        "exited with code 3: only stdout says why"
    );
    let t = &outcome.terminal;
    assert!(
        t.contains("--- check (last lines of stdout) ---\nonly stdout says why"),
        "{t}"
    );
    assert!(
        !t.contains("--- check (last lines of stderr"),
        "no empty block: {t}"
    );
    assert!(
        t.contains("--- style (last lines of stdout, optional) ---\nstyle: bad"),
        "{t}"
    );
    junit_parses(&outcome.junit);
}

#[test]
fn json_prints_a_document_even_when_there_is_no_report() {
    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"true\"]\n",
    )]);
    let patch = repo.home.path().join("evil.diff");
    std::fs::write(
        &patch,
        "diff --git a/../escape.txt b/../escape.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../escape.txt\n@@ -0,0 +1 @@\n+pwned\n",
    )
    .unwrap();
    for (args, code) in [
        (vec!["--patch".to_owned(), patch.display().to_string()], 2),
        (vec!["--ref".to_owned(), "no-such-ref".to_owned()], 2),
        (
            vec![
                "--explain".to_owned(),
                "--ref".to_owned(),
                "nope".to_owned(),
            ],
            2,
        ),
    ] {
        let out = cordon()
            .env("CORDON_HOME", repo.home.path())
            .args(["verify", "--json", "--repo"])
            .arg(repo.path())
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let doc = support::error_document::error_document(&out);
        assert_eq!(doc["schema"], "cordon.error/v1");
        assert_eq!(doc["code"], code);
        let kind = if args[0] == "--patch" {
            "refused"
        } else {
            "usage"
        };
        assert_eq!(doc["kind"], kind, "{args:?}: {doc:#}");
        assert!(doc["message"].as_str().unwrap().len() > 10, "{doc:#}");
        // The cause is said once on stderr too.
        let stderr = String::from_utf8_lossy(&out.stderr);
        if args[0] == "--patch" {
            assert_eq!(
                stderr.matches("has a `..` component").count(),
                1,
                "{stderr}"
            );
            assert_eq!(
                doc["causes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c.as_str().unwrap().contains("has a `..` component"))
                    .count(),
                1,
                "{doc:#}"
            );
            assert!(
                doc["hints"][0]
                    .as_str()
                    .unwrap()
                    .contains("inside the workspace")
            );
        }
    }
}

#[test]
fn explain_says_only_what_is_true() {
    let explain = |repo: &Repo| {
        let out = cordon()
            .env("CORDON_HOME", repo.home.path())
            .args(["verify", "--explain", "--repo"])
            .arg(repo.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let node = Repo::new(&[
        ("package.json", NODE_PACKAGE),
        ("index.js", "exports.add = (a, b) => a + b;\n"),
    ]);
    let text = explain(&node);
    assert!(
        text.contains("package.json: npm (no lockfile) installs"),
        "{text}"
    );
    assert!(!text.contains("from the lockfile"), "{text}");
    assert!(
        text.contains("node-check [compile, required; offline] node --check ./index.js"),
        "{text}"
    );
    let locked = Repo::new(&[
        ("package.json", NODE_PACKAGE),
        ("package-lock.json", "{}\n"),
    ]);
    assert!(explain(&locked).contains("npm (from package-lock.json)"));

    // pytest is configured by test files under tests/, nothing else is.
    let python = Repo::new(&[
        ("pyproject.toml", "[project]\nname = \"x\"\n"),
        ("x.py", "X = 1\n"),
        ("tests/test_x.py", "def test_x():\n    pass\n"),
    ]);
    let text = explain(&python);
    assert!(
        text.contains("tools configured: pytest (test files under tests/);"),
        "{text}"
    );
    assert!(
        text.contains("python-compile [compile, required; offline]"),
        "{text}"
    );
    assert!(!text.contains("ruff") && !text.contains("mypy"), "{text}");
}

#[test]
fn a_declared_stage_whose_program_is_missing_says_so_in_verifys_terms() {
    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"lint\"\ncategory = \"lint\"\nrun = [\"no-such-linter-cordon\", \"check\"]\n",
    )]);
    let out = cordon()
        .env("CORDON_HOME", repo.home.path())
        .args(["verify", "--json", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "an infrastructure error");
    let report: RunReport = serde_json::from_slice(&out.stdout).unwrap();
    let reason = &report.failure.as_ref().unwrap().reason;
    assert!(
        reason.starts_with("no-such-linter-cordon is not installed on this host"),
        "{reason}"
    );
    assert!(!reason.contains("--ro"), "verify has no --ro: {reason}");
}

#[test]
fn a_required_tool_this_host_lacks_is_an_infrastructure_error_that_names_it() {
    let repo = Repo::new(&[
        ("package.json", NODE_PACKAGE),
        ("bun.lock", "{}\n"),
        ("index.js", "exports.add = (a, b) => a + b;\n"),
    ]);
    // A host whose PATH has git and nothing else: bun and node are not installed.
    let bin = TestDir::new();
    let git_path = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let git_path = String::from_utf8(git_path.stdout).unwrap();
    std::os::unix::fs::symlink(git_path.trim(), bin.path().join("git")).unwrap();
    let out = cordon()
        .env("CORDON_HOME", repo.home.path())
        .env("PATH", bin.path())
        .args(["verify", "--json", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let report: RunReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(125), "{report:#?}");
    assert_eq!(report.overall, Overall::Error);
    let install = report
        .stages
        .iter()
        .find(|s| s.name == "bun-install")
        .unwrap();
    assert_eq!(
        install.skip_reason.as_deref(),
        Some("bun is not installed on this host")
    );
    assert_eq!(
        report.failure.as_ref().unwrap().reason,
        "a required stage did not run: bun is not installed on this host"
    );
}

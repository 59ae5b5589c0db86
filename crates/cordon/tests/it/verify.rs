//! `cordon verify` end to end: real projects built in temp dirs, real git, the real sandbox.

use std::path::Path;
use std::process::{Command, Output};

use cordon_types::{Overall, RunReport, StageFailureCategory, StageStatus};
use pretty_assertions::assert_eq;

use crate::support;
use crate::support::{TestDir, cordon, git};

/// A git repository in a temp dir, with its own CORDON_HOME.
struct Repo {
    dir: TestDir,
    home: TestDir,
}

impl Repo {
    fn new(files: &[(&str, &str)]) -> Repo {
        let repo = Repo {
            dir: TestDir::new(),
            home: TestDir::new(),
        };
        git(repo.path(), &["init", "-q", "-b", "main"]);
        repo.commit(files, "initial");
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn commit(&self, files: &[(&str, &str)], message: &str) {
        for (name, text) in files {
            let path = self.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(self.path(), &["add", "-A"]);
        git(self.path(), &["commit", "-q", "-m", message]);
    }

    fn verify(&self, args: &[&str]) -> (Option<RunReport>, Output) {
        let out = cordon()
            .env("CORDON_HOME", self.home.path())
            .arg("verify")
            .arg("--repo")
            .arg(self.path())
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        let report = serde_json::from_slice(&out.stdout).ok();
        (report, out)
    }

    fn verify_ok(&self, args: &[&str]) -> (RunReport, i32) {
        let (report, out) = self.verify(args);
        let report = report.unwrap_or_else(|| {
            panic!(
                "no report; exit {:?}; stderr: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (report, out.status.code().unwrap())
    }

    /// `cordon verify --explain --json ARGS`: the argv the plan gives `stage`.
    fn planned_command(&self, args: &[&str], stage: &str) -> serde_json::Value {
        let out = cordon()
            .env("CORDON_HOME", self.home.path())
            .args(["verify", "--explain", "--json", "--repo"])
            .arg(self.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let found = plan["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == stage)
            .unwrap_or_else(|| panic!("no stage {stage} in {plan:#}"));
        found["command"].clone()
    }

    /// The live checkout's observable state.
    fn state(&self) -> (String, String, String, String) {
        (
            git(
                self.path(),
                &["status", "--porcelain=v1", "--untracked-files=all"],
            ),
            git(self.path(), &["rev-parse", "HEAD"]),
            git(self.path(), &["branch", "-a"]),
            git(self.path(), &["worktree", "list", "--porcelain"]),
        )
    }
}

const CARGO_TOML: &str =
    "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";
const LIB_OK: &str = "pub fn add(a: u32, b: u32) -> u32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 2), 4); }\n    #[test]\n    fn adds_zero() { assert_eq!(super::add(0, 7), 7); }\n}\n";
const LIB_BROKEN: &str = "pub fn add(a: u32, b: u32) -> u32 { a * b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 2), 4); }\n    #[test]\n    fn adds_zero() { assert_eq!(super::add(0, 7), 7); }\n}\n";

fn stage<'a>(report: &'a RunReport, name: &str) -> &'a cordon_types::StageResult {
    report
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

#[test]
fn passing_cargo_crate_passes_the_gate_with_the_same_counts_as_cargo() {
    let repo = Repo::new(&[("Cargo.toml", CARGO_TOML), ("src/lib.rs", LIB_OK)]);
    let before = repo.state();
    let (report, exit) = repo.verify_ok(&[]);
    assert_eq!(exit, 0, "{report:#?}");
    assert_eq!(report.overall, Overall::Pass);
    assert!(report.promotion.allowed);
    assert_eq!(report.plan.source, cordon_types::PlanSource::Detected);
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["cargo-fetch", "cargo-fmt", "cargo-test", "cargo-clippy"]
    );
    let test = stage(&report, "cargo-test");
    assert_eq!(test.status, StageStatus::Pass);
    assert_eq!(repo.state(), before, "the live checkout is untouched");
    assert!(
        !repo.path().join("target").exists(),
        "nothing was built in the live checkout"
    );
    // The same command run directly agrees.
    let direct = Command::new("cargo")
        .args(["test", "--offline"])
        .current_dir(repo.path())
        .env("CARGO_TARGET_DIR", repo.home.path().join("direct-target"))
        .output()
        .unwrap();
    assert!(direct.status.success());
    let direct_passed = String::from_utf8_lossy(&direct.stdout)
        .matches("test result: ok. 2 passed")
        .count();
    assert_eq!(direct_passed, 1);
    assert_eq!(test.tests.unwrap().passed, 2);
    assert!(report.workspace.isolated);
    assert!(
        !Path::new(&report.workspace.path).exists(),
        "transient workspace removed"
    );
}

#[test]
fn failing_test_blocks_the_gate_and_a_fixing_patch_unblocks_it() {
    let repo = Repo::new(&[("Cargo.toml", CARGO_TOML), ("src/lib.rs", LIB_BROKEN)]);
    let (report, exit) = repo.verify_ok(&[]);
    assert_eq!(exit, 1);
    assert_eq!(report.overall, Overall::Fail);
    assert!(!report.promotion.allowed);
    assert_eq!(report.promotion.blocking, vec!["cargo-test".to_owned()]);
    let test = stage(&report, "cargo-test");
    assert_eq!(test.status, StageStatus::Fail);
    assert_eq!(
        test.failure.as_ref().unwrap().category,
        StageFailureCategory::Test
    );
    assert_eq!(
        report.failure.as_ref().unwrap().stage.as_deref(),
        Some("cargo-test")
    );
    assert_eq!(test.tests.unwrap().failed, 1);

    // A patch that fixes the bug: made against the live checkout, never applied to it.
    std::fs::write(repo.path().join("src/lib.rs"), LIB_OK).unwrap();
    let patch = git(repo.path(), &["diff"]);
    git(repo.path(), &["checkout", "--", "src/lib.rs"]);
    let patch_file = repo.home.path().join("fix.diff");
    std::fs::write(&patch_file, &patch).unwrap();
    let before = repo.state();
    let (report, exit) = repo.verify_ok(&["--patch", patch_file.to_str().unwrap()]);
    assert_eq!(exit, 0, "{:#?}", report.failure);
    assert!(report.patch.as_ref().is_some_and(|h| h.len() == 64));
    assert_eq!(report.changed_files, vec!["src/lib.rs".to_owned()]);
    assert_eq!(repo.state(), before);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("src/lib.rs")).unwrap(),
        LIB_BROKEN
    );
}

const STAGES: &str = r#"
[[stage]]
name = "lint"
category = "lint"
run = ["sh", "-c", "echo style problem >&2; exit 1"]
required = false

[[stage]]
name = "build"
category = "build"
run = ["sh", "-c", "echo built > artifact.txt"]

[[stage]]
name = "slow"
category = "test"
run = ["sh", "-c", "sleep 30"]
timeout = "500ms"

[[stage]]
name = "after"
category = "test"
run = ["sh", "-c", "cat artifact.txt"]
"#;

#[test]
fn optional_stages_report_timeouts_block_and_fail_fast_skips() {
    let repo = Repo::new(&[("cordon.toml", STAGES)]);
    let (report, exit) = repo.verify_ok(&[]);
    assert_eq!(exit, 1);
    let status: Vec<(String, StageStatus)> = report
        .stages
        .iter()
        .map(|s| (s.name.clone(), s.status))
        .collect();
    assert_eq!(
        status,
        vec![
            ("lint".into(), StageStatus::Fail),
            ("build".into(), StageStatus::Pass),
            ("slow".into(), StageStatus::Timeout),
            ("after".into(), StageStatus::Skipped),
        ]
    );
    assert_eq!(
        stage(&report, "slow").failure.as_ref().unwrap().category,
        StageFailureCategory::Timeout
    );
    assert!(
        stage(&report, "after")
            .skip_reason
            .as_ref()
            .unwrap()
            .contains("slow")
    );
    assert_eq!(
        report.promotion.blocking,
        vec!["slow".to_owned(), "after".to_owned()]
    );
    assert_eq!(report.plan.source, cordon_types::PlanSource::CordonToml);

    let (report, _) = repo.verify_ok(&["--keep-going"]);
    let after = stage(&report, "after");
    assert_eq!(after.status, StageStatus::Pass);
    assert_eq!(after.stdout.head, "built\n", "stages share the workspace");
    assert_eq!(report.promotion.blocking, vec!["slow".to_owned()]);

    // Fail closed: required stages left out by --stages cannot count as passed; the optional
    // lint failure never blocks.
    let (report, exit) = repo.verify_ok(&["--stages", "lint,build"]);
    assert_eq!(exit, 1);
    assert_eq!(
        report.promotion.blocking,
        vec!["slow".to_owned(), "after".to_owned()]
    );
    assert_eq!(stage(&report, "slow").status, StageStatus::Skipped);
    assert_eq!(stage(&report, "build").status, StageStatus::Pass);
}

#[test]
fn bad_config_exits_2_naming_file_line_and_key() {
    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"true\"]\ntimeout = \"10\"\n",
    )]);
    let (_, out) = repo.verify(&[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cordon.toml:5"), "{stderr}");
    assert!(
        !stderr.contains("workspaces/"),
        "the file is named as the repository has it: {stderr}"
    );
    assert!(stderr.contains("no unit"), "{stderr}");

    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"true\"]\nwhen = 3\n",
    )]);
    let (_, out) = repo.verify(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `when`"));

    let (_, out) = repo.verify(&["--ref", "no-such-branch"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn hostile_patch_is_refused_and_nothing_changes() {
    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"true\"]\n",
    )]);
    let before = repo.state();
    let patch = "diff --git a/../escape.txt b/../escape.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../escape.txt\n@@ -0,0 +1 @@\n+pwned\n";
    let file = repo.home.path().join("evil.diff");
    std::fs::write(&file, patch).unwrap();
    let (_, out) = repo.verify(&["--patch", file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!repo.path().parent().unwrap().join("escape.txt").exists());
    assert_eq!(repo.state(), before);
}

#[test]
fn candidate_patch_cannot_rewrite_the_plan() {
    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"test -f ok\"]\n",
    )]);
    let patch = "diff --git a/cordon.toml b/cordon.toml\n--- a/cordon.toml\n+++ b/cordon.toml\n@@ -3 +3 @@\n-run = [\"sh\", \"-c\", \"test -f ok\"]\n+run = [\"true\"]\n";
    let file = repo.home.path().join("weaken.diff");
    std::fs::write(&file, patch).unwrap();
    let (report, exit) = repo.verify_ok(&["--patch", file.to_str().unwrap()]);
    assert_eq!(exit, 1, "the committed plan judged the change");
    assert_eq!(stage(&report, "t").command, vec!["sh", "-c", "test -f ok"]);
}

#[test]
fn cargo_workspace_targeting_tests_only_changed_packages_and_dependents() {
    let repo = Repo::new(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n",
        ),
        (
            "crates/core/Cargo.toml",
            "[package]\nname = \"core\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "crates/core/src/lib.rs",
            "pub fn one() -> u32 { 1 }\n#[test]\nfn core_one() { assert_eq!(one(), 1); }\n",
        ),
        (
            "crates/app/Cargo.toml",
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ncore = { path = \"../core\" }\n",
        ),
        (
            "crates/app/src/lib.rs",
            "pub fn two() -> u32 { core::one() + 1 }\n#[test]\nfn app_two() { assert_eq!(two(), 2); }\n",
        ),
        (
            "crates/lone/Cargo.toml",
            "[package]\nname = \"lone\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "crates/lone/src/lib.rs",
            "#[test]\nfn lone_a() {}\n#[test]\nfn lone_b() {}\n",
        ),
    ]);
    let base = git(repo.path(), &["rev-parse", "HEAD"]).trim().to_owned();
    git(repo.path(), &["checkout", "-q", "-b", "feature"]);
    repo.commit(
        &[(
            "crates/lone/src/lib.rs",
            "#[test]\nfn lone_a() {}\n#[test]\nfn lone_b() {}\n#[test]\nfn lone_c() {}\n",
        )],
        "lone",
    );
    let (report, exit) = repo.verify_ok(&["--ref", "feature", "--base", &base]);
    assert_eq!(exit, 0, "{report:#?}");
    assert!(report.plan.targeted);
    assert_eq!(
        report.changed_files,
        vec!["crates/lone/src/lib.rs".to_owned()]
    );
    let test = stage(&report, "cargo-test");
    assert_eq!(
        test.command,
        vec!["cargo", "test", "--offline", "-p", "lone"]
    );
    assert_eq!(test.tests.unwrap().passed, 3);

    // A change to core selects core and its dependent app, not lone.
    let base2 = git(repo.path(), &["rev-parse", "HEAD"]).trim().to_owned();
    repo.commit(&[("crates/core/src/lib.rs", "pub fn one() -> u32 { 1 }\n#[test]\nfn core_one() { assert_eq!(one(), 1); }\n// touched\n")], "core");
    let (report, _) = repo.verify_ok(&["--ref", "feature", "--base", &base2]);
    let test = stage(&report, "cargo-test");
    assert_eq!(
        test.command,
        vec!["cargo", "test", "--offline", "-p", "app", "-p", "core"]
    );
    assert_eq!(test.tests.unwrap().passed, 2);

    // A root change (fail closed): the full suite.
    repo.commit(
        &[(
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n# root\n",
        )],
        "root",
    );
    let (report, _) = repo.verify_ok(&["--ref", "feature", "--base", &base]);
    assert_eq!(
        stage(&report, "cargo-test").command,
        vec!["cargo", "test", "--offline"]
    );
}

#[test]
fn node_project_scripts_are_detected_and_run() {
    let repo = Repo::new(&[
        (
            "package.json",
            r#"{"name":"demo","version":"1.0.0","scripts":{"test":"node --test","build":"node -e \"require('fs').writeFileSync('dist.txt','ok')\""}}"#,
        ),
        (
            "test/add.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 1, 2));\ntest('subtracts', () => assert.strictEqual(3 - 1, 2));\n",
        ),
    ]);
    let (report, exit) = repo.verify_ok(&[]);
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["npm-install", "npm-build", "npm-test"]);
    assert_eq!(exit, 0, "{report:#?}");
    assert_eq!(stage(&report, "npm-test").tests.unwrap().passed, 2);
}

#[test]
fn smoke_stages_wait_for_readiness_inside_the_sandbox() {
    let repo = Repo::new(&[(
        "cordon.toml",
        r#"
[[stage]]
name = "http"
category = "smoke"
run = ["python3", "-m", "http.server", "18431", "--bind", "127.0.0.1"]
ready = { tcp = 18431 }
timeout = "20s"

[[stage]]
name = "banner"
category = "smoke"
run = ["sh", "-c", "sleep 0.2; echo 'server listening on 7000'; sleep 60"]
ready = { stdout = "listening on \\d+" }
timeout = "20s"

[[stage]]
name = "never"
category = "smoke"
run = ["sleep", "60"]
ready = { stdout = "ready" }
timeout = "1s"
required = false

[[stage]]
name = "dies"
category = "smoke"
run = ["sh", "-c", "exit 3"]
ready = { tcp = 18432 }
required = false
"#,
    )]);
    let (report, exit) = repo.verify_ok(&[]);
    assert_eq!(exit, 0, "{report:#?}");
    assert_eq!(stage(&report, "http").status, StageStatus::Pass);
    assert_eq!(stage(&report, "banner").status, StageStatus::Pass);
    assert!(stage(&report, "banner").duration_ms < 15_000);
    let never = stage(&report, "never");
    assert_eq!(never.status, StageStatus::Fail);
    assert_eq!(
        never.failure.as_ref().unwrap().category,
        StageFailureCategory::Smoke
    );
    let dies = stage(&report, "dies");
    assert_eq!(dies.status, StageStatus::Fail);
    assert!(
        dies.failure
            .as_ref()
            .unwrap()
            .reason
            .contains("before it was ready")
    );
}

#[test]
fn junit_markdown_and_explain() {
    let repo = Repo::new(&[("cordon.toml", STAGES)]);
    let junit = repo.home.path().join("report.xml");
    let md = repo.home.path().join("report.md");
    let (report, _) = repo.verify_ok(&[
        "--junit",
        junit.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let xml = std::fs::read_to_string(&junit).unwrap();
    let check = Command::new("python3")
        .args(["-c", "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); print(len(d.getElementsByTagName('testcase')), len(d.getElementsByTagName('failure')), len(d.getElementsByTagName('skipped')))"])
        .arg(&junit)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "invalid XML: {}\n{xml}",
        String::from_utf8_lossy(&check.stderr)
    );
    // The optional lint's failure is reported as skipped ("optional: ..."), never as a
    // failure that would paint CI red: 1 failure (the timeout), 2 skipped (lint, after).
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "4 1 2");
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("blocked"));
    assert!(markdown.contains("| slow | test | yes |"));
    assert!(markdown.contains("<details>"));
    assert_eq!(report.stages.len(), 4);

    let out = cordon()
        .env("CORDON_HOME", repo.home.path())
        .args(["verify", "--explain", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Plan (cordon.toml)"), "{text}");
    assert!(text.contains("4. after"), "{text}");
    assert!(!repo.path().join("artifact.txt").exists());
}

#[test]
fn nothing_to_verify_is_a_usage_error() {
    let repo = Repo::new(&[("README.md", "hello\n")]);
    let (_, out) = repo.verify(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to verify"));
}

#[test]
fn npm_workspace_targeting_runs_only_changed_packages_and_dependents() {
    let pkg = |name: &str, deps: &str| {
        format!(r#"{{"name":"{name}","version":"1.0.0","scripts":{{"test":"node --test"}}{deps}}}"#)
    };
    let test_file = "const test = require('node:test');\ntest('ok', () => {});\n";
    let repo = Repo::new(&[
        (
            "package.json",
            r#"{"name":"root","private":true,"workspaces":["packages/*"]}"#,
        ),
        ("packages/util/package.json", &pkg("util", "")),
        ("packages/util/test/a.test.js", test_file),
        (
            "packages/web/package.json",
            &pkg("web", r#","dependencies":{"util":"1.0.0"}"#),
        ),
        ("packages/web/test/a.test.js", test_file),
        ("packages/cli/package.json", &pkg("cli", "")),
        ("packages/cli/test/a.test.js", test_file),
    ]);
    let base = git(repo.path(), &["rev-parse", "HEAD"]).trim().to_owned();
    repo.commit(
        &[("packages/util/index.js", "module.exports = 1;\n")],
        "util",
    );
    let (report, exit) = repo.verify_ok(&["--base", &base]);
    assert_eq!(exit, 0, "{report:#?}");
    let test = stage(&report, "npm-test");
    assert_eq!(
        test.command,
        vec![
            "npm",
            "run",
            "--silent",
            "test",
            "--workspace=util",
            "--workspace=web",
            "--if-present"
        ]
    );
    assert_eq!(
        test.tests.unwrap().passed,
        2,
        "one test in each selected package"
    );
    // Without a known change: every package.
    let (report, _) = repo.verify_ok(&[]);
    let test = stage(&report, "npm-test");
    assert_eq!(test.tests.unwrap().passed, 3);
}

#[test]
fn terminal_view_without_json_shows_stages_and_the_verdict() {
    let repo = Repo::new(&[("cordon.toml", STAGES)]);
    let out = cordon()
        .env("CORDON_HOME", repo.home.path())
        .args(["verify", "--keep-going", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "the human view goes to stderr");
    let text = String::from_utf8_lossy(&out.stderr);
    for want in [
        "▶ build (build)",
        "✓ pass build",
        "✗ timeout slow",
        "(optional) exited with code 1",
        "--- lint (last lines of stderr, optional) ---",
        "gate: BLOCKED by slow",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn interrupted_verify_cleans_up_and_a_killed_one_is_collected_by_gc() {
    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"long\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"touch started && exec sleep 60\"]\n",
    )]);
    let workspaces = repo.home.path().join("workspaces");
    let count = || {
        std::fs::read_dir(&workspaces)
            .map(|d| {
                d.flatten()
                    // `.ended` remembers ended workspaces' ids, not their trees.
                    .filter(|e| e.path().is_dir() && e.file_name() != ".ended")
                    .count()
            })
            .unwrap_or(0)
    };
    // The stage runs: it made `started` in its workspace (an overlay's upper layer at
    // `workspaces/ID/layer/upper`, or a git worktree at `workspaces/ID/tree`).
    let wait_for_the_stage = || {
        support::wait_until(
            "the stage started",
            std::time::Duration::from_secs(30),
            || {
                std::fs::read_dir(&workspaces).is_ok_and(|d| {
                    d.flatten().any(|e| {
                        e.path().join("layer/upper/started").exists()
                            || e.path().join("tree/started").exists()
                    })
                })
            },
        );
    };
    let spawn = || {
        cordon()
            .env("CORDON_HOME", repo.home.path())
            .args(["verify", "--json", "--repo"])
            .arg(repo.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };

    // Ctrl-C: the stage is ended, the report still comes, the workspace is removed.
    let child = spawn();
    wait_for_the_stage();
    support::signal(child.id() as i32, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let report: RunReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report.overall, Overall::Error);
    assert!(!report.promotion.allowed);
    assert_eq!(count(), 0, "the transient workspace is removed on Ctrl-C");

    // SIGKILL: nothing can clean up; the next gc does.
    let mut child = spawn();
    wait_for_the_stage();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(count(), 1, "a SIGKILL leaves the workspace behind");
    let out = cordon()
        .env("CORDON_HOME", repo.home.path())
        .args(["gc", "--json"])
        .output()
        .unwrap();
    let gc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        gc["workspaces"]["removed"].as_array().unwrap().len(),
        1,
        "{gc:#}"
    );
    assert_eq!(gc["runs"]["marked_interrupted"], 1, "{gc:#}");
    assert_eq!(count(), 0);
    assert!(!git(repo.path(), &["worktree", "list"]).contains("workspaces"));
}

#[test]
fn python_project_with_pytest_is_detected_and_counts_agree() {
    let repo = Repo::new(&[
        (
            "pyproject.toml",
            "[project]\nname = \"demo\"\nversion = \"0.1\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
        ),
        ("demo.py", "def add(a, b):\n    return a + b\n"),
        (
            "tests/test_demo.py",
            "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\nimport demo\n\ndef test_add():\n    assert demo.add(1, 2) == 3\n\ndef test_more():\n    assert demo.add(2, 2) == 4\n",
        ),
    ]);
    let (report, exit) = repo.verify_ok(&[]);
    assert_eq!(exit, 0, "{report:#?}");
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["python-compile", "pytest"]);
    let direct = Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&direct.stdout).contains("2 passed"));
    assert_eq!(stage(&report, "pytest").tests.unwrap().passed, 2);
}

/// The detected Python checks run side by side (a warm verification's compile check no longer
/// waits for nor delays the tests); a syntax error still blocks as a compile failure named by
/// the compile stage, the first in plan order, though pytest ran beside it and failed too.
#[test]
fn python_checks_run_side_by_side_and_a_syntax_error_is_still_a_compile_failure() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[
        (
            "pyproject.toml",
            "[project]\nname = \"demo\"\nversion = \"0.1\"\n",
        ),
        ("demo.py", "def add(a, b):\n    return a + b\n"),
        (
            "tests/test_demo.py",
            "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\nimport demo\n\ndef test_add():\n    assert demo.add(1, 2) == 3\n",
        ),
    ]);
    let (report, exit) = repo.verify_ok(&[]);
    assert_eq!(exit, 0, "{report:#?}");
    // An uncommitted edit: a candidate over the kept build, whose checks run side by side
    // (a trusted build runs them one after another).
    std::fs::write(
        repo.path().join("demo.py"),
        "def add(a, b:\n    return a + b\n",
    )
    .unwrap();
    let (report, exit) = repo.verify_ok(&[]);
    assert_eq!(exit, 1, "{report:#?}");
    let failure = report.failure.as_ref().unwrap();
    assert_eq!(
        (failure.stage.as_deref(), failure.category),
        (Some("python-compile"), StageFailureCategory::Compile),
        "{failure:#?}"
    );
    assert!(failure.reason.contains("demo.py:1"), "{failure:#?}");
    // Side by side: pytest was not skipped by the compile failure (fail fast skips only
    // the stages after a group).
    assert_eq!(
        stage(&report, "pytest").status,
        StageStatus::Fail,
        "{report:#?}"
    );
}

#[test]
fn a_symlink_cannot_lead_a_stage_out_of_the_workspace() {
    let victim = TestDir::new();
    let repo = Repo::new(&[(
        "cordon.toml",
        "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"echo owned > pwned\"]\ncwd = \"sub\"\n",
    )]);
    // The candidate patch adds `sub` as a symlink to a host directory.
    let patch = format!(
        "diff --git a/sub b/sub\nnew file mode 120000\n--- /dev/null\n+++ b/sub\n@@ -0,0 +1 @@\n+{}\n\\ No newline at end of file\n",
        victim.path().display()
    );
    let file = repo.home.path().join("link.diff");
    std::fs::write(&file, patch).unwrap();
    let (report, out) = repo.verify(&["--patch", file.to_str().unwrap()]);
    assert!(
        !victim.path().join("pwned").exists(),
        "the stage wrote outside the workspace"
    );
    if let Some(report) = report {
        assert!(!report.promotion.allowed);
    } else {
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn smoke_stages_fail_when_the_program_ends_or_only_stderr_matches() {
    let repo = Repo::new(&[(
        "cordon.toml",
        r#"
[[stage]]
name = "quits"
category = "smoke"
run = ["sh", "-c", "echo starting; exit 0"]
ready = { stdout = "listening on" }
required = false

[[stage]]
name = "stderr"
category = "smoke"
run = ["sh", "-c", "echo 'error: not listening on 80' >&2; sleep 30"]
ready = { stdout = "listening on" }
timeout = "1s"
required = false
"#,
    )]);
    let (report, _) = repo.verify_ok(&["--keep-going"]);
    let quits = stage(&report, "quits");
    assert_eq!(quits.status, StageStatus::Fail);
    assert!(
        quits
            .failure
            .as_ref()
            .unwrap()
            .reason
            .contains("before it was ready")
    );
    assert_eq!(stage(&report, "stderr").status, StageStatus::Fail);
}

#[test]
fn a_decoy_manifest_in_the_patch_cannot_pick_the_tests() {
    let repo = Repo::new(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n",
        ),
        (
            "crates/a/Cargo.toml",
            "[package]\nname = \"a\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("crates/a/src/lib.rs", "#[test]\nfn a_works() {}\n"),
        (
            "crates/b/Cargo.toml",
            "[package]\nname = \"b\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\na = { path = \"../a\" }\n",
        ),
        ("crates/b/src/lib.rs", "#[test]\nfn b_works() {}\n"),
        (
            "crates/c/Cargo.toml",
            "[package]\nname = \"c\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("crates/c/src/lib.rs", "#[test]\nfn c_works() {}\n"),
    ]);
    // The change touches `a` and plants a manifest named `c` inside it.
    std::fs::write(
        repo.path().join("crates/a/src/lib.rs"),
        "#[test]\nfn a_works() {}\n// edit\n",
    )
    .unwrap();
    std::fs::write(
        repo.path().join("crates/a/src/Cargo.toml"),
        "[package]\nname = \"c\"\n",
    )
    .unwrap();
    git(repo.path(), &["add", "-A"]);
    let patch = git(repo.path(), &["diff", "--cached"]);
    git(repo.path(), &["reset", "-q", "--hard"]);
    let file = repo.home.path().join("decoy.diff");
    std::fs::write(&file, patch).unwrap();
    assert_eq!(
        repo.planned_command(&["--patch", file.to_str().unwrap()], "cargo-test"),
        serde_json::json!(["cargo", "test", "--offline", "-p", "a", "-p", "b"])
    );
}

#[test]
fn a_change_outside_the_project_runs_the_full_suite() {
    let repo = Repo::new(&[
        (
            "app/Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n",
        ),
        (
            "app/crates/a/Cargo.toml",
            "[package]\nname = \"a\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("app/crates/a/src/lib.rs", "\n"),
        (
            "app/crates/b/Cargo.toml",
            "[package]\nname = \"b\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nshared = { path = \"../../../shared\" }\n",
        ),
        ("app/crates/b/src/lib.rs", "\n"),
        (
            "shared/Cargo.toml",
            "[package]\nname = \"shared\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("shared/src/lib.rs", "\n"),
    ]);
    let base = git(repo.path(), &["rev-parse", "HEAD"]).trim().to_owned();
    let explain =
        |base: &str| repo.planned_command(&["--project", "app", "--base", base], "cargo-test");
    repo.commit(&[("app/crates/a/src/lib.rs", "// a\n")], "a only");
    assert_eq!(
        explain(&base),
        serde_json::json!(["cargo", "test", "--offline", "-p", "a"])
    );
    // `shared` lies outside the project; `b` depends on it: everything runs.
    repo.commit(&[("shared/src/lib.rs", "// shared\n")], "shared");
    assert_eq!(
        explain(&base),
        serde_json::json!(["cargo", "test", "--offline"])
    );
}

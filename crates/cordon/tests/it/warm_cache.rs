//! Warm verification through the real binary: a trusted build of the base commit becomes a
//! read-only cache; candidates build on it in private layers and can never change what the
//! next verification sees.

use std::path::{Path, PathBuf};
use std::process::Output;

use cordon_types::{Overall, RunReport, StageStatus};

use crate::support;
use crate::support::{TestDir, cordon, git};

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
        for (name, text) in files {
            let path = repo.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", "base"]);
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A patch (`git diff`) that writes `files` over the committed tree.
    fn patch(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let scratch = TestDir::new();
        let clone = scratch.path().join("c");
        git(self.path(), &["clone", "-q", ".", clone.to_str().unwrap()]);
        for (file, text) in files {
            let path = clone.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(&clone, &["add", "-A"]);
        let diff = git(&clone, &["diff", "--cached", "--binary"]);
        let out = self.home.path().join(format!("{name}.diff"));
        std::fs::write(&out, diff).unwrap();
        out
    }

    fn verify(&self, args: &[&str]) -> (RunReport, Output) {
        let out = cordon()
            .env("CORDON_HOME", self.home.path())
            .args(["verify", "--json", "--repo"])
            .arg(self.path())
            .args(args)
            .output()
            .unwrap();
        let report: RunReport = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (report, out)
    }

    /// Verifies with `args` and requires the gate to pass (the panic shows cordon's stderr
    /// and the stages).
    #[track_caller]
    fn passes(&self, args: &[&str]) -> RunReport {
        let (report, out) = self.verify(args);
        assert_eq!(
            report.overall,
            Overall::Pass,
            "{}\n{:#?}",
            String::from_utf8_lossy(&out.stderr),
            report.stages
        );
        report
    }

    /// `cordon verify --explain` with `args`: its output (it must succeed).
    #[track_caller]
    fn explain(&self, args: &[&str]) -> String {
        let out = cordon()
            .env("CORDON_HOME", self.home.path())
            .args(["verify", "--explain", "--repo"])
            .arg(self.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The cache entry `key` (`caches/entries/<key>.json`).
    fn entry(&self, key: &str) -> serde_json::Value {
        let path = self.home.path().join(format!("caches/entries/{key}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// Every file name under the cache layers.
    fn cached_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut stack = vec![self.home.path().join("caches/layers")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                names.push(entry.file_name().to_string_lossy().into_owned());
                if entry.file_type().unwrap().is_dir() {
                    stack.push(path);
                }
            }
        }
        names
    }
}

fn stage<'a>(report: &'a RunReport, name: &str) -> &'a cordon_types::StageResult {
    report
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}: {report:#?}"))
}

const CARGO_TOML: &str = "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";
const LIB: &str = "pub fn value() -> u32 {\n    1\n}\n";
/// The test every verification runs: nothing a candidate planted is visible.
const CHECK: &str = r#"
use std::path::Path;

#[test]
fn nothing_planted_is_visible() {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    assert!(!target.join("POISON").exists(), "target/ was poisoned");
    let home = std::env::var("CARGO_HOME").unwrap();
    assert!(!Path::new(&home).join("registry/POISON").exists(), "the registry was poisoned");
    assert!(
        !std::fs::read_dir(target.join("debug/deps")).unwrap().flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("libp-")
                && name.ends_with(".rlib")
                && std::fs::metadata(e.path()).unwrap().len() == 0
        }),
        "a cached artefact was truncated"
    );
}

#[test]
fn value_is_what_the_candidate_says() {
    let expected: u32 = include_str!("../expected").trim().parse().unwrap();
    assert_eq!(p::value(), expected);
}
"#;

/// A candidate's build script that tries to poison every cache it can reach.
const POISON_BUILD_RS: &str = r#"
use std::path::Path;
fn main() {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::write(target.join("POISON"), "x");
    if let Ok(home) = std::env::var("CARGO_HOME") {
        let _ = std::fs::write(Path::new(&home).join("registry/POISON"), "x");
    }
    // Truncate what the trusted build made: the next verification would link garbage.
    for entry in std::fs::read_dir(target.join("debug/deps")).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("libp-") && name.ends_with(".rlib") {
            let _ = std::fs::write(entry.path(), b"");
        }
    }
}
"#;

#[test]
fn a_candidate_cannot_poison_the_trusted_cache_or_the_next_verification() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB),
        ("tests/check.rs", CHECK),
        ("expected", "1\n"),
    ]);
    // The base commit itself, without a patch: a trusted build, promoted.
    let warm = repo.passes(&[]);
    assert_eq!(warm.workspace.strategy, "overlay");
    let cache = warm.cache.clone().unwrap();
    let key = cache
        .promoted
        .clone()
        .expect("the trusted build made a cache");
    assert!(
        cache.places.iter().any(|p| p.starts_with("target/")),
        "{cache:#?}"
    );

    // A hostile candidate: its build script writes into target/, the registry, and truncates
    // the cached library. Its own verification may pass or fail; nothing of it may remain.
    let hostile = repo.patch(
        "hostile",
        &[
            ("build.rs", POISON_BUILD_RS),
            ("src/lib.rs", "pub fn value() -> u32 {\n    2\n}\n"),
            ("expected", "2\n"),
        ],
    );
    let (bad, _) = repo.verify(&["--patch", hostile.to_str().unwrap()]);
    let bad_cache = bad.cache.clone().unwrap();
    assert_eq!(bad_cache.used.as_deref(), Some(key.as_str()));
    assert_eq!(bad_cache.promoted, None, "a candidate is never promoted");
    assert!(!repo.cached_names().iter().any(|n| n == "POISON"));
    let home = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
    assert!(
        !home.join("registry/POISON").exists(),
        "the host's registry was written"
    );

    // The next candidate builds on the same cache and sees none of it.
    let clean = repo.patch(
        "clean",
        &[
            ("src/lib.rs", "pub fn value() -> u32 {\n    3\n}\n"),
            ("expected", "3\n"),
        ],
    );
    let (next, out) = repo.verify(&["--patch", clean.to_str().unwrap()]);
    assert_eq!(
        next.overall,
        Overall::Pass,
        "{}\n{:#?}",
        String::from_utf8_lossy(&out.stderr),
        stage(&next, "cargo-test")
    );
    assert_eq!(
        next.cache.as_ref().unwrap().used.as_deref(),
        Some(key.as_str())
    );
    // Its dependencies are the trusted build's: no fetch.
    let fetch = stage(&next, "cargo-fetch");
    assert_eq!(fetch.status, StageStatus::Skipped, "{fetch:#?}");
    assert!(
        fetch
            .skip_reason
            .as_deref()
            .unwrap()
            .contains("dependencies unchanged")
    );
    let counts = stage(&next, "cargo-test").tests.unwrap();
    assert_eq!((counts.passed, counts.failed), (2, 0));

    // A candidate that changes the manifest fetches again.
    let manifest = repo.patch(
        "manifest",
        &[(
            "Cargo.toml",
            &format!("{CARGO_TOML}description = \"changed\"\n"),
        )],
    );
    let (fetched, _) = repo.verify(&["--patch", manifest.to_str().unwrap()]);
    assert_eq!(stage(&fetched, "cargo-fetch").status, StageStatus::Pass);

    // `--cache off` builds cold and says so.
    let (cold, _) = repo.verify(&["--patch", clean.to_str().unwrap(), "--cache", "off"]);
    assert_eq!(cold.overall, Overall::Pass);
    assert_eq!(cold.cache.unwrap().used, None);
}

#[test]
fn concurrent_candidates_share_one_cache() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB),
        ("tests/check.rs", CHECK),
        ("expected", "1\n"),
    ]);
    let (warm, _) = repo.verify(&[]);
    let key = warm.cache.unwrap().promoted.expect("promoted");
    let patches: Vec<PathBuf> = (10..13)
        .map(|v| {
            repo.patch(
                &format!("v{v}"),
                &[
                    (
                        "src/lib.rs",
                        &format!("pub fn value() -> u32 {{\n    {v}\n}}\n"),
                    ),
                    ("expected", &format!("{v}\n")),
                ],
            )
        })
        .collect();
    let reports: Vec<RunReport> = std::thread::scope(|scope| {
        let handles: Vec<_> = patches
            .iter()
            .map(|p| scope.spawn(|| repo.verify(&["--patch", p.to_str().unwrap()]).0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for report in &reports {
        assert_eq!(report.overall, Overall::Pass, "{report:#?}");
        assert_eq!(
            report.cache.as_ref().unwrap().used.as_deref(),
            Some(key.as_str())
        );
    }
    // Every candidate's writes went with its workspace (`.ended` remembers ended workspaces'
    // ids, not their trees).
    let left: Vec<_> = std::fs::read_dir(repo.home.path().join("workspaces"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir() && e.file_name() != ".ended")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

const PACKAGE_JSON: &str = r#"{
  "name": "app",
  "version": "1.0.0",
  "dependencies": { "dep": "file:./dep" },
  "scripts": {
    "test": "node -e \"const fs = require('fs'); if (fs.existsSync('node_modules/POISON')) { console.error('node_modules was poisoned'); process.exit(1); } require('dep'); console.log('ok')\""
  }
}
"#;

#[test]
fn an_install_is_skipped_when_the_manifests_match_the_trusted_cache_and_its_scripts_cannot_poison_it()
 {
    if !support::overlay_available() {
        return;
    }
    if std::process::Command::new("npm")
        .arg("--version")
        .output()
        .is_err()
    {
        support::missing_capability("npm is not installed");
        return;
    }
    let repo = Repo::new(&[
        ("package.json", PACKAGE_JSON),
        (
            "dep/package.json",
            r#"{"name": "dep", "version": "1.0.0", "main": "index.js"}"#,
        ),
        ("dep/index.js", "module.exports = 1;\n"),
        ("index.js", "module.exports = require('dep');\n"),
    ]);
    let warm = repo.passes(&[]);
    let key = warm.cache.unwrap().promoted.expect("promoted");

    // A candidate that changes package.json (a postinstall hook writing into node_modules):
    // the install runs, in its private layer.
    let hooked = PACKAGE_JSON.replace(
        "\"test\":",
        "\"postinstall\": \"node -e \\\"require('fs').writeFileSync('node_modules/POISON', 'x')\\\"\",\n    \"test\":",
    );
    let hostile = repo.patch("hook", &[("package.json", &hooked)]);
    let (bad, _) = repo.verify(&["--patch", hostile.to_str().unwrap()]);
    assert_eq!(
        stage(&bad, "npm-install").status,
        StageStatus::Pass,
        "{bad:#?}"
    );
    assert_eq!(
        stage(&bad, "npm-test").status,
        StageStatus::Fail,
        "its own test sees its hook"
    );
    assert!(!repo.cached_names().iter().any(|n| n == "POISON"));

    // A candidate that leaves the manifests alone: no install at all, node_modules from the
    // trusted cache, none of the hook's writes.
    let clean = repo.patch(
        "clean",
        &[("index.js", "module.exports = require('dep') + 0;\n")],
    );
    let next = repo.passes(&["--patch", clean.to_str().unwrap()]);
    let install = stage(&next, "npm-install");
    assert_eq!(install.status, StageStatus::Skipped);
    assert!(
        install
            .skip_reason
            .as_deref()
            .unwrap()
            .contains("node_modules/ comes from the trusted cache"),
        "{install:#?}"
    );
    assert_eq!(next.cache.unwrap().used.as_deref(), Some(key.as_str()));
}

#[test]
fn explain_shows_the_cache_each_stage_uses_and_why() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB),
        ("tests/check.rs", CHECK),
        ("expected", "1\n"),
    ]);
    let explain = |args: &[&str]| repo.explain(args);
    let text = explain(&[]);
    assert!(text.contains("trusted build: the base commit"), "{text}");
    assert!(
        text.contains("target/: empty: a private layer to promote"),
        "{text}"
    );
    let patch = repo.patch("p", &[("src/lib.rs", "pub fn value() -> u32 { 1 }\n")]);
    let text = explain(&["--patch", patch.to_str().unwrap()]);
    assert!(text.contains("no trusted build cache of"), "{text}");
    repo.verify(&[]);
    let text = explain(&["--patch", patch.to_str().unwrap()]);
    assert!(text.contains("target/: trusted cache"), "{text}");
    assert!(
        text.contains("the same base tree it was built in"),
        "{text}"
    );
    assert!(
        text.contains("caches: build directories under a private layer"),
        "{text}"
    );
}

/// A Python project whose declared setup stage makes a virtual environment (`outputs`), and
/// may be skipped when none of its `inputs` changed. Like `pip install` running a package's
/// `setup.py`, the stage runs a file of the repository (`install_hook.py`): a candidate that
/// changes it runs its own code while the environment is made.
const PY_CONFIG: &str = r#"
[[stage]]
name = "venv"
category = "setup"
run = ["sh", "-c", "python3 -m venv --without-pip --system-site-packages .venv && site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))') && cp -r vendor/dep \"$site/\" && .venv/bin/python install_hook.py \"$site\""]
outputs = [".venv"]
inputs = ["requirements.txt", "vendor/**", "install_hook.py"]

[[stage]]
name = "pytest"
category = "test"
run = [".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
"#;

const PY_TEST: &str = r#"
import os
import sys

import app
import dep


def test_nothing_planted_is_visible():
    assert not os.path.exists(".venv/POISON"), "the environment was poisoned"
    assert dep.VALUE == 1, "the installed dependency was rewritten"
    assert sys.prefix.endswith(".venv")


def test_answer_is_what_the_candidate_says():
    with open("expected") as f:
        assert app.answer() == int(f.read())
"#;

/// A hostile `install_hook.py`: writes into the environment and rewrites what was installed.
const PY_POISON_HOOK: &str = r#"
import os, sys
site = sys.argv[1]
open(".venv/POISON", "w").write("x")
open(os.path.join(site, "dep", "__init__.py"), "w").write("VALUE = 666\n")
"#;

#[test]
fn a_python_environment_is_made_by_the_trusted_build_and_skipped_while_its_inputs_are_unchanged() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[
        ("cordon.toml", PY_CONFIG),
        ("requirements.txt", "dep==1\n"),
        ("vendor/dep/__init__.py", "VALUE = 1\n"),
        ("install_hook.py", "import sys\n"),
        ("app.py", "def answer():\n    return 1\n"),
        ("tests/test_app.py", PY_TEST),
        ("expected", "1\n"),
    ]);
    let warm = repo.passes(&[]);
    let cache = warm.cache.clone().unwrap();
    let key = cache
        .promoted
        .clone()
        .expect("the trusted build made a cache");
    assert!(
        cache.places.iter().any(|p| p.starts_with(".venv/")),
        "{cache:#?}"
    );

    // A candidate whose install hook poisons the environment: its inputs changed, so the
    // stage runs (in its private layer); its own test sees its hook.
    let hostile = repo.patch("hostile", &[("install_hook.py", PY_POISON_HOOK)]);
    let (bad, _) = repo.verify(&["--patch", hostile.to_str().unwrap()]);
    assert_eq!(stage(&bad, "venv").status, StageStatus::Pass, "{bad:#?}");
    assert_eq!(stage(&bad, "pytest").status, StageStatus::Fail, "{bad:#?}");
    let bad_cache = bad.cache.unwrap();
    assert_eq!(bad_cache.used.as_deref(), Some(key.as_str()));
    assert_eq!(bad_cache.promoted, None, "a candidate is never promoted");
    assert!(!repo.cached_names().iter().any(|n| n == "POISON"));

    // A candidate that changes the code only: no environment is made, the trusted one is
    // seen, none of the hook's writes.
    let clean = repo.patch(
        "clean",
        &[
            ("app.py", "def answer():\n    return 3\n"),
            ("expected", "3\n"),
        ],
    );
    let next = repo.passes(&["--patch", clean.to_str().unwrap()]);
    let venv = stage(&next, "venv");
    assert_eq!(venv.status, StageStatus::Skipped, "{venv:#?}");
    let why = venv.skip_reason.as_deref().unwrap();
    assert!(
        why.contains(".venv/ come(s) from the trusted cache") && why.contains("install_hook.py"),
        "{why}"
    );
    let counts = stage(&next, "pytest").tests.unwrap();
    assert_eq!((counts.passed, counts.failed), (2, 0));
    let text = repo.explain(&["--patch", clean.to_str().unwrap()]);
    assert!(text.contains(".venv/: trusted cache"), "{text}");

    // A candidate that changes requirements.txt makes its environment again.
    let reqs = repo.patch("reqs", &[("requirements.txt", "dep==1\n# pinned\n")]);
    let (again, _) = repo.verify(&["--patch", reqs.to_str().unwrap()]);
    assert_eq!(
        stage(&again, "venv").status,
        StageStatus::Pass,
        "{again:#?}"
    );
    assert_eq!(again.overall, Overall::Pass, "{again:#?}");
}

/// A declared stage that makes `out/` (a build directory of the cache) and appends to a file
/// in it, and a stage that checks how `out/` is mounted: `volatile` (overlayfs without its
/// syncs) exactly when `expect_volatile` says so.
const MOUNT_CONFIG: &str = r#"
[[stage]]
name = "make"
category = "setup"
run = ["sh", "-c", "if [ -f out/data ]; then [ \"$(cat out/data)\" = no ] || { echo 'out/data was changed:'; cat out/data; exit 3; }; fi; mkdir -p out && cat expect_volatile >> out/data"]
outputs = ["out"]
inputs = ["expect_volatile"]

[[stage]]
name = "mounts"
category = "test"
run = ["sh", "-c", """
line=$(grep -E '^([^ ]+ ){4}[^ ]*/out ' /proc/self/mountinfo) || { echo 'out/ is not a mount'; exit 2; }
echo "$line"
case "$line" in *,volatile*|*,fsync=volatile*) v=yes;; *) v=no;; esac
[ "$v" = "$(cat expect_volatile)" ] || { echo "volatile: $v"; exit 1; }
ws=$(grep -E "^([^ ]+ ){4}$(pwd) " /proc/self/mountinfo) || { echo 'the workspace is not a mount'; exit 2; }
case "$ws" in *volatile*) echo "the workspace's own layer is volatile: $ws"; exit 1;; esac
if [ $v = yes ]; then want=$(printf 'no\nyes'); else want=no; fi
[ "$(cat out/data)" = "$want" ] || { echo 'out/data:'; cat out/data; exit 1; }
"""]
"#;

#[test]
fn a_candidates_layers_are_mounted_volatile_and_a_trusted_builds_are_not() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[("cordon.toml", MOUNT_CONFIG), ("expect_volatile", "no\n")]);
    // The trusted build: its layers are kept (promoted), so they are mounted with syncs.
    let warm = repo.passes(&[]);
    assert!(warm.cache.unwrap().promoted.is_some());

    // Two candidates one after the other: each mounts its private layer volatile in both of
    // its stages (the second mount of a layer clears the mark the first left), rewrites a file
    // of the trusted layer (a copy-up), and sees only the trusted content at first.
    let candidate = repo.patch("volatile", &[("expect_volatile", "yes\n")]);
    for _ in 0..2 {
        let report = repo.passes(&["--patch", candidate.to_str().unwrap()]);
        assert_eq!(stage(&report, "make").status, StageStatus::Pass);
        assert_eq!(report.cache.unwrap().promoted, None);
    }
}

/// A Cargo project without a committed `Cargo.lock`: a stage that says whether the workspace
/// has one before anything ran (`expect_lock` says which), then the build.
const LOCK_CONFIG: &str = r#"
[[stage]]
name = "lock"
category = "lint"
run = ["sh", "-c", "if [ -f Cargo.lock ]; then v=yes; cat Cargo.lock; else v=no; fi; [ \"$v\" = \"$(cat expect_lock)\" ] || { echo \"Cargo.lock there: $v\"; exit 1; }"]

[[stage]]
name = "build"
category = "compile"
run = ["cargo", "build", "--offline"]
"#;

#[test]
fn a_candidate_gets_the_lockfile_its_trusted_build_resolved_unless_a_manifest_changed() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[
        ("cordon.toml", LOCK_CONFIG),
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB),
        ("expect_lock", "no\n"),
    ]);
    let warm = repo.passes(&[]);
    let key = warm.cache.unwrap().promoted.expect("promoted");
    let entry = repo.entry(&key);
    let kept = entry["made_lockfiles"]["Cargo.lock"].as_str().unwrap();
    assert!(kept.contains("name = \"p\""), "{kept}");

    let explain = |patch: &Path| repo.explain(&["--patch", patch.to_str().unwrap()]);
    // A candidate that changes code only starts with the trusted build's lockfile.
    let code = repo.patch(
        "code",
        &[
            ("src/lib.rs", "pub fn value() -> u32 {\n    2\n}\n"),
            ("expect_lock", "yes\n"),
        ],
    );
    let report = repo.passes(&["--patch", code.to_str().unwrap()]);
    assert!(
        stage(&report, "lock").stdout.head.contains("name = \"p\""),
        "{report:#?}"
    );
    let text = explain(&code);
    assert!(
        text.contains("Cargo.lock: the one the trusted build of"),
        "{text}"
    );

    // A candidate that changes a manifest resolves for itself.
    let manifest = repo.patch(
        "manifest",
        &[
            (
                "Cargo.toml",
                &format!("{CARGO_TOML}\n[features]\nextra = []\n"),
            ),
            ("expect_lock", "no\n"),
        ],
    );
    repo.passes(&["--patch", manifest.to_str().unwrap()]);
    assert!(!explain(&manifest).contains("Cargo.lock: the one"));

    // A commit with its own Cargo.lock: the trusted build keeps none (the candidates have it).
    let locked = Repo::new(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB),
        ("Cargo.lock", kept),
    ]);
    let warm = locked.passes(&[]);
    let key = warm.cache.unwrap().promoted.expect("promoted");
    let entry = locked.entry(&key);
    assert!(entry.get("made_lockfiles").is_none(), "{entry}");
}

/// Two parallel stages between two ordinary ones (the first makes `target/`, a cached
/// build directory). `expect_parallel` says whether the group
/// runs at once on private layers (`yes`, a candidate) or in turn on the shared ones (`no`,
/// the trusted build). Each parallel stage prints when it starts and ends, reads what the
/// stage before wrote, writes into the workspace and the build directory, and (at once)
/// must not see its sibling's writes, made while it sleeps. The stage after must see no
/// candidate's parallel writes, and the trusted build's.
const PARALLEL_CONFIG: &str = r#"
[[stage]]
name = "before"
category = "setup"
run = ["sh", "-c", "mkdir -p target && echo built > target/before"]
outputs = ["target"]

[[stage]]
name = "left"
category = "test"
parallel = true
run = ["sh", "-c", "echo start $(date +%s%N); cat target/before; echo $(cat expect_parallel) > target/left; echo x > left.txt; sleep 3; echo end $(date +%s%N); if [ \"$(cat expect_parallel)\" = yes ] && [ -e right.txt ]; then echo 'sees right.txt'; exit 1; fi; if [ \"$(cat expect_parallel)\" = yes ] && [ \"$(cat target/right 2>/dev/null)\" = yes ]; then echo 'sees target/right'; exit 1; fi"]

[[stage]]
name = "right"
category = "lint"
parallel = true
run = ["sh", "-c", "echo start $(date +%s%N); cat target/before; echo $(cat expect_parallel) > target/right; echo x > right.txt; sleep 3; echo end $(date +%s%N); if [ \"$(cat expect_parallel)\" = yes ] && [ -e left.txt ]; then echo 'sees left.txt'; exit 1; fi; if [ \"$(cat expect_parallel)\" = yes ] && [ \"$(cat target/left 2>/dev/null)\" = yes ]; then echo 'sees target/left'; exit 1; fi"]

[[stage]]
name = "after"
category = "test"
run = ["sh", "-c", "set -e; cat target/before; [ \"$(cat target/left)\" = no ]; [ \"$(cat target/right)\" = no ]; if [ \"$(cat expect_parallel)\" = yes ]; then [ ! -e left.txt ] && [ ! -e right.txt ]; else [ -e left.txt ] && [ -e right.txt ]; fi"]
"#;

/// The (start, end) times a parallel stage of [`PARALLEL_CONFIG`] printed.
fn interval(report: &RunReport, name: &str) -> (u128, u128) {
    let out = &stage(report, name).stdout.head;
    let time = |key: &str| -> u128 {
        out.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("{name} printed no {key:?}: {out}"))
            .trim()
            .parse()
            .unwrap()
    };
    (time("start "), time("end "))
}

#[test]
fn parallel_stages_run_at_once_on_layers_of_their_own_and_a_trusted_build_runs_them_in_turn() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[
        ("cordon.toml", PARALLEL_CONFIG),
        ("expect_parallel", "no\n"),
    ]);
    let trusted = repo.explain(&[]);
    assert!(
        trusted.contains(
            "parallel stages run one after another (left, right): this is a trusted build"
        ),
        "{trusted}"
    );
    // The trusted build: in turn, on the shared layers, which become the cache.
    let warm = repo.passes(&[]);
    assert!(warm.cache.as_ref().unwrap().promoted.is_some());
    let (left, right) = (interval(&warm, "left"), interval(&warm, "right"));
    assert!(left.1 <= right.0, "in turn: {left:?} then {right:?}");

    // A candidate: at once (each started before the other ended), each on its own layers.
    let candidate = repo.patch("parallel", &[("expect_parallel", "yes\n")]);
    let explained = repo.explain(&["--patch", candidate.to_str().unwrap()]);
    assert!(
        explained.contains("left [test, required, parallel: own layers;"),
        "{explained}"
    );
    let report = repo.passes(&["--patch", candidate.to_str().unwrap()]);
    let (left, right) = (interval(&report, "left"), interval(&report, "right"));
    assert!(
        left.0 < right.1 && right.0 < left.1,
        "the parallel stages did not overlap: {left:?} {right:?}"
    );
    assert_eq!(stage(&report, "after").status, StageStatus::Pass);
    // One at a time (`--parallel-stages 1`): in turn, and still each on layers of its own
    // (the second would see the first's files otherwise).
    let report = repo.passes(&[
        "--patch",
        candidate.to_str().unwrap(),
        "--parallel-stages",
        "1",
    ]);
    let (left, right) = (interval(&report, "left"), interval(&report, "right"));
    assert!(left.1 <= right.0, "one at a time: {left:?} then {right:?}");

    // The parallel stages alone: no stage before them made the shared layers, which their
    // own go over (`--stages` leaves the others out, so the gate does not pass).
    let (report, _) = repo.verify(&[
        "--patch",
        candidate.to_str().unwrap(),
        "--stages",
        "left,right",
    ]);
    for name in ["left", "right"] {
        assert_eq!(
            stage(&report, name).status,
            StageStatus::Pass,
            "{report:#?}"
        );
    }
}

/// A required parallel stage fails at once while its sibling still runs: the sibling ends
/// with its own result, the stage after the group is skipped (fail fast), the gate blocks.
const PARALLEL_FAILING_CONFIG: &str = r#"
[[stage]]
name = "fails"
category = "test"
parallel = true
run = ["sh", "-c", "echo broken; exit 3"]

[[stage]]
name = "slow"
category = "lint"
required = false
parallel = true
run = ["sh", "-c", "sleep 1; echo finished"]

[[stage]]
name = "after"
category = "test"
run = ["true"]
"#;

/// Two parallel stages and one after them, each printing the name of the sandbox's PID 1.
const PID1_CONFIG: &str = r#"
[[stage]]
name = "left"
category = "test"
parallel = true
run = ["cat", "/proc/1/comm"]

[[stage]]
name = "right"
category = "lint"
parallel = true
run = ["cat", "/proc/1/comm"]
"#;

/// While parallel stages run, cordon has a thread per stage; each sandbox is still built by
/// the helper executable installed beside cordon.
#[test]
fn parallel_stages_are_built_by_the_helper() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[("cordon.toml", PID1_CONFIG)]);
    let (report, out) = repo.verify(&["--cache", "off", "--parallel-stages", "2"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for name in ["left", "right"] {
        // The kernel keeps the first 15 bytes of a process name.
        assert_eq!(
            stage(&report, name).stdout.head,
            "cordon-sandbox-\n",
            "{report:#?}"
        );
    }
}

#[test]
fn a_worktree_workspace_runs_parallel_stages_in_turn_and_says_why() {
    if !support::sandbox_available() {
        return;
    }
    let repo = Repo::new(&[("cordon.toml", PARALLEL_FAILING_CONFIG)]);
    // A worktree has no layers of its own to give each stage: they run one after another,
    // writing the workspace as ordinary stages do.
    let out = cordon()
        .env("CORDON_HOME", repo.home.path())
        .env("CORDON_WORKSPACE_STRATEGY", "git-worktree")
        .args(["verify", "--explain", "--cache", "off", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "parallel stages run one after another (fails, slow): the workspace is a worktree"
        ),
        "{text}"
    );
    assert!(!text.contains("parallel: own layers"), "{text}");
}

#[test]
fn a_failing_parallel_stage_lets_its_sibling_finish_and_blocks_the_stages_after() {
    if !support::overlay_available() {
        return;
    }
    let repo = Repo::new(&[("cordon.toml", PARALLEL_FAILING_CONFIG)]);
    let (report, out) = repo.verify(&["--cache", "off"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(report.overall, Overall::Fail);
    assert_eq!(stage(&report, "fails").status, StageStatus::Fail);
    assert_eq!(stage(&report, "fails").exit_code, Some(3));
    let slow = stage(&report, "slow");
    assert_eq!(slow.status, StageStatus::Pass, "{slow:#?}");
    assert!(slow.stdout.head.contains("finished"), "{slow:#?}");
    let after = stage(&report, "after");
    assert_eq!(after.status, StageStatus::Skipped);
    assert!(
        after
            .skip_reason
            .as_deref()
            .unwrap()
            .contains("required stage `fails` did not pass"),
        "{after:#?}"
    );
    // The stages keep their order in the report, whatever order they ended in.
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fails", "slow", "after"]);
}

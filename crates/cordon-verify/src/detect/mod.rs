//! Zero-config detection: a plan from the project's own files when there is no `cordon.toml`.
//!
//! Style stages (fmt, clippy, eslint, ruff, vet) are optional — reported, never gating —
//! because many healthy projects are not clean under today's linters; build, type-check and
//! test stages gate. Setup stages fetch dependencies with the network on and writable caches;
//! every other stage runs offline with caches read-only.

use std::path::{Path, PathBuf};

use crate::tree::Dir;

use cordon_types::StageCategory;

use crate::config::{NetworkSetting, StageConfig};

mod installed;
mod python;

pub use installed::{Installed, Missing, PythonFacts, PythonProbe};

/// A detected plan: the stages and why each is there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Detected {
    /// The stages, in order.
    pub stages: Vec<StageConfig>,
    /// One line per decision.
    pub reasons: Vec<String>,
    /// Stages whose tool this host lacks: planned, but skipped with the reason.
    pub missing: Vec<Missing>,
}

/// The test command of an npm workspace without a root `test` script (every package's own).
pub(crate) const NPM_WORKSPACES_TEST: &[&str] = &[
    "npm",
    "run",
    "--silent",
    "test",
    "--workspaces",
    "--if-present",
];
/// The test command of a pnpm workspace without a root `test` script.
pub(crate) const PNPM_RECURSIVE_TEST: &[&str] = &["pnpm", "-r", "--if-present", "run", "test"];

/// The ecosystems cordon recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecosystem {
    /// `Cargo.toml`.
    Cargo,
    /// `package.json`.
    Node,
    /// `go.mod`.
    Go,
    /// `pyproject.toml`, `setup.py`, `setup.cfg`, `pytest.ini`, or pytest test files under
    /// `tests/` or `test/`.
    Python,
}

/// Detects the project at `root`, for this host's tools.
pub fn detect(root: &Dir) -> Detected {
    detect_on(root, &Installed::from_host())
}

/// Detects the project at `root` for a host with the tools `host` finds: a stage whose program
/// it lacks is planned as skipped ("pnpm is not installed on this host"), never run into an
/// infrastructure error.
pub fn detect_on(root: &Dir, host: &Installed) -> Detected {
    let mut found = Detected::default();
    if root.join("Cargo.toml").is_file() {
        cargo(root, &mut found);
    }
    if root.join("package.json").is_file() {
        node(root, &mut found);
    }
    if root.join("go.mod").is_file() {
        go(&mut found);
    }
    if let Some(marker) = python::marker(root) {
        python::detect(root, marker, &mut found, host);
    }
    for stage in &found.stages {
        let Some(program) = stage.run.first() else {
            continue;
        };
        if !found.missing.iter().any(|m| m.stage == stage.name) && host.program(program).is_none() {
            found.missing.push(Missing {
                stage: stage.name.clone(),
                reason: format!("{program} is not installed on this host"),
            });
        }
    }
    if found.stages.is_empty() {
        found.reasons.push(
            "no Cargo.toml, package.json, go.mod, pyproject.toml, setup.py, setup.cfg, pytest.ini or test files under tests/ at the repository root, and no cordon.toml"
                .into(),
        );
    }
    found
}

pub(crate) fn stage(
    name: &str,
    category: StageCategory,
    run: &[&str],
    required: bool,
) -> StageConfig {
    StageConfig {
        name: name.into(),
        category,
        run: run.iter().map(|s| (*s).to_owned()).collect(),
        timeout: None,
        memory: None,
        pids: None,
        network: None,
        env: Default::default(),
        secrets: Vec::new(),
        credentials: Vec::new(),
        cwd: None,
        required,
        when_changed: Vec::new(),
        ready: None,
        writable_caches: false,
        outputs: Vec::new(),
        inputs: Vec::new(),
        parallel: false,
        block_existing: false,
        fail_on_warnings: false,
    }
}

fn setup(name: &str, run: &[&str]) -> StageConfig {
    let mut s = stage(name, StageCategory::Setup, run, true);
    // The package registries the user's clients use, through cordon's proxy: a build script
    // or install hook of the candidate reaches nothing else.
    s.network = Some(NetworkSetting::Registry);
    s.writable_caches = true;
    s
}

/// A stage that runs alongside its parallel neighbours (see [`StageConfig::parallel`]): the
/// checks that only read what the stages before them built (tests, lints), which on a
/// warm verification leave cores idle one after another (measured on semver; BENCHMARKS.md).
fn parallel(mut s: StageConfig) -> StageConfig {
    s.parallel = true;
    s
}

fn offline(mut s: StageConfig, vars: &[(&str, &str)]) -> StageConfig {
    for (k, v) in vars {
        s.env.insert((*k).into(), (*v).into());
    }
    s
}

/// The compiler's diagnostics as JSON (code, level, message, `file:line:col` of the primary
/// span): the findings are read from them; the renderings show their `rendered` text.
const CARGO_JSON: &str = "--message-format=json";

/// The directory of the Cargo workspace `root` belongs to, relative to `root` (`""` or
/// `"../.."`): the highest manifest up to the top of the tree that declares `[workspace]`,
/// else `root` itself. Its `target/` is the build directory warm verification caches.
pub(crate) fn cargo_owner(root: &Dir) -> PathBuf {
    let mut up = PathBuf::new();
    let mut owner = PathBuf::new();
    let mut dir = root.clone();
    while !dir.rel().as_os_str().is_empty() {
        dir = dir.join("..");
        up.push("..");
        if manifest(&dir.join("Cargo.toml")).is_some_and(|t| t.contains_key("workspace")) {
            owner = up.clone();
        }
    }
    owner
}

/// A TOML file of the tree, if it parses (at most 1 MiB).
fn manifest(file: &Dir) -> Option<toml::Table> {
    file.read_limited(1 << 20)
        .ok()
        .and_then(|text| toml::from_str(&text).ok())
}

/// Whether the project chose its debug info itself: `debug` in `[profile.dev]` or
/// `[profile.test]` of its manifest, its workspace's, or their `.cargo/config.toml`.
fn chooses_debug_info(root: &Dir, owner: &Path) -> bool {
    let files = ["Cargo.toml", ".cargo/config.toml", ".cargo/config"];
    [root.clone(), root.join(owner)].iter().any(|dir| {
        files.iter().any(|file| {
            manifest(&dir.join(file)).is_some_and(|t| {
                ["dev", "test"].iter().any(|profile| {
                    t.get("profile")
                        .and_then(|p| p.get(profile))
                        .is_some_and(|p| p.get("debug").is_some())
                })
            })
        })
    })
}

fn cargo(root: &Dir, found: &mut Detected) {
    // Incremental compilation as Cargo does it by default (the project's profile decides):
    // a candidate's build starts from the trusted build's incremental state. (Measured with
    // the stages below: less CPU than without, on semver as on a small crate; BENCHMARKS.md.)
    let mut off = vec![("CARGO_NET_OFFLINE", "true")];
    // Line tables, not full debug info: panics' backtraces keep their files and lines, and
    // no debugger reads a verification's binaries (semver's warm build: about 15 % faster;
    // BENCHMARKS.md). A project that sets `debug` itself keeps its choice.
    let owner = cargo_owner(root);
    if chooses_debug_info(root, &owner) {
        found.reasons.push(
            "Cargo.toml: the project sets its own debug info (profile.dev/test `debug`): kept"
                .into(),
        );
    } else {
        off.extend([
            ("CARGO_PROFILE_DEV_DEBUG", "line-tables-only"),
            ("CARGO_PROFILE_TEST_DEBUG", "line-tables-only"),
        ]);
        found.reasons.push(
            "Cargo.toml: builds keep line tables, not full debug info (backtraces keep file:line; a project's own profile `debug` setting wins)"
                .into(),
        );
    }
    // Clippy builds in its own directory under `target/`: Cargo keeps one record of the
    // compiler it probed per target directory, and clippy's wrapper and the plain compiler
    // would each find the other's there and probe again (about 80 ms per candidate).
    let clippy_dir = owner.join("target").join("cordon-clippy");
    let clippy_dir = clippy_dir.to_string_lossy();
    found.reasons.push(format!(
        "Cargo.toml: clippy builds in {clippy_dir}, so that its compiler probe and the build's do not replace each other in one target directory"
    ));
    found.reasons.push(
        "Cargo.toml: cargo fetch (network), then offline and side by side fmt (optional), test (gating: it builds what `cargo test` builds, and a compile error fails it as a compile failure) and clippy (optional)"
            .into(),
    );
    found.reasons.push(
        "Cargo.toml: test and clippy take the targets `cargo test` builds (libraries, binaries, tests, examples; benches only those the project marks `test = true`), so nightly-only benches the project never runs on stable do not block"
            .into(),
    );
    // Warnings fail the stage by its findings, not by `-D warnings`: raised to errors they
    // would end cargo's check of a crate that has one before cargo records the check as done,
    // and every verification would check the crate again (serde_path_to_error, which has a
    // rustc warning; BENCHMARKS.md). Cargo replays a fresh crate's warnings, so a warm run
    // reports them as the first run did.
    let mut clippy = stage(
        "cargo-clippy",
        StageCategory::Lint,
        &[
            "cargo",
            "clippy",
            "--offline",
            "--tests",
            "--bins",
            "--examples",
            CARGO_JSON,
        ],
        false,
    );
    clippy.fail_on_warnings = true;
    found.stages.extend([
        setup("cargo-fetch", &["cargo", "fetch"]),
        parallel(offline(
            stage(
                "cargo-fmt",
                StageCategory::Lint,
                &["cargo", "fmt", "--all", "--check"],
                false,
            ),
            &off,
        )),
        parallel(offline(
            stage(
                "cargo-test",
                StageCategory::Test,
                &["cargo", "test", "--offline"],
                true,
            ),
            &off,
        )),
        parallel(offline(
            clippy,
            &[off.as_slice(), &[("CARGO_TARGET_DIR", &clippy_dir)]].concat(),
        )),
    ]);
}

/// The scripts of `package.json`, when it parses.
fn node_scripts(root: &Dir) -> Vec<String> {
    let Ok(text) = root.join("package.json").read_to_string() else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    value
        .get("scripts")
        .and_then(|s| s.as_object())
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The package's plain-JavaScript entry file (`main`, else `index.js`), when it exists.
fn node_entry(root: &Dir) -> Option<String> {
    let text = root.join("package.json").read_to_string().ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let main = value
        .get("main")
        .and_then(|m| m.as_str())
        .unwrap_or("index.js")
        .trim_start_matches("./");
    let plain = [".js", ".cjs", ".mjs"].iter().any(|e| main.ends_with(e));
    let safe = !main.starts_with('/') && !main.split('/').any(|p| p == "..");
    (plain && safe && root.join(main).is_file()).then(|| main.to_owned())
}

fn node(root: &Dir, found: &mut Detected) {
    let (pm, install): (&str, Vec<&str>) = if root.join("pnpm-lock.yaml").is_file() {
        ("pnpm", vec!["pnpm", "install", "--frozen-lockfile"])
    } else if root.join("yarn.lock").is_file() {
        ("yarn", vec!["yarn", "install", "--frozen-lockfile"])
    } else if root.join("bun.lockb").is_file() || root.join("bun.lock").is_file() {
        ("bun", vec!["bun", "install", "--frozen-lockfile"])
    } else if root.join("package-lock.json").is_file() {
        ("npm", vec!["npm", "ci", "--no-audit", "--no-fund"])
    } else {
        ("npm", vec!["npm", "install", "--no-audit", "--no-fund"])
    };
    let scripts = node_scripts(root);
    let lockfile = [
        "pnpm-lock.yaml",
        "yarn.lock",
        "bun.lockb",
        "bun.lock",
        "package-lock.json",
        "npm-shrinkwrap.json",
    ]
    .into_iter()
    .find(|l| root.join(l).is_file());
    let from = match lockfile {
        Some(lock) => format!("{pm} (from {lock})"),
        None => format!("{pm} (no lockfile)"),
    };
    found.reasons.push(format!(
        "package.json: {from} installs with network; scripts found: {}",
        if scripts.is_empty() {
            "none".to_owned()
        } else {
            scripts.join(", ")
        }
    ));
    found.stages.push(setup(&format!("{pm}-install"), &install));
    if let Some(entry) = node_entry(root) {
        found.reasons.push(format!(
            "package.json: `node --check {entry}` (compile) finds syntax errors before the tests"
        ));
        found.stages.push(stage(
            "node-check",
            StageCategory::Compile,
            &["node", "--check", &format!("./{entry}")],
            true,
        ));
    }
    let workspaces = crate::target::node_packages(root).filter(|p| !p.is_empty());
    if let Some(packages) = &workspaces {
        found.reasons.push(format!(
            "{} workspace packages: {}",
            pm,
            packages
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (script, category, required) in [
        ("lint", StageCategory::Lint, false),
        ("typecheck", StageCategory::Typecheck, true),
        ("build", StageCategory::Build, true),
        ("test", StageCategory::Test, true),
    ] {
        let workspace_test = script == "test"
            && workspaces.is_some()
            && !scripts.iter().any(|s| s == "test")
            && matches!(pm, "npm" | "pnpm");
        if workspace_test {
            // No root test script: run each workspace package's own, so that targeting can
            // narrow to the changed packages.
            let run = if pm == "npm" {
                NPM_WORKSPACES_TEST
            } else {
                PNPM_RECURSIVE_TEST
            };
            found
                .stages
                .push(stage(&format!("{pm}-test"), category, run, required));
        } else if scripts.iter().any(|s| s == script) {
            let run: Vec<&str> = match pm {
                "npm" => vec!["npm", "run", "--silent", script],
                other => vec![other, "run", script],
            };
            found
                .stages
                .push(stage(&format!("{pm}-{script}"), category, &run, required));
        }
    }
}

fn go(found: &mut Detected) {
    found.reasons.push(
        "go.mod: go mod download (network), then vet (optional), build and test (gating), offline"
            .into(),
    );
    let off = [("GOFLAGS", "-mod=mod"), ("GOPROXY", "off")];
    found.stages.extend([
        setup("go-mod-download", &["go", "mod", "download"]),
        offline(
            stage(
                "go-vet",
                StageCategory::Lint,
                &["go", "vet", "./..."],
                false,
            ),
            &off,
        ),
        offline(
            stage(
                "go-build",
                StageCategory::Compile,
                &["go", "build", "./..."],
                true,
            ),
            &off,
        ),
        offline(
            stage(
                "go-test",
                StageCategory::Test,
                &["go", "test", "./..."],
                true,
            ),
            &off,
        ),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(d: &Detected) -> Vec<(&str, bool)> {
        d.stages
            .iter()
            .map(|s| (s.name.as_str(), s.required))
            .collect()
    }

    #[test]
    fn cargo_project() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname='x'\n").unwrap();
        let d = detect(&Dir::host(dir.path()));
        assert_eq!(
            names(&d),
            vec![
                ("cargo-fetch", true),
                ("cargo-fmt", false),
                ("cargo-test", true),
                ("cargo-clippy", false)
            ]
        );
        assert_eq!(d.stages[0].network, Some(NetworkSetting::Registry));
        assert_eq!(d.stages[2].network, None);
        // Fmt, test and clippy run side by side after the fetch; builds keep line tables only;
        // clippy builds in a directory of its own under target/; no bench is built.
        let parallel: Vec<bool> = d.stages.iter().map(|s| s.parallel).collect();
        assert_eq!(parallel, [false, true, true, true]);
        assert!(d.stages.iter().all(|s| {
            !s.run
                .iter()
                .any(|a| a == "--all-targets" || a == "--benches")
        }));
        for s in &d.stages[1..] {
            assert_eq!(
                s.env.get("CARGO_PROFILE_DEV_DEBUG").map(String::as_str),
                Some("line-tables-only"),
                "{}",
                s.name
            );
        }
        assert_eq!(
            d.stages[3].env.get("CARGO_TARGET_DIR").map(String::as_str),
            Some("target/cordon-clippy")
        );
        assert_eq!(d.stages[2].env.get("CARGO_TARGET_DIR"), None);
        // Clippy's warnings fail it by its findings, not raised to errors (`-D warnings` would
        // keep cargo from recording a crate with a warning as checked).
        assert!(d.stages[3].fail_on_warnings);
        assert!(!d.stages[3].run.iter().any(|a| a == "-D" || a == "warnings"));
        assert!(d.stages.iter().filter(|s| s.fail_on_warnings).count() == 1);
    }

    #[test]
    fn a_cargo_workspace_member_points_clippy_at_the_workspaces_target_and_own_debug_settings_stay()
    {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[workspace]\nmembers = ['crates/app']\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("crates/app")).unwrap();
        std::fs::write(
            dir.path().join("crates/app/Cargo.toml"),
            "[package]\nname='app'\n",
        )
        .unwrap();
        let d = detect(&Dir::host(dir.path()).join("crates/app"));
        let clippy = d.stages.iter().find(|s| s.name == "cargo-clippy").unwrap();
        assert_eq!(
            clippy.env.get("CARGO_TARGET_DIR").map(String::as_str),
            Some("../../target/cordon-clippy")
        );
        assert!(clippy.env.contains_key("CARGO_PROFILE_DEV_DEBUG"));

        // The workspace's manifest chooses debug info: no stage overrides it.
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[workspace]\nmembers = ['crates/app']\n[profile.dev]\ndebug = 1\n",
        )
        .unwrap();
        let d = detect(&Dir::host(dir.path()).join("crates/app"));
        assert!(
            d.stages
                .iter()
                .all(|s| !s.env.contains_key("CARGO_PROFILE_DEV_DEBUG")),
            "{d:#?}"
        );
        // Nor at the workspace's top.
        let d = detect(&Dir::host(dir.path()));
        assert!(
            d.stages
                .iter()
                .all(|s| !s.env.contains_key("CARGO_PROFILE_DEV_DEBUG"))
        );
        // Nor when a `.cargo/config.toml` sets it for the test profile.
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname='x'\n").unwrap();
        std::fs::create_dir_all(dir.path().join(".cargo")).unwrap();
        std::fs::write(
            dir.path().join(".cargo/config.toml"),
            "[profile.test]\ndebug = true\n",
        )
        .unwrap();
        let d = detect(&Dir::host(dir.path()));
        assert!(
            d.stages
                .iter()
                .all(|s| !s.env.contains_key("CARGO_PROFILE_DEV_DEBUG"))
        );
    }

    #[test]
    fn node_project_uses_only_existing_scripts_and_the_lockfiles_manager() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts": {"test": "node --test", "lint": "eslint ."}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("pnpm-lock.yaml"), "").unwrap();
        let d = detect(&Dir::host(dir.path()));
        assert_eq!(
            names(&d),
            vec![
                ("pnpm-install", true),
                ("pnpm-lint", false),
                ("pnpm-test", true)
            ]
        );
    }

    #[test]
    fn stages_of_missing_programs_are_planned_as_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("go.mod"), "module x\n").unwrap();
        let d = detect_on(&Dir::host(dir.path()), &Installed::default());
        let missing: Vec<&str> = d.missing.iter().map(|m| m.reason.as_str()).collect();
        assert_eq!(missing, ["go is not installed on this host"; 4]);
        let here = detect_on(&Dir::host(dir.path()), &Installed::from_host());
        assert_eq!(
            here.missing.is_empty(),
            Installed::from_host().program("go").is_some()
        );
    }

    #[test]
    fn python_and_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pyproject.toml"),
            "[tool.ruff]\n[tool.pytest.ini_options]\n",
        )
        .unwrap();
        assert_eq!(
            names(&detect(&Dir::host(dir.path()))),
            vec![("ruff", false), ("pytest", true)]
        );
        let empty = tempfile::tempdir().unwrap();
        let d = detect(&Dir::host(empty.path()));
        assert!(d.stages.is_empty());
        assert!(d.reasons[0].contains("no Cargo.toml"));
    }
}

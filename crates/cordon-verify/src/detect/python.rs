//! Python projects (`pyproject.toml`): a compile stage, then the tools the project itself
//! configures — never a tool it does not.

use std::path::Path;

use crate::tree::Dir;

use cordon_types::StageCategory;

use super::{Detected, Installed, Missing, parallel, stage};

/// Directories `compileall` does not enter: hidden ones, virtual environments, vendored or
/// built trees.
const NOT_COMPILED: &str = r"(^|/)(\.[^/]+|venv|env|node_modules|build|dist|__pycache__)/";

/// What `compileall` checks: the package's own sources — the top-level modules and package
/// directories (with `__init__.py`), at the root or under `src/` — never the tests, whose data
/// may hold files that are broken on purpose. Paths start with `./` (never an option).
fn package_sources(root: &Dir) -> Vec<String> {
    let mut sources = Vec::new();
    for base in ["", "src"] {
        let names: Vec<(String, bool)> =
            root.join(base).entries().into_iter().take(10_000).collect();
        for (name, dir) in names {
            let hidden_or_tests =
                name.starts_with('.') || matches!(name.as_str(), "tests" | "test");
            let wanted = if dir {
                !hidden_or_tests && root.join(base).join(&name).join("__init__.py").is_file()
            } else {
                base.is_empty() && name.ends_with(".py") && !name.starts_with('.')
            };
            if wanted {
                let path = Path::new(".").join(base).join(&name);
                sources.push(path.display().to_string());
            }
        }
    }
    sources
}

/// The project's configuration files: `pyproject.toml` (parsed), `setup.cfg`, `tox.ini`.
struct PythonConfig {
    pyproject: toml::Table,
    setup_cfg: String,
    tox_ini: String,
}

impl PythonConfig {
    fn read(root: &Dir) -> PythonConfig {
        let text = |name: &str| root.join(name).read_to_string().unwrap_or_default();
        PythonConfig {
            pyproject: toml::from_str(&text("pyproject.toml")).unwrap_or_default(),
            setup_cfg: text("setup.cfg"),
            tox_ini: text("tox.ini"),
        }
    }

    /// Whether `pyproject.toml` has `[tool.NAME]`.
    fn tool(&self, name: &str) -> bool {
        self.pyproject
            .get("tool")
            .and_then(|t| t.as_table())
            .is_some_and(|t| t.contains_key(name))
    }
}

/// Whether an INI file has a `[section]` line.
fn has_section(ini: &str, section: &str) -> bool {
    ini.lines().any(|l| l.trim() == format!("[{section}]"))
}

/// Whether `dir` holds a pytest test file (`test_*.py`, `*_test.py`), two levels deep at most.
fn has_test_files(dir: &Dir, depth: u8) -> bool {
    dir.entries().into_iter().take(1000).any(|(name, is_dir)| {
        if is_dir {
            depth > 0 && has_test_files(&dir.join(&name), depth - 1)
        } else {
            name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
        }
    })
}

/// Where pytest's configuration was found, if anywhere.
fn pytest_configured(root: &Dir, config: &PythonConfig) -> Option<&'static str> {
    if config.tool("pytest") {
        Some("[tool.pytest] in pyproject.toml")
    } else if root.join("pytest.ini").is_file() {
        Some("pytest.ini")
    } else if has_section(&config.setup_cfg, "tool:pytest") {
        Some("[tool:pytest] in setup.cfg")
    } else if has_section(&config.tox_ini, "pytest") {
        Some("[pytest] in tox.ini")
    } else {
        test_folder(root)
    }
}

/// The folder of pytest test files (`test_*.py`, `*_test.py`, two levels deep at most), as
/// `--explain` names it: `test files under tests/` or `test files under test/`.
fn test_folder(root: &Dir) -> Option<&'static str> {
    [
        ("tests", "test files under tests/"),
        ("test", "test files under test/"),
    ]
    .into_iter()
    .find(|(dir, _)| has_test_files(&root.join(dir), 2))
    .map(|(_, why)| why)
}

/// What makes `root` a Python project: `pyproject.toml`, else `setup.py` or `setup.cfg`
/// (older packages), else pytest's own configuration (`pytest.ini`) or test files under
/// `tests/` or `test/` (a project pytest runs as it is).
pub(super) fn marker(root: &Dir) -> Option<&'static str> {
    ["pyproject.toml", "setup.py", "setup.cfg", "pytest.ini"]
        .into_iter()
        .find(|m| root.join(m).is_file())
        .or_else(|| test_folder(root))
}

/// The checks run side by side (see [`super::parallel`]): each only reads the sources, and on
/// a warm verification of a short test suite the compile check one after the tests was a
/// large share of the time (six: BENCHMARKS.md). A compile failure still comes first: the
/// gate names the first required stage in plan order that failed.
pub(super) fn detect(root: &Dir, marker: &str, found: &mut Detected, host: &Installed) {
    let config = PythonConfig::read(root);
    let sources = package_sources(root);
    if !sources.is_empty() {
        let mut run = vec!["python3", "-m", "compileall", "-q", "-x", NOT_COMPILED];
        run.extend(sources.iter().map(String::as_str));
        found.stages.push(parallel(stage(
            "python-compile",
            StageCategory::Compile,
            &run,
            true,
        )));
    }
    let mut configured: Vec<String> = Vec::new();
    let missing = |found: &mut Detected, name: &str, tool: &str, there: bool| {
        if !there {
            found.missing.push(Missing {
                stage: name.to_owned(),
                reason: format!("{tool} is not installed on this host"),
            });
        }
    };
    let ruff = config.tool("ruff")
        || root.join("ruff.toml").is_file()
        || root.join(".ruff.toml").is_file();
    if ruff {
        configured.push("ruff (its configuration)".into());
        found.stages.push(parallel(stage(
            "ruff",
            StageCategory::Lint,
            &["ruff", "check", "."],
            false,
        )));
        missing(found, "ruff", "ruff", host.program("ruff").is_some());
    }
    let mypy = config.tool("mypy")
        || root.join("mypy.ini").is_file()
        || root.join(".mypy.ini").is_file()
        || has_section(&config.setup_cfg, "mypy");
    if mypy {
        configured.push("mypy (its configuration)".into());
        found.stages.push(parallel(stage(
            "mypy",
            StageCategory::Typecheck,
            &["python3", "-m", "mypy", "."],
            true,
        )));
        missing(found, "mypy", "mypy", host.python_module("mypy"));
    }
    if let Some(why) = pytest_configured(root, &config) {
        configured.push(format!("pytest ({why})"));
        found.stages.push(parallel(stage(
            "pytest",
            StageCategory::Test,
            &["python3", "-m", "pytest", "-q"],
            true,
        )));
        missing(found, "pytest", "pytest", host.python_module("pytest"));
    }
    found.reasons.push(format!(
        "{marker}: {}tools configured: {}; no setup stage (declare one in cordon.toml to install dependencies)",
        if sources.is_empty() {
            String::new()
        } else {
            format!(
                "`python3 -m compileall` (compile) over {} finds syntax errors first; ",
                sources.join(" ")
            )
        },
        if configured.is_empty() {
            "none".to_owned()
        } else {
            configured.join(", ")
        }
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect_in(files: &[(&str, &str)], host: &Installed) -> Detected {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let mut found = Detected::default();
        let root = Dir::host(dir.path());
        let marker = marker(&root).expect("a Python project");
        detect(&root, marker, &mut found, host);
        found
    }

    fn names(d: &Detected) -> Vec<&str> {
        d.stages.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn only_configured_tools_run() {
        let host = Installed::from_host();
        let d = detect_in(
            &[("pyproject.toml", "[project]\nname='x'\n"), ("x.py", "")],
            &host,
        );
        assert_eq!(names(&d), ["python-compile"]);
        assert!(
            d.reasons[0].contains("tools configured: none"),
            "{:?}",
            d.reasons
        );
        // A `tests/` dir without test files configures nothing.
        let d = detect_in(&[("pyproject.toml", ""), ("tests/data.txt", "")], &host);
        assert!(names(&d).is_empty(), "no sources, no tests: nothing to run");
        for files in [
            &[("pyproject.toml", ""), ("pytest.ini", "[pytest]\n")][..],
            &[
                ("pyproject.toml", ""),
                ("setup.cfg", "[tool:pytest]\naddopts = -q\n"),
            ],
            &[("pyproject.toml", ""), ("tox.ini", "[tox]\n[pytest]\n")],
            &[("pyproject.toml", ""), ("tests/unit/test_x.py", "")],
        ] {
            let d = detect_in(files, &host);
            assert_eq!(names(&d), ["pytest"], "{files:?}");
        }
        let d = detect_in(
            &[
                ("pyproject.toml", ""),
                ("setup.cfg", "[mypy]\nstrict = True\n"),
            ],
            &host,
        );
        assert_eq!(names(&d), ["mypy"]);
    }

    #[test]
    fn test_files_alone_make_a_python_project_and_the_folder_is_named() {
        let host = Installed::from_host();
        let d = detect_in(
            &[("calc/__init__.py", ""), ("tests/test_calc.py", "")],
            &host,
        );
        assert_eq!(names(&d), ["python-compile", "pytest"]);
        // The checks run side by side.
        assert!(d.stages.iter().all(|s| s.parallel), "{:?}", d.stages);
        assert!(
            d.reasons[0].starts_with("test files under tests/: "),
            "{:?}",
            d.reasons
        );
        let d = detect_in(
            &[("pyproject.toml", ""), ("test/unit/test_x.py", "")],
            &host,
        );
        assert!(
            d.reasons[0].contains("pytest (test files under test/)"),
            "{:?}",
            d.reasons
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/data.txt"), "").unwrap();
        assert_eq!(marker(&Dir::host(dir.path())), None, "no test files");
    }

    #[test]
    fn an_older_package_with_setup_cfg_only_is_python_too() {
        let host = Installed::from_host();
        let d = detect_in(
            &[
                ("setup.cfg", "[tool:pytest]\nminversion = 2.2.0\n"),
                ("six.py", ""),
                ("test_six.py", ""),
            ],
            &host,
        );
        assert_eq!(names(&d), ["python-compile", "pytest"]);
        assert!(d.reasons[0].starts_with("setup.cfg: "), "{:?}", d.reasons);
    }

    #[test]
    fn compileall_checks_the_package_not_the_tests() {
        let host = Installed::from_host();
        let d = detect_in(
            &[
                ("pyproject.toml", ""),
                ("setup.py", ""),
                ("demo/__init__.py", ""),
                ("src/other/__init__.py", ""),
                ("scripts/tool.py", ""),
                ("tests/data/broken_on_purpose.py", "def ("),
                ("tests/test_x.py", ""),
            ],
            &host,
        );
        assert_eq!(
            d.stages[0].run[6..],
            ["./demo", "./setup.py", "./src/other"]
        );
    }

    #[test]
    fn a_tool_this_host_lacks_is_planned_as_skipped() {
        let nothing = Installed::default();
        let d = detect_in(
            &[(
                "pyproject.toml",
                "[tool.ruff]\n[tool.mypy]\n[tool.pytest.ini_options]\n",
            )],
            &nothing,
        );
        assert_eq!(names(&d), ["ruff", "mypy", "pytest"]);
        let missing: Vec<(&str, &str)> = d
            .missing
            .iter()
            .map(|m| (m.stage.as_str(), m.reason.as_str()))
            .collect();
        assert_eq!(
            missing,
            [
                ("ruff", "ruff is not installed on this host"),
                ("mypy", "mypy is not installed on this host"),
                ("pytest", "pytest is not installed on this host"),
            ]
        );
    }
}

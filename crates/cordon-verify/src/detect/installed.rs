//! Whether this host has the tools a detected stage would run: a stage whose tool is missing
//! is planned as skipped ("ruff is not installed on this host"), not run into an error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A detected stage this host cannot run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The stage's name.
    pub stage: String,
    /// Why it is skipped (`ruff is not installed on this host`).
    pub reason: String,
}

/// Looks tools up on this host.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// The directories of `PATH`.
    path: Vec<PathBuf>,
    /// The Python interpreter whose modules are looked up, when there is one.
    python: Option<PathBuf>,
    /// What a [`PythonProbe`] already found out about it.
    python_facts: Option<PythonFacts>,
}

/// The modules detection asks `python3` about (a [`PythonProbe`] asks for all at once).
const PROBED_MODULES: &[&str] = &["pytest", "mypy"];

/// The host's `python3`, as one process tells it: its version (`Python 3.11.7`, as `python3
/// --version` prints it) and which of the modules detection looks for it can import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PythonFacts {
    /// `Python 3.11.7`.
    pub version: String,
    /// The importable ones among pytest and mypy.
    pub modules: Vec<String>,
}

/// Asks `python3` for its [`PythonFacts`] on a thread of its own, while cordon does its git
/// work: an interpreter start costs 50-200 ms (more through a version manager's shim), once
/// per verification instead of once per question.
#[derive(Debug, Clone, Default)]
pub struct PythonProbe(std::sync::Arc<(Asking, std::sync::OnceLock<Option<PythonFacts>>)>);

/// The probe's thread, until its answer is taken.
type Asking = std::sync::Mutex<Option<std::thread::JoinHandle<Option<PythonFacts>>>>;

impl PythonProbe {
    /// Starts asking the `python3` on `PATH` (nothing when there is none).
    pub fn start() -> PythonProbe {
        let Some(python) = Installed::from_host().python else {
            return PythonProbe::default();
        };
        let thread = std::thread::spawn(move || python_facts(&python));
        PythonProbe(std::sync::Arc::new((
            std::sync::Mutex::new(Some(thread)),
            std::sync::OnceLock::new(),
        )))
    }

    /// The facts, waiting for the probe when it still runs; `None` when it was never started
    /// or `python3` did not answer.
    pub fn facts(&self) -> Option<PythonFacts> {
        let (thread, facts) = &*self.0;
        facts
            .get_or_init(|| {
                let handle = thread.lock().ok()?.take()?;
                handle.join().ok().flatten()
            })
            .clone()
    }
}

fn python_facts(python: &Path) -> Option<PythonFacts> {
    let out = Command::new(python)
        .args([
            "-s",
            "-c",
            "import importlib.util, sys\n\
             print('Python ' + sys.version.split()[0])\n\
             print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))",
        ])
        .args(PROBED_MODULES)
        .current_dir("/")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let version = lines.next()?.trim().to_owned();
    let modules = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    Some(PythonFacts { version, modules })
}

impl Installed {
    /// This host: cordon's own `PATH` (the sandbox binds the same toolchains read-only).
    pub fn from_host() -> Installed {
        let path: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        let mut installed = Installed {
            path,
            python: None,
            python_facts: None,
        };
        installed.python = installed.program("python3");
        installed
    }

    /// This host, with what `probe` found out about its `python3` (when it answered).
    pub fn from_host_probed(probe: &PythonProbe) -> Installed {
        let mut installed = Installed::from_host();
        installed.python_facts = probe.facts();
        installed
    }

    /// The executable `name` on `PATH`.
    pub fn program(&self, name: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        self.path.iter().map(|d| d.join(name)).find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    }

    /// Whether `python3` can import `module` (its own site-packages: the user site is out of
    /// the sandbox's sight, so `-s`).
    pub fn python_module(&self, module: &str) -> bool {
        let Some(python) = &self.python else {
            return false;
        };
        if let Some(facts) = &self.python_facts
            && PROBED_MODULES.contains(&module)
        {
            return facts.modules.iter().any(|m| m == module);
        }
        module_importable(python, module)
    }
}

fn module_importable(python: &Path, module: &str) -> bool {
    Command::new(python)
        .args([
            "-s",
            "-c",
            "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)",
            module,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_real_programs_and_modules() {
        let host = Installed::from_host();
        assert!(host.program("sh").is_some());
        assert!(host.program("no-such-program-cordon").is_none());
        assert!(
            host.python_module("json"),
            "python3 is on every machine of this kind"
        );
        assert!(!host.python_module("no_such_module_cordon"));
    }

    #[test]
    fn one_probe_answers_what_the_questions_would() {
        let probe = PythonProbe::start();
        let facts = probe.facts().expect("python3 answers");
        assert!(facts.version.starts_with("Python 3."), "{facts:?}");
        let asked = Installed::from_host();
        let probed = Installed::from_host_probed(&probe);
        for module in PROBED_MODULES {
            assert_eq!(
                probed.python_module(module),
                asked.python_module(module),
                "{module}"
            );
        }
        assert_eq!(probe.facts(), Some(facts), "asked once, kept");
        assert_eq!(PythonProbe::default().facts(), None);
    }
}

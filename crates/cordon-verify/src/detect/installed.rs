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
}

impl Installed {
    /// This host: cordon's own `PATH` (the sandbox binds the same toolchains read-only).
    pub fn from_host() -> Installed {
        let path: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        let mut installed = Installed { path, python: None };
        installed.python = installed.program("python3");
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
}

//! Daily use without traps (issue 34), through the real binary: workspaces that stay,
//! sandboxes that look normal, no lost commits, failures that say why, documentation examples that
//! run, quiet pipes and the smaller items. Real git repositories in temp dirs, the real
//! kernel sandbox, real processes; one module per trap.

mod docs_examples;
mod kept_commits;
mod masking;
#[cfg(feature = "server")]
mod no_debug;
#[cfg(feature = "server")]
mod pipes;
mod say_why;
#[cfg(feature = "server")]
mod service_logs;
#[cfg(feature = "server")]
mod small_items;
mod workspaces;

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{TestDir, cordon, git};

/// A host repository (branch `main`, one commit of `a.txt`) and a `CORDON_HOME` of its own.
pub(crate) struct Fixture {
    pub(crate) repo: TestDir,
    pub(crate) home: TestDir,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        Fixture::with_files(&[("a.txt", "alpha\n")])
    }

    /// A repository whose first commit holds `files` (path, contents).
    pub(crate) fn with_files(files: &[(&str, &str)]) -> Fixture {
        let f = Fixture {
            repo: TestDir::new(),
            home: TestDir::new(),
        };
        git(f.repo.path(), &["init", "-q", "-b", "main"]);
        for (path, contents) in files {
            let path = f.repo.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        git(f.repo.path(), &["add", "-A"]);
        git(f.repo.path(), &["commit", "-qm", "init"]);
        f
    }

    /// `cordon ARGS` in the repository, with the fixture's home.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = cordon();
        command
            .env("CORDON_HOME", self.home.path())
            .current_dir(self.repo.path())
            .args(args);
        command
    }

    pub(crate) fn cordon(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `cordon ARGS`, which must exit 0.
    #[track_caller]
    pub(crate) fn ok(&self, args: &[&str]) -> Output {
        let out = self.cordon(args);
        assert!(
            out.status.success(),
            "{args:?} exited {:?}:\n{}",
            out.status.code(),
            text(&out.stderr)
        );
        out
    }

    /// `cordon ARGS` (with `--json` among them), parsed.
    #[track_caller]
    pub(crate) fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out.stdout)))
    }

    pub(crate) fn repo_path(&self) -> &Path {
        self.repo.path()
    }
}

/// Bytes as text (lossy).
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

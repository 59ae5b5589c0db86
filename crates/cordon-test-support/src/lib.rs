//! What cordon's integration tests share, so that each crate's tests set their fixtures up the
//! same way instead of each keeping a copy.
//!
//! - [`TestDir`]: a temporary directory removed at the end of the test.
//! - [`git`] and [`repo_with`]: the real `git` in a hardened environment (no system or global
//!   configuration, no inherited `GIT_*` variable, a fixed identity) and a repository on
//!   branch `main` with files in one commit.
//! - [`cordon_bin`] and [`sandbox_helper`]: the built `cordon` and `cordon-sandbox-init`
//!   executables, found beside the test executable (`target/<profile>/`), for the tests of
//!   crates other than `cordon` (cargo gives `CARGO_BIN_EXE_*` only to the binaries' own
//!   package); [`cordon`]: the `cordon` command with this test run's own `CORDON_HOME`
//!   ([`test_home`]).
//! - [`missing_capability`]: a host that lacks a kernel feature (or PostgreSQL, or a browser)
//!   fails the test in CI and under `CORDON_REQUIRE_SANDBOX=1` ([`capabilities_required`]),
//!   and skips it, saying why, only elsewhere; [`sandbox_available`] and friends ask
//!   `cordon doctor`.
//! - [`wait_until`], [`wait_dead`], [`signal`], ...: processes seen from outside.
//! - [`server::Server`]: a real `cordon serve` and an HTTP/1.1 client for it;
//!   [`postgres::Database`]: a database of its own on the throw-away PostgreSQL cluster of
//!   `scripts/test`.
//!
//! ```no_run
//! use cordon_test_support::{TestDir, cordon, git, repo_with};
//!
//! let dir = TestDir::new();
//! let repo = repo_with(dir.path(), &[("README", "hello\n")]);
//! assert_eq!(git(&repo, &["branch", "--show-current"]), "main\n");
//! let out = cordon().args(["run", "--", "true"]).current_dir(&repo).output().unwrap();
//! assert!(out.status.success());
//! ```
//!
//! A dev-dependency only: no crate of the workspace depends on it otherwise, and it depends on
//! no crate of cordon's, so that any of them may use it.

mod binaries;
mod capability;
mod dir;
mod git;
pub mod postgres;
pub mod postgres_relay;
mod process;
pub mod server;

pub use binaries::{cordon, cordon_bin, sandbox_helper, test_home};
pub use capability::{
    capabilities_required, cgroup_limits_available, doctor, missing_capability, overlay_available,
    sandbox_available,
};
pub use dir::TestDir;
pub use git::{git, git_bytes, git_command, repo_with};
pub use process::{is_alive, read_pid, signal, wait_dead, wait_reaped, wait_until, wait4};

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The crate is for tests: a crate of the workspace may have it among its
    /// `[dev-dependencies]`, never among its dependencies or build-dependencies.
    #[test]
    fn no_crate_depends_on_it_but_for_its_tests() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut manifests = 0;
        for entry in std::fs::read_dir(&crates).unwrap() {
            let manifest = entry.unwrap().path().join("Cargo.toml");
            let Ok(text) = std::fs::read_to_string(&manifest) else {
                continue;
            };
            manifests += 1;
            let mut section = String::new();
            for line in text.lines().map(str::trim) {
                if line.starts_with('[') {
                    section = line.to_owned();
                }
                let names_it = line.starts_with("cordon-test-support")
                    || (line.starts_with('[') && line.contains("cordon-test-support"));
                if names_it {
                    assert!(
                        section.starts_with("[dev-dependencies"),
                        "{}: cordon-test-support in {section}: it may only be a dev-dependency",
                        manifest.display()
                    );
                }
            }
        }
        assert!(
            manifests > 10,
            "read {manifests} manifests under {}",
            crates.display()
        );
    }
}

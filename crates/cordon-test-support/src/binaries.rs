//! The executables the `cordon` package builds, found the way the sandbox finds its helper
//! (`cordon-sandbox/src/helper.rs`): beside the running executable, or, for a test program that
//! cargo keeps in `target/<profile>/deps/`, in `target/<profile>/` — where cargo puts the
//! workspace's executables. Tests of the `cordon` package could use `CARGO_BIN_EXE_cordon`
//! (the same file); the tests of every other crate cannot, cargo gives it to the binary's own
//! package only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The `cordon` executable of this build (`target/<profile>/cordon`). Panics, saying how to
/// build it, when it is not there.
pub fn cordon_bin() -> PathBuf {
    built("cordon")
}

/// The sandbox helper of this build (`target/<profile>/cordon-sandbox-init`), which
/// `cargo build -p cordon` builds beside `cordon`. Panics, saying how to build it, when it is
/// not there.
pub fn sandbox_helper() -> PathBuf {
    built("cordon-sandbox-init")
}

/// The `cordon` command with this test run's throw-away `CORDON_HOME` (see [`test_home`]); a
/// test that needs a home of its own sets `CORDON_HOME` again.
pub fn cordon() -> Command {
    let mut command = Command::new(cordon_bin());
    command.env("CORDON_HOME", test_home());
    command
}

/// How long a home of an earlier test run is kept (for a look after a failure). A full run
/// leaves about 16 MiB (recorded transcripts).
const OLD_HOMES: Duration = Duration::from_secs(60 * 60);

/// The `CORDON_HOME` of this test run, out of the user's: `target/tmp/cordon-test-homes/RUN`
/// (cargo's `CARGO_TARGET_TMPDIR`), where RUN is nextest's run id (so every test process of
/// one `cargo nextest run` shares the home: concurrent use of one home is part of what cordon
/// supports), or this process's id under plain `cargo test`. Made once per process; homes of
/// runs older than an hour are removed then, so they do not pile up.
pub fn test_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let homes = target_tmp_dir().join("cordon-test-homes");
        let run = std::env::var("NEXTEST_RUN_ID")
            .ok()
            .filter(|id| !id.is_empty() && !id.contains('/') && !id.starts_with('.'))
            .unwrap_or_else(|| format!("pid-{}", std::process::id()));
        remove_old_homes(&homes, &run);
        let home = homes.join(run);
        std::fs::create_dir_all(&home)
            .unwrap_or_else(|e| panic!("test home {}: {e}", home.display()));
        home
    })
}

fn remove_old_homes(homes: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(homes) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > OLD_HOMES));
        if old && entry.file_name() != current {
            // Another process of an old run may be removing it too.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The executable `name` of this build, or a panic that says how to build it.
fn built(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let candidates = candidates(&exe, name);
    if let Some(found) = candidates.iter().find(|c| is_executable(c)) {
        return found.clone();
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    panic!(
        "error: no `{name}` executable beside this test ({})\n\
         hint: these tests run the real `{name}`, which the `cordon` package builds: \
         `cargo build -p cordon` first (or run the whole workspace's tests: `cargo nextest run \
         --workspace`, as scripts/test does)",
        looked.join(", ")
    );
}

/// Where `name` may be for an executable at `exe`: beside it, and above cargo's `deps/`.
fn candidates(exe: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = vec![exe.with_file_name(name)];
    if let Some(dir) = exe.parent()
        && dir.file_name().is_some_and(|n| n == "deps")
        && let Some(profile_dir) = dir.parent()
    {
        out.push(profile_dir.join(name));
    }
    out
}

/// Cargo's `CARGO_TARGET_TMPDIR` (`target/tmp`), which it gives to integration tests at
/// compile time only: the test executable is `target/<profile>/deps/NAME-HASH`.
fn target_tmp_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let target = exe
        .parent()
        .filter(|dir| dir.file_name().is_some_and(|n| n == "deps"))
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap_or_else(|| {
            panic!(
                "{} is not a test executable in cargo's target/<profile>/deps/",
                exe.display()
            )
        });
    target.join("tmp")
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executables_are_looked_for_beside_the_test_and_above_cargos_deps() {
        assert_eq!(
            candidates(Path::new("/w/target/debug/deps/it-0123"), "cordon"),
            [
                PathBuf::from("/w/target/debug/deps/cordon"),
                PathBuf::from("/w/target/debug/cordon")
            ]
        );
        assert_eq!(
            candidates(Path::new("/usr/local/bin/x"), "cordon"),
            [PathBuf::from("/usr/local/bin/cordon")]
        );
    }

    #[test]
    fn a_missing_executable_says_how_to_build_it() {
        let panic = std::panic::catch_unwind(|| built("cordon-no-such-program")).unwrap_err();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("`cargo build -p cordon`"), "{message}");
    }

    #[test]
    fn the_test_home_is_one_per_run_under_the_target_tmp_dir() {
        let home = test_home();
        assert!(home.is_dir());
        assert!(
            home.parent().unwrap().ends_with("tmp/cordon-test-homes"),
            "{}",
            home.display()
        );
    }
}

//! [`RunFiles`]: the host files cordon makes for one run (the scrubbed copies of a
//! repository's git configuration, a review round's items), kept under cordon's own state —
//! never in the shared `/tmp` — and removed when the run is done, or, when its cordon was
//! killed first, by the next cordon that makes some.

use std::path::{Path, PathBuf};

/// A private directory of one run's files, `$CORDON_HOME/run/<pid>-<what>-<n>` (mode 0700),
/// removed with everything in it when dropped. Directories of cordons that are gone (the pid
/// their name starts with no longer runs) are removed by [`RunFiles::make`].
#[derive(Debug)]
pub struct RunFiles {
    dir: PathBuf,
}

impl RunFiles {
    /// A new directory for `what` (a short word: `git`, `review`) under `$CORDON_HOME/run`
    /// (the system's temporary directory when there is no home).
    pub fn make(what: &str) -> std::io::Result<RunFiles> {
        let root = cordon_types::cordon_home()
            .map(|home| home.join("run"))
            .unwrap_or_else(|_| std::env::temp_dir().join("cordon-run"));
        Self::make_in(&root, what)
    }

    /// [`RunFiles::make`] under `root`.
    pub fn make_in(root: &Path, what: &str) -> std::io::Result<RunFiles> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)?;
        remove_abandoned(root);
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let pid = std::process::id();
        loop {
            let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = root.join(format!("{pid}-{what}-{n}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(RunFiles { dir }),
                // Left by an earlier process of the same pid that is not gone (pid reuse).
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RunFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes the directories under `root` whose cordon (the pid their name starts with) no
/// longer runs.
fn remove_abandoned(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = pid > 0 && Path::new("/proc").join(pid.to_string()).exists();
        // A directory of the landlock tier's scratch is its own business (it removes the
        // abandoned ones the same way): only ours, named `<pid>-<word>-<n>`.
        let ours = name
            .to_str()
            .and_then(|n| n.split('-').nth(1))
            .is_some_and(|w| w.chars().all(|c| c.is_ascii_lowercase()));
        if !alive && ours {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_files_go_with_their_handle_and_a_dead_cordons_with_the_next() {
        let root = tempfile::tempdir().unwrap();
        let files = RunFiles::make_in(root.path(), "git").unwrap();
        std::fs::write(files.path().join("config"), "x").unwrap();
        let dir = files.path().to_owned();
        drop(files);
        assert!(!dir.exists());
        // A cordon that was killed (no process can have this pid) left its files.
        let left = root.path().join("2147483647-git-0");
        std::fs::create_dir_all(&left).unwrap();
        std::fs::write(left.join("config"), "x").unwrap();
        let _next = RunFiles::make_in(root.path(), "git").unwrap();
        assert!(!left.exists());
    }
}

//! The landlock tier's private home and temporary directory: made under cordon's own state
//! for one run, removed when the run's [`Scratch`] is dropped, and — when cordon was killed
//! before it could remove them — by the next run that makes its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A run's private directories (`home/` and `tmp/` inside one directory of its own), removed
/// when the last clone of this handle is dropped.
#[derive(Clone)]
pub struct Scratch(Arc<ScratchDir>);

struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        remove(&self.0);
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Scratch").field(&self.0.0).finish()
    }
}

impl PartialEq for Scratch {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Scratch {}

impl Scratch {
    /// Makes the directories under `root` (created when missing), after removing those of
    /// runs whose cordon is gone.
    pub(crate) fn make(root: &Path) -> std::io::Result<Scratch> {
        std::fs::create_dir_all(root)?;
        remove_abandoned(root);
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let pid = std::process::id();
        let dir = loop {
            let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let dir = root.join(format!("{pid}-{n}-{nanos:08x}"));
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        };
        let scratch = Scratch(Arc::new(ScratchDir(dir.canonicalize()?)));
        for sub in ["home", "tmp"] {
            std::fs::create_dir(scratch.0.0.join(sub))?;
        }
        Ok(scratch)
    }

    /// The private home directory.
    pub fn home(&self) -> PathBuf {
        self.0.0.join("home")
    }

    /// The private temporary directory.
    pub fn tmp(&self) -> PathBuf {
        self.0.0.join("tmp")
    }

    /// Where the run's CA bundle is shown (beside `home/` and `tmp/`, read-only).
    pub fn ca_bundle(&self) -> PathBuf {
        self.0.0.join("ca-bundle.pem")
    }
}

/// Removes the directories under `root` whose cordon (the pid their name starts with) is no
/// longer running.
fn remove_abandoned(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok());
        let alive = pid.is_some_and(|pid| {
            rustix::process::Pid::from_raw(pid)
                .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
        });
        if pid.is_some() && !alive {
            remove(&entry.path());
        }
    }
}

/// Removes `dir` and everything in it, making directories writable first (a program may
/// have left one without permissions).
fn remove(dir: &Path) {
    if std::fs::remove_dir_all(dir).is_ok() {
        return;
    }
    fn open_up(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&entry.path());
            }
        }
    }
    open_up(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_is_removed_with_its_last_handle_and_abandoned_ones_by_the_next() {
        let root = tempfile::tempdir().unwrap();
        let s = Scratch::make(root.path()).unwrap();
        std::fs::write(s.tmp().join("f"), "x").unwrap();
        let again = s.clone();
        let dir = s.home().parent().unwrap().to_owned();
        drop(s);
        assert!(dir.exists());
        drop(again);
        assert!(!dir.exists());
        // One of a cordon that is gone (no process has pid 0 … the largest pid is far above
        // any live one here: use one that cannot exist).
        let abandoned = root.path().join("2147483647-dead");
        std::fs::create_dir_all(abandoned.join("tmp")).unwrap();
        let _next = Scratch::make(root.path()).unwrap();
        assert!(!abandoned.exists());
    }
}

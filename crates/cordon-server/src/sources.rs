//! Which local repositories a job may clone. A path is cloned on the server's host, with the
//! server's rights: a path into `/proc` (another job's working directory through
//! `/proc/PID/cwd`), or into cordon's own state (other projects' workspaces, the job store),
//! would hand one project another's data. Such paths are refused after every symlink in them
//! is resolved, at submission and again when the clone runs.

use std::path::{Path, PathBuf};

/// Directories no clone may read from, besides cordon's own state.
const SYSTEM_ROOTS: &[&str] = &["/proc", "/sys", "/dev"];

/// The local directory a clone source names (a path or a `file://` URL), or `None` for a
/// remote URL (one [`crate::service::clone_remote`] names a host of).
pub fn local_path(url: &str) -> Option<PathBuf> {
    if crate::service::clone_remote(url).is_some() {
        return None;
    }
    let path = match url.split_once("://") {
        Some((_, rest)) => rest,
        None => url,
    };
    Some(PathBuf::from(path))
}

/// Checks a local clone source against the places no job may read: returns the directory it
/// names with every symlink resolved (what to clone), or why it is refused. The path is
/// resolved by the kernel with magic links refused (`/proc/PID/cwd`, `/proc/PID/root`,
/// `/proc/self/fd/N`: they lead into other processes' views, wherever they appear, also
/// behind a symlink), then the directory reached is checked against `/proc`, `/sys`, `/dev`
/// and `state_dirs`.
pub fn check_local(path: &Path, state_dirs: &[PathBuf]) -> Result<PathBuf, String> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    if !path.is_absolute() {
        return Err(format!(
            "{} is not an absolute path (a local repository is named by its absolute path)",
            path.display()
        ));
    }
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| match e {
        rustix::io::Errno::XDEV | rustix::io::Errno::LOOP => format!(
            "{} leads through a process's view (/proc/PID/cwd, root or fd), which jobs may \
             not read",
            path.display()
        ),
        _ => format!("{} is not a readable directory", path.display()),
    })?;
    // Where the kernel got to (reading this link is how a descriptor's path is known).
    let real = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd)
    ))
    .map_err(|e| format!("cannot tell where {} leads: {e}", path.display()))?;
    let forbidden = SYSTEM_ROOTS.iter().map(PathBuf::from).chain(
        state_dirs
            .iter()
            .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone())),
    );
    for root in forbidden {
        // (A directory that merely holds one of them is fine: a clone reads the repository's
        // git directory, not the work tree around it.)
        if real.starts_with(&root) {
            return Err(format!(
                "{} is inside {}, which jobs may not read",
                path.display(),
                root.display()
            ));
        }
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_file_urls_are_local_and_the_rest_remote() {
        assert_eq!(local_path("/srv/repo"), Some(PathBuf::from("/srv/repo")));
        assert_eq!(
            local_path("file:///srv/repo"),
            Some(PathBuf::from("/srv/repo"))
        );
        assert_eq!(local_path("FILE:///x"), Some(PathBuf::from("/x")));
        assert_eq!(local_path("https://example.org/r.git"), None);
        assert_eq!(local_path("git@example.org:r.git"), None);
        assert_eq!(local_path("/srv/a:b"), Some(PathBuf::from("/srv/a:b")));
    }

    #[test]
    fn proc_state_and_relative_paths_are_refused_also_through_symlinks() {
        let state = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let own = std::process::id();
        for bad in [
            PathBuf::from(format!("/proc/{own}/cwd")),
            PathBuf::from("/proc/self/root"),
            PathBuf::from("/proc/self/root/tmp"),
            PathBuf::from("/proc/1"),
            PathBuf::from("/dev"),
            state.path().join("."),
            PathBuf::from("relative/repo"),
        ] {
            assert!(
                check_local(&bad, &[state.path().to_owned()]).is_err(),
                "{} was allowed",
                bad.display()
            );
        }
        let link = outside.path().join("link");
        std::os::unix::fs::symlink(state.path(), &link).unwrap();
        assert!(check_local(&link, &[state.path().to_owned()]).is_err());
        // A symlink into a process's view, and a path through it.
        let magic = outside.path().join("magic");
        std::os::unix::fs::symlink(format!("/proc/{own}"), &magic).unwrap();
        assert!(check_local(&magic.join("cwd"), &[state.path().to_owned()]).is_err());
        let fine = outside.path().join("repo");
        std::fs::create_dir(&fine).unwrap();
        assert_eq!(
            check_local(&fine, &[state.path().to_owned()]).unwrap(),
            fine.canonicalize().unwrap()
        );
    }
}

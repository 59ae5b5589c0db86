//! Which local repositories a job may clone. A path is cloned on the server's host, with the
//! server's rights: a path into `/proc` (another job's working directory through
//! `/proc/PID/cwd`), or into cordon's own state (other projects' workspaces, the job store),
//! would hand one project another's data. Such paths are refused after every symlink in them
//! is resolved, at submission and again when the clone runs.
//!
//! The directory named is not all git reads: a `.git` file (`gitdir: …`) or symlink, a
//! `commondir`, `objects/info/alternates` (and theirs in turn), a symlink anywhere in the git
//! data, or git's fallback to `NAME.git` beside an empty `NAME` lead anywhere. So
//! [`check_git_dir`] finds the git directory itself, refuses the source unless everything
//! git would read of it resolves inside the directory named, and the clone is made from that
//! git directory alone (`--no-local`, `upload-pack --strict`: no search, no gitfile, objects
//! sent as a pack, no alternates copied).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most entries of a source's git data [`check_git_dir`] looks at for symlinks.
const MAX_GIT_ENTRIES: usize = 500_000;

/// How deep alternates of alternates go (git's own limit is 5).
const MAX_ALTERNATE_DEPTH: usize = 5;

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

/// Resolves `path` by the kernel, magic links refused (`/proc/PID/root`, `/proc/self/fd/N`
/// lead into other processes' views whatever their text says): where it leads, or why not.
fn resolve(path: &Path) -> Result<PathBuf, String> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| format!("{} cannot be resolved: {e}", path.display()))?;
    std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd)
    ))
    .map_err(|e| format!("cannot tell where {} leads: {e}", path.display()))
}

/// `path` resolved, refused unless it is inside `source`: `what` names it in the reason.
fn inside(source: &Path, path: &Path, what: &str) -> Result<PathBuf, String> {
    let real = resolve(path)?;
    if real.starts_with(source) {
        Ok(real)
    } else {
        Err(format!(
            "{what} of {} leads to {}, outside the directory named: only a repository whose \
             git data is all inside it is cloned (not a worktree, a submodule checkout or a \
             repository with alternates; clone the main repository instead)",
            source.display(),
            real.display()
        ))
    }
}

/// The git directory of the local source `source` (as [`check_local`] resolved it), checked:
/// `source/.git` (a directory, or a `.git` file's `gitdir:`), or `source` itself when it is a
/// bare repository; refused unless that directory, its common directory (`commondir`), its
/// object directory, every alternate object directory (recursively) and the target of every
/// symlink in all of them resolve inside `source`. What to clone with `--no-local` and
/// `upload-pack --strict`, so that git reads this directory and nothing it would search for.
pub fn check_git_dir(source: &Path) -> Result<PathBuf, String> {
    let dot_git = source.join(".git");
    let git_dir = match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) if meta.is_file() => {
            let text = std::fs::read_to_string(&dot_git)
                .map_err(|e| format!("cannot read {}: {e}", dot_git.display()))?;
            let target = text
                .trim_end_matches(['\n', '\r'])
                .strip_prefix("gitdir: ")
                .ok_or_else(|| format!("{} is not a gitfile", dot_git.display()))?;
            inside(source, &source.join(target), "the .git file")?
        }
        Ok(_) => inside(source, &dot_git, ".git")?,
        Err(_) if is_git_dir(source) => source.to_owned(),
        Err(_) => {
            return Err(format!(
                "{} holds no repository (no .git, not a bare repository)",
                source.display()
            ));
        }
    };
    if !is_git_dir(&git_dir) {
        return Err(format!("{} is not a git directory", git_dir.display()));
    }
    let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => inside(
            source,
            &git_dir.join(text.trim_end_matches(['\n', '\r'])),
            "the commondir file",
        )?,
        Err(_) => git_dir.clone(),
    };
    let mut walk = vec![git_dir.clone(), common_dir.clone()];
    let mut objects = vec![inside(
        source,
        &common_dir.join("objects"),
        "the object directory",
    )?];
    for depth in 0..=MAX_ALTERNATE_DEPTH {
        let mut next = Vec::new();
        for dir in &objects {
            walk.push(dir.clone());
            let list = dir.join("info/alternates");
            let Ok(text) = std::fs::read_to_string(&list) else {
                continue;
            };
            for line in text.lines() {
                let line = line.trim_end_matches('\r');
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                if line.starts_with('"') {
                    return Err(format!("{} holds a quoted path", list.display()));
                }
                if depth == MAX_ALTERNATE_DEPTH {
                    return Err(format!("alternates of {} nest too deep", source.display()));
                }
                next.push(inside(
                    source,
                    &dir.join(line),
                    "an alternate object directory",
                )?);
            }
        }
        objects = next;
    }
    check_symlinks(source, walk)?;
    Ok(git_dir)
}

/// Whether `dir` looks like a git directory as git's `is_git_directory` sees it: `HEAD`, and
/// `objects` and `refs` (here or in its common directory).
fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file()
        && (dir.join("commondir").is_file()
            || (dir.join("objects").is_dir() && dir.join("refs").is_dir()))
}

/// Refuses a symlink under any of `roots` (and under the directories those symlinks lead to)
/// whose target resolves outside `source`; at most [`MAX_GIT_ENTRIES`] entries are looked at.
fn check_symlinks(source: &Path, roots: Vec<PathBuf>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let mut queue = roots;
    let mut entries = 0usize;
    while let Some(dir) = queue.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Ok(list) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in list.flatten() {
            entries += 1;
            if entries > MAX_GIT_ENTRIES {
                return Err(format!(
                    "the git data of {} has more than {MAX_GIT_ENTRIES} files to check",
                    source.display()
                ));
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_symlink() {
                let real = inside(source, &path, "a symlink in the git data")?;
                if real.is_dir() {
                    queue.push(real);
                }
            } else if kind.is_dir() {
                queue.push(path);
            }
        }
    }
    Ok(())
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

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn git_data_must_resolve_inside_the_source() {
        let top = tempfile::tempdir().unwrap();
        let top = top.path().canonicalize().unwrap();
        let main = top.join("main");
        std::fs::create_dir(&main).unwrap();
        git(&main, &["init", "-q", "-b", "main"]);
        git(
            &main,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ],
        );
        assert_eq!(check_git_dir(&main).unwrap(), main.join(".git"));
        // Bare: the directory itself.
        git(&top, &["clone", "-q", "--bare", "main", "bare.git"]);
        assert_eq!(
            check_git_dir(&top.join("bare.git")).unwrap(),
            top.join("bare.git")
        );
        // A gitfile into its own directory is fine; a worktree's leads outside.
        let own = top.join("own");
        std::fs::create_dir(&own).unwrap();
        std::fs::rename(top.join("bare.git"), own.join("data")).unwrap();
        std::fs::write(own.join(".git"), "gitdir: data\n").unwrap();
        assert_eq!(check_git_dir(&own).unwrap(), own.join("data"));
        git(&main, &["worktree", "add", "-q", "--detach", "../wt"]);
        let refused = check_git_dir(&top.join("wt")).unwrap_err();
        assert!(refused.contains("outside the directory named"), "{refused}");
        // Nothing to clone.
        let empty = top.join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(
            check_git_dir(&empty)
                .unwrap_err()
                .contains("holds no repository")
        );
        // A symlink in the refs that leads out.
        std::os::unix::fs::symlink("/etc/hostname", main.join(".git/refs/heads/out")).unwrap();
        let refused = check_git_dir(&main).unwrap_err();
        assert!(refused.contains("a symlink in the git data"), "{refused}");
    }
}

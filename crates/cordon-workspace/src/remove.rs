//! Removing a directory tree whatever a program left in it: any depth (30,000 nested
//! directories: no descriptor per level, no path longer than `PATH_MAX`), directories without
//! permissions (an overlay's `work/work` is mode 000), symlinks never followed.
//!
//! The walk holds one directory open at a time and climbs back through `..`, checking that
//! each parent is still the directory it came from (device and inode), so a tree changed
//! under the walk stops it instead of steering it elsewhere.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// A directory's identity, to recognise it again after climbing through `..`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
}

/// One directory of the descent: its name in its parent, and its subdirectories still to do.
struct Frame {
    name: OsString,
    identity: Identity,
    pending: Vec<OsString>,
}

/// Removes `path` and everything under it; a missing `path` is fine. A symlink at `path` is
/// removed itself, never followed.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    let meta = match path.symlink_metadata() {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return std::fs::remove_file(path);
    }
    let (parent, name) = match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => (parent, name.to_owned()),
        _ => return Err(std::io::Error::other("refusing to remove a root directory")),
    };
    let parent_path = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let top_parent = rustix::fs::open(
        parent_path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let top_parent_identity = identity(&top_parent)?;
    let mut current = open_dir(&top_parent, &name)?;
    let mut stack = vec![Frame {
        identity: identity(&current)?,
        pending: clear_files(&current)?,
        name,
    }];
    loop {
        let top = stack
            .last_mut()
            .expect("the stack holds the directory being emptied");
        if let Some(child) = top.pending.pop() {
            let next = open_dir(&current, &child)?;
            let frame = Frame {
                identity: identity(&next)?,
                pending: clear_files(&next)?,
                name: child,
            };
            current = next;
            stack.push(frame);
            continue;
        }
        let done = stack.pop().expect("checked above");
        let (up, expected) = match stack.last() {
            Some(parent) => (
                rustix::fs::openat(
                    &current,
                    "..",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )?,
                parent.identity,
            ),
            None => (top_parent.try_clone()?, top_parent_identity),
        };
        if identity(&up)? != expected {
            return Err(std::io::Error::other(format!(
                "{} changed while it was being removed",
                path.display()
            )));
        }
        rustix::fs::unlinkat(&up, &done.name, AtFlags::REMOVEDIR)?;
        if stack.is_empty() {
            return Ok(());
        }
        current = up;
    }
}

fn identity(fd: &OwnedFd) -> std::io::Result<Identity> {
    let st = rustix::fs::fstat(fd)?;
    Ok(Identity {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// Opens the subdirectory `name` of `dir` for reading, never through a symlink; a directory
/// without read or search permission (but ours) is given them first.
fn open_dir(dir: &OwnedFd, name: &OsString) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::ACCESS) => {
            // Pinned first (no symlink), made accessible, then opened as that same directory.
            let pinned = rustix::fs::openat(
                dir,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            rustix::fs::chmodat(dir, name, Mode::from_raw_mode(0o700), AtFlags::empty())?;
            let fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
            if identity(&fd)? != identity(&pinned)? {
                return Err(std::io::Error::other(
                    "a directory changed while it was being removed",
                ));
            }
            Ok(fd)
        }
        Err(e) => Err(e.into()),
    }
}

/// Unlinks every entry of `dir` that is not a directory; returns the subdirectories' names.
fn clear_files(dir: &OwnedFd) -> std::io::Result<Vec<OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let mut subdirs = Vec::new();
    let mut files = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsString::from(std::ffi::OsStr::from_bytes(name));
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => {
                let st = rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)?;
                FileType::from_raw_mode(st.st_mode) == FileType::Directory
            }
            _ => false,
        };
        if is_dir {
            subdirs.push(name);
        } else {
            files.push(name);
        }
    }
    for name in files {
        match rustix::fs::unlinkat(dir, &name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(subdirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_deep_trees_unreadable_directories_and_never_follows_symlinks() {
        let base = tempfile::tempdir().unwrap();
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        let tree = base.path().join("tree");
        // Deeper than PATH_MAX allows by path, and more levels than descriptors allowed.
        let mut dir = rustix::fs::open(base.path(), OFlags::RDONLY, Mode::empty()).unwrap();
        rustix::fs::mkdirat(&dir, "tree", Mode::from_raw_mode(0o755)).unwrap();
        dir = rustix::fs::openat(&dir, "tree", OFlags::RDONLY, Mode::empty()).unwrap();
        for _ in 0..5000 {
            rustix::fs::mkdirat(&dir, "d", Mode::from_raw_mode(0o755)).unwrap();
            let file = rustix::fs::openat(
                &dir,
                "f",
                OFlags::CREATE | OFlags::WRONLY,
                Mode::from_raw_mode(0o644),
            )
            .unwrap();
            drop(file);
            dir = rustix::fs::openat(&dir, "d", OFlags::RDONLY, Mode::empty()).unwrap();
        }
        rustix::fs::symlinkat(&outside, &dir, "link").unwrap();
        rustix::fs::mkdirat(&dir, "locked", Mode::from_raw_mode(0o755)).unwrap();
        let locked = rustix::fs::openat(&dir, "locked", OFlags::RDONLY, Mode::empty()).unwrap();
        rustix::fs::mkdirat(&locked, "inner", Mode::from_raw_mode(0o755)).unwrap();
        rustix::fs::chmodat(&dir, "locked", Mode::from_raw_mode(0o000), AtFlags::empty()).unwrap();
        drop((dir, locked));
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
        assert_eq!(std::fs::read_to_string(outside.join("keep")).unwrap(), "x");
        remove_tree(&tree).unwrap();
    }
}

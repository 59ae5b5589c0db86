//! A lockfile in an overlay workspace's upper layer, read and written without following a
//! symlink or leaving the layer: what a trusted build's tools wrote where the commit has no
//! lockfile (a library's `Cargo.lock`), and the same file seeded into a candidate's layer.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{CWD, FileType, Mode, OFlags, ResolveFlags};

/// A lockfile larger than this is neither kept nor seeded (Cargo's own are a few hundred KiB
/// for large workspaces).
const MAX_LOCKFILE: u64 = 8 << 20;

/// Inside the layer, without symlinks, `/proc` magic links or mount crossings.
fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH
        | ResolveFlags::NO_SYMLINKS
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV
}

fn open_layer(upper: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat2(
        CWD,
        upper,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    )?)
}

/// The file at `rel` (repository-relative) in the layer `upper`: `Ok(None)` when the layer
/// has nothing there, or something that is not a regular file (a whiteout, a FIFO); an
/// error for a symlink on the way or at `rel`, which is never followed.
pub(crate) fn read(upper: &Path, rel: &Path) -> std::io::Result<Option<String>> {
    let layer = open_layer(upper)?;
    let fd = match rustix::fs::openat2(
        &layer,
        rel,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
        beneath(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Ok(None);
    }
    if u64::try_from(st.st_size).unwrap_or(u64::MAX) > MAX_LOCKFILE {
        return Err(std::io::Error::other("larger than 8 MiB"));
    }
    let mut text = String::new();
    std::fs::File::from(fd)
        .take(MAX_LOCKFILE + 1)
        .read_to_string(&mut text)?;
    Ok(Some(text))
}

/// Writes `text` as a new file at `rel` (repository-relative) in the layer `upper`, making
/// the parent directories the layer lacks (an upper directory shows its lower's files too).
/// Fails when anything is already at `rel`, or on the way is not a directory of the layer.
/// The file appears whole or not at all: written under a temporary name, then renamed
/// without replacing anything.
pub(crate) fn seed(upper: &Path, rel: &Path, text: &str) -> std::io::Result<()> {
    let mut dir = open_layer(upper)?;
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(std::io::Error::other("not a file path"));
    };
    for part in parent.components() {
        let Component::Normal(part) = part else {
            return Err(std::io::Error::other("not a plain relative path"));
        };
        match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = rustix::fs::openat2(
            &dir,
            part,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
            beneath(),
        )?;
    }
    let mut temp = std::ffi::OsString::from(".cordon-seed-");
    temp.push(name);
    let fd = rustix::fs::openat2(
        &dir,
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o644),
        beneath(),
    )?;
    let written = std::fs::File::from(fd)
        .write_all(text.as_bytes())
        .and_then(|()| {
            rustix::fs::renameat_with(&dir, &temp, &dir, name, rustix::fs::RenameFlags::NOREPLACE)
                .map_err(std::io::Error::from)
        });
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, &temp, rustix::fs::AtFlags::empty());
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_lockfile_reads_back_and_is_never_written_over_anything() {
        let dir = tempfile::tempdir().unwrap();
        let upper = dir.path();
        seed(upper, Path::new("crates/app/Cargo.lock"), "lock\n").unwrap();
        assert_eq!(
            read(upper, Path::new("crates/app/Cargo.lock")).unwrap(),
            Some("lock\n".to_owned())
        );
        // Something already there (a file, a symlink) is left alone.
        assert!(seed(upper, Path::new("crates/app/Cargo.lock"), "other\n").is_err());
        std::os::unix::fs::symlink("/etc/passwd", upper.join("Cargo.lock")).unwrap();
        assert!(seed(upper, Path::new("Cargo.lock"), "x").is_err());
        assert!(read(upper, Path::new("Cargo.lock")).is_err());
        // A symlinked directory on the way is not followed out of the layer.
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), upper.join("sub")).unwrap();
        assert!(seed(upper, Path::new("sub/Cargo.lock"), "x").is_err());
        assert!(!outside.path().join("Cargo.lock").exists());
        assert!(seed(upper, Path::new("../Cargo.lock"), "x").is_err());
        // Nothing but the seeded files is left behind (no temporary file).
        let mut names: Vec<_> = std::fs::read_dir(upper.join("crates/app"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["Cargo.lock"]);
        // Nothing there, or not a regular file (a FIFO would block a plain read).
        assert_eq!(read(upper, Path::new("none/Cargo.lock")).unwrap(), None);
        rustix::fs::mknodat(
            CWD,
            upper.join("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert_eq!(read(upper, Path::new("fifo")).unwrap(), None);
    }
}

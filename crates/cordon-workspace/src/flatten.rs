//! Flattening frozen layers: several frozen layers merged into one new frozen layer that,
//! over the same base tree, shows exactly the same tree ([`Workspaces::flatten_layers`]).
//!
//! Frozen layers are overlayfs upper layers made under `userxattr` (see [`crate::frozen`]),
//! so the merge follows overlayfs's own rules for a stack of lower layers, topmost first:
//!
//! - the topmost layer that has a name decides what it is: a file, a symlink, a special
//!   file, a *whiteout* (a character device 0/0: the name is deleted) or a directory;
//! - a directory merges with the same directory of the layers below it, down to the first
//!   layer where it is *opaque* (`user.overlay.opaque` = `y`: nothing below shows through) or
//!   where the name is not a directory (a file or whiteout there ends the merge, and hides
//!   the base's entry too);
//! - everything else shows the base tree through.
//!
//! The merged layer keeps every whiteout (it must still hide the base's file) and marks a
//! directory opaque exactly when the stack hid what is below it. Redirects and metacopy are
//! not in play: overlayfs turns both off under `userxattr`.
//!
//! Nothing is copied: every non-directory of the merged layer is a hard link to the inode of
//! the layer it came from (frozen layers are never written again, so sharing their inodes is
//! safe, and hard links within a layer stay hard links). Modes, owners, timestamps and
//! extended attributes of files come with the inode; directories are made anew with the
//! mode, timestamps and `user.` extended attributes of the topmost directory of their merge.
//! Where a hard link is refused (too many links, another file system), the file is copied.
//!
//! The merge is built under a hidden name in `layers/` (`.flatten-<id>-<pid>-<start>`, which
//! gc deletes once its builder is gone) and published with its holds in one step.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Timespec, Timestamps, XattrFlags};

use crate::bases::BaseHolder;
use crate::error::WorkspaceError;
use crate::state::ProcessIdentity;
use crate::workspaces::Workspaces;

/// The extended attribute overlayfs (under `userxattr`) marks an opaque directory with.
const OPAQUE_XATTR: &str = "user.overlay.opaque";

/// The prefix of overlayfs's own extended attributes (under `userxattr`); a program's own
/// attribute of that name is stored escaped, as `user.overlay.overlay.…`.
const OVERLAY_PREFIX: &str = "user.overlay.";

impl Workspaces {
    /// Merges the frozen layers `layers` (topmost first, all published) into one new frozen
    /// layer held by `holders`, and returns its id. Over the same base tree, the new layer
    /// shows exactly what the stack showed (see the module documentation); the layers
    /// themselves are left as they are (other trees may stand on them).
    pub fn flatten_layers(
        &self,
        layers: &[String],
        holders: &[BaseHolder],
    ) -> Result<String, WorkspaceError> {
        let mut sources = Vec::with_capacity(layers.len());
        for id in layers {
            crate::frozen::check_layer_id(id)?;
            let dir = self.frozen_layer(id);
            if !dir.is_dir() {
                return Err(WorkspaceError::io(
                    &dir,
                    std::io::Error::other("the frozen layer is gone"),
                ));
            }
            sources.push(dir);
        }
        let id = crate::state::random_short_id()
            .map_err(|e| WorkspaceError::io(self.frozen_layer("new"), e))?;
        let me = ProcessIdentity::current();
        let build = self.frozen_layer(&format!(
            ".flatten-{id}-{}-{}",
            me.pid,
            me.start_time.unwrap_or_default()
        ));
        let result = merge_dir(&sources, &build, false)
            .map_err(|(path, e)| WorkspaceError::io(path, e))
            .and_then(|()| self.publish_built_layer(&id, &build, holders));
        if result.is_err() {
            let _ = crate::remove::remove_tree(&build);
        }
        result.map(|()| id)
    }
}

/// Whether `name` (an entry of `layers/`) is a flatten in progress whose builder is gone.
pub(crate) fn abandoned_build(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(".flatten-") else {
        return false;
    };
    let mut parts = rest.split('-');
    let (_id, pid, start) = (parts.next(), parts.next(), parts.next());
    let (Some(pid), Some(start)) = (
        pid.and_then(|p| p.parse::<u32>().ok()),
        start.and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return true;
    };
    ProcessIdentity {
        pid,
        start_time: Some(start),
    }
    .liveness()
        == crate::state::Liveness::Gone
}

type MergeResult = Result<(), (PathBuf, std::io::Error)>;

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> (PathBuf, std::io::Error) + '_ {
    move |e| (path.to_owned(), e)
}

/// Makes `out` the merge of the directories `sources` (topmost first, each a directory that
/// shows through the one above it); `opaque` when the stack hides whatever lies below the
/// lowest of them.
fn merge_dir(sources: &[PathBuf], out: &Path, opaque: bool) -> MergeResult {
    std::fs::create_dir(out).map_err(at(out))?;
    // Each name, with the topmost source that has it.
    let mut names: BTreeMap<OsString, usize> = BTreeMap::new();
    for (i, dir) in sources.iter().enumerate() {
        for entry in std::fs::read_dir(dir).map_err(at(dir))? {
            let entry = entry.map_err(at(dir))?;
            names.entry(entry.file_name()).or_insert(i);
        }
    }
    for (name, i) in names {
        let path = sources[i].join(&name);
        let target = out.join(&name);
        let meta = std::fs::symlink_metadata(&path).map_err(at(&path))?;
        if !meta.is_dir() {
            link_entry(&path, &target, &meta)?;
            continue;
        }
        let mut subs = vec![path.clone()];
        let mut hides = is_opaque(&path)?;
        if !hides {
            for lower in &sources[i + 1..] {
                let below = lower.join(&name);
                match std::fs::symlink_metadata(&below) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err((below, e)),
                    Ok(m) if m.is_dir() => {
                        hides = is_opaque(&below)?;
                        subs.push(below);
                        if hides {
                            break;
                        }
                    }
                    // A file or a whiteout under a directory: the merge stops there, and the
                    // base's entry is hidden as well.
                    Ok(_) => {
                        hides = true;
                        break;
                    }
                }
            }
        }
        merge_dir(&subs, &target, hides)?;
    }
    finish_dir(&sources[0], out, opaque)
}

/// Gives `out` the mode, `user.` extended attributes and timestamps of `from`, and the
/// opaque mark when `opaque`.
fn finish_dir(from: &Path, out: &Path, opaque: bool) -> MergeResult {
    copy_user_xattrs(from, out)?;
    if opaque {
        rustix::fs::lsetxattr(out, OPAQUE_XATTR, b"y", XattrFlags::empty())
            .map_err(|e| (out.to_owned(), e.into()))?;
    }
    let meta = std::fs::symlink_metadata(from).map_err(at(from))?;
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(meta.mode() & 0o7777))
        .map_err(at(out))?;
    set_times(out, &meta)
}

fn set_times(path: &Path, meta: &std::fs::Metadata) -> MergeResult {
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: meta.atime(),
            tv_nsec: meta.atime_nsec() as _,
        },
        last_modification: Timespec {
            tv_sec: meta.mtime(),
            tv_nsec: meta.mtime_nsec() as _,
        },
    };
    rustix::fs::utimensat(CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| (path.to_owned(), e.into()))
}

/// Whether the directory `dir` is opaque (nothing below it shows through).
fn is_opaque(dir: &Path) -> Result<bool, (PathBuf, std::io::Error)> {
    let mut value = [0u8; 8];
    match rustix::fs::lgetxattr(dir, OPAQUE_XATTR, &mut value[..]) {
        Ok(n) => Ok(&value[..n] == b"y"),
        Err(rustix::io::Errno::NODATA) | Err(rustix::io::Errno::NOTSUP) => Ok(false),
        // A longer value is not overlayfs's `y`.
        Err(rustix::io::Errno::RANGE) => Ok(false),
        Err(e) => Err((dir.to_owned(), e.into())),
    }
}

/// Copies the `user.` extended attributes of `from` to `to`, except overlayfs's own (the
/// opaque mark is decided by the merge; the others describe one layer's copy-ups).
fn copy_user_xattrs(from: &Path, to: &Path) -> MergeResult {
    let mut list = vec![0u8; 65536];
    let n = match rustix::fs::llistxattr(from, &mut list[..]) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => return Ok(()),
        Err(e) => return Err((from.to_owned(), e.into())),
    };
    let mut value = vec![0u8; 65536];
    for name in list[..n].split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let escaped = name.starts_with("user.overlay.overlay.");
        if !name.starts_with("user.") || (name.starts_with(OVERLAY_PREFIX) && !escaped) {
            continue;
        }
        let len = rustix::fs::lgetxattr(from, name, &mut value[..])
            .map_err(|e| (from.to_owned(), e.into()))?;
        rustix::fs::lsetxattr(to, name, &value[..len], XattrFlags::empty())
            .map_err(|e| (to.to_owned(), e.into()))?;
    }
    Ok(())
}

/// Puts the non-directory `from` at `to`: a hard link to the same inode, or a copy where the
/// link is refused.
fn link_entry(from: &Path, to: &Path, meta: &std::fs::Metadata) -> MergeResult {
    match rustix::fs::linkat(CWD, from, CWD, to, AtFlags::empty()) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::MLINK | rustix::io::Errno::XDEV | rustix::io::Errno::PERM) => {}
        Err(e) => return Err((to.to_owned(), e.into())),
    }
    let kind = meta.file_type();
    let mode = rustix::fs::Mode::from_raw_mode(meta.mode() & 0o7777);
    if kind.is_symlink() {
        let target = std::fs::read_link(from).map_err(at(from))?;
        std::os::unix::fs::symlink(&target, to).map_err(at(to))?;
    } else if kind.is_file() {
        std::fs::copy(from, to).map_err(at(to))?;
        copy_user_xattrs(from, to)?;
    } else {
        let (file_type, dev) = if kind.is_char_device() {
            (rustix::fs::FileType::CharacterDevice, meta.rdev())
        } else if kind.is_block_device() {
            (rustix::fs::FileType::BlockDevice, meta.rdev())
        } else if kind.is_fifo() {
            (rustix::fs::FileType::Fifo, 0)
        } else {
            (rustix::fs::FileType::Socket, 0)
        };
        rustix::fs::mknodat(CWD, to, file_type, mode, dev as _)
            .map_err(|e| (to.to_owned(), e.into()))?;
        copy_user_xattrs(from, to)?;
    }
    set_times(to, meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whiteout(path: &Path) {
        rustix::fs::mknodat(
            CWD,
            path,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0),
            0,
        )
        .unwrap();
    }

    fn opaque(dir: &Path) {
        rustix::fs::lsetxattr(dir, OPAQUE_XATTR, b"y", XattrFlags::empty()).unwrap();
    }

    fn kind(path: &Path) -> String {
        match std::fs::symlink_metadata(path) {
            Err(_) => "absent".into(),
            Ok(m) if m.file_type().is_char_device() && m.rdev() == 0 => "whiteout".into(),
            Ok(m) if m.is_dir() => {
                let o = if is_opaque(path).unwrap() {
                    " opaque"
                } else {
                    ""
                };
                format!("dir {:o}{o}", m.mode() & 0o7777)
            }
            Ok(m) if m.file_type().is_symlink() => {
                format!("symlink {}", std::fs::read_link(path).unwrap().display())
            }
            Ok(_) => format!("file {}", std::fs::read_to_string(path).unwrap()),
        }
    }

    /// Overlayfs's rules for a stack of lower layers, on layers made by hand: the topmost
    /// entry wins, whiteouts stay, a directory is opaque where the stack hid what is below,
    /// files are hard links to the layers' own.
    #[test]
    fn a_merge_shows_what_the_stack_showed() {
        let home = tempfile::tempdir().unwrap();
        let ws = Workspaces::new(home.path());
        let layers = home.path().join("layers");
        let (top, mid, low) = (
            layers.join("aaaaaaaa"),
            layers.join("bbbbbbbb"),
            layers.join("cccccccc"),
        );
        for l in [&top, &mid, &low] {
            std::fs::create_dir_all(l).unwrap();
        }
        // low: a file, a directory with two files, a file that becomes a directory.
        std::fs::write(low.join("f"), "low").unwrap();
        std::fs::create_dir(low.join("d")).unwrap();
        std::fs::write(low.join("d/x"), "low x").unwrap();
        std::fs::write(low.join("d/y"), "low y").unwrap();
        std::fs::write(low.join("was-file"), "file").unwrap();
        std::fs::create_dir(low.join("merged")).unwrap();
        std::fs::write(low.join("merged/from-low"), "l").unwrap();
        // mid: f overridden, d/x deleted, was-file a directory over the file, an opaque dir.
        std::fs::write(mid.join("f"), "mid").unwrap();
        std::fs::create_dir(mid.join("d")).unwrap();
        whiteout(&mid.join("d/x"));
        std::fs::create_dir(mid.join("was-file")).unwrap();
        std::fs::write(mid.join("was-file/in"), "in").unwrap();
        std::fs::create_dir(mid.join("o")).unwrap();
        opaque(&mid.join("o"));
        std::fs::write(mid.join("o/only"), "o").unwrap();
        std::fs::create_dir(mid.join("merged")).unwrap();
        std::fs::write(mid.join("merged/from-mid"), "m").unwrap();
        // top: f deleted, a symlink, d's mode, a new dir over nothing (merges with the base).
        whiteout(&top.join("f"));
        std::os::unix::fs::symlink("d/y", top.join("link")).unwrap();
        std::fs::create_dir(top.join("d")).unwrap();
        std::fs::set_permissions(top.join("d"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir(top.join("new")).unwrap();
        std::fs::write(top.join("new/n"), "n").unwrap();
        std::fs::create_dir(top.join("merged")).unwrap();
        std::fs::write(top.join("merged/from-top"), "t").unwrap();

        let proof = home.path().join("holder");
        std::fs::create_dir(&proof).unwrap();
        let holder = BaseHolder {
            name: "me".into(),
            proof,
        };
        let ids: Vec<String> = ["aaaaaaaa", "bbbbbbbb", "cccccccc"]
            .map(String::from)
            .into();
        let id = ws.flatten_layers(&ids, &[holder]).unwrap();
        let m = ws.frozen_layer(&id);
        let seen: Vec<(&str, String)> = [
            "f",
            "link",
            "d",
            "d/x",
            "d/y",
            "was-file",
            "was-file/in",
            "o",
            "o/only",
            "new",
            "new/n",
            "merged",
            "merged/from-low",
            "merged/from-mid",
            "merged/from-top",
        ]
        .into_iter()
        .map(|p| (p, kind(&m.join(p))))
        .collect();
        let expected: Vec<(&str, String)> = [
            ("f", "whiteout"),
            ("link", "symlink d/y"),
            ("d", "dir 700"),
            ("d/x", "whiteout"),
            ("d/y", "file low y"),
            ("was-file", "dir 755 opaque"),
            ("was-file/in", "file in"),
            ("o", "dir 755 opaque"),
            ("o/only", "file o"),
            ("new", "dir 755"),
            ("new/n", "file n"),
            ("merged", "dir 755"),
            ("merged/from-low", "file l"),
            ("merged/from-mid", "file m"),
            ("merged/from-top", "file t"),
        ]
        .into_iter()
        .map(|(p, k)| (p, k.to_owned()))
        .collect();
        assert_eq!(seen, expected);
        // Hard links, not copies; held; the old layers untouched.
        let ino = |p: &Path| std::fs::symlink_metadata(p).unwrap().ino();
        assert_eq!(ino(&m.join("d/y")), ino(&low.join("d/y")));
        assert!(layers.join(format!("{id}.holds/me")).exists());
        assert_eq!(kind(&mid.join("d/x")), "whiteout");
        // Nothing left behind under a hidden name.
        let hidden: Vec<_> = std::fs::read_dir(&layers)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".flatten-"))
            .collect();
        assert!(hidden.is_empty());
    }

    #[test]
    fn a_build_is_abandoned_once_its_builder_is_gone() {
        let me = ProcessIdentity::current();
        let mine = format!(".flatten-abcdefgh-{}-{}", me.pid, me.start_time.unwrap());
        assert!(!abandoned_build(&mine));
        assert!(abandoned_build(".flatten-abcdefgh-1-18446744073709551615"));
        assert!(abandoned_build(".flatten-garbage"));
        assert!(!abandoned_build(".trash-abcdefgh"));
    }
}

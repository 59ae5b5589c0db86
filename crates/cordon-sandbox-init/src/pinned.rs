//! Mounting without following symlinks: every path the helper mounts from or onto is opened
//! once, with `RESOLVE_NO_SYMLINKS`, and the mount is made on the opened object (the new
//! mount API: `open_tree`, `fsmount`, `mount_setattr` on the detached tree, `move_mount`).
//!
//! Writable binds (a workspace) are shared with other sandboxes running at the same time: one
//! of them can swap a directory for a symlink between the policy's check and the mount. A
//! path-based `mount(2)` would follow that symlink — out of the workspace, or past a mask.
//! Here a swapped path makes the set-up fail (closed); and a bind source must still be the
//! very object the policy side checked (same device and inode), or it is refused.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, OpenTreeFlags, fsconfig_create,
    fsconfig_set_string, fsmount, fsopen, move_mount, open_tree,
};

use crate::error::Setup;
use crate::plan::FileIdentity;

/// No symlink anywhere in the path, and no `/proc` magic link either.
fn no_links() -> ResolveFlags {
    ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// Opens `path` (absolute) as an `O_PATH` descriptor without following any symlink.
pub fn open(path: &Path) -> Setup<OwnedFd> {
    rustix::fs::openat2(
        CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        no_links(),
    )
    .map_err(|e| {
        format!(
            "open {} (without following symlinks): {}",
            path.display(),
            std::io::Error::from(e)
        )
        .into()
    })
}

/// The device and inode of an open object.
pub fn identity(fd: &OwnedFd) -> Setup<FileIdentity> {
    let st = rustix::fs::fstat(fd).map_err(|e| format!("fstat: {}", std::io::Error::from(e)))?;
    Ok(FileIdentity {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// `mkdir -p path` where no existing component may be a symlink; returns the directory,
/// opened.
///
/// The deepest directory of `path` that exists is found first, from `path` itself upwards,
/// each try one `openat2` of the whole prefix that refuses a symlink anywhere on the way: a
/// mount point that is already there (most of them, once a first mount under a directory
/// made it) costs one system call instead of one per component. The missing components are
/// then made and opened one by one, below the directory found.
pub fn mkdir_p(path: &Path, mode: u32) -> Setup<OwnedFd> {
    let mut names = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => names.push(name),
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(format!("{} is not a plain absolute path", path.display()).into());
            }
        }
    }
    if !path.has_root() {
        return Err(format!("{} is not a plain absolute path", path.display()).into());
    }
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut existing = names.len();
    let mut dir = loop {
        let mut prefix = std::path::PathBuf::from("/");
        prefix.extend(&names[..existing]);
        match rustix::fs::openat2(CWD, &prefix, flags, Mode::empty(), no_links()) {
            Ok(dir) => break dir,
            Err(rustix::io::Errno::NOENT) if existing > 0 => existing -= 1,
            Err(e) => {
                return Err(format!(
                    "{} cannot be a mount point (a symlink or not a directory on the way): {}",
                    path.display(),
                    std::io::Error::from(e)
                )
                .into());
            }
        }
    };
    for name in &names[existing..] {
        match rustix::fs::mkdirat(&dir, *name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => {
                return Err(format!(
                    "create directory {}: {}",
                    path.display(),
                    std::io::Error::from(e)
                )
                .into());
            }
        }
        dir = rustix::fs::openat2(&dir, *name, flags, Mode::empty(), no_links()).map_err(|e| {
            format!(
                "{} cannot be a mount point (a symlink or not a directory on the way): {}",
                path.display(),
                std::io::Error::from(e)
            )
        })?;
    }
    Ok(dir)
}

/// Creates the file `path` if missing (no symlink anywhere) and opens it.
pub fn touch(path: &Path) -> Setup<OwnedFd> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(format!("{} has no parent", path.display()).into());
    };
    let dir = mkdir_p(parent, 0o755)?;
    let created = rustix::fs::openat(
        &dir,
        name,
        OFlags::CREATE | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    );
    match created {
        // Something already there (a directory, a device, a file on a read-only mount):
        // opening it for writing may fail; that is fine, `open` below decides.
        Ok(_)
        | Err(
            rustix::io::Errno::ISDIR
            | rustix::io::Errno::ACCESS
            | rustix::io::Errno::ROFS
            | rustix::io::Errno::TXTBSY
            | rustix::io::Errno::PERM,
        ) => {}
        Err(e) => {
            return Err(format!(
                "create {} (not through a symlink): {}",
                path.display(),
                std::io::Error::from(e)
            )
            .into());
        }
    }
    open(path)
}

/// A detached copy of the mount tree at `src` (recursively, as `mount --rbind`).
pub fn clone_tree(src: &OwnedFd, recursive: bool) -> Setup<OwnedFd> {
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_EMPTY_PATH;
    if recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    open_tree(src, "", flags)
        .map_err(|e| format!("clone a mount tree: {}", std::io::Error::from(e)).into())
}

/// A new, detached tmpfs.
pub fn tmpfs(mode: u32, size_bytes: Option<u64>, inodes: Option<u64>) -> Setup<OwnedFd> {
    let err =
        |what: &str, e: rustix::io::Errno| format!("tmpfs {what}: {}", std::io::Error::from(e));
    let fs = fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).map_err(|e| err("fsopen", e))?;
    fsconfig_set_string(&fs, "mode", format!("{mode:o}")).map_err(|e| err("mode", e))?;
    if let Some(size) = size_bytes {
        fsconfig_set_string(&fs, "size", size.to_string()).map_err(|e| err("size", e))?;
    }
    if let Some(inodes) = inodes {
        fsconfig_set_string(&fs, "nr_inodes", inodes.to_string())
            .map_err(|e| err("nr_inodes", e))?;
    }
    fsconfig_create(&fs).map_err(|e| err("create", e))?;
    fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::empty())
        .map_err(|e| err("fsmount", e).into())
}

/// A layer of an overlay, opened, and the name overlayfs is given for it.
///
/// overlayfs shows its layers in the mount table (`/proc/self/mountinfo`, `/proc/mounts`)
/// exactly as they were named: a host path there (`upperdir=/home/alice/.local/share/cordon/
/// sessions/…`) told the program where cordon keeps its state. So a layer is named
/// `PROC/self/fd/N`, the descriptor opened here (overlayfs resolves the name while it is
/// configured, and the layer is then pinned too). Where that name does not lead to the
/// layer (no procfs at `PROC`), the path itself is used.
struct Layer {
    _fd: OwnedFd,
    name: std::path::PathBuf,
}

impl Layer {
    /// Opens `path` (symlinks followed, as overlayfs would follow them; magic links
    /// refused) and names it through `proc`.
    fn open(path: &Path, proc: &Path) -> Setup<Layer> {
        let fd = rustix::fs::openat2(
            CWD,
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| format!("open {}: {}", path.display(), std::io::Error::from(e)))?;
        let name = proc.join(format!("self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)));
        let same = match (rustix::fs::fstat(&fd), rustix::fs::stat(&name)) {
            (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
            _ => false,
        };
        let name = if same { name } else { path.to_owned() };
        // `:` separates layers and `\` escapes in `lowerdir`: such names are refused.
        let bytes = name.as_os_str().as_encoded_bytes();
        if bytes.contains(&b':') || bytes.contains(&b'\\') {
            return Err(format!("overlay: {} contains ':' or '\\'", name.display()).into());
        }
        Ok(Layer { _fd: fd, name })
    }
}

/// A new, detached overlay: `lower` underneath, `upper` taking the writes (`writable`), or
/// `upper` on top of `lower`, read-only. Paths are absolute paths as the helper sees them;
/// the layers are named through the procfs at `proc` ([`Layer`]).
pub fn overlay(
    lower: &Path,
    upper: &Path,
    work: &Path,
    writable: bool,
    proc: &Path,
) -> Setup<OwnedFd> {
    let err =
        |what: &str, e: rustix::io::Errno| format!("overlay {what}: {}", std::io::Error::from(e));
    let (lower, upper) = (Layer::open(lower, proc)?, Layer::open(upper, proc)?);
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC).map_err(|e| err("fsopen", e))?;
    // Unprivileged overlays keep their whiteouts in `user.` extended attributes.
    rustix::mount::fsconfig_set_flag(&fs, "userxattr").map_err(|e| err("userxattr", e))?;
    // Open until the overlay is made: a kernel may resolve the names only then.
    let work = if writable {
        Some(Layer::open(work, proc)?)
    } else {
        None
    };
    if let Some(work) = &work {
        fsconfig_set_string(&fs, "lowerdir", &lower.name).map_err(|e| err("lowerdir", e))?;
        fsconfig_set_string(&fs, "upperdir", &upper.name).map_err(|e| err("upperdir", e))?;
        fsconfig_set_string(&fs, "workdir", &work.name).map_err(|e| err("workdir", e))?;
    } else {
        let layers = format!("{}:{}", upper.name.display(), lower.name.display());
        fsconfig_set_string(&fs, "lowerdir", layers).map_err(|e| err("lowerdir", e))?;
    }
    fsconfig_create(&fs).map_err(|e| err("create", e))?;
    fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::empty())
        .map_err(|e| err("fsmount", e).into())
}

/// A new, detached overlay of `lowers` (topmost first) and, when given, an `(upper, work)`
/// pair taking the writes; read-only without it. Paths are absolute paths as the helper
/// sees them; the layers are named through the procfs at `proc` ([`Layer`]). `volatile`
/// (with an upper): overlayfs skips its syncs, for a layer thrown away after its run; the
/// mark an earlier volatile mount left in `work` is removed first (the kernel refuses to
/// mount over it).
pub fn layered(
    lowers: &[std::path::PathBuf],
    upper: Option<(&Path, &Path)>,
    volatile: bool,
    proc: &Path,
) -> Setup<OwnedFd> {
    let err =
        |what: &str, e: rustix::io::Errno| format!("overlay {what}: {}", std::io::Error::from(e));
    if lowers.is_empty() || (upper.is_none() && lowers.len() < 2) {
        return Err("overlay: too few layers".into());
    }
    let lowers = lowers
        .iter()
        .map(|p| Layer::open(p, proc))
        .collect::<Setup<Vec<Layer>>>()?;
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC).map_err(|e| err("fsopen", e))?;
    // Unprivileged overlays keep their whiteouts' and opaque directories' marks in `user.`
    // extended attributes.
    rustix::mount::fsconfig_set_flag(&fs, "userxattr").map_err(|e| err("userxattr", e))?;
    let mut joined = std::ffi::OsString::new();
    for (i, lower) in lowers.iter().enumerate() {
        if i > 0 {
            joined.push(":");
        }
        joined.push(&lower.name);
    }
    // The kernel takes at most 255 bytes per value: a deeper stack (a forked session's
    // frozen layers) is given one layer at a time (`lowerdir+`, Linux 6.8 and later).
    if joined.len() < 256 {
        fsconfig_set_string(&fs, "lowerdir", joined.as_os_str()).map_err(|e| err("lowerdir", e))?;
    } else {
        for lower in &lowers {
            fsconfig_set_string(&fs, "lowerdir+", &lower.name).map_err(|e| err("lowerdir+", e))?;
        }
    }
    // Open until the overlay is made: a kernel may resolve the names only then.
    let mut held = Vec::new();
    if let Some((upper_path, work_path)) = upper {
        if volatile {
            clear_volatile_mark(work_path)?;
        }
        let (upper, work) = (
            Layer::open(upper_path, proc)?,
            Layer::open(work_path, proc)?,
        );
        fsconfig_set_string(&fs, "upperdir", &upper.name).map_err(|e| err("upperdir", e))?;
        fsconfig_set_string(&fs, "workdir", &work.name).map_err(|e| err("workdir", e))?;
        if volatile {
            rustix::mount::fsconfig_set_flag(&fs, "volatile").map_err(|e| err("volatile", e))?;
        }
        held.extend([upper, work]);
    }
    fsconfig_create(&fs).map_err(|e| err("create", e))?;
    fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::empty())
        .map_err(|e| err("fsmount", e).into())
}

/// Removes the mark a `volatile` overlay leaves in its work directory
/// (`work/incompat/volatile/dirty`), each step relative to a directory opened without
/// following symlinks: overlayfs refuses to mount that work directory again while the mark is
/// there, lest it trust a layer a crash left half written. Only layers that are thrown away
/// are mounted volatile (a candidate's, in its verification's own scratch directory), so this
/// is the next stage's mount of a live layer, not a recovery.
fn clear_volatile_mark(work: &Path) -> Setup<()> {
    let gone = |what: &str, e: rustix::io::Errno| -> Setup<()> {
        Err(format!("{}/{what}: {}", work.display(), std::io::Error::from(e)).into())
    };
    let open = |at: &OwnedFd, name: &str| {
        rustix::fs::openat2(
            at,
            name,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
            no_links() | ResolveFlags::BENEATH | ResolveFlags::NO_XDEV,
        )
    };
    let top = match rustix::fs::openat2(
        CWD,
        work,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        no_links(),
    ) {
        Ok(dir) => dir,
        Err(e) => return gone("", e),
    };
    let mut dirs = Vec::with_capacity(3);
    for name in ["work", "incompat", "volatile"] {
        let at = dirs.last().unwrap_or(&top);
        match open(at, name) {
            Ok(dir) => dirs.push(dir),
            // Never mounted volatile (or already cleared): nothing to do below this.
            Err(rustix::io::Errno::NOENT) => break,
            Err(e) => return gone(name, e),
        }
    }
    // Deepest first: `volatile/dirty`, then `incompat/volatile`, then `work/incompat`.
    let names = ["incompat", "volatile", "dirty"];
    for depth in (0..dirs.len()).rev() {
        let flags = if depth == 2 {
            rustix::fs::AtFlags::empty()
        } else {
            rustix::fs::AtFlags::REMOVEDIR
        };
        match rustix::fs::unlinkat(&dirs[depth], names[depth], flags) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return gone(names[depth], e),
        }
    }
    Ok(())
}

/// Sets mount attributes (`MOUNT_ATTR_*`) on a detached tree, before it is attached.
pub fn set_attributes(tree: &OwnedFd, set: u64, recursive: bool) -> Setup<()> {
    let attr = crate::sys::MountAttr::set(set);
    let mut flags = libc::AT_EMPTY_PATH;
    if recursive {
        flags |= libc::AT_RECURSIVE;
    }
    let path = c"";
    let fd = std::os::fd::AsRawFd::as_raw_fd(tree);
    // SAFETY: `fd` is an open mount tree, `path` a valid empty string, `attr` a valid
    // mount_attr of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            path.as_ptr(),
            flags,
            &attr as *const crate::sys::MountAttr,
            std::mem::size_of::<crate::sys::MountAttr>(),
        )
    };
    crate::sys::check(r, || "set mount attributes".into()).map(drop)
}

/// Attaches a detached tree onto the opened mount point.
pub fn attach(tree: &OwnedFd, onto: &OwnedFd, shown: &Path) -> Setup<()> {
    move_mount(
        tree.as_fd(),
        "",
        onto.as_fd(),
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
    .map_err(|e| format!("mount on {}: {}", shown.display(), std::io::Error::from(e)).into())
}

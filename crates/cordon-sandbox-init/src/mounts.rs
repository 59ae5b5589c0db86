//! Builds the new root in the sandbox's mount namespace (runs in PID 1, before the program).

use std::path::{Path, PathBuf};

use crate::error::Setup;
use crate::pinned;
use crate::plan::{MountOp, PinnedPath, UpperLayer};
use crate::sys::{self, ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY};

/// Where the host root is reachable while the new root is built.
const OLD_ROOT: &str = "/.oldroot";

/// The empty regular file bound over masked files, made in the new root while it is built
/// and unlinked before the program starts (the binds keep it; nothing shows its name).
const EMPTY_FILE: &str = "/.cordon-empty";

/// The host name inside the sandbox (its own UTS namespace).
pub const HOSTNAME: &str = "cordon";

/// The sandbox's `/etc/hosts`: the host's, with the sandbox's own host name resolving, as
/// programs expect.
pub fn etc_hosts(mut host: Vec<u8>) -> Vec<u8> {
    host.extend_from_slice(format!("\n127.0.1.1\t{HOSTNAME}\n").as_bytes());
    host
}

/// Device nodes bound from the host into the minimal `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Parts of `/proc` that must stay read-only (host kernel settings).
const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];

/// The source name of the sandbox's root tmpfs, as `/proc/self/mountinfo` shows it: how a
/// cordon inside the sandbox knows it is in one (nothing inside can mount, or unmount that).
pub const ROOT_SOURCE: &str = "cordon-sandbox";

/// Whether this process runs inside a cordon sandbox: the root of its mount namespace is the
/// tmpfs a sandbox's PID 1 makes (source [`ROOT_SOURCE`] in `/proc/self/mountinfo`).
/// Nothing inside a sandbox can mount or unmount, so a program can neither fake nor hide it.
pub fn inside_a_sandbox() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|t| root_is_a_sandboxs(&t))
}

/// Whether the root mount of `mountinfo` (the text of `/proc/self/mountinfo`) is a sandbox's.
pub fn root_is_a_sandboxs(mountinfo: &str) -> bool {
    mountinfo.lines().any(|line| {
        let Some((mount, fs)) = line.split_once(" - ") else {
            return false;
        };
        let mut fs = fs.split(' ');
        mount.split(' ').nth(4) == Some("/")
            && fs.next() == Some("tmpfs")
            && fs.next() == Some(ROOT_SOURCE)
    })
}

/// Makes mounts private, pivots into a fresh tmpfs, executes `ops`, makes the `noexec` mount
/// points so, detaches the host root and makes the new root read-only.
pub fn build(ops: &[MountOp], noexec: &[PathBuf]) -> Setup<()> {
    sys::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let base = Path::new("/tmp");
    sys::mount(
        Some(Path::new(ROOT_SOURCE)),
        base,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755"),
    )?;
    let c_base = sys::cstr(base)?;
    // SAFETY: valid path.
    sys::check(unsafe { libc::chdir(c_base.as_ptr()) }.into(), || {
        "enter the new root".into()
    })?;
    sys::mkdir_p(Path::new("/tmp/.oldroot"), 0o700)?;
    let (c_new, c_old) = (sys::cstr(".")?, sys::cstr(".oldroot")?);
    // SAFETY: both are valid paths; pivot_root has no libc wrapper.
    let r = unsafe { libc::syscall(libc::SYS_pivot_root, c_new.as_ptr(), c_old.as_ptr()) };
    sys::check(r, || "pivot_root into the new root".into())?;
    let root = sys::cstr("/")?;
    // SAFETY: valid path.
    sys::check(unsafe { libc::chdir(root.as_ptr()) }.into(), || {
        "chdir /".into()
    })?;

    for op in ops {
        apply(op)?;
    }
    match std::fs::remove_file(EMPTY_FILE) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("remove {EMPTY_FILE}: {e}").into()),
    }
    for dst in noexec {
        // The mount whose root `dst` is (opened without following symlinks), alone: mounts
        // on top of it (an allowed program bound over itself) keep their own attributes.
        let mount = pinned::open(dst)?;
        pinned::set_attributes(&mount, ATTR_NOEXEC, false)?;
    }

    let old = sys::cstr(OLD_ROOT)?;
    // SAFETY: `old` is a valid NUL-terminated path.
    let r = unsafe { libc::umount2(old.as_ptr(), libc::MNT_DETACH) };
    sys::check(r.into(), || "detach the host root".into())?;
    // SAFETY: valid path.
    unsafe { libc::rmdir(old.as_ptr()) };
    sys::mount_setattr(
        Path::new("/"),
        ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
        false,
    )
}

fn host(src: &Path) -> PathBuf {
    let rel = src.strip_prefix("/").unwrap_or(src);
    Path::new(OLD_ROOT).join(rel)
}

fn apply(op: &MountOp) -> Setup<()> {
    match op {
        MountOp::Bind {
            src,
            dst,
            dir,
            rw,
            identity,
        } => {
            // The source, reached through the old root without following any symlink, must
            // still be what the policy side checked.
            let source = pinned::open(&host(src))?;
            if pinned::identity(&source)? != *identity {
                return Err(format!(
                    "{} changed while the sandbox was being set up (replaced or swapped for a \
                     symlink): refused",
                    src.display()
                )
                .into());
            }
            let target = if *dir {
                pinned::mkdir_p(dst, 0o755)?
            } else {
                pinned::touch(dst)?
            };
            let tree = pinned::clone_tree(&source, true)?;
            let ro = if *rw { 0 } else { ATTR_RDONLY };
            pinned::set_attributes(&tree, ro | ATTR_NOSUID | ATTR_NODEV, true)?;
            pinned::attach(&tree, &target, dst)
        }
        MountOp::Overlay {
            dst,
            lower,
            lower_identity,
            upper,
            work,
            writable,
        } => {
            let lower_fd = pinned::open(&host(lower))?;
            if pinned::identity(&lower_fd)? != *lower_identity {
                return Err(format!(
                    "{} changed while the sandbox was being set up: refused",
                    lower.display()
                )
                .into());
            }
            let target = pinned::mkdir_p(dst, 0o755)?;
            let proc = host(Path::new("/proc"));
            let layers = (host(lower), host(upper), host(work));
            let tree = match pinned::overlay(&layers.0, &layers.1, &layers.2, *writable, &proc) {
                Ok(tree) => tree,
                // No overlayfs here: the private layer alone (empty at first), never the
                // host's cache.
                Err(_) => pinned::clone_tree(&pinned::open(&host(upper))?, false)?,
            };
            let ro = if *writable { 0 } else { ATTR_RDONLY };
            pinned::set_attributes(&tree, ro | ATTR_NOSUID | ATTR_NODEV, false)?;
            pinned::attach(&tree, &target, dst)
        }
        MountOp::Layers { dst, lowers, upper } => layers(dst, lowers, upper.as_ref()),
        MountOp::Tmpfs {
            dst,
            mode,
            ro,
            size_bytes,
            inodes,
        } => {
            let target = pinned::mkdir_p(dst, 0o755)?;
            let tree = pinned::tmpfs(*mode, *size_bytes, *inodes)?;
            let mut attributes = ATTR_NOSUID | ATTR_NODEV;
            if *ro {
                attributes |= ATTR_RDONLY | ATTR_NOEXEC;
            }
            pinned::set_attributes(&tree, attributes, false)?;
            pinned::attach(&tree, &target, dst)
        }
        MountOp::MaskFile { dst } => {
            let target = pinned::open(dst)?;
            // An empty regular file, not `/dev/null`: a device node on a `nodev` mount cannot
            // be opened at all (EACCES), and a masked file must read as empty.
            let empty = empty_file()?;
            let tree = pinned::clone_tree(&empty, false)?;
            pinned::set_attributes(
                &tree,
                ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
                false,
            )?;
            pinned::attach(&tree, &target, dst)
        }
        MountOp::CopyFile { src, dst } => {
            if let Some(parent) = dst.parent() {
                sys::mkdir_p(parent, 0o755)?;
            }
            let mut data =
                std::fs::read(host(src)).map_err(|e| format!("read {}: {e}", src.display()))?;
            if dst == Path::new("/etc/hosts") {
                data = etc_hosts(data);
            }
            std::fs::write(dst, data).map_err(|e| format!("write {}: {e}", dst.display()).into())
        }
        MountOp::Symlink { dst, target } => {
            if let Some(parent) = dst.parent() {
                sys::mkdir_p(parent, 0o755)?;
            }
            std::os::unix::fs::symlink(target, dst)
                .map_err(|e| format!("create symlink {}: {e}", dst.display()).into())
        }
        MountOp::Dev { shm_size_bytes } => dev(*shm_size_bytes),
        MountOp::Proc => proc(),
    }
}

/// The empty, read-only regular file masks are bound from ([`EMPTY_FILE`] in the new root),
/// made on first use.
fn empty_file() -> Setup<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .custom_flags(libc::O_NOFOLLOW)
        .open(EMPTY_FILE)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("create {EMPTY_FILE}: {e}").into()),
    }
    pinned::open(Path::new(EMPTY_FILE))
}

/// A copy-on-write tree; fails closed (no weaker fallback).
fn layers(dst: &Path, lowers: &[PinnedPath], upper: Option<&UpperLayer>) -> Setup<()> {
    let mut paths = Vec::with_capacity(lowers.len());
    for lower in lowers {
        let fd = pinned::open(&host(&lower.path))?;
        if pinned::identity(&fd)? != lower.identity {
            return Err(format!(
                "{} changed while the sandbox was being set up: refused",
                lower.path.display()
            )
            .into());
        }
        paths.push(host(&lower.path));
    }
    let target = pinned::mkdir_p(dst, 0o755)?;
    let tree = match (upper, paths.as_slice()) {
        // One read-only layer needs no overlay (overlayfs wants two without an upper).
        (None, [only]) => pinned::clone_tree(&pinned::open(only)?, false)?,
        (upper, _) => {
            let volatile = upper.is_some_and(|u| u.volatile);
            let upper = upper.map(|u| (host(&u.upper), host(&u.work)));
            pinned::layered(
                &paths,
                upper.as_ref().map(|(u, w)| (u.as_path(), w.as_path())),
                volatile,
                &host(Path::new("/proc")),
            )
            .map_err(|e| format!("{e} (a copy-on-write tree at {})", dst.display()))?
        }
    };
    let ro = if upper.is_some() { 0 } else { ATTR_RDONLY };
    pinned::set_attributes(&tree, ro | ATTR_NOSUID | ATTR_NODEV, false)?;
    pinned::attach(&tree, &target, dst)
}

fn dev(shm_size_bytes: Option<u64>) -> Setup<()> {
    let dev = Path::new("/dev");
    sys::mkdir_p(dev, 0o755)?;
    sys::mount(
        Some(Path::new("tmpfs")),
        dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("mode=0755"),
    )?;
    for name in DEVICES {
        let dst = dev.join(name);
        sys::touch(&dst)?;
        sys::mount(Some(&host(&dst)), &dst, None, libc::MS_BIND, None)?;
        // A device node is neither executable nor setuid: the source mount's flags suffice.
    }
    let pts = dev.join("pts");
    sys::mkdir_p(&pts, 0o755)?;
    sys::mount(
        Some(Path::new("devpts")),
        &pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    )?;
    let shm = dev.join("shm");
    sys::mkdir_p(&shm, 0o755)?;
    let data = match shm_size_bytes {
        Some(size) => format!(
            "mode=1777,size={size},nr_inodes={}",
            (size / 4096).max(1024)
        ),
        None => "mode=1777".to_owned(),
    };
    sys::mount(
        Some(Path::new("tmpfs")),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&data),
    )?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link))
            .map_err(|e| format!("create /dev/{link}: {e}"))?;
    }
    sys::mount_setattr(dev, ATTR_RDONLY | ATTR_NOSUID | ATTR_NOEXEC, false)
}

fn proc() -> Setup<()> {
    let proc = Path::new("/proc");
    sys::mkdir_p(proc, 0o555)?;
    sys::mount(
        Some(Path::new("proc")),
        proc,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    for sub in PROC_READ_ONLY {
        let p = proc.join(sub);
        if p.exists() {
            sys::mount(Some(&p), &p, None, libc::MS_BIND | libc::MS_REC, None)?;
            sys::mount_setattr(
                &p,
                ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
                true,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_is_known_by_its_root_mount() {
        let host = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    40 22 0:30 / /tmp rw - tmpfs cordon-sandbox rw\n";
        assert!(!root_is_a_sandboxs(host));
        let sandbox = "301 300 0:61 / / ro,nosuid,nodev - tmpfs cordon-sandbox rw,mode=755\n\
                       302 301 254:0 /usr /usr ro - ext4 /dev/vda rw\n";
        assert!(root_is_a_sandboxs(sandbox));
        // Another tmpfs root (a container's) is not one.
        assert!(!root_is_a_sandboxs("1 0 0:5 / / rw - tmpfs tmpfs rw\n"));
    }
}

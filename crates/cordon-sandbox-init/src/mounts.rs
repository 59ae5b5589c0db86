//! Builds the new root in the sandbox's mount namespace (runs in PID 1, before the program).

use std::path::{Path, PathBuf};

use crate::error::Setup;
use crate::plan::MountOp;
use crate::sys::{self, ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY};

/// Where the host root is reachable while the new root is built.
const OLD_ROOT: &str = "/.oldroot";

/// The host name inside the sandbox (its own UTS namespace).
pub const HOSTNAME: &str = "cordon";

/// Device nodes bound from the host into the minimal `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Parts of `/proc` that must stay read-only (host kernel settings).
const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];

/// Makes mounts private, pivots into a fresh tmpfs, executes `ops`, detaches the host root
/// and makes the new root read-only.
pub fn build(ops: &[MountOp]) -> Setup<()> {
    sys::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let base = Path::new("/tmp");
    sys::mount(
        Some(Path::new("tmpfs")),
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
        MountOp::Bind { src, dst, dir, rw } => {
            if *dir {
                sys::mkdir_p(dst, 0o755)?;
            } else {
                sys::touch(dst)?;
            }
            sys::mount(
                Some(&host(src)),
                dst,
                None,
                libc::MS_BIND | libc::MS_REC,
                None,
            )?;
            let ro = if *rw { 0 } else { ATTR_RDONLY };
            sys::mount_setattr(dst, ro | ATTR_NOSUID | ATTR_NODEV, true)
        }
        MountOp::Tmpfs { dst, mode, ro } => {
            sys::mkdir_p(dst, 0o755)?;
            let mut flags = libc::MS_NOSUID | libc::MS_NODEV;
            if *ro {
                flags |= libc::MS_RDONLY | libc::MS_NOEXEC;
            }
            let data = format!("mode={mode:o}");
            sys::mount(
                Some(Path::new("tmpfs")),
                dst,
                Some("tmpfs"),
                flags,
                Some(&data),
            )
        }
        MountOp::MaskFile { dst } => {
            sys::mount(
                Some(&host(Path::new("/dev/null"))),
                dst,
                None,
                libc::MS_BIND,
                None,
            )?;
            sys::mount_setattr(
                dst,
                ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
                false,
            )
        }
        MountOp::CopyFile { src, dst } => {
            if let Some(parent) = dst.parent() {
                sys::mkdir_p(parent, 0o755)?;
            }
            let mut data =
                std::fs::read(host(src)).map_err(|e| format!("read {}: {e}", src.display()))?;
            if dst == Path::new("/etc/hosts") {
                // The sandbox's own host name resolves, as programs expect.
                data.extend_from_slice(format!("\n127.0.1.1\t{HOSTNAME}\n").as_bytes());
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
        MountOp::Dev => dev(),
        MountOp::Proc => proc(),
    }
}

fn dev() -> Setup<()> {
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
    sys::mount(
        Some(Path::new("tmpfs")),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=1777"),
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

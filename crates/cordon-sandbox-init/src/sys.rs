//! Thin, checked wrappers over the raw syscalls the helper uses.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub use crate::error::Setup;

/// A C string of a path or argument (interior NULs are refused).
pub fn cstr(s: impl AsRef<OsStr>) -> Setup<CString> {
    CString::new(s.as_ref().as_bytes())
        .map_err(|_| format!("{:?} contains a NUL byte", s.as_ref()).into())
}

/// Maps a `-1` return to an error naming the step and errno.
pub fn check(ret: libc::c_long, what: impl FnOnce() -> String) -> Setup<libc::c_long> {
    if ret < 0 {
        Err(format!("{}: {}", what(), std::io::Error::last_os_error()).into())
    } else {
        Ok(ret)
    }
}

/// The current errno.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `mount(2)`.
pub fn mount(
    src: Option<&Path>,
    dst: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Setup<()> {
    let c_src = src.map(cstr).transpose()?;
    let c_dst = cstr(dst)?;
    let c_fs = fstype.map(cstr).transpose()?;
    let c_data = data.map(cstr).transpose()?;
    let p = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a valid NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            p(&c_src),
            c_dst.as_ptr(),
            p(&c_fs),
            flags,
            p(&c_data).cast(),
        )
    };
    check(r.into(), || match src {
        Some(s) => format!("mount {} on {}", s.display(), dst.display()),
        None => format!(
            "mount {} on {}",
            fstype.unwrap_or("(remount)"),
            dst.display()
        ),
    })
    .map(drop)
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
pub struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

impl MountAttr {
    /// Attributes that set `set` (`MOUNT_ATTR_*` bits) and change nothing else.
    pub fn set(set: u64) -> Self {
        MountAttr {
            attr_set: set,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        }
    }
}

/// `MOUNT_ATTR_RDONLY`.
pub const ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
pub const ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
pub const ATTR_NODEV: u64 = 0x4;
/// `MOUNT_ATTR_NOEXEC`.
pub const ATTR_NOEXEC: u64 = 0x8;

/// Sets mount attributes on `dst` and, when `recursive`, on every mount below it.
pub fn mount_setattr(dst: &Path, set: u64, recursive: bool) -> Setup<()> {
    let c_dst = cstr(dst)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: `c_dst` is a valid path, `attr` a valid mount_attr of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_dst.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(r, || format!("make {} read-only/nosuid", dst.display())).map(drop)
}

/// `mkdir -p` (existing directories are fine).
pub fn mkdir_p(path: &Path, mode: u32) -> Setup<()> {
    let c = cstr(path)?;
    // SAFETY: `c` is a valid path.
    if unsafe { libc::mkdir(c.as_ptr(), mode) } == 0 {
        return Ok(());
    }
    match errno() {
        libc::EEXIST => Ok(()),
        libc::ENOENT => {
            if let Some(parent) = path.parent() {
                mkdir_p(parent, 0o755)?;
            }
            // SAFETY: as above.
            let r = unsafe { libc::mkdir(c.as_ptr(), mode) };
            if r < 0 && errno() != libc::EEXIST {
                return Err(format!(
                    "create directory {}: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                )
                .into());
            }
            Ok(())
        }
        _ => Err(format!(
            "create directory {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        )
        .into()),
    }
}

/// Creates an empty file to mount over (an existing one is fine).
pub fn touch(path: &Path) -> Setup<()> {
    if let Some(parent) = path.parent() {
        mkdir_p(parent, 0o755)?;
    }
    let c = cstr(path)?;
    // SAFETY: `c` is a valid path; the returned fd is closed right away.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o644,
        )
    };
    if fd < 0 {
        if errno() == libc::EEXIST || errno() == libc::EISDIR {
            return Ok(());
        }
        return Err(format!(
            "create {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        )
        .into());
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    Ok(())
}

/// Writes `data` to an existing file (procfs, cgroupfs).
pub fn write_file(path: &Path, data: &[u8]) -> Setup<()> {
    std::fs::write(path, data).map_err(|e| format!("write {}: {e}", path.display()).into())
}

/// Writes all of `data` to a raw fd (best effort; used for reports).
pub fn write_all(fd: i32, mut data: &[u8]) {
    while !data.is_empty() {
        // SAFETY: `data` is a valid buffer of the given length.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        let Ok(n) = usize::try_from(n) else { return };
        if n == 0 {
            return;
        }
        data = &data[n..];
    }
}

/// A pipe whose both ends are close-on-exec.
pub fn pipe() -> Setup<(i32, i32)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    check(r.into(), || "create a pipe".into())?;
    Ok((fds[0], fds[1]))
}

/// Closes a descriptor, ignoring errors.
pub fn close(fd: i32) {
    // SAFETY: closing a descriptor we own (or an invalid one, which only fails).
    unsafe { libc::close(fd) };
}

/// Ends the process immediately, without running destructors or atexit handlers.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions.
    unsafe { libc::_exit(code) }
}

/// An empty signal set.
pub fn empty_sigset() -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the zeroed set.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut s);
        s
    }
}

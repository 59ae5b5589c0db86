//! The sandbox's private network namespace: made by the `clone` that creates PID 1 (when the
//! plan asks for it); PID 1 brings its loopback device up before anything else uses it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::Setup;
use crate::sys;

/// Brings the loopback device of the calling process's network namespace up.
pub fn loopback_up() -> Setup<()> {
    // SAFETY: socket with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    sys::check(fd.into(), || "open a socket to configure loopback".into())?;
    // SAFETY: a new descriptor, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq for these ioctls.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    sys::check(r.into(), || "read loopback flags".into())?;
    // SAFETY: ifru_flags is the member SIOCGIFFLAGS filled in.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: as above.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &req) };
    sys::check(r.into(), || "bring loopback up".into())?;
    Ok(())
}

//! Probes of what the host kernel offers, for the policy side's `doctor` and `prepare`. Each
//! is a safe function over the one raw system call (or forked child) it needs.

/// The Landlock ABI version the kernel reports (0 when Landlock is unavailable).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only
    // returns the ABI version; it reads and writes no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// Whether the kernel offers seccomp (`PR_GET_SECCOMP` answers when it is built in).
pub fn seccomp_available() -> bool {
    rustix::thread::secure_computing_mode().is_ok()
}

/// Whether `mount_setattr(2)` (recursive read-only binds, Linux 5.12) exists.
pub fn mount_setattr_available() -> bool {
    // SAFETY: an invalid descriptor, a null path and a null attr with size 0: the kernel
    // answers EINVAL/EBADF/EFAULT when the syscall exists and ENOSYS when not; nothing is read,
    // written or changed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            -1,
            std::ptr::null::<libc::c_char>(),
            0,
            std::ptr::null::<libc::c_void>(),
            0usize,
        )
    };
    !(r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS))
}

/// What a forked child could do in new user and mount namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceProbe {
    /// `Ok` when user and mount namespaces could be created, else why not.
    pub user_namespaces: Result<(), String>,
    /// Whether an overlayfs could be mounted inside them.
    pub overlayfs: bool,
}

/// Tries, in a forked child, to create user and mount namespaces and mount an overlayfs
/// inside them. Nothing outside the child changes.
pub fn namespaces() -> NamespaceProbe {
    let paths = ["/tmp", "/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m"]
        .map(|p| std::ffi::CString::new(p).expect("no NUL"));
    let tmpfs = std::ffi::CString::new("tmpfs").expect("no NUL");
    let overlay = std::ffi::CString::new("overlay").expect("no NUL");
    let opts =
        std::ffi::CString::new("lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w").expect("no NUL");
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let maps = [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("0 {uid} 1")),
        ("/proc/self/gid_map", format!("0 {gid} 1")),
    ]
    .map(|(p, v)| (std::ffi::CString::new(p).expect("no NUL"), v));
    // SAFETY: the child only makes raw syscalls on strings allocated before the fork, then
    // `_exit`s; it never returns into Rust code that could allocate or unwind.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: raw syscalls with valid, NUL-terminated pointers; the child never returns.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                libc::_exit(10 + (*libc::__errno_location()).min(200));
            }
            for (path, value) in &maps {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, value.as_ptr().cast(), value.len());
                    libc::close(fd);
                }
            }
            if libc::mount(
                tmpfs.as_ptr(),
                paths[0].as_ptr(),
                tmpfs.as_ptr(),
                0,
                std::ptr::null(),
            ) != 0
            {
                libc::_exit(2);
            }
            for p in &paths[1..] {
                libc::mkdir(p.as_ptr(), 0o755);
            }
            let r = libc::mount(
                overlay.as_ptr(),
                paths[4].as_ptr(),
                overlay.as_ptr(),
                0,
                opts.as_ptr().cast(),
            );
            libc::_exit(if r == 0 { 0 } else { 1 });
        }
    }
    if pid < 0 {
        return NamespaceProbe {
            user_namespaces: Err(std::io::Error::last_os_error().to_string()),
            overlayfs: false,
        };
    }
    let mut st = 0;
    loop {
        // SAFETY: reaping our own child into a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    let code = if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else {
        255
    };
    let (user_namespaces, overlayfs) = match code {
        0 => (Ok(()), true),
        1 | 2 => (Ok(()), false),
        c if c >= 10 => (
            Err(std::io::Error::from_raw_os_error(c - 10).to_string()),
            false,
        ),
        c => (Err(format!("probe exited {c}")), false),
    };
    NamespaceProbe {
        user_namespaces,
        overlayfs,
    }
}

/// Why this process may not create user namespaces, and how to fix it, from what can be read
/// without trying: the sysctls that disable them, AppArmor's restriction, a seccomp filter
/// over this process (a container's profile), or a cordon sandbox around it. `None` when
/// nothing explains a refusal.
pub fn namespace_refusal_remedy() -> Option<String> {
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/{name}"))
            .ok()
            .map(|v| v.trim().to_owned())
    };
    if crate::mounts::inside_a_sandbox() {
        return Some(
            "this runs inside a cordon sandbox, which refuses new namespaces: use --isolation \
             landlock (cordon chooses it by itself there)"
                .into(),
        );
    }
    if sysctl("user/max_user_namespaces").as_deref() == Some("0") {
        return Some(
            "user namespaces are disabled (user.max_user_namespaces = 0): `sysctl -w \
             user.max_user_namespaces=15000`, or use --isolation landlock"
                .into(),
        );
    }
    if sysctl("kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Some(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): \
             `sysctl -w kernel.unprivileged_userns_clone=1`, or use --isolation landlock"
                .into(),
        );
    }
    if sysctl("kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Some(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns = 1): install the AppArmor profile \
             cordon ships (packaging/apparmor/cordon: see docs/troubleshooting.md), or `sysctl -w \
             kernel.apparmor_restrict_unprivileged_userns=0`, or use --isolation landlock"
                .into(),
        );
    }
    let filtered = std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status.lines().any(|l| {
            l.split_once(':')
                .is_some_and(|(k, v)| k == "Seccomp" && v.trim() == "2")
        })
    });
    if filtered {
        return Some(
            "this process runs under a seccomp filter that refuses them, as a container's \
             default profile does (Docker, Podman): run the container with a profile that \
             allows clone/unshare with CLONE_NEWUSER (e.g. `--security-opt seccomp=unconfined`), \
             or use --isolation landlock"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_agree_with_the_kernel() {
        // This machine's kernel has all of these; a host without them fails here on purpose
        // only when the sandbox is required (CI).
        let required = std::env::var_os("CI").is_some_and(|v| v == "true")
            || std::env::var_os("CORDON_REQUIRE_SANDBOX").is_some_and(|v| v == "1");
        let abi = landlock_abi();
        let ns = namespaces();
        if required {
            assert!(abi > 0, "no Landlock");
            assert!(seccomp_available(), "no seccomp");
            assert!(mount_setattr_available(), "no mount_setattr");
            assert_eq!(ns.user_namespaces, Ok(()));
        }
        // The ABI file in sysfs-less setups is not readable; /proc/self/status shows the
        // seccomp mode field whenever seccomp exists.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(seccomp_available(), status.contains("\nSeccomp:"));
        if ns.overlayfs {
            assert_eq!(ns.user_namespaces, Ok(()));
        }
    }
}

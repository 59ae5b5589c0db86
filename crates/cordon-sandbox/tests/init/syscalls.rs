//! The system calls the seccomp filter must refuse, made for real: this test binary, copied
//! into a sandbox's working directory and run there as the program (`__probe-syscalls`),
//! makes each call with raw `syscall(2)` and prints one line per call: `NAME ok` or
//! `NAME errno N`. Arguments are chosen so that a call the filter failed to stop still does
//! no harm (null pointers, invalid descriptors, invalid flags) and, where it matters, fails
//! differently than the filter would: [`CONTROLS`] lists the calls whose unfiltered result is
//! checked to differ, run outside the sandbox (`__probe-syscalls-control`), which proves the
//! test would notice a missing rule.

/// The argument that makes the test binary probe the filter.
pub const PROBE_ARG: &str = "__probe-syscalls";
/// The argument that makes the test binary make a 32-bit `int 0x80` system call.
pub const INT80_ARG: &str = "__probe-int80";

/// `personality(PER_BSD)`: a persona change.
const PER_BSD: i64 = 0x0006;
/// The x32 system call bit.
#[cfg(target_arch = "x86_64")]
const X32: libc::c_long = 0x4000_0000;

/// What one call is expected to do under the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Refused with this errno.
    Errno(i32),
    /// Let through: anything but `EPERM`/`ENOSYS` from the filter.
    Allowed,
}

/// One probe: name, system call number, arguments, expectation.
pub struct Probe {
    pub name: &'static str,
    nr: libc::c_long,
    args: [i64; 6],
    pub expect: Expect,
}

const fn probe(name: &'static str, nr: libc::c_long, args: [i64; 6], expect: Expect) -> Probe {
    Probe {
        name,
        nr,
        args,
        expect,
    }
}

const REFUSED: Expect = Expect::Errno(libc::EPERM);
const NONE: [i64; 6] = [0; 6];
const BAD_FD: [i64; 6] = [-1, 0, 0, 0, 0, 0];

/// Placeholders patched at run time: an open `/dev/null`.
const DEV_NULL: i64 = i64::MIN;

/// Every probe, in order.
#[expect(
    clippy::too_many_lines,
    reason = "test code: a table of probes, one entry per syscall"
)]
pub fn probes() -> Vec<Probe> {
    use libc::*;
    let mut v = vec![
        // Refused whatever the arguments.
        probe("mount", SYS_mount, NONE, REFUSED),
        probe("umount2", SYS_umount2, NONE, REFUSED),
        probe("pivot_root", SYS_pivot_root, NONE, REFUSED),
        probe("chroot", SYS_chroot, NONE, REFUSED),
        probe(
            "unshare",
            SYS_unshare,
            [i64::from(CLONE_NEWUSER), 0, 0, 0, 0, 0],
            REFUSED,
        ),
        probe("setns", SYS_setns, BAD_FD, REFUSED),
        probe("ptrace", SYS_ptrace, [16, -1, 0, 0, 0, 0], REFUSED),
        probe(
            "process_vm_readv",
            SYS_process_vm_readv,
            [0, 0, 0, 0, 0, 1],
            REFUSED,
        ),
        probe(
            "process_vm_writev",
            SYS_process_vm_writev,
            [0, 0, 0, 0, 0, 1],
            REFUSED,
        ),
        probe(
            "pidfd_getfd",
            SYS_pidfd_getfd,
            [-1, -1, 0, 0, 0, 0],
            REFUSED,
        ),
        probe("bpf", SYS_bpf, [-1, 0, 0, 0, 0, 0], REFUSED),
        probe("keyctl", SYS_keyctl, [-1, 0, 0, 0, 0, 0], REFUSED),
        probe("add_key", SYS_add_key, NONE, REFUSED),
        probe("request_key", SYS_request_key, NONE, REFUSED),
        probe(
            "perf_event_open",
            SYS_perf_event_open,
            [0, 0, -1, -1, 0, 0],
            REFUSED,
        ),
        probe("userfaultfd", SYS_userfaultfd, [-1, 0, 0, 0, 0, 0], REFUSED),
        probe("kexec_load", SYS_kexec_load, [0, 0, 0, -1, 0, 0], REFUSED),
        probe(
            "kexec_file_load",
            SYS_kexec_file_load,
            [-1, -1, 0, 0, 0, 0],
            REFUSED,
        ),
        probe("init_module", SYS_init_module, NONE, REFUSED),
        probe("finit_module", SYS_finit_module, BAD_FD, REFUSED),
        probe("delete_module", SYS_delete_module, NONE, REFUSED),
        probe("open_by_handle_at", SYS_open_by_handle_at, BAD_FD, REFUSED),
        probe("name_to_handle_at", SYS_name_to_handle_at, BAD_FD, REFUSED),
        probe("acct", SYS_acct, [1, 0, 0, 0, 0, 0], REFUSED),
        probe("swapon", SYS_swapon, NONE, REFUSED),
        probe("swapoff", SYS_swapoff, NONE, REFUSED),
        probe("reboot", SYS_reboot, NONE, REFUSED),
        probe("syslog", SYS_syslog, [10, 0, 0, 0, 0, 0], REFUSED),
        probe("quotactl", SYS_quotactl, NONE, REFUSED),
        probe("vhangup", SYS_vhangup, NONE, REFUSED),
        probe("settimeofday", SYS_settimeofday, NONE, REFUSED),
        probe(
            "clock_settime",
            SYS_clock_settime,
            [-1, 0, 0, 0, 0, 0],
            REFUSED,
        ),
        probe(
            "clock_adjtime",
            SYS_clock_adjtime,
            [-1, 0, 0, 0, 0, 0],
            REFUSED,
        ),
        probe("fsopen", SYS_fsopen, NONE, REFUSED),
        probe("fsconfig", SYS_fsconfig, BAD_FD, REFUSED),
        probe("fsmount", SYS_fsmount, BAD_FD, REFUSED),
        probe("fspick", SYS_fspick, BAD_FD, REFUSED),
        probe("open_tree", SYS_open_tree, BAD_FD, REFUSED),
        probe("move_mount", SYS_move_mount, [-1, 0, -1, 0, 0, 0], REFUSED),
        probe("mount_setattr", SYS_mount_setattr, BAD_FD, REFUSED),
        probe("io_uring_setup", SYS_io_uring_setup, NONE, REFUSED),
        probe("io_uring_enter", SYS_io_uring_enter, BAD_FD, REFUSED),
        probe("io_uring_register", SYS_io_uring_register, BAD_FD, REFUSED),
        // Refused with these arguments only.
        probe(
            "clone_newuser",
            SYS_clone,
            [i64::from(CLONE_NEWUSER | SIGCHLD), 0, 0, 0, 0, 0],
            REFUSED,
        ),
        probe(
            "clone_newnet",
            SYS_clone,
            [i64::from(CLONE_NEWNET | SIGCHLD), 0, 0, 0, 0, 0],
            REFUSED,
        ),
        probe(
            "clone_fork",
            SYS_clone,
            [i64::from(SIGCHLD), 0, 0, 0, 0, 0],
            Expect::Allowed,
        ),
        probe("clone3", SYS_clone3, NONE, Expect::Errno(ENOSYS)),
        probe(
            "ioctl_tiocsti",
            SYS_ioctl,
            [DEV_NULL, TIOCSTI as i64, 0, 0, 0, 0],
            REFUSED,
        ),
        probe(
            "ioctl_tioclinux",
            SYS_ioctl,
            [DEV_NULL, TIOCLINUX as i64, 0, 0, 0, 0],
            REFUSED,
        ),
        probe(
            "ioctl_tcgets",
            SYS_ioctl,
            [DEV_NULL, TCGETS as i64, 0, 0, 0, 0],
            Expect::Allowed,
        ),
        probe(
            "personality_bsd",
            SYS_personality,
            [PER_BSD, 0, 0, 0, 0, 0],
            REFUSED,
        ),
        probe(
            "personality_query",
            SYS_personality,
            [0xffff_ffff, 0, 0, 0, 0, 0],
            Expect::Allowed,
        ),
        probe(
            "socket_vsock",
            SYS_socket,
            [i64::from(AF_VSOCK), i64::from(SOCK_STREAM), 0, 0, 0, 0],
            REFUSED,
        ),
        probe(
            "socket_unix",
            SYS_socket,
            [i64::from(AF_UNIX), i64::from(SOCK_STREAM), 0, 0, 0, 0],
            Expect::Allowed,
        ),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        probe("iopl", SYS_iopl, NONE, REFUSED),
        probe("ioperm", SYS_ioperm, NONE, REFUSED),
        probe("uselib", SYS_uselib, NONE, REFUSED),
        probe("modify_ldt", SYS_modify_ldt, NONE, REFUSED),
        // x32 system calls share x86_64's audit architecture: only the guard stops them.
        probe("x32_getpid", X32 | SYS_getpid, NONE, REFUSED),
        probe(
            "x32_unshare",
            X32 | SYS_unshare,
            [i64::from(CLONE_NEWUSER), 0, 0, 0, 0, 0],
            REFUSED,
        ),
    ]);
    v
}

/// Probes whose result outside the sandbox is checked to differ from the filter's verdict.
pub const CONTROLS: &[&str] = &[
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "modify_ldt",
    "socket_vsock",
    "clone3",
    "ioctl_tiocsti",
    "ioctl_tioclinux",
    "personality_bsd",
    "x32_getpid",
    "setns",
    "pidfd_getfd",
];

/// Makes every probe (the control run makes only [`CONTROLS`]) and prints the results.
pub fn run(control: bool) -> ! {
    // No controlling terminal: `vhangup` could otherwise hang up the caller's.
    // SAFETY: setsid has no memory-safety preconditions.
    unsafe { libc::setsid() };
    // SAFETY: opening /dev/null with a static path.
    let dev_null = i64::from(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) });
    for p in probes() {
        if control && !CONTROLS.contains(&p.name) {
            continue;
        }
        let a = p.args.map(|a| if a == DEV_NULL { dev_null } else { a });
        // SAFETY: every argument is an integer, a null pointer or an invalid descriptor; the
        // kernel validates them and the calls touch no memory of this process.
        let r = unsafe { libc::syscall(p.nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if r == 0 && p.nr == libc::SYS_clone {
            // The child of a clone that went through: leave at once.
            // SAFETY: _exit has no preconditions.
            unsafe { libc::_exit(0) };
        }
        if r > 0 && p.nr == libc::SYS_clone {
            // SAFETY: reaping the child just created.
            unsafe { libc::waitpid(r as i32, std::ptr::null_mut(), libc::__WALL) };
        }
        if r < 0 {
            println!("{} errno {errno}", p.name);
        } else {
            println!("{} ok", p.name);
        }
    }
    std::process::exit(0)
}

/// An i386 system call through `int 0x80` (getpid, number 20): a foreign architecture to the
/// filter, which kills the process (`SIGSYS`). Prints the result if it survives.
#[cfg(target_arch = "x86_64")]
pub fn int80() -> ! {
    let ret: i64;
    // SAFETY: `int 0x80` with eax = 20 is the i386 getpid; it reads no memory. The registers
    // the compat entry may touch are declared clobbered.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inlateout("rax") 20i64 => ret,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack)
        );
    }
    println!("int80 returned {ret}");
    std::process::exit(0)
}

/// Parses the probe's output into (name, result) pairs.
pub fn parse(stdout: &str) -> Vec<(String, Result<(), i32>)> {
    stdout
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(' ')?;
            let result = match rest.strip_prefix("errno ") {
                Some(n) => Err(n.parse().ok()?),
                None if rest == "ok" => Ok(()),
                None => return None,
            };
            Some((name.to_owned(), result))
        })
        .collect()
}

/// Whether `result` is what `expect` says the filter does.
pub fn matches(expect: Expect, result: Result<(), i32>) -> bool {
    match expect {
        Expect::Errno(e) => result == Err(e),
        Expect::Allowed => !matches!(result, Err(libc::EPERM | libc::ENOSYS)),
    }
}

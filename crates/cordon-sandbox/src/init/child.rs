//! The program's own process: drop every privilege, apply Landlock and seccomp, exec.

use std::ffi::CString;

use super::sys::{self, Setup};
use super::{Prepared, landlock, seccomp, status};

/// Runs in the forked child of PID 1; never returns. A failure is reported on `status_fd`
/// and the process exits 127 without running the program.
pub fn exec(p: &Prepared, status_fd: i32) -> ! {
    let err = setup_and_exec(p);
    status::send_error(status_fd, &err);
    sys::exit_now(127)
}

fn setup_and_exec(p: &Prepared) -> String {
    match setup(p) {
        Ok(()) => {}
        Err(e) => return e,
    }
    exec_program(p)
}

fn setup(p: &Prepared) -> Setup<()> {
    // SAFETY: plain syscalls without pointer arguments, or with pointers to live locals.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // The helper is a Rust program, whose runtime ignores SIGPIPE; an ignored signal stays
        // ignored across exec. The program starts with the default, as from a shell.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    for rl in &p.plan.rlimits {
        let lim = libc::rlimit {
            rlim_cur: rl.soft,
            rlim_max: rl.hard,
        };
        // SAFETY: `lim` is a valid rlimit.
        let r = unsafe { libc::setrlimit(rl.resource, &lim) };
        sys::check(r.into(), || format!("setrlimit({})", rl.resource))?;
    }
    // SAFETY: valid path.
    let r = unsafe { libc::chdir(p.workdir.as_ptr()) };
    sys::check(r.into(), || {
        format!("enter the working directory {:?}", p.workdir)
    })?;
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    sys::check(r.into(), || "set no_new_privs".into())?;
    drop_capabilities()?;
    if let Some(ll) = &p.plan.landlock {
        landlock::restrict(ll)?;
    }
    if let Some(filter) = &p.seccomp {
        seccomp::install(filter)?;
    }
    // Every inherited descriptor above stderr (the report pipe included) closes on exec.
    // SAFETY: close_range with the CLOEXEC flag only marks descriptors.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    sys::check(r, || "mark descriptors close-on-exec".into())?;
    Ok(())
}

fn drop_capabilities() -> Setup<()> {
    for cap in 0..=63 {
        // SAFETY: integer arguments only; EINVAL past the last capability ends the loop.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } < 0 {
            if sys::errno() == libc::EINVAL {
                break;
            }
            return Err(format!(
                "drop capability {cap} from the bounding set: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    // SAFETY: integer arguments only.
    let r = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    sys::check(r.into(), || "clear ambient capabilities".into())?;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and two data structs of the v3 layout.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    sys::check(r, || "drop all capabilities".into()).map(drop)
}

/// Executes the program (searching `PATH` for a bare name); returns why it failed.
fn exec_program(p: &Prepared) -> String {
    let argv: Vec<*const libc::c_char> = p
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let envp: Vec<*const libc::c_char> = p
        .envp
        .iter()
        .map(|a| a.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let mut last = libc::ENOENT;
    for candidate in &p.candidates {
        try_exec(candidate, &argv, &envp);
        let e = sys::errno();
        // Keep the most telling error: permission denied beats not found.
        if e != libc::ENOENT && e != libc::ENOTDIR {
            last = e;
        }
    }
    let name = p
        .argv
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    match last {
        libc::ENOENT => format!(
            "program not found in the sandbox: {name} (is it inside a visible directory? add --ro PATH)"
        ),
        libc::EACCES => format!(
            "cannot execute {name}: permission denied (not allowed by --allow-exec, or not executable)"
        ),
        e => format!(
            "cannot execute {name}: {}",
            std::io::Error::from_raw_os_error(e)
        ),
    }
}

fn try_exec(path: &CString, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) {
    // SAFETY: `path` is a valid C string; argv and envp are NULL-terminated arrays of valid
    // C strings that outlive the call.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
}

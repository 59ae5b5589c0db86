//! The program's own process: drop every privilege, apply Landlock and seccomp, exec.

use std::ffi::CString;

use rustix::process::{Resource, Signal};

use crate::error::{Setup, SetupError};
use crate::outer::Prepared;
use crate::plan::RlimitResource;
use crate::status::FailureKind;
use crate::{capabilities, landlock, status, sys};

/// Runs in the forked child of PID 1; never returns. A failure is reported on `status_fd`
/// and the process exits 127 without running the program.
pub fn exec(p: &Prepared, status_fd: i32) -> ! {
    let (kind, err) = match setup(p, status_fd) {
        Ok(()) => exec_program(p),
        Err(e) => (FailureKind::Setup, e.to_string()),
    };
    status::send_error(status_fd, kind, &err);
    sys::exit_now(127)
}

/// The `setrlimit` resource of a plan's limit.
pub fn resource(r: RlimitResource) -> Resource {
    match r {
        RlimitResource::Core => Resource::Core,
        RlimitResource::Cpu => Resource::Cpu,
        RlimitResource::FileSize => Resource::Fsize,
        RlimitResource::OpenFiles => Resource::Nofile,
        RlimitResource::AddressSpace => Resource::As,
        RlimitResource::Processes => Resource::Nproc,
    }
}

fn setup(p: &Prepared, status_fd: i32) -> Setup<()> {
    rustix::process::setsid().map_err(|e| format!("start a session: {e}"))?;
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| format!("set the parent-death signal: {e}"))?;
    // The helper is a Rust program, whose runtime ignores SIGPIPE; an ignored signal stays
    // ignored across exec. The program starts with the default, as from a shell.
    // SAFETY: installing the default disposition runs no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    for rl in &p.plan.rlimits {
        let lim = rustix::process::Rlimit {
            current: Some(rl.soft),
            maximum: Some(rl.hard),
        };
        rustix::process::setrlimit(resource(rl.resource), lim)
            .map_err(|e| format!("setrlimit({:?}): {e}", rl.resource))?;
    }
    rustix::process::chdir(p.workdir.as_c_str())
        .map_err(|e| format!("enter the working directory {:?}: {e}", p.workdir))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("set no_new_privs: {e}"))?;
    capabilities::drop_all()?;
    if let Some(ll) = &p.plan.landlock {
        let unenforced = landlock::restrict(ll)?;
        if !unenforced.is_empty() {
            status::send_landlock_unenforced(status_fd, &unenforced);
        }
    }
    if let Some(filter) = &p.seccomp {
        filter
            .install()
            .map_err(|e| SetupError::from(e.to_string()))?;
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

/// Executes the program (searching `PATH` for a bare name); returns why it failed.
fn exec_program(p: &Prepared) -> (FailureKind, String) {
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
        libc::ENOENT => (
            FailureKind::NotFound,
            format!(
                "program not found in the sandbox: {name} (is it inside a visible directory? add --ro PATH)"
            ),
        ),
        libc::EACCES => (
            FailureKind::NotExecutable,
            format!(
                "cannot execute {name}: permission denied (not allowed by --allow-exec, or not executable)"
            ),
        ),
        e => (
            FailureKind::NotExecutable,
            format!(
                "cannot execute {name}: {}",
                std::io::Error::from_raw_os_error(e)
            ),
        ),
    }
}

fn try_exec(path: &CString, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) {
    // SAFETY: `path` is a valid C string; argv and envp are NULL-terminated arrays of valid
    // C strings that outlive the call.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
}

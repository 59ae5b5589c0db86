//! Starting the program the way `posix_spawn` does: `clone(CLONE_VM | CLONE_VFORK)` on a
//! small stack of its own, a few system calls, `execve`.
//!
//! `std::process::Command` with a `pre_exec` hook (which cordon needs: a session of its own,
//! the parent-death signal, the report pipe at a fixed number) falls back to `fork`: the
//! kernel copies cordon's page tables, both processes then fault on every page they write,
//! and the copy is torn down again at `execve`. A child that shares cordon's memory until it
//! executes costs none of that. posix_spawn itself cannot be used: it has no parent-death
//! signal.
//!
//! The child runs only async-signal-safe system calls on data prepared here before the clone
//! (C strings, pointer arrays): it allocates nothing, takes no lock and returns nothing
//! through the stack. cordon's thread is suspended until the child has executed the program
//! (or exited), so that data stays valid; other threads run on, which is why nothing the child
//! touches is shared with them. Signals are blocked across the clone and every handler is
//! reset to the default in the child before they are unblocked, so no handler of cordon's
//! ever runs in it. An exec failure is left in [`Spawn::error`] (shared memory) for the
//! parent to report.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use cordon_types::{CHILD_NETWORK_FD, CHILD_REPORT_FD};

/// The child's stack: it runs a few frames of straight-line code.
const STACK_BYTES: usize = 256 * 1024;

/// Where a standard descriptor of the child comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdio {
    /// cordon's own descriptor of that number.
    Inherit,
    /// This descriptor (dup'ed onto the standard number).
    Fd(RawFd),
}

/// Everything the child needs, as C data, prepared before the clone.
pub(crate) struct Spawn {
    /// Paths to try, in order (one for a program named with a slash, else a `PATH` search).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    stdin: Stdio,
    stdout: RawFd,
    stderr: RawFd,
    report_fd: Option<RawFd>,
    network_fd: Option<RawFd>,
}

/// The program, its arguments and environment, and where it runs.
pub(crate) struct Command<'a> {
    pub program: &'a OsStr,
    /// `argv[0]`, when it is not `program`.
    pub arg0: Option<&'a OsStr>,
    pub args: &'a [OsString],
    /// The complete environment of the program.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: &'a Path,
    pub stdin: Stdio,
    pub stdout: RawFd,
    pub stderr: RawFd,
    /// The report pipe's write end, placed at [`CHILD_REPORT_FD`].
    pub report_fd: Option<RawFd>,
    /// The network socket, placed at [`CHILD_NETWORK_FD`].
    pub network_fd: Option<RawFd>,
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    let mut owned = Vec::with_capacity(bytes.len() + 1);
    owned.extend_from_slice(bytes);
    cstring_from(owned)
}

/// `bytes` as a C string; allocates nothing when `bytes` has room for the NUL.
fn cstring_from(bytes: Vec<u8>) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "an argument, variable or path contains a NUL byte",
        )
    })
}

impl Spawn {
    /// Prepares `cmd`: C strings, and the `PATH` search's candidates (as `execvp` does, from
    /// the program's own `PATH`, else `/bin:/usr/bin`).
    pub(crate) fn new(cmd: Command<'_>) -> std::io::Result<Spawn> {
        let program = cmd.program.as_bytes();
        let candidates = if program.contains(&b'/') {
            vec![cstring(program)?]
        } else if program.is_empty() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        } else {
            let path = cmd
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map_or(&b"/bin:/usr/bin"[..], |(_, v)| v.as_bytes());
            path.split(|b| *b == b':')
                .map(|dir| {
                    // An empty element is the current directory, as for execvp.
                    let dir = if dir.is_empty() { &b"."[..] } else { dir };
                    let mut full = Vec::with_capacity(dir.len() + 1 + program.len() + 1);
                    full.extend_from_slice(dir);
                    full.push(b'/');
                    full.extend_from_slice(program);
                    cstring_from(full)
                })
                .collect::<std::io::Result<Vec<_>>>()?
        };
        let argv = std::iter::once(cmd.arg0.unwrap_or(cmd.program))
            .chain(cmd.args.iter().map(OsString::as_os_str))
            .map(|a| cstring(a.as_bytes()))
            .collect::<std::io::Result<Vec<_>>>()?;
        let envp = cmd
            .env
            .iter()
            .map(|(k, v)| {
                // Room for the NUL too: `CString` adds it without growing the buffer.
                let mut kv = Vec::with_capacity(k.len() + 1 + v.len() + 1);
                kv.extend_from_slice(k.as_bytes());
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstring_from(kv)
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Spawn {
            candidates,
            argv,
            envp,
            cwd: cstring(cmd.cwd.as_os_str().as_bytes())?,
            stdin: cmd.stdin,
            stdout: cmd.stdout,
            stderr: cmd.stderr,
            report_fd: cmd.report_fd,
            network_fd: cmd.network_fd,
        })
    }

    /// Starts the child; returns its pid once it has executed the program, or the error that
    /// kept it from doing so (the child is then reaped).
    pub(crate) fn spawn(&self) -> std::io::Result<libc::pid_t> {
        let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
            v.iter()
                .map(|c| c.as_ptr())
                .chain([std::ptr::null()])
                .collect()
        };
        let argv = ptrs(&self.argv);
        let envp = ptrs(&self.envp);
        // `/bin/sh PATH ARGS...` for a file the kernel cannot execute itself (`ENOEXEC`), as
        // execvp does; slot 1 is filled by the child.
        let mut sh_argv: Vec<*const libc::c_char> = vec![c"/bin/sh".as_ptr(), std::ptr::null()];
        sh_argv.extend(argv.iter().skip(1).copied());
        let mut child = Child {
            spawn: self,
            argv: argv.as_ptr(),
            envp: envp.as_ptr(),
            sh_argv: sh_argv.as_mut_ptr(),
            old_mask: empty_sigset(),
            error: 0,
            stage: Stage::Started,
        };
        let stack = Stack::new()?;
        // Block every signal across the clone: the child must not run a handler of cordon's
        // before it has reset them.
        let all = full_sigset();
        // SAFETY: valid sigset pointers.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut child.old_mask) };
        // SAFETY: the child runs `child_main` on its own stack with a pointer to `child`,
        // which lives until clone returns: CLONE_VFORK suspends this thread until the child
        // has executed a program or exited. The child makes only async-signal-safe system
        // calls on memory prepared above.
        let pid = unsafe {
            libc::clone(
                child_main,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw mut child).cast(),
            )
        };
        let clone_error = std::io::Error::last_os_error();
        // SAFETY: restores this thread's mask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &child.old_mask, std::ptr::null_mut()) };
        // The child has executed a program or exited (or was never made): its stack is free.
        drop(stack);
        if pid < 0 {
            return Err(clone_error);
        }
        // SAFETY: `child` is ours again (the child has executed a program or exited); the read
        // is volatile because the child wrote it behind the compiler's back.
        let error = unsafe { std::ptr::read_volatile(&raw const child.error) };
        if error != 0 {
            // The child exited without executing anything: reap it, report why.
            let mut status = 0;
            // SAFETY: our own child, valid out-pointer.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
            let error = std::io::Error::from_raw_os_error(error);
            return Err(match child.stage {
                Stage::Started | Stage::Exec => error,
                stage => std::io::Error::new(
                    error.kind(),
                    format!("{} in the new process: {error}", stage.what()),
                ),
            });
        }
        Ok(pid)
    }
}

/// The first descriptor number the child does not keep: above the standard ones, and the
/// report pipe and network socket when it is given them.
fn first_private(spawn: &Spawn) -> libc::c_uint {
    if spawn.network_fd.is_some() {
        CHILD_NETWORK_FD as libc::c_uint + 1
    } else if spawn.report_fd.is_some() {
        CHILD_REPORT_FD as libc::c_uint + 1
    } else {
        3
    }
}

/// Which step of the child failed (for the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Stage {
    Started,
    Session,
    DeathSignal,
    Descriptors,
    Directory,
    Exec,
}

impl Stage {
    fn what(self) -> &'static str {
        match self {
            Stage::Started | Stage::Exec => "start the program",
            Stage::Session => "start a session (setsid)",
            Stage::DeathSignal => "set the parent-death signal",
            Stage::Descriptors => "set up the descriptors",
            Stage::Directory => "enter the working directory",
        }
    }
}

/// What the child reads and writes (in the parent's memory, which it shares).
struct Child<'a> {
    spawn: &'a Spawn,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    sh_argv: *mut *const libc::c_char,
    old_mask: libc::sigset_t,
    /// The errno that kept the child from executing the program (0: it did).
    error: i32,
    stage: Stage,
}

/// The child's stack: an anonymous mapping with a guard page below it.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn new() -> std::io::Result<Stack> {
        let page = 4096;
        let len = STACK_BYTES + page;
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the lowest page of the mapping just made becomes the guard page.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            let error = std::io::Error::last_os_error();
            // SAFETY: unmapping what was mapped above.
            unsafe { libc::munmap(base, len) };
            return Err(error);
        }
        Ok(Stack { base, len })
    }

    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping (the stack grows down from there).
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Stack::new`, no longer used (the child has executed a
        // program or exited: it runs on its own memory, if at all).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

fn empty_sigset() -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the zeroed set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    }
}

fn full_sigset() -> libc::sigset_t {
    // SAFETY: sigfillset initializes the zeroed set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        set
    }
}

fn errno() -> i32 {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// The child: runs on its own stack in cordon's memory, until `execve` or `_exit`.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Child` the suspended parent passed to clone.
    let child = unsafe { &mut *arg.cast::<Child<'_>>() };
    // SAFETY: system calls on integers and the prepared data only.
    let error = unsafe { child_setup(child) };
    child.error = if error == 0 { libc::ENOEXEC } else { error };
    // SAFETY: ends the child without running anything of the parent's (no atexit, no
    // destructors, no stdio flush).
    unsafe { libc::_exit(127) }
}

/// Returns the errno that stopped the child (it does not return when the program runs).
///
/// # Safety
/// Called only in the cloned child, with `child` prepared by [`Spawn::spawn`].
unsafe fn child_setup(child: &mut Child<'_>) -> i32 {
    let spawn = child.spawn;
    // SAFETY: as documented for both.
    unsafe {
        let error = child_prepare(child);
        if error != 0 {
            return error;
        }
        // execvp's search: permission denied is remembered and the search goes on; a missing
        // file or directory goes on; anything else stops it.
        child.stage = Stage::Exec;
        let mut error = libc::ENOENT;
        let mut denied = false;
        for candidate in &spawn.candidates {
            libc::execve(candidate.as_ptr(), child.argv, child.envp);
            let e = errno();
            if e == libc::ENOEXEC {
                *child.sh_argv.add(1) = candidate.as_ptr();
                libc::execve(c"/bin/sh".as_ptr(), child.sh_argv.cast_const(), child.envp);
                return errno();
            }
            match e {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                other => return other,
            }
            error = e;
        }
        if denied { libc::EACCES } else { error }
    }
}

/// The child's steps before the program: signal dispositions and mask, a session, the
/// parent-death signal, the descriptors, the working directory. Returns 0 or the errno of the
/// step left in `child.stage`.
///
/// # Safety
/// Called only in the cloned child, with `child` prepared by [`Spawn::spawn`] (or a copy of
/// it, in a child that does not share cordon's memory).
unsafe fn child_prepare(child: &mut Child<'_>) -> i32 {
    let spawn = child.spawn;
    // SAFETY: only async-signal-safe system calls on integers, on the prepared C strings and
    // pointer arrays, and on local buffers.
    unsafe {
        // No handler of cordon's may run here: every caught signal goes back to the default
        // (ignored ones stay ignored across exec, as always), then the blocked set is emptied
        // as std does for its children. SIGPIPE (ignored by Rust's runtime) and SIGTTIN
        // (ignored by cordon while it forwards a terminal) start at the default, as from a
        // shell.
        for sig in 1..=libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let caught = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            if caught || sig == libc::SIGPIPE || sig == libc::SIGTTIN {
                let default: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
        let none = empty_sigset();
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());

        // A session of its own: the run's processes share a session id cordon can recognise,
        // and the terminal's job-control signals do not reach them.
        child.stage = Stage::Session;
        if libc::setsid() < 0 {
            return errno();
        }
        // The program dies with the thread that spawned it, whatever kills cordon.
        child.stage = Stage::DeathSignal;
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return errno();
        }
        child.stage = Stage::Descriptors;
        let onto = |from: RawFd, to: RawFd| -> i32 {
            if from == to {
                let flags = libc::fcntl(from, libc::F_GETFD);
                if flags < 0 || libc::fcntl(from, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return errno();
                }
            } else if libc::dup2(from, to) < 0 {
                return errno();
            }
            0
        };
        if let Stdio::Fd(fd) = spawn.stdin {
            let e = onto(fd, 0);
            if e != 0 {
                return e;
            }
        }
        for (fd, to) in [(spawn.stdout, 1), (spawn.stderr, 2)] {
            let e = onto(fd, to);
            if e != 0 {
                return e;
            }
        }
        // Descriptors cordon inherited from its own parent stay out of the program: every one
        // above the standard ones (and the report pipe and network socket) is marked
        // close-on-exec. Best effort on old kernels.
        let first_private = first_private(spawn);
        // Out of the way of the fixed numbers first (the report pipe may be moved onto it).
        let network_fd = match spawn.network_fd {
            Some(fd) => match libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) {
                -1 => return errno(),
                moved => Some(moved),
            },
            None => None,
        };
        libc::syscall(
            libc::SYS_close_range,
            first_private,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if let Some(fd) = spawn.report_fd {
            let e = onto(fd, CHILD_REPORT_FD);
            if e != 0 {
                return e;
            }
        }
        if let Some(fd) = network_fd
            && libc::dup2(fd, CHILD_NETWORK_FD) < 0
        {
            return errno();
        }
        child.stage = Stage::Directory;
        if libc::chdir(spawn.cwd.as_ptr()) < 0 {
            return errno();
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Runs `program` with its output and errors on one pipe; returns its wait status and
    /// what it printed.
    fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> std::io::Result<(i32, String)> {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let spawn = Spawn::new(Command {
            program: program.as_ref(),
            arg0: None,
            args: &args,
            env: env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            cwd: Path::new("/"),
            stdin: Stdio::Inherit,
            stdout: w.as_raw_fd(),
            stderr: w.as_raw_fd(),
            report_fd: None,
            network_fd: None,
        })?;
        let pid = spawn.spawn()?;
        drop(w);
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(r), &mut out).unwrap();
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        Ok((status, String::from_utf8_lossy(&out).into_owned()))
    }

    #[test]
    fn runs_a_program_from_path_with_its_environment_and_directory() {
        let (status, out) = run(
            "sh",
            // `exec`: the shell's own mask, as it started (a waiting shell blocks signals).
            &[
                "-c",
                "echo \"$X $(pwd)\"; exec grep SigBlk /proc/self/status",
            ],
            &[("PATH", "/nonexistent:/usr/bin:/bin"), ("X", "y")],
        )
        .unwrap();
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status:#x} {out}"
        );
        // Signals are not blocked in the program, whatever cordon's thread blocks.
        assert_eq!(out, "y /\nSigBlk:\t0000000000000000\n");
    }

    #[test]
    fn a_missing_program_is_not_found_and_a_directory_is_denied() {
        let missing = run("cordon-no-such-program", &[], &[("PATH", "/usr/bin")]).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        let dir = run("/", &[], &[]).unwrap_err();
        assert_eq!(dir.kind(), std::io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn a_script_without_interpreter_line_runs_with_sh() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("plain");
        std::fs::write(&script, "echo from-sh\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let (status, out) = run(script.to_str().unwrap(), &[], &[]).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(out, "from-sh\n");
    }
}

//! The sandbox's PID 1 without the helper executable: cordon clones a child of its own into
//! the new namespaces and runs the helper's code there, instead of starting the helper
//! (`execve` of a second program, its C library start-up, the plan's JSON both ways).
//!
//! Only a process that is single-threaded when it clones may do this: the child is a copy of
//! it that goes on running Rust code (it allocates), which is sound only when no other thread
//! could have held a lock at the moment of the copy. cordon's executor checks that and starts
//! the helper executable otherwise.
//!
//! What the child holds of cordon's memory (cordon's own environment, the redactor's secret
//! values) stays out of the program's reach: PID 1 keeps every capability of the sandbox's
//! user namespace while the program has none, so the kernel refuses the program `ptrace` and
//! the `/proc/1` files that need it (`environ`, `mem`, `maps`), and PID 1 also makes itself
//! non-dumpable. The program's own process replaces that memory with `execve`.

use std::ffi::{OsStr, OsString};

use crate::entry::report_and_exit;
use crate::plan::InitPlan;
use crate::{outer, pid1};

/// A sandbox, ready to be run by PID 1 in a child that cordon clones itself into the plan's
/// namespaces ([`InProcessInit::namespaces`]) with the report pipe at
/// [`cordon_types::CHILD_REPORT_FD`].
#[derive(Clone, PartialEq, Eq)]
pub struct InProcessInit {
    plan: InitPlan,
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl std::fmt::Debug for InProcessInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment's values may be secrets: its names only.
        let names: Vec<&OsString> = self.env.iter().map(|(k, _)| k).collect();
        f.debug_struct("InProcessInit")
            .field("plan", &self.plan)
            .field("argv", &self.argv)
            .field("env_names", &names)
            .finish()
    }
}

impl InProcessInit {
    /// The plan, the program, its arguments and its complete environment. `None` when the
    /// plan needs the helper's outer process (cgroup limits: the outer process creates the
    /// cgroups and places PID 1 in them before it goes on).
    pub fn new(
        plan: InitPlan,
        program: &OsStr,
        args: &[OsString],
        env: Vec<(OsString, OsString)>,
    ) -> Option<InProcessInit> {
        if plan.spawn_namespaces() == 0 {
            return None;
        }
        let argv = std::iter::once(program.to_owned())
            .chain(args.iter().cloned())
            .collect();
        Some(InProcessInit { plan, argv, env })
    }

    /// The namespaces (`CLONE_NEW*` flags) the child must be cloned into.
    pub fn namespaces(&self) -> i32 {
        self.plan.spawn_namespaces()
    }

    /// Runs the sandbox as its PID 1 and exits; the report goes to
    /// [`cordon_types::CHILD_REPORT_FD`] exactly as the helper executable writes it.
    ///
    /// Call it only in a child cloned (without `CLONE_VM`) into [`Self::namespaces`] from a
    /// single-threaded process, with the standard descriptors and the report pipe (and the
    /// network socket, for a proxy) in place and every other descriptor closed.
    pub fn run(&self) -> ! {
        // As the helper executable's `main` does (and Rust's runtime): a write to a closed
        // pipe is an error, not a signal.
        // SAFETY: making a signal ignored runs no code.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        hide_cordons_command_line();
        let outcome = outer::prepare_from(self.plan.clone(), self.argv.clone(), self.env.clone())
            .and_then(|prepared| pid1::run_in_place(&prepared));
        report_and_exit(outcome)
    }
}

/// What `/proc/1/cmdline` shows the program instead of cordon's own command line (its options,
/// host paths) and environment, which this copy of cordon still holds.
const PROCESS_TITLE: &[u8] = b"cordon-sandbox\0";

/// Overwrites this process's copy of cordon's arguments and environment strings, where the
/// kernel reads `/proc/self/cmdline` and `/proc/self/environ` (`arg_start`..`arg_end` and
/// `env_start`..`env_end` of `/proc/self/stat`). Best effort: without those fields, nothing is
/// changed (the environment stays unreadable to the program anyway: PID 1 is not dumpable).
fn hide_cordons_command_line() {
    let Some([arg_start, arg_end, env_start, env_end]) = argument_areas() else {
        return;
    };
    for (start, end, title) in [
        (arg_start, arg_end, PROCESS_TITLE),
        (env_start, env_end, &[][..]),
    ] {
        let Some(len) = end.checked_sub(start).filter(|len| *len > 0) else {
            continue;
        };
        // SAFETY: the kernel's own bounds of this process's argument (environment) strings,
        // on its stack, mapped and writable; nothing in this process reads them again (the
        // sandbox's code has its own copies, std's `args` is never called here).
        let area = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, len) };
        area.fill(0);
        let n = title.len().min(len);
        area[..n].copy_from_slice(&title[..n]);
    }
}

/// Fields 48 to 51 of `/proc/self/stat`.
fn argument_areas() -> Option<[usize; 4]> {
    // Read into a buffer the whole line fits in (52 numbers and a 16-byte name, a few hundred
    // bytes): `fs::read` of a file whose size reads 0 grows its buffer from 32 bytes, one
    // `read` per doubling.
    let mut buf = [0u8; 2048];
    let mut file = std::fs::File::open("/proc/self/stat").ok()?;
    let mut len = 0;
    while len < buf.len() {
        match std::io::Read::read(&mut file, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    // The whole line or nothing: a field cut short would read as a smaller number.
    if len == buf.len() || buf[..len].last() != Some(&b'\n') {
        return None;
    }
    let stat = &buf[..len];
    let field = |n| cordon_types::proc_stat::number::<usize>(stat, n);
    Some([field(48)?, field(49)?, field(50)?, field(51)?])
}

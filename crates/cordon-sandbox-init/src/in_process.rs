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
use crate::error::SetupError;
use crate::plan::InitPlan;
use crate::{outer, pid1};

/// A sandbox, ready to be run by PID 1 in a child that cordon clones itself into the plan's
/// namespaces ([`InProcessInit::namespaces`]) with the report pipe at
/// [`cordon_types::CHILD_REPORT_FD`].
///
/// Everything PID 1 needs is allocated here, before the clone (the program's argv and
/// environment as C strings, the compiled seccomp filter): the child is a copy-on-write copy
/// of cordon, and every page it writes is copied for it, so building them in the child cost
/// it a copied page per page its allocations touched. The child only reads them, and frees
/// nothing (it ends with `_exit`).
#[derive(Clone, PartialEq, Eq)]
pub struct InProcessInit {
    plan: InitPlan,
    /// What the helper's `prepare` makes of the plan, the program and its environment, or why
    /// it could not (reported by PID 1 as a set-up failure, as the helper executable does).
    prepared: Result<outer::Prepared, SetupError>,
}

impl std::fmt::Debug for InProcessInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment's values may be secrets: its names only.
        let mut s = f.debug_struct("InProcessInit");
        s.field("plan", &self.plan);
        match &self.prepared {
            Ok(p) => {
                let names: Vec<std::borrow::Cow<'_, str>> = p
                    .envp
                    .iter()
                    .map(|kv| {
                        kv.as_bytes()
                            .split(|b| *b == b'=')
                            .next()
                            .unwrap_or_default()
                    })
                    .map(String::from_utf8_lossy)
                    .collect();
                s.field("argv", &p.argv).field("env_names", &names)
            }
            Err(e) => s.field("prepare_error", e),
        };
        s.finish()
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
        let prepared = outer::prepare_from(plan.clone(), argv, env);
        Some(InProcessInit { plan, prepared })
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
        let outcome = match &self.prepared {
            Ok(prepared) => pid1::run_in_place(prepared),
            Err(e) => Err(e.clone()),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(workdir: &str) -> InitPlan {
        InitPlan {
            mounts: Vec::new(),
            workdir: workdir.into(),
            private_network: true,
            network_thread: crate::plan::NetworkThread::Auto,
            landlock: None,
            seccomp: false,
            rlimits: Vec::new(),
            cgroup: None,
            uid: 1000,
            gid: 1000,
            noexec: Vec::new(),
            proxy_port: None,
        }
    }

    #[test]
    fn what_pid_1_needs_is_made_before_the_clone() {
        let env = vec![
            ("PATH".into(), "/opt/bin::/usr/bin".into()),
            ("API_TOKEN".into(), "s3cr3t-value".into()),
        ];
        let init = InProcessInit::new(plan("/w"), OsStr::new("make"), &["all".into()], env)
            .expect("a plan with namespaces runs in process");
        let prepared = init.prepared.as_ref().expect("prepared");
        assert_eq!(prepared.argv, [c"make".to_owned(), c"all".to_owned()]);
        assert_eq!(
            prepared.envp,
            [
                c"PATH=/opt/bin::/usr/bin".to_owned(),
                c"API_TOKEN=s3cr3t-value".to_owned()
            ]
        );
        // A bare name is looked for in PATH's directories (empty entries skipped).
        assert_eq!(
            prepared.candidates,
            [c"/opt/bin/make".to_owned(), c"/usr/bin/make".to_owned()]
        );
        assert_eq!(prepared.workdir, c"/w".to_owned());
        // Shown with the environment's names only: its values may be secrets.
        let shown = format!("{init:?}");
        assert!(shown.contains("API_TOKEN"), "{shown}");
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
    }

    #[test]
    fn what_cannot_be_prepared_is_kept_for_pid_1_to_report() {
        // A working directory with a NUL byte cannot be a C string: PID 1 reports it as the
        // set-up failure, as the helper executable does, instead of running anything.
        let init = InProcessInit::new(plan("/w\0x"), OsStr::new("/bin/true"), &[], Vec::new())
            .expect("a plan with namespaces runs in process");
        let error = init.prepared.as_ref().err().expect("an error");
        assert!(error.to_string().contains("NUL byte"), "{error}");
        assert!(format!("{init:?}").contains("prepare_error"));
    }
}

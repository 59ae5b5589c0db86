//! The helper (`cordon __sandbox-init -- PROGRAM ARGS...`): three processes.
//!
//! - **outer** (this process, in the host's namespaces): reads the plan, compiles seccomp,
//!   creates the cgroups, clones PID 1 into new namespaces, writes its uid/gid maps, waits,
//!   reads the cgroup counters, removes the cgroups and writes the [`ChildReport`].
//! - **pid1** (PID 1 of the new PID namespace): builds the root, forks the program, reaps
//!   every orphan, forwards termination signals, reports the program's end.
//! - **child** (the program's process): rlimits, `no_new_privs`, no capabilities, Landlock,
//!   seccomp, exec.

mod cgroup;
mod child;
mod landlock;
mod mounts;
mod outer;
mod pid1;
mod seccomp;
mod status;
mod sys;

use std::ffi::CString;

use cordon_types::{CHILD_REPORT_FD, ChildReport};

use crate::plan::InitPlan;

/// Everything the forked processes need, allocated before any fork.
struct Prepared {
    plan: InitPlan,
    /// The program's argv.
    argv: Vec<CString>,
    /// The program's environment (`NAME=value`).
    envp: Vec<CString>,
    /// Paths to try for the program (a `PATH` search when it has no slash).
    candidates: Vec<CString>,
    /// The working directory.
    workdir: CString,
    /// The compiled seccomp filter, when enforced.
    seccomp: Option<seccomp::Filter>,
}

/// The helper's entry point. Call it first thing in `main` when `argv[1]` is
/// [`crate::INIT_ARG`], before any thread exists. Writes one [`ChildReport`] to
/// [`CHILD_REPORT_FD`] and exits 0; a set-up failure becomes `setup_error` and the program
/// does not run.
pub fn init_main() -> ! {
    let report = match outer::run() {
        Ok(report) => report,
        Err(e) => ChildReport {
            setup_error: Some(format!("sandbox set-up failed: {e}")),
            ..ChildReport::default()
        },
    };
    let mut text = serde_json::to_vec(&report).expect("a report serializes");
    text.push(b'\n');
    sys::write_all(CHILD_REPORT_FD, &text);
    sys::close(CHILD_REPORT_FD);
    sys::exit_now(0)
}

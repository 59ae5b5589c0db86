//! The helper's entry point: run the sandbox, write the report, exit.

use cordon_types::{CHILD_REPORT_FD, ChildReport, ChildRusage};

use crate::{outer, sys};

/// The helper's entry point. Call it first thing in `main` when `argv[1]` is
/// [`crate::INIT_ARG`], before any thread exists (it creates a user namespace, which a
/// multi-threaded process cannot). Writes one [`ChildReport`] to [`CHILD_REPORT_FD`] and
/// exits 0; a set-up failure becomes `setup_error` and the program does not run.
///
/// With [`crate::OVERLAY_EXEC_ENV`] set instead of a plan, it mounts a copy-on-write tree in
/// a private namespace and executes the program there (see [`crate::OverlayExec`]).
///
/// A plan written by a cordon of another build (its [`crate::BUILD_ENV`] is not this build's
/// [`crate::HELPER_BUILD`]: an older helper left beside a newer cordon) is refused, never run.
pub fn init_main() -> ! {
    let build = std::env::var_os(crate::BUILD_ENV);
    let same_build = build.as_deref().is_some_and(|b| b == crate::HELPER_BUILD);
    if let Some(plan) = std::env::var_os(crate::overlay_exec::OVERLAY_EXEC_ENV) {
        if !same_build {
            eprintln!("cordon: {}", other_build(build.as_deref()));
            sys::exit_now(125)
        }
        crate::overlay_exec::run(&plan)
    }
    if !same_build {
        report_and_exit(Err(other_build(build.as_deref()).into()))
    }
    report_and_exit(outer::run())
}

/// Why a helper refuses a plan of another build.
fn other_build(build: Option<&std::ffi::OsStr>) -> String {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "cordon-sandbox-init".into());
    match build {
        Some(build) => format!(
            "{exe} is build {} but cordon is build {}: install cordon and its helper together \
             (cargo install --path crates/cordon installs both)",
            crate::HELPER_BUILD,
            build.to_string_lossy()
        ),
        None => format!("{exe} was started without cordon's build identity"),
    }
}

/// Writes the report of a run (or of why the sandbox could not be set up) to
/// [`CHILD_REPORT_FD`] and exits 0.
///
/// The report is the supervisor's last word: its other descriptors (the program's output
/// pipes among them) are closed first, so that cordon, which treats the report's end as the
/// end of the run, finds the output complete too; what is left of the process's exit (the
/// sandbox's namespaces taken down) then happens while cordon goes on.
pub(crate) fn report_and_exit(outcome: crate::error::Setup<ChildReport>) -> ! {
    let mut report = match outcome {
        Ok(report) => report,
        Err(e) => ChildReport {
            setup_error: Some(format!("sandbox set-up failed: {e}")),
            ..ChildReport::default()
        },
    };
    report.tree_rusage = Some(tree_rusage());
    // SAFETY: closing descriptors of this process, none of which is used again (the report
    // pipe is kept).
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            0u32,
            (CHILD_REPORT_FD - 1) as u32,
            0u32,
        );
        libc::syscall(
            libc::SYS_close_range,
            (CHILD_REPORT_FD + 1) as u32,
            u32::MAX,
            0u32,
        );
    }
    let mut text = serde_json::to_vec(&report).expect("a report serializes");
    text.push(b'\n');
    sys::write_all(CHILD_REPORT_FD, &text);
    sys::close(CHILD_REPORT_FD);
    sys::exit_now(0)
}

/// This process's CPU time and that of every child it reaped, and its largest peak memory.
fn tree_rusage() -> ChildRusage {
    let get = |who| {
        // SAFETY: an all-zero rusage is valid; getrusage fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        unsafe { libc::getrusage(who, &mut ru) };
        ru
    };
    let us = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(t.tv_usec).unwrap_or(0)
    };
    let (own, reaped) = (get(libc::RUSAGE_SELF), get(libc::RUSAGE_CHILDREN));
    ChildRusage {
        user_us: us(own.ru_utime) + us(reaped.ru_utime),
        sys_us: us(own.ru_stime) + us(reaped.ru_stime),
        max_rss_bytes: u64::try_from(own.ru_maxrss.max(reaped.ru_maxrss)).unwrap_or(0) * 1024,
    }
}

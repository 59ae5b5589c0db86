//! Host-side work on a copy-on-write tree without mounting anything on the host: the helper
//! enters a private user and mount namespace of its own, mounts the tree's layers over one
//! host directory there, and executes a program (cordon's hardened git) that sees the merged
//! tree at that path. The host's mount table never changes; the mount vanishes with the
//! process.
//!
//! This is not a sandbox: the program keeps the caller's view of the host, its environment and
//! its privileges (it is cordon's own git, run as cordon would run it on a worktree). It only
//! gains the one mount.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Setup;
use crate::plan::{HELPER_ENV, UpperLayer};
use crate::{pinned, sys};

/// The environment variable that carries an [`OverlayExec`] (JSON) to the helper, which then
/// runs it instead of a sandbox (`HELPER __sandbox-init -- PROGRAM ARGS...`).
pub const OVERLAY_EXEC_ENV: &str = "__CORDON_OVERLAY_EXEC";

/// A copy-on-write tree to mount over a host directory, in a private namespace, before a
/// program runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlayExec {
    /// The host directory the merged tree covers (canonical, existing).
    pub mount_at: PathBuf,
    /// The read-only layers, topmost first (canonical host paths).
    pub lowers: Vec<PathBuf>,
    /// The writable layer; `None` shows the tree read-only.
    pub upper: Option<UpperLayer>,
}

/// Mounts the tree described in [`OVERLAY_EXEC_ENV`] and executes `argv` (after `--`);
/// exits 125 with the reason on standard error when the tree cannot be mounted.
pub(crate) fn run(plan_json: &std::ffi::OsStr) -> ! {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let program = args
        .iter()
        .position(|a| a == "--")
        .map(|at| &args[at + 1..])
        .filter(|rest| !rest.is_empty());
    let result = (|| -> Setup<std::io::Error> {
        let program = program.ok_or("no program after `--`")?;
        let plan: OverlayExec = serde_json::from_slice(plan_json.as_encoded_bytes())
            .map_err(|e| format!("bad overlay plan: {e}"))?;
        mount(&plan)?;
        let mut command = std::process::Command::new(&program[0]);
        command.args(&program[1..]);
        for name in HELPER_ENV.iter().chain([&OVERLAY_EXEC_ENV]) {
            command.env_remove(name);
        }
        Ok(command.exec())
    })();
    match result {
        Ok(exec_error) => eprintln!("cordon: cannot run the program: {exec_error}"),
        Err(e) => eprintln!("cordon: copy-on-write tree: {e}"),
    }
    sys::exit_now(125)
}

/// Enters new user and mount namespaces (this process's ids mapped to themselves) and mounts
/// the layers over `mount_at`.
fn mount(plan: &OverlayExec) -> Setup<()> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    // SAFETY: unshare has no memory effects; the helper is single-threaded.
    let r = unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) };
    sys::check(r.into(), || "create a user and mount namespace".into())?;
    sys::write_file(Path::new("/proc/self/setgroups"), b"deny")?;
    sys::write_file(
        Path::new("/proc/self/uid_map"),
        format!("{uid} {uid} 1\n").as_bytes(),
    )?;
    sys::write_file(
        Path::new("/proc/self/gid_map"),
        format!("{gid} {gid} 1\n").as_bytes(),
    )?;
    // Nothing done here may reach the host's mount table.
    sys::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let target = pinned::open(&plan.mount_at)?;
    let tree = match (&plan.upper, plan.lowers.as_slice()) {
        (None, [only]) => pinned::clone_tree(&pinned::open(only)?, false)?,
        (upper, lowers) => pinned::layered(
            lowers,
            upper
                .as_ref()
                .map(|u| (u.upper.as_path(), u.work.as_path())),
            plan.upper.as_ref().is_some_and(|u| u.volatile),
            Path::new("/proc"),
        )?,
    };
    let ro = if plan.upper.is_some() {
        0
    } else {
        sys::ATTR_RDONLY
    };
    pinned::set_attributes(&tree, ro | sys::ATTR_NOSUID | sys::ATTR_NODEV, false)?;
    pinned::attach(&tree, &target, &plan.mount_at)?;
    // A working directory at or below the mount point still names the covered directory.
    if let Ok(cwd) = std::env::current_dir()
        && cwd.starts_with(&plan.mount_at)
    {
        std::env::set_current_dir(&cwd).map_err(|e| format!("enter {}: {e}", cwd.display()))?;
    }
    Ok(())
}

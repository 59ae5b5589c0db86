//! The outer helper: stays in the host's namespaces, owns the cgroups, writes the report.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use cordon_types::{ChildReport, LimitKind};
use rustix::process::Signal;

use crate::cgroup::{Cgroups, Counters};
use crate::error::Setup;
use crate::pid::ProcessId;
use crate::plan::{INIT_ARG, InitPlan, PLAN_ENV, RlimitResource};
use crate::seccomp::{ExecMemory, FilterOptions, SyscallFilter};
use crate::status::{self, FailureKind, Received};
use crate::{pid1, sys};

/// Everything the forked processes need, allocated before any fork.
#[derive(Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The plan.
    pub plan: InitPlan,
    /// The program's argv.
    pub argv: Vec<CString>,
    /// The program's environment (`NAME=value`).
    pub envp: Vec<CString>,
    /// Paths to try for the program (a `PATH` search when it has no slash).
    pub candidates: Vec<CString>,
    /// The working directory.
    pub workdir: CString,
    /// The compiled seccomp filter, when enforced.
    pub seccomp: Option<SyscallFilter>,
}

/// Runs the sandbox and returns what to report: the outer helper's sequence, top to bottom.
pub fn run() -> Setup<ChildReport> {
    // 1. Everything the children need, allocated before any clone or fork.
    let prepared = prepare()?;
    // 2. The cgroups (while we are still in the host's namespaces, where they can be made).
    let cgroups = prepared
        .plan
        .cgroup
        .as_ref()
        .map(Cgroups::create)
        .transpose()?;
    if prepared.plan.tier == cordon_types::IsolationTier::Landlock {
        // No namespaces: this process supervises the program itself.
        return crate::landlock_tier::run(&prepared, cgroups);
    }
    let (sync_r, sync_w) = sys::pipe()?;
    let (status_r, status_w) = sys::pipe()?;
    // 3. PID 1, in new namespaces. This process is single-threaded (it started no thread), so
    //    a `clone` without `CLONE_VM` is a `fork`: the child runs on its own copy of a memory
    //    no other thread was changing, as bubblewrap's child does.
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if prepared.plan.private_network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: clone without CLONE_VM behaves like fork (see above); the child only runs
    // `pid1::run`, which never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    let pid = sys::check(pid, || {
        let remedy = crate::probe::namespace_refusal_remedy()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        format!("create the sandbox namespaces (clone){remedy}")
    })?;
    if pid == 0 {
        sys::close(sync_w);
        sys::close(status_r);
        sys::close(cordon_types::CHILD_REPORT_FD);
        pid1::run(&prepared, sync_r, status_w)
    }
    let pid = i32::try_from(pid)
        .ok()
        .and_then(ProcessId::new)
        .ok_or("clone returned an impossible process id")?;
    sys::close(sync_r);
    sys::close(status_w);
    if prepared.plan.proxy_port.is_some() {
        // PID 1 sends the proxy's listener on it; cordon must see the end once it has.
        sys::close(cordon_types::CHILD_NETWORK_FD);
    }
    // 4. PID 1's uid/gid maps and cgroups, then let it go on.
    let placed = place(pid, &prepared.plan, cgroups.as_ref());
    if let Err(e) = placed {
        let _ = pid.signal(Signal::KILL);
        // SAFETY: reaping our own child, without a status pointer.
        unsafe { libc::waitpid(pid.get(), std::ptr::null_mut(), 0) };
        return Err(e);
    }
    sys::write_all(sync_w, b"1");
    sys::close(sync_w);
    // 5. Read until PID 1 reports the program's end (or every writer is gone), then reap it:
    //    its death ends everything left in the namespaces, so the payload is gone when we
    //    report.
    let received = read_status(status_r);
    let mut st = 0;
    loop {
        // SAFETY: valid out-pointer.
        let r = unsafe { libc::waitpid(pid.get(), &mut st, libc::__WALL) };
        if r >= 0 || sys::errno() != libc::EINTR {
            break;
        }
    }
    // 6. The cgroup counters, then the report.
    let counters = cgroups.map(Cgroups::finish).unwrap_or_default();
    Ok(report(&prepared.plan, &received, st, counters))
}

/// Reads status messages until the program's end arrives or the pipe is closed.
pub(crate) fn read_status(fd: i32) -> Received {
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into a live buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        let Ok(n) = usize::try_from(n) else { break };
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
        let received = status::parse(&String::from_utf8_lossy(&text));
        if received.exit.is_some() && text.ends_with(b"\n") {
            break;
        }
    }
    sys::close(fd);
    status::parse(&String::from_utf8_lossy(&text))
}

/// Writes the uid/gid maps of the new user namespace and moves PID 1 into the cgroups.
fn place(pid: ProcessId, plan: &InitPlan, cgroups: Option<&Cgroups>) -> Setup<()> {
    let proc = std::path::PathBuf::from(format!("/proc/{}", pid.get()));
    sys::write_file(&proc.join("setgroups"), b"deny")?;
    sys::write_file(
        &proc.join("uid_map"),
        format!("{0} {0} 1\n", plan.uid).as_bytes(),
    )?;
    sys::write_file(
        &proc.join("gid_map"),
        format!("{0} {0} 1\n", plan.gid).as_bytes(),
    )?;
    if let Some(cg) = cgroups {
        cg.add(pid)?;
    }
    Ok(())
}

/// Reads the plan, the command and the environment; allocates all the children need.
fn prepare() -> Setup<Prepared> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(INIT_ARG.as_ref())
        || args.next().as_deref() != Some("--".as_ref())
    {
        return Err(format!(
            "usage: cordon {INIT_ARG} -- PROGRAM [ARGS...] (run by cordon itself)"
        )
        .into());
    }
    let argv: Vec<OsString> = args.collect();
    let plan_text = std::env::var(PLAN_ENV)
        .map_err(|_| format!("{PLAN_ENV} is not set (run by cordon itself)"))?;
    let plan: InitPlan =
        serde_json::from_str(&plan_text).map_err(|e| format!("invalid plan: {e}"))?;
    let env = std::env::vars_os().filter(|(k, _)| !crate::plan::HELPER_ENV.iter().any(|h| k == *h));
    prepare_from(plan, argv, env)
}

/// Allocates all the children need from the plan, the program's argv and its environment.
pub(crate) fn prepare_from(
    plan: InitPlan,
    argv: Vec<OsString>,
    env: impl IntoIterator<Item = (OsString, OsString)>,
) -> Setup<Prepared> {
    let Some(program) = argv.first().cloned() else {
        return Err("no program to run".into());
    };
    let mut envp = Vec::new();
    let mut path = None;
    for (k, v) in env {
        if k == "PATH" {
            path = Some(v.clone());
        }
        let mut kv = k.into_vec();
        kv.push(b'=');
        kv.extend(v.into_vec());
        envp.push(
            CString::new(kv)
                .map_err(|_| "an environment variable contains a NUL byte".to_string())?,
        );
    }
    let candidates = if program.as_bytes().contains(&b'/') {
        vec![sys::cstr(&program)?]
    } else {
        let path = path.unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        path.as_bytes()
            .split(|b| *b == b':')
            .filter(|d| !d.is_empty())
            .map(|d| {
                let mut full = d.to_vec();
                full.push(b'/');
                full.extend(program.as_bytes());
                CString::new(full).map_err(|_| "PATH contains a NUL byte".into())
            })
            .collect::<Setup<Vec<_>>>()?
    };
    let seccomp = if plan.seccomp {
        let options = FilterOptions {
            exec_memory: if plan.deny_exec_memory {
                ExecMemory::Denied
            } else {
                ExecMemory::Allowed
            },
            sockets: plan.sockets,
        };
        Some(SyscallFilter::compile(options).map_err(|e| e.to_string())?)
    } else {
        None
    };
    Ok(Prepared {
        workdir: sys::cstr(&plan.workdir)?,
        argv: argv.iter().map(sys::cstr).collect::<Setup<Vec<_>>>()?,
        envp,
        candidates,
        seccomp,
        plan,
    })
}

/// The report of a run from what PID 1 and the program's process said, PID 1's own wait
/// status (when it was this process's child) and the cgroup counters.
pub(crate) fn report(
    plan: &InitPlan,
    received: &Received,
    pid1_status: i32,
    counters: Counters,
) -> ChildReport {
    let mut r = ChildReport {
        tree_peak_memory_bytes: counters.memory_peak,
        landlock_unenforced: received.landlock_unenforced.clone(),
        ..ChildReport::default()
    };
    if let Some(failure) = &received.error {
        // Exec failures are reported as they are, with the shell's exit codes; everything
        // else is the sandbox's own set-up.
        let message = &failure.message;
        (r.setup_exit_code, r.setup_error) = match failure.kind {
            FailureKind::NotFound => (Some(127), Some(message.clone())),
            FailureKind::NotExecutable => (Some(126), Some(message.clone())),
            FailureKind::Setup => (None, Some(format!("sandbox set-up failed: {message}"))),
        };
        return r;
    }
    match &received.exit {
        Some(exit) => {
            r.exit_code = exit.code;
            r.signal = exit.signal;
            r.rusage = Some(exit.rusage);
            r.processes_killed = exit.leftovers_killed;
        }
        None if libc::WIFSIGNALED(pid1_status) => r.signal = Some(libc::WTERMSIG(pid1_status)),
        None => {
            r.setup_error =
                Some("sandbox supervisor ended without reporting the program's status".into());
            return r;
        }
    }
    if counters.oom_kills > 0 {
        r.limits_hit.push(LimitKind::Memory);
    }
    if counters.pids_refused > 0 {
        r.limits_hit.push(LimitKind::Pids);
    }
    let cpu_limit = plan
        .rlimits
        .iter()
        .find(|l| l.resource == RlimitResource::Cpu);
    if let (Some(lim), Some(sig)) = (cpu_limit, r.signal) {
        let used_s = r.rusage.map_or(0, |u| (u.user_us + u.sys_us) / 1_000_000);
        if sig == libc::SIGXCPU || (sig == libc::SIGKILL && used_s >= lim.soft) {
            r.limits_hit.push(LimitKind::Cpu);
        }
    }
    if r.signal == Some(libc::SIGXFSZ) {
        r.limits_hit.push(LimitKind::FileSize);
    }
    r
}

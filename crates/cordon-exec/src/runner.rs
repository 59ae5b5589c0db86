//! The run loop: spawn, poll output / exit / deadlines / cancellation, terminate, drain, report.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant, SystemTime};

use cordon_types::{LeakReport, LimitKind, ResourceUsage, RunResult, RunResultTag};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{PidfdFlags, Signal, pidfd_open};

use crate::capture::HeadTail;
use crate::classify::{Ending, Intervention, classify};
use crate::error::ExecError;
use crate::io::{RunIo, Stream};
use crate::output::StreamState;
use crate::pid::ProcessId;

/// A terminal's end-of-file character (Ctrl-D), written when cordon's input ends.
const END_OF_FILE: u8 = 0x04;
use crate::process_tree::{ActiveRun, Tree, become_subreaper};
use crate::signals::signal_name;
use crate::spawn::{Command as SpawnCommand, Spawn, Stdio};
use crate::spec::{RunSpec, StdinMode};
use crate::supervisor::{MAX_REPORT_BYTES, apply_report, parse_report, read_report};

/// A run's result and the exit code a CLI should exit with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The full result document.
    pub result: RunResult,
    /// The conventional exit code: the program's own, `124` on timeout, `128+N` for signal
    /// N, `125` when cordon failed, `126`/`127` when the program is not executable / absent,
    /// `128+N` when cordon was cancelled by signal N.
    pub exit_code: u8,
    /// Whether the readiness probe fired (and cordon then stopped the program).
    pub ready: bool,
}

/// After leftovers were killed, how long the pipes may stay silent before cordon stops
/// reading (only a writer outside the tree can keep them open).
const FINAL_DRAIN_IDLE: Duration = Duration::from_secs(2);
/// What output is read into, one read at a time.
const READ_CHUNK: usize = 64 * 1024;
const PIPE_SIZE: usize = 1024 * 1024;
/// How long a supervisor's helpers may take to exit after the supervisor did.
const SUPERVISOR_SETTLE: Duration = Duration::from_millis(50);
/// How often a readiness probe is asked.
const READY_POLL: Duration = Duration::from_millis(25);
/// How often a [`crate::LimitGuard`] is asked.
const GUARD_POLL: Duration = Duration::from_millis(250);
/// How often a sink that fell behind is asked whether it takes output again.
const BACKPRESSURE_POLL: Duration = Duration::from_millis(10);

/// Runs `spec` to completion and reports what happened.
///
/// Returns `Err` only when cordon could not supervise at all; a program that fails, cannot be
/// found, or is ended by a limit yields `Ok` with the matching status.
pub fn run(spec: &RunSpec, mut io: RunIo<'_>) -> Result<RunOutcome, ExecError> {
    become_subreaper();
    let started_at = SystemTime::now();
    let cwd = match &spec.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|_| ExecError::BadCwd { path: ".".into() })?,
    };
    if !cwd.is_dir() {
        return Err(ExecError::BadCwd { path: cwd });
    }
    let (out_r, out_w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| ExecError::Pipe(e.into()))?;
    let (err_r, err_w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| ExecError::Pipe(e.into()))?;
    // Bigger pipes mean fewer wake-ups under a flood; the kernel may refuse, which is fine.
    for fd in [&out_r, &err_r] {
        let _ = rustix::pipe::fcntl_setpipe_size(fd, PIPE_SIZE);
    }
    let report_pipe = if spec.supervised {
        Some(pipe_with(PipeFlags::CLOEXEC).map_err(|e| ExecError::Pipe(e.into()))?)
    } else {
        None
    };
    // The report is read once the supervisor has exited (it writes it just before): one
    // wake-up less per run. That needs room for all of it in the pipe, or the supervisor
    // would block writing; where the kernel refuses the room, it is read as it comes.
    let report_fits = report_pipe.as_ref().is_some_and(|(r, _)| {
        rustix::pipe::fcntl_setpipe_size(r, MAX_REPORT_BYTES)
            .is_ok_and(|size| size >= MAX_REPORT_BYTES)
    });

    let mut forwarder = None;
    // Descriptors the program gets; they are closed here once it has them.
    let mut stdin_fd: Option<OwnedFd> = None;
    let (out_r, out_w, err_w) = match spec.stdin {
        StdinMode::Terminal => {
            // A terminal of cordon's own is the program's input, output and error; what it
            // writes is read from the primary side as stdout (the pipes above go unused).
            drop((out_r, out_w, err_w));
            let pty = crate::pty::Pty::open().map_err(ExecError::Pipe)?;
            let clone = |fd: &OwnedFd| fd.try_clone().map_err(ExecError::Pipe);
            let into_terminal = clone(&pty.primary)?;
            forwarder = Some(
                crate::stdin::Forwarder::start_into(into_terminal, Some(END_OF_FILE))
                    .map_err(ExecError::Pipe)?,
            );
            stdin_fd = Some(clone(&pty.secondary)?);
            let output = clone(&pty.secondary)?;
            (pty.primary, output, pty.secondary)
        }
        StdinMode::Inherit | StdinMode::Null | StdinMode::Forward => (out_r, out_w, err_w),
    };
    match spec.stdin {
        StdinMode::Terminal | StdinMode::Inherit => {}
        StdinMode::Null => {
            stdin_fd = Some(
                rustix::fs::open(
                    "/dev/null",
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
                .map_err(|e| ExecError::Pipe(e.into()))?,
            );
        }
        StdinMode::Forward if !crate::stdin::stdin_is_terminal() => {}
        StdinMode::Forward => {
            let mut started = crate::stdin::Forwarder::start().map_err(ExecError::Pipe)?;
            stdin_fd = started.program_end.take();
            forwarder = Some(started);
        }
    }
    let network_fd = if spec.supervised {
        io.network_fd.take()
    } else {
        None
    };
    let env: Vec<(OsString, OsString)> = if spec.env.clear {
        spec.env.set.clone()
    } else {
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| !spec.env.set.iter().any(|(s, _)| s == k))
            .collect();
        env.extend(spec.env.set.iter().cloned());
        env
    };
    let prepared = Spawn::new(SpawnCommand {
        program: &spec.program,
        args: &spec.args,
        env,
        cwd: &cwd,
        stdin: stdin_fd
            .as_ref()
            .map_or(Stdio::Inherit, |fd| Stdio::Fd(fd.as_raw_fd())),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        report_fd: report_pipe.as_ref().map(|(_, w)| w.as_raw_fd()),
        network_fd: network_fd.as_ref().map(AsRawFd::as_raw_fd),
    });

    let children_before = children_rusage();
    let t0 = Instant::now();
    let spawned = prepared.and_then(|p| p.spawn());
    // The program has its copies: close ours of the pipes' write ends (and of the forwarded
    // input's read end).
    drop((stdin_fd, out_w, err_w, network_fd));
    let report_r = report_pipe.map(|(r, _w)| r);
    let pid = match spawned {
        Ok(pid) => pid,
        Err(error) => {
            return Ok(not_started(spec, &cwd, started_at, t0, &error));
        }
    };
    let root = ProcessId::new(pid).expect("a spawned child has a positive process id");
    let active = ActiveRun::register(pid);
    let tree = Tree {
        root: pid,
        sid: pid,
        exclusive: spec.exclusive_children,
        run: &active,
        started: t0,
    };
    let pidfd = pidfd_open(root.as_pid(), PidfdFlags::empty()).ok();

    let mut streams = [
        StreamState::new(Stream::Stdout, out_r, spec.output_limit),
        StreamState::new(Stream::Stderr, err_r, spec.output_limit),
    ];
    let mut report = report_r.map(|fd| (Some(fd), Vec::new()));
    let mut limits_hit: Vec<LimitKind> = Vec::new();
    let mut intervention = Intervention::None;
    let mut kill_at: Option<Instant> = None;
    let mut kill_root_at: Option<Instant> = None;
    let mut exit: Option<(libc::c_int, libc::rusage, Instant)> = None;
    let mut leak_deadline: Option<Instant> = None;
    let deadline = t0 + spec.timeout;
    let mut guard_due: Option<Instant> = io.guard.is_some().then(|| t0 + GUARD_POLL);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut scratch = Vec::new();

    loop {
        let report_open = report.as_ref().is_some_and(|(fd, _)| fd.is_some());
        let streams_open = streams.iter().any(|s| s.fd.is_some());
        if exit.is_some() && !streams_open && !report_open {
            break;
        }
        let now = Instant::now();
        if leak_deadline.is_some_and(|d| now >= d)
            || (exit.is_some() && io.cancel.is_some_and(|c| c.is_cancelled()))
        {
            break;
        }
        if exit.is_none() {
            let cancelled = io.cancel.is_some_and(|c| c.is_cancelled());
            let ready = intervention == Intervention::None
                && now < deadline
                && io.ready.as_deref_mut().is_some_and(|p| p.is_ready(pid));
            let over_limit = if intervention == Intervention::None
                && now < deadline
                && guard_due.is_some_and(|due| now >= due)
            {
                guard_due = Some(now + GUARD_POLL);
                io.guard.as_deref_mut().and_then(|g| g.exceeded())
            } else {
                None
            };
            if intervention == Intervention::None
                && (now >= deadline || cancelled || ready || over_limit.is_some())
            {
                intervention = if ready {
                    Intervention::Ready
                } else if let Some(limit) = over_limit {
                    limits_hit.push(limit);
                    Intervention::Limit
                } else if cancelled {
                    Intervention::Cancelled {
                        signal: io.cancel.and_then(|c| c.signal()),
                    }
                } else {
                    limits_hit.push(LimitKind::Timeout);
                    Intervention::Timeout
                };
                if !spec.supervised {
                    signal_pid(root, Signal::TERM);
                }
                tree.signal_members(Signal::TERM);
                kill_at = Some(now + spec.grace);
            }
            if kill_at.is_some_and(|t| now >= t) {
                kill_at = None;
                if spec.supervised {
                    kill_root_at = Some(now + spec.grace);
                } else {
                    signal_pid(root, Signal::KILL);
                }
                tree.kill_members();
            }
            if kill_root_at.is_some_and(|t| now >= t) {
                kill_root_at = None;
                signal_pid(root, Signal::KILL);
            }
        }

        let mut wake_at: Option<Instant> = leak_deadline;
        if exit.is_none() {
            if intervention == Intervention::None {
                wake_at = earliest(wake_at, Some(deadline));
            }
            wake_at = earliest(wake_at, kill_at);
            wake_at = earliest(wake_at, kill_root_at);
            if pidfd.is_none() {
                wake_at = earliest(wake_at, Some(now + Duration::from_millis(5)));
            }
            if io.ready.is_some() && intervention == Intervention::None {
                wake_at = earliest(wake_at, Some(now + READY_POLL));
            }
            if intervention == Intervention::None {
                wake_at = earliest(wake_at, guard_due);
            }
        }
        let timeout = wake_at.map(|t| to_timespec(t.saturating_duration_since(now)));

        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(5);
        let mut slots: Vec<Slot> = Vec::with_capacity(5);
        let mut paused = false;
        for (i, s) in streams.iter().enumerate() {
            if let Some(fd) = &s.fd {
                // A sink that is behind (a terminal nobody reads) pauses reading this stream;
                // deadlines and kills never wait for it.
                if io
                    .sink
                    .as_deref()
                    .is_some_and(|k| !k.accepts_more(s.stream()))
                {
                    paused = true;
                    continue;
                }
                fds.push(PollFd::new(fd, PollFlags::IN));
                slots.push(Slot::Stream(i));
            }
        }
        let timeout = if paused {
            let soon = to_timespec(BACKPRESSURE_POLL);
            Some(match timeout {
                Some(t) if (t.tv_sec, t.tv_nsec) < (soon.tv_sec, soon.tv_nsec) => t,
                _ => soon,
            })
        } else {
            timeout
        };
        if let Some((Some(fd), _)) = &report
            && (exit.is_some() || !report_fits)
        {
            fds.push(PollFd::new(fd, PollFlags::IN));
            slots.push(Slot::Report);
        }
        if exit.is_none()
            && let Some(fd) = &pidfd
        {
            fds.push(PollFd::new(fd, PollFlags::IN));
            slots.push(Slot::Exit);
        }
        // Watched in the leak window too: Ctrl-C then ends the wait for leftovers.
        if intervention == Intervention::None
            && let Some(cancel) = io.cancel
        {
            fds.push(PollFd::from_borrowed_fd(cancel.fd(), PollFlags::IN));
            slots.push(Slot::Cancel);
        }
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(ExecError::Poll(e.into())),
        }
        let ready: Vec<Slot> = fds
            .iter()
            .zip(&slots)
            .filter(|(fd, _)| !fd.revents().is_empty())
            .map(|(_, slot)| *slot)
            .collect();
        drop(fds);

        for &slot in &ready {
            match slot {
                Slot::Stream(i) => {
                    streams[i].read_once(&mut buf, &mut scratch, &mut io, &mut limits_hit);
                }
                Slot::Report => read_report(&mut report, &mut buf),
                Slot::Exit | Slot::Cancel => {}
            }
        }
        let exit_may_be_ready = pidfd.is_none() || ready.iter().any(|s| matches!(s, Slot::Exit));
        if exit.is_none()
            && exit_may_be_ready
            && let Some(status) = try_wait(pid)?
        {
            exit = Some((status.0, status.1, Instant::now()));
            leak_deadline = Some(Instant::now() + spec.leak_window);
        }
    }

    // Nobody reads the forwarded input any more.
    drop(forwarder);
    // The program is gone. Whatever of its tree is left now is a leak: kill it. A supervisor's
    // own helpers may still be on their way out: give them a moment first.
    if spec.supervised {
        tree.settle(SUPERVISOR_SETTLE);
    }
    let open_when_window_closed = streams.iter().any(|s| s.fd.is_some());
    let processes_killed = tree.kill_members() as u32;
    // What is still in the pipes is delivered: with its writers dead, each pipe ends once
    // drained (a slow reader of cordon's own output only makes this take longer). Only a
    // writer outside the tree could keep it open: stop when nothing comes for a while.
    let mut gave_up = false;
    while streams.iter().any(|s| s.fd.is_some()) {
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(2);
        let mut which = Vec::with_capacity(2);
        for (i, s) in streams.iter().enumerate() {
            if let Some(fd) = &s.fd {
                fds.push(PollFd::new(fd, PollFlags::IN));
                which.push(i);
            }
        }
        match poll(&mut fds, Some(&to_timespec(FINAL_DRAIN_IDLE))) {
            Ok(0) => {
                gave_up = true;
                break;
            }
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(ExecError::Poll(e.into())),
        }
        let ready: Vec<usize> = fds
            .iter()
            .zip(&which)
            .filter(|(fd, _)| !fd.revents().is_empty())
            .map(|(_, &i)| i)
            .collect();
        drop(fds);
        for i in ready {
            streams[i].read_once(&mut buf, &mut scratch, &mut io, &mut limits_hit);
        }
    }
    let output_held_open = open_when_window_closed && (processes_killed > 0 || gave_up);
    for s in &mut streams {
        s.close(&mut scratch, &mut io, &mut limits_hit);
    }
    if let Some((fd @ Some(_), _)) = &mut report {
        // The supervisor exited; anything it wrote is already in the pipe.
        *fd = None;
    }

    let (status, rusage, exited_at) = exit.expect("the loop ends only after the program exits");
    // The CPU time of the whole tree: this process's children's since the run started.
    let tree_usage: Option<(u64, u64)> = if !(spec.exclusive_children && ActiveRun::count() == 1) {
        None
    } else {
        children_rusage()
            .zip(children_before)
            .map(|(after, before)| {
                (
                    timeval_ms(after.ru_utime) - timeval_ms(before.ru_utime),
                    timeval_ms(after.ru_stime) - timeval_ms(before.ru_stime),
                )
            })
    };
    drop(active);

    let mut ending = if libc::WIFSIGNALED(status) {
        Ending::Signaled(libc::WTERMSIG(status))
    } else {
        Ending::Exited(libc::WEXITSTATUS(status))
    };
    // The program's (or the supervisor's) own `wait4` figures; a supervisor's report replaces
    // them with its program's.
    let mut resource = ResourceUsage {
        max_rss_bytes: Some(rusage.ru_maxrss.max(0) as u64 * 1024),
        cpu_user_ms: Some(timeval_ms(rusage.ru_utime)),
        cpu_sys_ms: Some(timeval_ms(rusage.ru_stime)),
        tree_cpu_user_ms: tree_usage.map(|(user, _)| user),
        tree_cpu_sys_ms: tree_usage.map(|(_, sys)| sys),
        tree_peak_memory_bytes: None,
    };
    let mut sandbox = spec.sandbox.clone().unwrap_or_default();
    let mut leaked = LeakReport {
        processes_killed,
        output_held_open,
    };
    if let Some((_, bytes)) = &report {
        match parse_report(bytes, &ending) {
            Ok(child) => {
                apply_report(&child, &mut ending, &mut resource, &mut limits_hit);
                // What the supervisor killed after the program ended is the run's leak too
                // (PID 1 of a sandbox kills what is left in its namespace).
                leaked.processes_killed += child.processes_killed;
                sandbox.landlock_unenforced = child.landlock_unenforced;
            }
            Err(reason) => {
                if intervention == Intervention::None {
                    ending = Ending::NotStarted {
                        reason,
                        exit_code: 125,
                    };
                }
            }
        }
    }

    let timeout_text = describe_timeout(spec);
    let verdict = classify(&ending, intervention, &limits_hit, &timeout_text);
    let (exit_code, signal) = match ending {
        Ending::Exited(code) => (Some(code), None),
        Ending::Signaled(sig) => (None, Some(signal_name(sig))),
        Ending::NotStarted { .. } => (None, None),
    };
    let [stdout, stderr] = streams.map(|s| s.into_captured());
    let result = RunResult {
        schema: RunResultTag,
        status: verdict.status,
        exit_code,
        signal,
        duration_ms: exited_at.duration_since(t0).as_millis() as u64,
        limits_hit,
        stdout,
        stderr,
        resource,
        failure: verdict.failure,
        command: spec.reported_command(),
        cwd: cwd.to_string_lossy().into_owned(),
        started_at: humantime::format_rfc3339_millis(started_at).to_string(),
        leaked,
        sandbox,
        run_id: None,
        network: None,
    };
    Ok(RunOutcome {
        result,
        exit_code: verdict.exit_code,
        ready: intervention == Intervention::Ready,
    })
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    Stream(usize),
    Report,
    Exit,
    Cancel,
}

fn not_started(
    spec: &RunSpec,
    cwd: &std::path::Path,
    started_at: SystemTime,
    t0: Instant,
    error: &std::io::Error,
) -> RunOutcome {
    let program = spec.program.to_string_lossy();
    let (reason, exit_code) = match error.kind() {
        std::io::ErrorKind::NotFound => (format!("program not found: {program}"), 127),
        std::io::ErrorKind::PermissionDenied => {
            (format!("program is not executable: {program}"), 126)
        }
        _ => (format!("cannot start {program}: {error}"), 125),
    };
    let ending = Ending::NotStarted { reason, exit_code };
    let verdict = classify(&ending, Intervention::None, &[], "");
    RunOutcome {
        result: RunResult {
            schema: RunResultTag,
            status: verdict.status,
            exit_code: None,
            signal: None,
            duration_ms: t0.elapsed().as_millis() as u64,
            limits_hit: Vec::new(),
            stdout: HeadTail::new(0).to_captured(),
            stderr: HeadTail::new(0).to_captured(),
            resource: ResourceUsage::default(),
            failure: verdict.failure,
            command: spec.reported_command(),
            cwd: cwd.to_string_lossy().into_owned(),
            started_at: humantime::format_rfc3339_millis(started_at).to_string(),
            leaked: LeakReport::default(),
            sandbox: spec.sandbox.clone().unwrap_or_default(),
            run_id: None,
            network: None,
        },
        exit_code: verdict.exit_code,
        ready: false,
    }
}

fn describe_timeout(spec: &RunSpec) -> String {
    format!(
        "{} (SIGTERM to the whole process tree, SIGKILL after {} grace)",
        humantime::format_duration(spec.timeout),
        humantime::format_duration(spec.grace)
    )
}

fn signal_pid(pid: ProcessId, signal: Signal) {
    let _ = pid.signal(signal);
}

/// Reaps the program if it has exited, with its resource usage.
fn try_wait(pid: i32) -> Result<Option<(libc::c_int, libc::rusage)>, ExecError> {
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid out-pointers; `pid` is our own unreaped child.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            return Ok(Some((status, usage)));
        }
        if r == 0 {
            return Ok(None);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return Err(ExecError::Wait { pid, source: err });
    }
}

fn children_rusage() -> Option<libc::rusage> {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    let r = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    (r == 0).then_some(usage)
}

fn timeval_ms(tv: libc::timeval) -> u64 {
    (tv.tv_sec.max(0) as u64) * 1000 + (tv.tv_usec.max(0) as u64) / 1000
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn to_timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: d.subsec_nanos() as i64,
    }
}

//! Watching a running program until it and its tree are gone: its output, its exit, the
//! deadline, cancellation, readiness and limit guards, and ending its tree when it must end.
//!
//! The watch is a small state machine ([`Phase`]): `Running` → (an intervention: the
//! timeout, a cancellation, readiness or a limit) `Terminating` → (after the grace period)
//! `KillingSupervisor` (a supervisor gets its own grace to report) → `Killed`, and from any of
//! them `Exited` once the program (the tree's root) has exited, while its output is still
//! read for the leak window. Then [`Watch::end_tree`] kills what is left and drains the pipes.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use cordon_types::LimitKind;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::Signal;

use crate::classify::Intervention;
use crate::error::ExecError;
use crate::io::RunIo;
use crate::output::StreamState;
use crate::pid::ProcessId;
use crate::process_tree::Tree;
use crate::spec::RunSpec;
use crate::supervisor::read_report;

/// What output is read into, one read at a time.
const READ_CHUNK: usize = 64 * 1024;
/// After leftovers were killed, how long the pipes may stay silent before cordon stops
/// reading (only a writer outside the tree can keep them open).
const FINAL_DRAIN_IDLE: Duration = Duration::from_secs(2);
/// How long a supervisor's helpers may take to exit after the supervisor did.
const SUPERVISOR_SETTLE: Duration = Duration::from_millis(50);
/// How often a readiness probe is asked.
const READY_POLL: Duration = Duration::from_millis(25);
/// How often a [`crate::LimitGuard`] is asked.
const GUARD_POLL: Duration = Duration::from_millis(250);
/// How often a sink that fell behind is asked whether it takes output again.
const BACKPRESSURE_POLL: Duration = Duration::from_millis(10);
/// How often the program's exit is checked where no pidfd tells it.
const EXIT_POLL: Duration = Duration::from_millis(5);

/// Where a run is in its life.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// The program runs and cordon has done nothing to it.
    Running,
    /// The tree got SIGTERM (why: [`Watch::intervention`]); SIGKILL follows at `kill_at`.
    Terminating { kill_at: Instant },
    /// The members of a supervisor's tree got SIGKILL; the supervisor itself has until
    /// `kill_at` to report before it gets SIGKILL too.
    KillingSupervisor { kill_at: Instant },
    /// Every process of the tree got SIGKILL; its exit is on its way.
    Killed,
    /// The program exited; its output is read until `leak_until` (a grandchild may hold the
    /// pipes open).
    Exited { exit: Exit, leak_until: Instant },
}

/// How the program (the tree's root) exited.
#[derive(Clone, Copy)]
pub(crate) struct Exit {
    /// Its wait status.
    pub status: libc::c_int,
    /// Its resource usage, from `wait4`.
    pub rusage: libc::rusage,
    /// When cordon saw it.
    pub at: Instant,
}

impl std::fmt::Debug for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exit")
            .field("status", &self.status)
            .finish()
    }
}

/// The supervisor's report as it arrives.
pub(crate) struct Report {
    /// The pipe, until its end.
    pub fd: Option<OwnedFd>,
    /// What arrived.
    pub bytes: Vec<u8>,
    /// Whether all of it fits in the pipe: it is then read once the supervisor has exited.
    pub fits: bool,
}

/// What a descriptor in one `poll` stands for.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Stream(usize),
    Report,
    Exit,
    Cancel,
}

/// A running program, watched.
pub(crate) struct Watch<'a, 'io> {
    spec: &'a RunSpec,
    io: RunIo<'io>,
    root: ProcessId,
    pidfd: Option<OwnedFd>,
    tree: Tree<'a>,
    /// Stdout and stderr.
    pub streams: [StreamState; 2],
    /// The supervisor's report, for a supervised run.
    pub report: Option<Report>,
    phase: Phase,
    /// Why cordon ended the program, if it did.
    pub intervention: Intervention,
    /// The limits that were hit, in the order they were.
    pub limits_hit: Vec<LimitKind>,
    started: Instant,
    guard_due: Option<Instant>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
}

/// What the watch saw, once the tree is gone.
pub(crate) struct Watched {
    /// How the program exited.
    pub exit: Exit,
    /// Processes of the tree killed after the program exited.
    pub processes_killed: u32,
    /// Whether a leftover process held the output open past the leak window.
    pub output_held_open: bool,
}

impl<'a, 'io> Watch<'a, 'io> {
    /// Starts watching the program `root` of `tree`, spawned at `started`.
    pub(crate) fn new(
        spec: &'a RunSpec,
        io: RunIo<'io>,
        tree: Tree<'a>,
        streams: [StreamState; 2],
        report: Option<Report>,
        started: Instant,
    ) -> Self {
        let root = ProcessId::new(tree.root).expect("a spawned child has a positive process id");
        let pidfd =
            rustix::process::pidfd_open(root.as_pid(), rustix::process::PidfdFlags::empty()).ok();
        let guard_due = io.guard.is_some().then(|| started + GUARD_POLL);
        Watch {
            spec,
            io,
            root,
            pidfd,
            tree,
            streams,
            report,
            phase: Phase::Running,
            intervention: Intervention::None,
            limits_hit: Vec::new(),
            started,
            guard_due,
            buf: vec![0u8; READ_CHUNK],
            scratch: Vec::new(),
        }
    }

    /// Watches until the program has exited and its output has ended (or the leak window
    /// closed, or a cancellation cut the wait for leftovers short).
    pub(crate) fn until_exit(&mut self) -> Result<(), ExecError> {
        loop {
            let now = Instant::now();
            if let Phase::Exited { leak_until, .. } = self.phase {
                let cancelled = self.io.cancel.is_some_and(|c| c.is_cancelled());
                if !self.anything_open() || now >= leak_until || cancelled {
                    return Ok(());
                }
            } else {
                self.step(now);
            }
            let Some(ready) = self.poll(now)? else {
                continue;
            };
            for &slot in &ready {
                match slot {
                    Slot::Stream(i) => self.read_stream(i),
                    Slot::Report => {
                        if let Some(report) = &mut self.report {
                            read_report(&mut report.fd, &mut report.bytes, &mut self.buf);
                        }
                    }
                    Slot::Exit | Slot::Cancel => {}
                }
            }
            let exit_may_be_ready =
                self.pidfd.is_none() || ready.iter().any(|s| matches!(s, Slot::Exit));
            if !matches!(self.phase, Phase::Exited { .. })
                && exit_may_be_ready
                && let Some((status, rusage)) = try_wait(self.tree.root)?
            {
                let at = Instant::now();
                self.phase = Phase::Exited {
                    exit: Exit { status, rusage, at },
                    leak_until: at + self.spec.leak_window,
                };
            }
        }
    }

    /// Whether an output stream or the report pipe is still open.
    fn anything_open(&self) -> bool {
        self.streams.iter().any(|s| s.fd.is_some())
            || self.report.as_ref().is_some_and(|r| r.fd.is_some())
    }

    /// Before the program exits: starts ending it when something says it must end, and
    /// escalates from SIGTERM to SIGKILL on time.
    fn step(&mut self, now: Instant) {
        let deadline = self.started + self.spec.timeout;
        match self.phase {
            Phase::Running => {
                if let Some(why) = self.reason_to_end(now, deadline) {
                    self.intervention = why;
                    if !self.spec.supervised {
                        let _ = self.root.signal(Signal::TERM);
                    }
                    self.tree.signal_members(Signal::TERM);
                    self.phase = Phase::Terminating {
                        kill_at: now + self.spec.grace,
                    };
                }
            }
            Phase::Terminating { kill_at } if now >= kill_at => {
                self.tree.kill_members();
                self.phase = if self.spec.supervised {
                    // PID 1 of a sandbox ends everything in it when it dies; give it the
                    // time to say how the program ended first.
                    Phase::KillingSupervisor {
                        kill_at: now + self.spec.grace,
                    }
                } else {
                    let _ = self.root.signal(Signal::KILL);
                    Phase::Killed
                };
            }
            Phase::KillingSupervisor { kill_at } if now >= kill_at => {
                let _ = self.root.signal(Signal::KILL);
                self.phase = Phase::Killed;
            }
            Phase::Terminating { .. }
            | Phase::KillingSupervisor { .. }
            | Phase::Killed
            | Phase::Exited { .. } => {}
        }
    }

    /// Why the running program must end now, if it must: ready (a smoke test passed), a
    /// limit guard's limit exceeded, a cancellation, or the timeout, in that order.
    fn reason_to_end(&mut self, now: Instant, deadline: Instant) -> Option<Intervention> {
        let before_deadline = now < deadline;
        if before_deadline
            && let Some(probe) = self.io.ready.as_deref_mut()
            && probe.is_ready(self.tree.root)
        {
            return Some(Intervention::Ready);
        }
        if before_deadline && self.guard_due.is_some_and(|due| now >= due) {
            self.guard_due = Some(now + GUARD_POLL);
            if let Some(limit) = self.io.guard.as_deref_mut().and_then(|g| g.exceeded()) {
                self.limits_hit.push(limit);
                return Some(Intervention::Limit);
            }
        }
        if let Some(cancel) = self.io.cancel
            && cancel.is_cancelled()
        {
            return Some(Intervention::Cancelled {
                signal: cancel.signal(),
            });
        }
        if !before_deadline {
            self.limits_hit.push(LimitKind::Timeout);
            return Some(Intervention::Timeout);
        }
        None
    }

    /// When the watch must look again even if no descriptor says anything.
    fn wake_at(&self, now: Instant) -> Option<Instant> {
        let mut times: Vec<Instant> = Vec::with_capacity(4);
        match self.phase {
            Phase::Exited { leak_until, .. } => return Some(leak_until),
            Phase::Running => {
                times.push(self.started + self.spec.timeout);
                if self.io.ready.is_some() {
                    times.push(now + READY_POLL);
                }
                times.extend(self.guard_due);
            }
            Phase::Terminating { kill_at } | Phase::KillingSupervisor { kill_at } => {
                times.push(kill_at);
            }
            Phase::Killed => {}
        }
        if self.pidfd.is_none() {
            times.push(now + EXIT_POLL);
        }
        times.into_iter().min()
    }

    /// One `poll` over what may say something; `None` when it was interrupted.
    fn poll(&self, now: Instant) -> Result<Option<Vec<Slot>>, ExecError> {
        let exited = matches!(self.phase, Phase::Exited { .. });
        let mut timeout = self
            .wake_at(now)
            .map(|t| to_timespec(t.saturating_duration_since(now)));
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(5);
        let mut slots: Vec<Slot> = Vec::with_capacity(5);
        for (i, s) in self.streams.iter().enumerate() {
            let Some(fd) = &s.fd else { continue };
            // A sink that is behind (a terminal nobody reads) pauses reading this stream;
            // deadlines and kills never wait for it.
            if self
                .io
                .sink
                .as_deref()
                .is_some_and(|k| !k.accepts_more(s.stream()))
            {
                let soon = to_timespec(BACKPRESSURE_POLL);
                timeout = Some(match timeout {
                    Some(t) if (t.tv_sec, t.tv_nsec) < (soon.tv_sec, soon.tv_nsec) => t,
                    _ => soon,
                });
                continue;
            }
            fds.push(PollFd::new(fd, PollFlags::IN));
            slots.push(Slot::Stream(i));
        }
        if let Some(Report {
            fd: Some(fd), fits, ..
        }) = &self.report
            && (exited || !fits)
        {
            fds.push(PollFd::new(fd, PollFlags::IN));
            slots.push(Slot::Report);
        }
        if !exited && let Some(fd) = &self.pidfd {
            fds.push(PollFd::new(fd, PollFlags::IN));
            slots.push(Slot::Exit);
        }
        // Watched in the leak window too: Ctrl-C then ends the wait for leftovers.
        if self.intervention == Intervention::None
            && let Some(cancel) = self.io.cancel
        {
            fds.push(PollFd::from_borrowed_fd(cancel.fd(), PollFlags::IN));
            slots.push(Slot::Cancel);
        }
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(None),
            Err(e) => return Err(ExecError::Poll(e.into())),
        }
        Ok(Some(
            fds.iter()
                .zip(&slots)
                .filter(|(fd, _)| !fd.revents().is_empty())
                .map(|(_, slot)| *slot)
                .collect(),
        ))
    }

    fn read_stream(&mut self, i: usize) {
        self.streams[i].read_once(
            &mut self.buf,
            &mut self.scratch,
            &mut self.io,
            &mut self.limits_hit,
        );
    }

    /// After the program exited: kills whatever of its tree is left (a leak), delivers what
    /// is still in the pipes, and closes everything.
    pub(crate) fn end_tree(&mut self) -> Result<Watched, ExecError> {
        let Phase::Exited { exit, .. } = self.phase else {
            unreachable!("until_exit returns only once the program has exited");
        };
        // Nobody reads the forwarded input any more (dropped by the caller). A supervisor's
        // own helpers may still be on their way out: give them a moment first.
        if self.spec.supervised {
            self.tree.settle(SUPERVISOR_SETTLE);
        }
        let open_when_window_closed = self.streams.iter().any(|s| s.fd.is_some());
        let processes_killed = self.tree.kill_members() as u32;
        // With its writers dead, each pipe ends once drained (a slow reader of cordon's own
        // output only makes this take longer). Only a writer outside the tree could keep it
        // open: stop when nothing comes for a while.
        let mut gave_up = false;
        while self.streams.iter().any(|s| s.fd.is_some()) {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(2);
            let mut which = Vec::with_capacity(2);
            for (i, s) in self.streams.iter().enumerate() {
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
                self.read_stream(i);
            }
        }
        for s in &mut self.streams {
            s.close(&mut self.scratch, &mut self.io, &mut self.limits_hit);
        }
        if let Some(report) = &mut self.report {
            // The supervisor exited; anything it wrote is already in the pipe.
            report.fd = None;
        }
        Ok(Watched {
            exit,
            processes_killed,
            output_held_open: open_when_window_closed && (processes_killed > 0 || gave_up),
        })
    }
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

fn to_timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: d.subsec_nanos() as i64,
    }
}

//! A run from start to end: plumbing, spawn, watch ([`crate::watch`]), end the tree, report.

use std::time::{Instant, SystemTime};

use cordon_types::{LeakReport, LimitKind, ResourceUsage, RunResult, RunResultTag, SandboxSummary};

use crate::capture::HeadTail;
use crate::classify::{Ending, Intervention, classify};
use crate::error::ExecError;
use crate::io::{RunIo, Stream};
use crate::output::StreamState;
use crate::plumbing::Plumbing;
use crate::process_tree::{ActiveRun, Tree, become_subreaper};
use crate::signals::signal_name;
use crate::spec::RunSpec;
use crate::supervisor::{apply_report, parse_report};
use crate::watch::{Report, Watch, Watched};

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
    let (plumbing, child_ends) = Plumbing::new(spec, io.network_fd.take())?;
    let Plumbing {
        out_r,
        err_r,
        report_r,
        report_fits,
        forwarder,
    } = plumbing;

    let children_before = children_rusage();
    let t0 = Instant::now();
    let pid = match child_ends.spawn(spec, &cwd) {
        Ok(pid) => pid,
        Err(error) => return Ok(not_started(spec, &cwd, started_at, t0, &error)),
    };
    let active = ActiveRun::register(pid);
    let tree = Tree {
        root: pid,
        sid: pid,
        exclusive: spec.exclusive_children,
        run: &active,
        started: t0,
    };
    let streams = [
        StreamState::new(Stream::Stdout, Some(out_r), spec.output_limit),
        StreamState::new(Stream::Stderr, err_r, spec.output_limit),
    ];
    let report = report_r.map(|fd| Report {
        fd: Some(fd),
        bytes: Vec::new(),
        fits: report_fits,
    });
    let mut watch = Watch::new(spec, io, tree, streams, report, t0);
    watch.until_exit()?;
    drop(forwarder);
    let watched = watch.end_tree()?;
    // The CPU time of the whole tree: this process's children's since the run started, when
    // this process ran nothing else meanwhile.
    let tree_usage = (spec.exclusive_children && ActiveRun::count() == 1)
        .then(|| children_rusage().zip(children_before))
        .flatten()
        .map(|(after, before)| {
            (
                timeval_ms(after.ru_utime) - timeval_ms(before.ru_utime),
                timeval_ms(after.ru_stime) - timeval_ms(before.ru_stime),
            )
        });
    let Watch {
        streams,
        report,
        intervention,
        limits_hit,
        ..
    } = watch;
    let ending = Observed {
        watched,
        intervention,
        limits_hit,
        report: report.map(|r| r.bytes),
        tree_usage,
        sandbox: spec.sandbox.clone().unwrap_or_default(),
    };
    Ok(ending.into_outcome(spec, &cwd, started_at, t0, streams))
}

/// Everything observed of a run that ended.
struct Observed {
    watched: Watched,
    intervention: Intervention,
    limits_hit: Vec<LimitKind>,
    /// The supervisor's report, for a supervised run.
    report: Option<Vec<u8>>,
    /// The tree's CPU time (user, system) in milliseconds, when it is known.
    tree_usage: Option<(u64, u64)>,
    sandbox: SandboxSummary,
}

impl Observed {
    /// The result document and exit code of the run.
    fn into_outcome(
        mut self,
        spec: &RunSpec,
        cwd: &std::path::Path,
        started_at: SystemTime,
        t0: Instant,
        streams: [StreamState; 2],
    ) -> RunOutcome {
        let exit = self.watched.exit;
        let mut ending = if libc::WIFSIGNALED(exit.status) {
            Ending::Signaled(libc::WTERMSIG(exit.status))
        } else {
            Ending::Exited(libc::WEXITSTATUS(exit.status))
        };
        // The program's (or the supervisor's) own `wait4` figures; a supervisor's report
        // replaces them with its program's.
        let mut resource = ResourceUsage {
            max_rss_bytes: Some(exit.rusage.ru_maxrss.max(0) as u64 * 1024),
            cpu_user_ms: Some(timeval_ms(exit.rusage.ru_utime)),
            cpu_sys_ms: Some(timeval_ms(exit.rusage.ru_stime)),
            tree_cpu_user_ms: self.tree_usage.map(|(user, _)| user),
            tree_cpu_sys_ms: self.tree_usage.map(|(_, sys)| sys),
            tree_peak_memory_bytes: None,
        };
        let mut leaked = LeakReport {
            processes_killed: self.watched.processes_killed,
            output_held_open: self.watched.output_held_open,
        };
        // Whether the program's own end is known: a supervised run's comes only from the
        // supervisor's report (the supervisor's own exit status says nothing of it).
        let mut end_known = true;
        if let Some(bytes) = &self.report {
            match parse_report(bytes, &ending) {
                Ok(child) => {
                    apply_report(&child, &mut ending, &mut resource, &mut self.limits_hit);
                    // What the supervisor killed after the program ended is the run's leak
                    // too (PID 1 of a sandbox kills what is left in its namespace).
                    leaked.processes_killed += child.processes_killed;
                    self.sandbox.landlock_unenforced = child.landlock_unenforced;
                }
                Err(reason) if self.intervention == Intervention::None => {
                    ending = Ending::NotStarted {
                        reason,
                        exit_code: 125,
                    };
                }
                // Stopped by cordon before the supervisor reported: the program's exit code
                // and signal are unknown, not the supervisor's (which exits 0).
                Err(_) => end_known = false,
            }
        }
        let verdict = classify(
            &ending,
            self.intervention,
            &self.limits_hit,
            &describe_timeout(spec),
        );
        let (exit_code, signal) = match ending {
            _ if !end_known => (None, None),
            Ending::Exited(code) => (Some(code), None),
            Ending::Signaled(sig) => (None, Some(signal_name(sig))),
            Ending::NotStarted { .. } => (None, None),
        };
        let [stdout, stderr] = streams.map(StreamState::into_captured);
        RunOutcome {
            result: RunResult {
                schema: RunResultTag,
                status: verdict.status,
                exit_code,
                signal,
                duration_ms: exit.at.duration_since(t0).as_millis() as u64,
                limits_hit: self.limits_hit,
                stdout,
                stderr,
                resource,
                failure: verdict.failure,
                command: spec.reported_command(),
                cwd: cwd.to_string_lossy().into_owned(),
                started_at: humantime::format_rfc3339_millis(started_at).to_string(),
                leaked,
                sandbox: self.sandbox,
                run_id: None,
                network: None,
            },
            exit_code: verdict.exit_code,
            ready: self.intervention == Intervention::Ready,
        }
    }
}

/// The outcome of a program that could not be started.
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

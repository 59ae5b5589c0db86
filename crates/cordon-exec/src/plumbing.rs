//! A run's descriptors before the spawn: the output pipes (or a terminal), the program's
//! input, the supervisor's report pipe and network socket, and the program's environment.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use rustix::pipe::{PipeFlags, pipe_with};

use crate::error::ExecError;
use crate::spawn::{Command as SpawnCommand, Spawn, Stdio};
use crate::spec::{RunSpec, StdinMode};
use crate::stdin::Forwarder;
use crate::supervisor::MAX_REPORT_BYTES;

/// A terminal's end-of-file character (Ctrl-D), written when cordon's input ends.
const END_OF_FILE: u8 = 0x04;
/// The size asked for the output pipes: fewer wake-ups under a flood.
const PIPE_SIZE: usize = 1024 * 1024;

/// Everything a run needs to spawn its program and then watch it.
pub(crate) struct Plumbing {
    /// What the program writes to stdout (or to its terminal), read by cordon.
    pub out_r: OwnedFd,
    /// What the program writes to stderr (unused with a terminal: it never ends by itself,
    /// so it is closed as soon as the program has its copy).
    pub err_r: Option<OwnedFd>,
    /// The supervisor's report pipe's read end (supervised runs).
    pub report_r: Option<OwnedFd>,
    /// Whether the report fits in its pipe whole, so that it can be read once the supervisor
    /// has exited (one wake-up less per run); otherwise it is read as it comes.
    pub report_fits: bool,
    /// Forwards cordon's input to the program, while it runs.
    pub forwarder: Option<Forwarder>,
}

/// The program's ends of the plumbing: given to it by [`ChildEnds::spawn`], which closes
/// cordon's copies.
pub(crate) struct ChildEnds {
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
    report: Option<OwnedFd>,
    network: Option<OwnedFd>,
}

impl Plumbing {
    /// Makes the pipes (or the terminal) `spec` asks for; `network_fd` is handed to a
    /// supervisor only.
    pub(crate) fn new(
        spec: &RunSpec,
        network_fd: Option<OwnedFd>,
    ) -> Result<(Self, ChildEnds), ExecError> {
        let pipe = || pipe_with(PipeFlags::CLOEXEC).map_err(|e| ExecError::Pipe(e.into()));
        let (report_r, report_w, report_fits) = if spec.supervised {
            let (r, w) = pipe()?;
            let fits = rustix::pipe::fcntl_setpipe_size(&r, MAX_REPORT_BYTES)
                .is_ok_and(|size| size >= MAX_REPORT_BYTES);
            (Some(r), Some(w), fits)
        } else {
            (None, None, false)
        };
        let network = if spec.supervised { network_fd } else { None };
        let mut forwarder = None;
        let mut stdin = None;
        let (out_r, err_r, stdout, stderr) = if spec.stdin == StdinMode::Terminal {
            // A terminal of cordon's own is the program's input, output and error; what it
            // writes is read from the primary side as stdout.
            let pty = crate::pty::Pty::open().map_err(ExecError::Pipe)?;
            let clone = |fd: &OwnedFd| fd.try_clone().map_err(ExecError::Pipe);
            forwarder = Some(
                Forwarder::start_into(clone(&pty.primary)?, Some(END_OF_FILE))
                    .map_err(ExecError::Pipe)?,
            );
            stdin = Some(clone(&pty.secondary)?);
            let output = clone(&pty.secondary)?;
            (pty.primary, None, output, pty.secondary)
        } else {
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            // The kernel may refuse the size, which is fine.
            for fd in [&out_r, &err_r] {
                let _ = rustix::pipe::fcntl_setpipe_size(fd, PIPE_SIZE);
            }
            (out_r, Some(err_r), out_w, err_w)
        };
        match spec.stdin {
            StdinMode::Terminal | StdinMode::Inherit => {}
            StdinMode::Null => {
                stdin = Some(
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
                let mut started = Forwarder::start().map_err(ExecError::Pipe)?;
                stdin = started.program_end.take();
                forwarder = Some(started);
            }
        }
        let plumbing = Plumbing {
            out_r,
            err_r,
            report_r,
            report_fits,
            forwarder,
        };
        let ends = ChildEnds {
            stdin,
            stdout,
            stderr,
            report: report_w,
            network,
        };
        Ok((plumbing, ends))
    }
}

impl ChildEnds {
    /// Spawns the program with these ends, then closes cordon's copies of them (only the
    /// program's own must keep the write ends open, so that its exit ends the pipes).
    pub(crate) fn spawn(self, spec: &RunSpec, cwd: &Path) -> std::io::Result<libc::pid_t> {
        Spawn::new(SpawnCommand {
            program: &spec.program,
            arg0: spec.arg0.as_deref(),
            args: &spec.args,
            env: program_env(spec),
            cwd,
            stdin: self
                .stdin
                .as_ref()
                .map_or(Stdio::Inherit, |fd| Stdio::Fd(fd.as_raw_fd())),
            stdout: self.stdout.as_raw_fd(),
            stderr: self.stderr.as_raw_fd(),
            report_fd: self.report.as_ref().map(AsRawFd::as_raw_fd),
            network_fd: self.network.as_ref().map(AsRawFd::as_raw_fd),
        })
        .and_then(|prepared| prepared.spawn())
    }
}

/// The program's complete environment: cordon's own (unless cleared) with the spec's
/// variables set over it.
fn program_env(spec: &RunSpec) -> Vec<(OsString, OsString)> {
    if spec.env.clear {
        return spec.env.set.clone();
    }
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !spec.env.set.iter().any(|(s, _)| s == k))
        .collect();
    env.extend(spec.env.set.iter().cloned());
    env
}

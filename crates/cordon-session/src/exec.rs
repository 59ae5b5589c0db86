//! Running programs in a session: [`ExecLease`], and [`Session::exec`] for library callers.

use std::path::Path;
use std::time::Duration;

use cordon_runner::{Hooks, Ran, RunRequest, WorkspaceMount};
use cordon_workspace::ProcessIdentity;

use crate::error::{SessionError, SessionErrorKind};
use crate::record::{self, SessionRecord, SessionRun, WriterActivity, WriterInfo};
use crate::sessions::Session;
use cordon_workspace::state::FileLock;

/// How a program runs in a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The session's tree and its own git repository writable (the agent commits freely);
    /// one writer at a time.
    Write,
    /// The whole tree and its git data read-only, enforced by the kernel (a reviewer);
    /// readers never wait.
    ReadOnly,
}

/// The right to run one program in a session: for a writer, the session's writer lock
/// (a `flock`, released by the kernel if this process dies).
#[derive(Debug)]
pub struct ExecLease {
    session: Session,
    record: SessionRecord,
    access: Access,
    started_at: String,
    writer_lock: Option<FileLock>,
    overlay: Option<cordon_runner::OverlayMount>,
    /// `readers.lock`, shared: the layers this run mounts stay held while it runs.
    _readers: FileLock,
}

impl Session {
    /// Takes the right to run a program: a writer waits at most `wait` for another writer
    /// (`Duration::ZERO`: refuse at once); a reader never waits. The run is entered in the
    /// record (exit code unknown until [`ExecLease::finish`]), so a crash leaves a trace.
    pub fn begin_exec(&self, access: Access, wait: Duration) -> Result<ExecLease, SessionError> {
        self.begin_exec_or_stop(access, wait, &|| false)
    }

    /// Like [`Session::begin_exec`], and a writer's wait ends as soon as `stop` says so (the
    /// caller's cancel): [`SessionErrorKind::WaitCancelled`].
    pub fn begin_exec_or_stop(
        &self,
        access: Access,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<ExecLease, SessionError> {
        self.active_record()?;
        self.check_home_masked()?;
        let writer = match access {
            Access::ReadOnly => None,
            Access::Write => Some(self.writer_lock_or_stop(wait, stop)?),
        };
        // Taken before the record is read: a flatten lets go of the layers it replaced only
        // when no run that may have read them holds this lock.
        let readers = self.readers_lock()?;
        let started_at = record::now_text();
        let me = ProcessIdentity::current();
        let record = self.update(|rec| {
            rec.last_activity = started_at.clone();
            rec.push_run(SessionRun {
                run_id: None,
                read_only: access == Access::ReadOnly,
                command: Vec::new(),
                started_at: started_at.clone(),
                pid: me.pid,
                pid_start_time: me.start_time,
                exit_code: None,
            });
            if writer.is_some() {
                rec.writer = Some(WriterInfo {
                    pid: me.pid,
                    start_time: me.start_time,
                    activity: WriterActivity::Exec,
                    since: started_at.clone(),
                });
            }
        })?;
        let overlay = self.overlay(&record)?;
        Ok(ExecLease {
            session: self.clone(),
            record,
            access,
            started_at,
            writer_lock: writer,
            overlay,
            _readers: readers,
        })
    }

    /// `readers.lock`, shared: held by whatever runs over the session's layers (an exclusive
    /// holder, letting go of layers after a flatten, holds it for a moment only).
    pub(crate) fn readers_lock(&self) -> Result<FileLock, SessionError> {
        Ok(FileLock::acquire_shared(
            &self.sessions.layout.readers_lock(&self.id),
        )?)
    }

    /// Takes the writer lock within `wait` (or until `stop` says so:
    /// [`SessionErrorKind::WaitCancelled`]), recording nothing; the session must still be
    /// active once it is held (gc or `remove` may have ended it meanwhile).
    pub(crate) fn writer_lock_or_stop(
        &self,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<FileLock, SessionError> {
        let path = self.sessions.layout.writer_lock(&self.id);
        if let Some(lock) = FileLock::acquire_within_or_stop(&path, wait, stop)? {
            self.active_record()?;
            return Ok(lock);
        }
        if stop() {
            return Err(SessionError::new(SessionErrorKind::WaitCancelled).with_id(&self.id));
        }
        let pid = self.record()?.writer.map_or(0, |w| w.pid);
        let kind = if wait.is_zero() {
            SessionErrorKind::WriterBusy { pid }
        } else {
            SessionErrorKind::WaitTimedOut { waited: wait }
        };
        Err(SessionError::new(kind).with_id(&self.id))
    }

    /// Runs one program in the session through the one sandboxed-run path: `request`'s
    /// working directory (default: the tree's top) must lie in the tree; the workspace is
    /// set by the session.
    pub fn exec(
        &self,
        mut request: RunRequest,
        access: Access,
        wait: Duration,
        hooks: Hooks<'_>,
    ) -> Result<Ran, SessionError> {
        let lease = self.begin_exec(access, wait)?;
        lease.apply(&mut request);
        let command: Vec<String> = request
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let run_id = hooks.transcript.map(|t| t.recorder.id().to_owned());
        let ran = cordon_runner::run(&request, hooks);
        let exit = ran.as_ref().ok().map(|r| r.exit_code);
        lease.finish(run_id, command, exit)?;
        Ok(ran?)
    }
}

impl ExecLease {
    /// The session's record when the lease was taken.
    pub fn record(&self) -> &SessionRecord {
        &self.record
    }

    /// The session's tree (the program's default working directory).
    pub fn tree(&self) -> &Path {
        &self.record.path
    }

    /// The workspace the program runs in.
    pub fn mount(&self) -> WorkspaceMount {
        WorkspaceMount {
            root: self.record.path.clone(),
            git_common_dir: None,
            read_only: self.access == Access::ReadOnly,
            overlay: self.overlay.clone(),
        }
    }

    /// Points `request` at the session: the workspace, and the tree as working directory
    /// unless one inside it is set (one outside is refused by the run path).
    pub fn apply(&self, request: &mut RunRequest) {
        request.workspace = Some(self.mount());
        if request.cwd.as_os_str().is_empty() || !request.cwd.starts_with(self.tree()) {
            request.cwd = self.tree().to_owned();
        }
    }

    /// Records the run's end (its id in the run history, the redacted command, the exit
    /// code) and releases the writer lock.
    pub fn finish(
        self,
        run_id: Option<String>,
        command: Vec<String>,
        exit_code: Option<u8>,
    ) -> Result<SessionRecord, SessionError> {
        let me = std::process::id();
        let writer = self.writer_lock.is_some();
        let rec = self.session.update(|rec| {
            rec.last_activity = record::now_text();
            if let Some(run) = rec
                .runs
                .iter_mut()
                .rev()
                .find(|r| r.pid == me && r.started_at == self.started_at)
            {
                run.run_id = run_id;
                run.command = command;
                run.exit_code = exit_code;
            }
            if writer && rec.writer.as_ref().is_some_and(|w| w.pid == me) {
                rec.writer = None;
            }
        });
        drop(self.writer_lock);
        rec
    }
}

/// Whether a process runs: alive (same start time) and not a zombie waiting for its parent.
fn still_running(identity: &ProcessIdentity) -> bool {
    if identity.liveness() != cordon_workspace::Liveness::Alive {
        return false;
    }
    let stat = std::fs::read(format!("/proc/{}/stat", identity.pid)).unwrap_or_default();
    cordon_types::proc_stat::field(&stat, 3).is_some() && !cordon_types::proc_stat::has_ended(&stat)
}

/// Asks the cordon processes running programs in the session to stop (SIGTERM: each ends its
/// program's whole sandbox and records the run as cancelled), and waits at most `wait` for
/// them to be gone. Processes are recognised by pid and start time, so a reused pid is never
/// signalled.
pub(crate) fn stop_runs(rec: &SessionRecord, wait: Duration, stop: &dyn Fn() -> bool) {
    let deadline = std::time::Instant::now() + wait;
    let mut signalled = Vec::new();
    let writer = rec.writer.iter().map(|w| (w.pid, w.start_time));
    let running = rec
        .runs
        .iter()
        .filter(|r| r.exit_code.is_none())
        .map(|r| (r.pid, r.pid_start_time));
    for (pid, start_time) in writer.chain(running) {
        let identity = ProcessIdentity { pid, start_time };
        if pid != std::process::id()
            && start_time.is_some()
            && identity.liveness() == cordon_workspace::Liveness::Alive
            && let Some(pid) = rustix::process::Pid::from_raw(pid as i32)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            signalled.push(identity);
        }
    }
    while signalled.iter().any(still_running) && std::time::Instant::now() < deadline && !stop() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

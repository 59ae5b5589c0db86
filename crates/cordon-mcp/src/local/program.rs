//! `run` and `session_exec`: one program through the one sandboxed-run path
//! (`cordon_runner`), recorded in the run history like `cordon run`'s, within the operator's
//! bounds.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use cordon_runner::{
    Bounds as RunBounds, Hooks, Isolation, OverlayMount, Ran, Recorder, RunRequest, SandboxOptions,
    TranscriptTarget, WorkspaceMount,
};
use cordon_session::Access;
use cordon_store::{RunKind, RunState};
use cordon_types::{NetworkRule, RunResult, RunStatus};

use super::Local;
use crate::bounds::{DEFAULT_OUTPUT_LIMIT, MAX_OUTPUT_LIMIT};
use crate::failure::ToolFailure;
use crate::inputs::{ProgramAsk, RunInput, SessionExecInput};
use crate::server::{Call, ToolOutput};

/// The most bytes of output a recorded run's transcript keeps (as `cordon run`'s default).
const TRANSCRIPT_LIMIT: u64 = 64 << 20;

impl Local {
    /// `run`: in a session (as its writer), in a workspace, or in a directory the agent may
    /// open.
    pub(super) fn run(&self, input: RunInput, call: &Call) -> Result<ToolOutput, ToolFailure> {
        let ask = input.ask();
        if let Some(id) = &input.session {
            if input.workspace.is_some() {
                return Err(ToolFailure::usage(
                    "give `session` or `workspace`, not both: a session is a workspace",
                ));
            }
            if input.no_sandbox {
                return Err(ToolFailure::usage(
                    "no_sandbox cannot be used in a session: a session runs only sandboxed",
                ));
            }
            return self.in_session(id, Access::Write, None, input.argv, &ask, input.cwd, call);
        }
        let mut request = self.request(input.argv, &ask, input.no_sandbox)?;
        let (record_repo, _mounted) = match &input.workspace {
            Some(id) => {
                let (mount, guard, repo) = self.workspace_mount(id, input.no_sandbox, call)?;
                request.cwd = inside(&mount.root, input.cwd.as_deref())?;
                request.workspace = Some(mount);
                // Recorded as about the workspace's repository (`runs` find it there).
                (repo, guard)
            }
            None => {
                let place = self.bounds.default_place(call.roots())?;
                let cwd = match &input.cwd {
                    Some(dir) => place.join(dir),
                    None => place,
                };
                request.cwd = self.bounds.check_path("cwd", &cwd, call.roots())?;
                (request.cwd.clone(), None)
            }
        };
        let (ran, _) = self.record_run(&request, &record_repo, None, call)?;
        Ok(output(&ran.result))
    }

    /// `session_exec`: a writer or a reader in a session.
    pub(super) fn session_exec(
        &self,
        input: SessionExecInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let access = if input.read_only {
            Access::ReadOnly
        } else {
            Access::Write
        };
        let wait = match &input.wait {
            Some(text) => Some(
                cordon_types::units::parse_duration(text)
                    .map_err(|e| ToolFailure::usage(format!("wait {text:?}: {e}")))?,
            ),
            None => None,
        };
        let ask = input.ask();
        self.in_session(&input.id, access, wait, input.argv, &ask, input.cwd, call)
    }

    /// One program in session `id`, with `access`.
    #[expect(
        clippy::too_many_arguments,
        reason = "the two tools' inputs, spelled out"
    )]
    fn in_session(
        &self,
        id: &str,
        access: Access,
        wait: Option<Duration>,
        argv: Vec<String>,
        ask: &ProgramAsk,
        cwd: Option<String>,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let session = self.open_session(id, call)?;
        let mut request = self.request(argv, ask, false)?;
        // A writer waits at most the program's own timeout for another writer, and never past
        // the client's cancel.
        let wait = wait.unwrap_or(Duration::ZERO).min(request.bounds.timeout);
        let lease = session.begin_exec_or_stop(access, wait, &|| call.cancel.is_cancelled())?;
        request.cwd = inside(lease.tree(), cwd.as_deref())?;
        request.workspace = Some(lease.mount());
        let tree = lease.tree().to_owned();
        let session_id = session.id().to_string();
        let ran = self.record_run(&request, &tree, Some(&session_id), call);
        let (run_id, command, exit) = match &ran {
            Ok((ran, command)) => (
                ran.result.run_id.clone(),
                command.clone(),
                Some(ran.exit_code),
            ),
            Err(failure) => (None, Vec::new(), Some(failure.document.code)),
        };
        lease.finish(run_id, command, exit)?;
        Ok(output(&ran?.0.result))
    }

    /// The run request of `argv` within the operator's bounds: network, timeout, memory,
    /// output, and whether the sandbox may be left out.
    fn request(
        &self,
        argv: Vec<String>,
        ask: &ProgramAsk,
        no_sandbox: bool,
    ) -> Result<RunRequest, ToolFailure> {
        if argv.is_empty() {
            return Err(ToolFailure::usage("argv is empty: name the program to run"));
        }
        self.bounds.check_no_sandbox(no_sandbox)?;
        let network = ask.network.clone().unwrap_or(NetworkRule::None);
        self.bounds.check_network(&network)?;
        let timeout = self.bounds.timeout(ask.timeout.as_deref())?;
        let memory = self.bounds.memory(ask.memory.as_deref())?;
        let output_limit = output_limit(ask.output_limit.as_deref())?;
        let isolation = if no_sandbox {
            if network != NetworkRule::None || ask.memory.is_some() || ask.pids.is_some() {
                return Err(ToolFailure::usage(
                    "network, memory and pids are enforced by the sandbox: they cannot be \
                     combined with no_sandbox",
                ));
            }
            Isolation::Unsandboxed
        } else {
            let (mut options, _) = SandboxOptions::with_network(&network)
                .map_err(|e| ToolFailure::usage(format!("network: {e}")))?;
            options.limits.memory_bytes = memory;
            options.limits.pids = ask.pids;
            Isolation::Sandboxed(options)
        };
        let mut request = RunRequest::new(argv, PathBuf::new());
        request.isolation = isolation;
        request.env = environment(ask)?;
        request.bounds = RunBounds {
            timeout,
            output_limit,
            ..RunBounds::default()
        };
        Ok(request)
    }

    /// Prepares, records and runs `request`: the run is entered in the history before the
    /// program starts (its id goes out as a progress notification), its output is recorded
    /// as it comes, and the client's cancel ends its whole tree. Returns what ran and the
    /// command as recorded.
    fn record_run(
        &self,
        request: &RunRequest,
        record_repo: &Path,
        session: Option<&str>,
        call: &Call,
    ) -> Result<(Ran, Vec<String>), ToolFailure> {
        let prepared = cordon_runner::prepare(request)?;
        let command = prepared.shown_command().to_vec();
        let recorder = Recorder::begin_on(
            self.store.clone(),
            RunKind::Run,
            Some(record_repo),
            session,
            &command,
            TRANSCRIPT_LIMIT,
        )?;
        call.progress(format!(
            "run {} started: {}",
            recorder.id(),
            command.join(" ")
        ));
        let ran = prepared.run(Hooks {
            cancel: Some(&call.cancel),
            transcript: Some(TranscriptTarget {
                recorder: &recorder,
                stage: None,
            }),
            ..Hooks::default()
        });
        match ran {
            Ok(ran) => {
                // A failure to record loses no result: the answer carries it.
                let _ = recorder.finish(RunState::from(ran.result.status), &ran.result);
                Ok((ran, command))
            }
            Err(error) => {
                let failure = ToolFailure::from(error);
                let _ = recorder.finish(RunState::Error, &failure.document);
                Err(failure)
            }
        }
    }

    /// A workspace the agent may use, mounted for one writer: the mount, its guard and the
    /// repository it was made from.
    fn workspace_mount(
        &self,
        id: &str,
        no_sandbox: bool,
        call: &Call,
    ) -> Result<
        (
            WorkspaceMount,
            Option<cordon_workspace::MountGuard>,
            PathBuf,
        ),
        ToolFailure,
    > {
        let record = self.workspace_record(id, call)?;
        let overlay = self.workspaces.overlay_parts(&record)?;
        if overlay.is_some() && no_sandbox {
            return Err(ToolFailure::usage(format!(
                "no_sandbox: workspace {id} is an overlay, whose files exist only inside the \
                 sandbox"
            )));
        }
        let guard = self.workspaces.mount_guard(&record, true)?;
        let mount = WorkspaceMount {
            root: record.path.clone(),
            git_common_dir: Some(record.git_common_dir.clone()),
            read_only: false,
            overlay: overlay.map(|parts| OverlayMount {
                lowers: parts.lowers,
                layer: parts.layer,
                git_dir: Some(parts.git_dir),
                dot_git: Some(parts.dot_git),
                caches: Vec::new(),
            }),
        };
        Ok((mount, guard, record.repo))
    }
}

/// `dir` (relative, plain) inside `top`; `top` itself when none.
fn inside(top: &Path, dir: Option<&str>) -> Result<PathBuf, ToolFailure> {
    let Some(dir) = dir else {
        return Ok(top.to_owned());
    };
    let rel = Path::new(dir);
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(ToolFailure::usage(format!(
            "cwd {dir:?} must be a plain relative path inside the workspace or session"
        )));
    }
    Ok(top.join(rel))
}

/// The bytes of each stream a run's result keeps.
fn output_limit(asked: Option<&str>) -> Result<usize, ToolFailure> {
    let Some(text) = asked else {
        return Ok(DEFAULT_OUTPUT_LIMIT);
    };
    let bytes = cordon_types::units::parse_size(text)
        .map_err(|e| ToolFailure::usage(format!("output_limit {text:?}: {e}")))?;
    match usize::try_from(bytes) {
        Ok(bytes) if bytes <= MAX_OUTPUT_LIMIT => Ok(bytes),
        _ => Err(ToolFailure::usage(format!(
            "output_limit {text} is more than 1MiB; the whole output is in the transcript \
             (runs_logs)"
        ))),
    }
}

/// The variables asked for, checked.
fn environment(ask: &ProgramAsk) -> Result<Vec<(String, String)>, ToolFailure> {
    ask.env
        .iter()
        .map(|(name, value)| {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid || value.contains('\0') {
                return Err(ToolFailure::usage(format!(
                    "env {name:?}: names are letters, digits and _ (not first), values hold no NUL"
                )));
            }
            Ok((name.clone(), value.clone()))
        })
        .collect()
}

/// A run's answer: its result, and a summary of exit, duration, limits and the last lines.
pub(crate) fn output(result: &RunResult) -> ToolOutput {
    ToolOutput::of(result, summary(result))
}

/// The summary of a run: `exit 0 (pass) in 12 ms`, limits hit, the reason it failed, the
/// last lines of each stream.
pub(crate) fn summary(result: &RunResult) -> String {
    let ended = match (result.status, result.exit_code, &result.signal) {
        (RunStatus::Cancelled, _, _) => "cancelled".to_owned(),
        (RunStatus::Timeout, _, _) => "timed out".to_owned(),
        (_, Some(code), _) => format!("exit {code}"),
        (_, None, Some(signal)) => format!("killed by {signal}"),
        (_, None, None) => "did not run".to_owned(),
    };
    let mut lines = vec![format!(
        "{ended} ({}) in {} ms{}",
        serde_json::to_value(result.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        result.duration_ms,
        result
            .run_id
            .as_deref()
            .map(|id| format!(", run {id}"))
            .unwrap_or_default()
    )];
    if !result.limits_hit.is_empty() {
        let hit: Vec<String> = result
            .limits_hit
            .iter()
            .filter_map(|l| serde_json::to_value(l).ok()?.as_str().map(str::to_owned))
            .collect();
        lines.push(format!("limits hit: {}", hit.join(", ")));
    }
    if let Some(failure) = &result.failure {
        lines.push(format!("why: {}", failure.reason));
    }
    for (name, stream) in [("stdout", &result.stdout), ("stderr", &result.stderr)] {
        let text = format!("{}{}", stream.head, stream.tail);
        let last: Vec<&str> = text.lines().rev().take(10).collect();
        if !last.is_empty() {
            lines.push(format!("{name} (last lines):"));
            lines.extend(last.into_iter().rev().map(|l| format!("  {l}")));
        }
    }
    lines.join("\n")
}

//! Workspaces and sessions: `cordon-workspace` and `cordon-session` as the CLI calls them,
//! each reachable only through a repository the agent may open.

use std::path::PathBuf;
use std::time::Duration;

use cordon_session::{CreateRequest as SessionCreate, PullRequest, Session};
use cordon_workspace::{CreateRequest, ProcessIdentity, WorkspaceId, WorkspaceRecord};

use super::Local;
use crate::failure::ToolFailure;
use crate::inputs::{
    DiffInput, IdInput, SessionCreateInput, SessionForkInput, SessionPullInput,
    WorkspaceApplyInput, WorkspaceCreateInput,
};
use crate::outputs::{WorkspacePatch, WorkspacePatchTag};
use crate::server::{Call, ToolOutput};

/// How long `session_remove` waits for what runs in the session to stop.
const REMOVE_WAIT: Duration = Duration::from_secs(30);

/// How long `session_pull` waits for the session's writer to finish.
const PULL_WAIT: Duration = Duration::from_secs(60);

impl Local {
    /// The repository a call names (default: the first place the agent may open), checked.
    fn repository(&self, repo: Option<&str>, call: &Call) -> Result<PathBuf, ToolFailure> {
        let place = self.bounds.default_place(call.roots())?;
        let path = match repo {
            Some(dir) => place.join(dir),
            None => place,
        };
        self.bounds.check_path("repo", &path, call.roots())
    }

    /// The record of workspace `id`, when it was made from a repository the agent may open
    /// (any other is "not found": its existence is not the agent's business).
    pub(super) fn workspace_record(
        &self,
        id: &str,
        call: &Call,
    ) -> Result<WorkspaceRecord, ToolFailure> {
        let parsed: WorkspaceId = id.parse()?;
        let record = self.workspaces.show(&parsed)?.record;
        if !self.bounds.allows(&record.repo, call.roots()) {
            return Err(ToolFailure::not_found(format!(
                "no workspace {id} of a repository this server may open"
            )));
        }
        Ok(record)
    }

    /// Session `id`, when it was made from a repository the agent may open.
    pub(super) fn open_session(&self, id: &str, call: &Call) -> Result<Session, ToolFailure> {
        let session = self.sessions.open_str(id)?;
        let record = session.record()?;
        if !self.bounds.allows(&record.repo, call.roots()) {
            return Err(ToolFailure::not_found(format!(
                "no session {id} of a repository this server may open"
            )));
        }
        Ok(session)
    }

    pub(super) fn workspace_create(
        &self,
        input: WorkspaceCreateInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let repo = self.repository(input.repo.as_deref(), call)?;
        let rev = input.rev.unwrap_or_else(|| "HEAD".to_owned());
        let mut request = CreateRequest::new(&repo, &rev, input.persistent);
        if !input.persistent {
            // A transient workspace is this server's: `cordon gc` removes it once it ended.
            request.owner = Some(ProcessIdentity::current());
        }
        let record = self.workspaces.create(&request)?;
        let summary = format!(
            "workspace {} of {}@{} ({}){}",
            record.id.as_str(),
            record.repo.display(),
            record.rev,
            record.strategy,
            record
                .strategy_note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        );
        Ok(ToolOutput::of(&record, summary))
    }

    pub(super) fn workspace_apply(
        &self,
        input: WorkspaceApplyInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let record = self.workspace_record(&input.id, call)?;
        let report = self.workspaces.apply(&record.id, input.patch.as_bytes())?;
        let summary = format!(
            "applied to {}: {} file(s)\n{}",
            record.id.as_str(),
            report.files.len(),
            report
                .files
                .iter()
                .map(|f| format!("  {:?} {}", f.status, f.path.to_string_lossy()))
                .collect::<Vec<_>>()
                .join("\n")
        );
        Ok(ToolOutput::of(&report, summary))
    }

    pub(super) fn workspace_diff(
        &self,
        input: DiffInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let record = self.workspace_record(&input.id, call)?;
        let mut diff = self.workspaces.diff(&record.id, false)?;
        let patch = diff.patch.take().unwrap_or_default();
        let max = max_patch(input.max_bytes);
        let patch_bytes = u64::try_from(patch.len()).unwrap_or(u64::MAX);
        let shown = String::from_utf8_lossy(&patch[..patch.len().min(max)]).into_owned();
        let document = WorkspacePatch {
            schema: WorkspacePatchTag,
            truncated: patch.len() > max,
            diff,
            patch: shown,
            patch_bytes,
        };
        let summary = format!(
            "{} file(s) changed in {} ({} bytes of patch{})",
            document.diff.files.len(),
            record.id.as_str(),
            patch_bytes,
            if document.truncated {
                ", truncated"
            } else {
                ""
            }
        );
        Ok(ToolOutput::of(&document, summary))
    }

    pub(super) fn workspace_remove(
        &self,
        input: IdInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let record = self.workspace_record(&input.id, call)?;
        let removed = self.workspaces.remove(&record.id)?;
        let summary = format!("removed workspace {}", removed.id.as_str());
        Ok(ToolOutput::of(&removed, summary))
    }

    pub(super) fn session_create(
        &self,
        input: SessionCreateInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        if input.workspace.is_some() {
            return Err(ToolFailure::usage(
                "a session is made from a repository's branch (repo, ref); `workspace` names \
                 one over the job service only",
            ));
        }
        let repo = self.repository(input.repo.as_deref(), call)?;
        let mut request = SessionCreate::new(&repo);
        request.rev = input.rev.unwrap_or_else(|| "HEAD".to_owned());
        request.branch = input.branch;
        request.depth = input.depth;
        if let Some(text) = &input.idle_timeout {
            request.idle_timeout = cordon_types::units::parse_duration(text)
                .map_err(|e| ToolFailure::usage(format!("idle_timeout {text:?}: {e}")))?;
        }
        let record = self.sessions.create(&request)?;
        let summary = format!(
            "session {} of {} ({} at {})",
            record.id,
            record.repo.display(),
            record.host_branch,
            record.base_commit.as_str()
        );
        Ok(ToolOutput::of(&record, summary))
    }

    pub(super) fn session_diff(
        &self,
        input: DiffInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let session = self.open_session(&input.id, call)?;
        let diff = session.diff(max_patch(input.max_bytes))?;
        let summary = format!(
            "session {} against {}: {} bytes of patch{}",
            diff.id,
            diff.base_commit,
            diff.patch_bytes,
            if diff.truncated { ", truncated" } else { "" }
        );
        Ok(ToolOutput::of(&diff, summary))
    }

    pub(super) fn session_pull(
        &self,
        input: SessionPullInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let session = self.open_session(&input.id, call)?;
        let request = PullRequest {
            into: input.into,
            wait: PULL_WAIT,
            ..PullRequest::default()
        };
        let report = session.pull_or_stop(&request, &|| call.cancel.is_cancelled())?;
        let summary = match report.outcome {
            cordon_session::PullOutcome::Merged => format!(
                "{} fast-forwarded by {} commit(s)",
                report.into, report.commits
            ),
            cordon_session::PullOutcome::UpToDate => {
                format!("{} is up to date with session {}", report.into, report.id)
            }
        };
        Ok(ToolOutput::of(&report, summary))
    }

    pub(super) fn session_show(
        &self,
        input: IdInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let record = self.open_session(&input.id, call)?.record()?;
        let summary = format!(
            "session {} ({:?}) of {} on {}, {} run(s)",
            record.id,
            record.state,
            record.repo.display(),
            record.branch,
            record.runs.len()
        );
        Ok(ToolOutput::of(&record, summary))
    }

    pub(super) fn session_fork(
        &self,
        input: SessionForkInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let session = self.open_session(&input.id, call)?;
        let report = session.fork(&cordon_session::ForkRequest::new(input.count.unwrap_or(1)))?;
        let ids: Vec<String> = report.sessions.iter().map(|s| s.id.to_string()).collect();
        let summary = format!(
            "forked session {} into {} ({} frozen layer(s) shared)",
            report.source,
            ids.join(", "),
            report.depth
        );
        Ok(ToolOutput::of(&report, summary))
    }

    pub(super) fn session_remove(
        &self,
        input: IdInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let session = self.open_session(&input.id, call)?;
        let record = session.remove_or_stop(REMOVE_WAIT, &|| call.cancel.is_cancelled())?;
        let summary = format!("ended session {} (its runs stay recorded)", record.id);
        Ok(ToolOutput::of(&record, summary))
    }
}

/// The most bytes of a patch returned: what was asked, at most
/// [`cordon_session::MAX_DIFF_BYTES`].
fn max_patch(asked: Option<u64>) -> usize {
    asked
        .and_then(|b| usize::try_from(b).ok())
        .unwrap_or(cordon_session::MAX_DIFF_BYTES)
        .min(cordon_session::MAX_DIFF_BYTES)
}

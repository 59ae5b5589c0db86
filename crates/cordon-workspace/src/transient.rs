//! [`TransientWorkspace`]: a workspace removed when the value is dropped.

use std::path::Path;

use crate::error::WorkspaceError;
use crate::id::WorkspaceId;
use crate::record::WorkspaceRecord;
use crate::workspaces::{CreateRequest, Workspaces};

/// A transient workspace owned by this value: dropping it removes the workspace.
///
/// If the process dies first (a crash, `SIGKILL`), the record names this process as owner,
/// and the next [`Workspaces::gc`] or [`Workspaces::reconcile_on_start`] removes it.
#[derive(Debug)]
pub struct TransientWorkspace {
    workspaces: Workspaces,
    record: Option<WorkspaceRecord>,
}

impl Workspaces {
    /// Creates a transient workspace of `repo` at `rev`, removed when the guard is dropped.
    pub fn create_transient(
        &self,
        repo: &Path,
        rev: &str,
    ) -> Result<TransientWorkspace, WorkspaceError> {
        self.create_transient_from(&CreateRequest::new(repo, rev, false))
    }

    /// Creates a transient workspace as `request` says (its `persistent` is ignored),
    /// removed when the guard is dropped.
    pub fn create_transient_from(
        &self,
        request: &CreateRequest,
    ) -> Result<TransientWorkspace, WorkspaceError> {
        let request = CreateRequest {
            persistent: false,
            ..request.clone()
        };
        let record = self.create(&request)?;
        Ok(TransientWorkspace {
            workspaces: self.clone(),
            record: Some(record),
        })
    }
}

impl TransientWorkspace {
    /// The workspace's record.
    pub fn record(&self) -> &WorkspaceRecord {
        self.record.as_ref().expect("present until consumed")
    }

    /// The workspace's id.
    pub fn id(&self) -> &WorkspaceId {
        &self.record().id
    }

    /// The directory of the workspace's files.
    pub fn path(&self) -> &Path {
        &self.record().path
    }

    /// Removes the workspace now, reporting failure (dropping ignores it).
    pub fn remove(mut self) -> Result<WorkspaceRecord, WorkspaceError> {
        let record = self.record.take().expect("present until consumed");
        self.workspaces.remove(&record.id)
    }

    /// Leaves the workspace in place; gc collects it once this process has exited.
    pub fn leak(mut self) -> WorkspaceRecord {
        self.record.take().expect("present until consumed")
    }
}

impl Drop for TransientWorkspace {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            let _ = self.workspaces.remove(&record.id);
        }
    }
}

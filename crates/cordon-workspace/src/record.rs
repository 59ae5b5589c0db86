//! `cordon.workspace/v1`: the record of one workspace, written atomically.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::id::WorkspaceId;
pub(crate) use crate::state::Durability;
use crate::state::{ProcessIdentity, sync_dir};

cordon_types::schema_tag!(
    /// The `schema` tag of a workspace record: always `"cordon.workspace/v1"`.
    WorkspaceRecordTag,
    "cordon.workspace/v1"
);

/// How a workspace's files are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Strategy {
    /// A detached `git worktree` of the source repository at the commit.
    GitWorktree,
    /// A copy-on-write overlay: the commit's shared, read-only base tree
    /// (`$CORDON_HOME/bases/<commit>`) under a private upper layer holding the workspace's
    /// changes, mounted only inside the sandbox (and in cordon's own helper namespace for
    /// host-side git); created in constant time once the base exists.
    Overlay,
}

impl Strategy {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::GitWorktree => "git-worktree",
            Strategy::Overlay => "overlay",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "git-worktree" => Ok(Strategy::GitWorktree),
            "overlay" => Ok(Strategy::Overlay),
            _ => Err(format!(
                "unknown workspace strategy {s:?} (expected overlay or git-worktree)"
            )),
        }
    }
}

/// Where a workspace is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceState {
    /// Being created by its owner; collected if the owner is gone.
    Creating,
    /// Ready for use.
    Ready,
    /// Being removed; collected by the next gc if the removal was interrupted.
    Removing,
}

impl std::fmt::Display for WorkspaceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WorkspaceState::Creating => "being created",
            WorkspaceState::Ready => "ready",
            WorkspaceState::Removing => "being removed",
        })
    }
}

/// The record of one workspace (`$CORDON_HOME/workspaces/<id>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-revision" = 3))]
pub struct WorkspaceRecord {
    /// Always `cordon.workspace/v1`.
    pub schema: WorkspaceRecordTag,
    /// The workspace's id.
    pub id: WorkspaceId,
    /// The host directory holding the workspace's files: a git worktree's full checkout.
    /// Absent for an overlay workspace, whose files exist only inside the sandbox (`cordon
    /// run --workspace ID`, `cordon workspace shell ID`) and to cordon's own commands
    /// (`workspace diff`, `apply`, `export`): its directory on the host stays empty.
    #[serde(rename = "path", default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<PathBuf>,
    /// The directory cordon addresses the workspace's tree by: a git worktree's checkout, an
    /// overlay's mount point (empty on the host). Not part of the document: it is where
    /// cordon keeps the workspace (`<home>/workspaces/<id>/tree`), filled in when the record
    /// is read.
    #[serde(skip)]
    #[schemars(skip)]
    pub path: PathBuf,
    /// The source repository (the top of its checkout, or its git directory when bare).
    pub repo: PathBuf,
    /// The source repository's common git directory.
    pub git_common_dir: PathBuf,
    /// The workspace's own git directory, once created: `<git_common_dir>/worktrees/<name>`
    /// for a git worktree, `<home>/workspaces/<id>/git` for an overlay.
    pub git_dir: Option<PathBuf>,
    /// The revision the user asked for, as given.
    #[serde(rename = "ref")]
    pub rev: String,
    /// The commit the revision resolved to: the content of the workspace when created.
    pub commit: cordon_git::CommitId,
    /// How the files are made.
    pub strategy: Strategy,
    /// Why this strategy: set when the one asked for (or the default, overlay) could not be
    /// used here and the workspace fell back to another (`cordon doctor` says more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy_note: Option<String>,
    /// When the workspace was created (RFC 3339, UTC).
    pub created_at: String,
    /// Whether the workspace outlives its owner (`false`: removed when the owner is gone).
    pub persistent: bool,
    /// A workspace not used for longer than this many seconds is removed by `cordon gc` (and
    /// the next cordon command): `cordon workspace create --idle-timeout`, 24 hours by
    /// default. Absent: no idle limit (a transient workspace, or a library caller's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_s: Option<u64>,
    /// The process that created the workspace.
    pub owner_pid: u32,
    /// That process's start time (`/proc/<pid>/stat` field 22), against pid reuse.
    pub owner_start_time: Option<u64>,
    /// Where the workspace is in its life.
    pub state: WorkspaceState,
}

impl WorkspaceRecord {
    /// The process that created the workspace.
    pub fn owner(&self) -> ProcessIdentity {
        ProcessIdentity {
            pid: self.owner_pid,
            start_time: self.owner_start_time,
        }
    }
}

/// Reads a record; `Ok(None)` when there is none.
pub(crate) fn read(path: &Path) -> Result<Option<WorkspaceRecord>, WorkspaceError> {
    let record: Option<WorkspaceRecord> = crate::state::read_json(path)?;
    Ok(record.map(|r| placed(r, path)))
}

/// A record as read from `file` (`<home>/workspaces/<id>.json`): its tree is
/// `<home>/workspaces/<id>/tree`, whatever the file says. An overlay's record written before
/// the document left the empty mount point out names it as `path`: forgotten here.
fn placed(mut record: WorkspaceRecord, file: &Path) -> WorkspaceRecord {
    record.path = file.with_extension("").join("tree");
    if record.strategy == Strategy::Overlay && record.checkout.as_ref() == Some(&record.path) {
        record.checkout = None;
    }
    record
}

/// A record file as gc sees it.
pub(crate) enum Stored {
    /// There is no record file.
    Missing,
    /// The file is not JSON at all (empty or cut short, e.g. by a power loss).
    Corrupt,
    /// A readable record.
    Found(Box<WorkspaceRecord>),
}

/// Reads a record, telling a corrupt file (not JSON) from one of another version (JSON that
/// is not a `cordon.workspace/v1` record: an error, so nothing of a newer cordon is touched).
pub(crate) fn read_stored(path: &Path) -> Result<Stored, WorkspaceError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Stored::Missing),
        Err(e) => return Err(WorkspaceError::io(path, e)),
    };
    if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
        return Ok(Stored::Corrupt);
    }
    serde_json::from_slice(&bytes)
        .map(|r| Stored::Found(Box::new(placed(r, path))))
        .map_err(|e| WorkspaceError::new(WorkspaceErrorKind::Record(e)).with_path(path))
}

/// Writes a record atomically (see [`crate::state::write_json`]): readers see the old
/// record or the new one, never a mix.
pub(crate) fn write(
    path: &Path,
    record: &WorkspaceRecord,
    durability: Durability,
) -> Result<(), WorkspaceError> {
    Ok(crate::state::write_json(path, record, durability)?)
}

/// Removes a file (if present); with [`Durability::Durable`], durably.
pub(crate) fn remove(path: &Path, durability: Durability) -> Result<(), WorkspaceError> {
    match std::fs::remove_file(path) {
        Ok(()) if durability == Durability::Atomic => Ok(()),
        Ok(()) => sync_dir(path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| WorkspaceError::io(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WorkspaceError::io(path, e)),
    }
}

/// Marks the record as just used (its modification time is the workspace's last use).
pub(crate) fn touch(path: &Path) {
    if let Ok(file) = std::fs::OpenOptions::new().append(true).open(path) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
}

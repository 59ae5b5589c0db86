//! [`WorkspaceError`]: what went wrong with which workspace, repository or path.

use std::path::PathBuf;

use crate::id::WorkspaceId;

/// A workspace operation failed.
#[derive(Debug, thiserror::Error)]
#[error("{}{kind}", context(id.as_ref(), repo.as_ref(), path.as_ref()))]
pub struct WorkspaceError {
    /// The workspace concerned, when known.
    pub id: Option<WorkspaceId>,
    /// The source repository concerned, when known.
    pub repo: Option<PathBuf>,
    /// The file or directory concerned, when known.
    pub path: Option<PathBuf>,
    /// What went wrong.
    #[source]
    pub kind: WorkspaceErrorKind,
}

fn context(id: Option<&WorkspaceId>, repo: Option<&PathBuf>, path: Option<&PathBuf>) -> String {
    let mut parts = Vec::new();
    if let Some(id) = id {
        parts.push(format!("workspace {id}"));
    }
    if let Some(repo) = repo {
        parts.push(format!("repository {}", repo.display()));
    }
    if let Some(path) = path {
        parts.push(path.display().to_string());
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}: ", parts.join(", "))
    }
}

impl From<crate::state::StateFileError> for WorkspaceError {
    fn from(e: crate::state::StateFileError) -> Self {
        match e.kind {
            crate::state::StateFileErrorKind::Io(source) => WorkspaceError::io(e.path, source),
            crate::state::StateFileErrorKind::Json(source) => {
                WorkspaceError::new(WorkspaceErrorKind::Record(source)).with_path(e.path)
            }
        }
    }
}

impl WorkspaceError {
    pub(crate) fn new(kind: WorkspaceErrorKind) -> Self {
        WorkspaceError {
            id: None,
            repo: None,
            path: None,
            kind,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        WorkspaceError::new(WorkspaceErrorKind::Io(source)).with_path(path)
    }

    pub(crate) fn with_id(mut self, id: &WorkspaceId) -> Self {
        self.id.get_or_insert_with(|| id.clone());
        self
    }

    pub(crate) fn with_repo(mut self, repo: impl Into<PathBuf>) -> Self {
        self.repo.get_or_insert_with(|| repo.into());
        self
    }

    pub(crate) fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path.get_or_insert_with(|| path.into());
        self
    }

    /// How every door reports it: unknown or ended ids, revisions that resolve to nothing and
    /// refused patches are the caller's (exit 2);
    /// the rest is cordon's failure (125).
    pub fn error_class(&self) -> cordon_types::ErrorClass {
        use WorkspaceErrorKind as K;
        use cordon_types::{ErrorClass, ErrorKind, exit_code};
        let failed = |kind| ErrorClass::new(exit_code::CORDON_FAILED, kind);
        match &self.kind {
            K::NotFound | K::Ended(_) => ErrorClass::new(exit_code::USAGE, ErrorKind::NotFound),
            K::InvalidId(_) => ErrorClass::USAGE,
            K::Git(g)
                if matches!(
                    g.kind,
                    cordon_git::GitErrorKind::NoCommits
                        | cordon_git::GitErrorKind::UnknownRevision { .. }
                ) =>
            {
                ErrorClass::USAGE
            }
            K::Git(g)
                if matches!(
                    g.kind,
                    cordon_git::GitErrorKind::PatchRefused { .. }
                        | cordon_git::GitErrorKind::PatchDoesNotApply { .. }
                ) =>
            {
                ErrorClass::new(exit_code::USAGE, ErrorKind::Refused)
            }
            K::NotReady(_) | K::InUse => failed(ErrorKind::Conflict),
            K::OverlayUnavailable(_) => failed(ErrorKind::Unsupported),
            K::Tampered { .. } => failed(ErrorKind::Refused),
            K::HomeUnknown(_) | K::Git(_) | K::Io(_) | K::BaseMissing { .. } | K::Record(_) => {
                ErrorClass::INTERNAL
            }
        }
    }

    /// What the user can do about the error, when there is something to say (rendered by the
    /// CLI as a `hint:` line).
    pub fn hint(&self) -> Option<&'static str> {
        match &self.kind {
            WorkspaceErrorKind::NotFound => Some(
                "`cordon workspace list` shows the workspaces there are (workspaces of another CORDON_HOME are not seen)",
            ),
            WorkspaceErrorKind::Ended(end) => Some(match end.reason {
                crate::ended::WorkspaceEndReason::Expired => {
                    "`cordon workspace create` makes another; `--idle-timeout` sets how long one may stay unused"
                }
                crate::ended::WorkspaceEndReason::OwnerGone => {
                    "without --transient a workspace stays until it is removed or unused for its --idle-timeout"
                }
                crate::ended::WorkspaceEndReason::Removed
                | crate::ended::WorkspaceEndReason::Collected => {
                    "`cordon workspace create` makes another"
                }
            }),
            WorkspaceErrorKind::InvalidId(_) => {
                Some("workspace ids are 8 characters of a-z and 2-7")
            }
            WorkspaceErrorKind::HomeUnknown(_) => None,
            WorkspaceErrorKind::NotReady(_) => {
                Some("wait for the other cordon process, or run `cordon gc`")
            }
            WorkspaceErrorKind::Git(e) => match e.kind {
                cordon_git::GitErrorKind::PatchRefused { .. } => {
                    Some("the patch may only change files inside the workspace, outside .git")
                }
                cordon_git::GitErrorKind::PatchDoesNotApply { .. } => {
                    Some("the patch was made against other content; nothing was changed")
                }
                _ => e.hint(),
            },
            WorkspaceErrorKind::Tampered { .. } => {
                Some("`cordon workspace remove ID` deletes only cordon's own directory of it")
            }
            WorkspaceErrorKind::Io(_) | WorkspaceErrorKind::Record(_) => None,
            WorkspaceErrorKind::BaseMissing { .. } => {
                Some("remove the workspace and create it again")
            }
            WorkspaceErrorKind::OverlayUnavailable(_) => Some(
                "`cordon doctor` says why; `--strategy git-worktree` (or CORDON_WORKSPACE_STRATEGY=git-worktree) works everywhere",
            ),
            WorkspaceErrorKind::InUse => Some("wait for the other program to finish, then retry"),
        }
    }

    /// Whether the error is an unknown workspace id, or one of a workspace that is gone (the
    /// CLI exits with 2 for it).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.kind,
            WorkspaceErrorKind::NotFound | WorkspaceErrorKind::Ended(_)
        )
    }
}

impl From<cordon_git::GitError> for WorkspaceError {
    fn from(e: cordon_git::GitError) -> Self {
        WorkspaceError::new(WorkspaceErrorKind::Git(Box::new(e)))
    }
}

/// How a workspace operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceErrorKind {
    /// No workspace has this id, and none had it (as far as cordon remembers: the ends of
    /// removed workspaces are forgotten by `gc --older-than`).
    #[error("no such workspace: it never existed here")]
    NotFound,
    /// The workspace was there and is gone: removed, expired, or collected by gc.
    #[error("no such workspace any more: {0}")]
    Ended(Box<crate::ended::WorkspaceEnd>),
    /// The text is not a workspace id (8 characters of `a-z` and `2-7`).
    #[error("{0:?} is not a workspace id")]
    InvalidId(String),
    /// `CORDON_HOME` is relative, or neither it, `XDG_DATA_HOME` nor `HOME` names an
    /// absolute directory.
    #[error(transparent)]
    HomeUnknown(cordon_types::HomeError),
    /// The record names files outside the workspace's own directory: it was not written by
    /// cordon (a program that could reach cordon's state forged it), and is not acted on.
    #[error("the record names {path}, not the workspace's own directory: it was tampered with")]
    Tampered {
        /// The path the record names.
        path: PathBuf,
    },
    /// The workspace is not ready (still being created, or being removed).
    #[error("the workspace is {0}")]
    NotReady(crate::record::WorkspaceState),
    /// A git operation failed (including a refused or non-applying patch).
    #[error(transparent)]
    Git(Box<cordon_git::GitError>),
    /// A file operation failed.
    #[error(transparent)]
    Io(std::io::Error),
    /// The base tree of an overlay workspace is gone (removed by hand: gc keeps held ones).
    #[error("the base tree of commit {commit} is missing")]
    BaseMissing {
        /// The commit.
        commit: cordon_git::CommitId,
    },
    /// An overlay workspace was asked for, or must be mounted, and this host cannot.
    #[error("overlay workspaces are unavailable here: {0}")]
    OverlayUnavailable(String),
    /// An overlay workspace is mounted writable by another program right now (overlayfs
    /// takes one writer per upper layer).
    #[error("the workspace is in use by another writer; overlay workspaces take one at a time")]
    InUse,
    /// A record could not be read or written as JSON.
    #[error("bad workspace record")]
    Record(#[source] serde_json::Error),
}

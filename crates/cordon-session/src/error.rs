//! [`SessionError`]: what went wrong, with which session, and what class of failure it is.

use std::path::PathBuf;
use std::time::Duration;

use crate::id::SessionId;

/// A session operation failed.
#[derive(Debug, thiserror::Error)]
#[error("{}{kind}", context(id.as_ref(), path.as_ref()))]
pub struct SessionError {
    /// The session concerned, when known.
    pub id: Option<SessionId>,
    /// The file or directory concerned, when known.
    pub path: Option<PathBuf>,
    /// What went wrong.
    #[source]
    pub kind: SessionErrorKind,
}

fn context(id: Option<&SessionId>, path: Option<&PathBuf>) -> String {
    let mut parts = Vec::new();
    if let Some(id) = id {
        parts.push(format!("session {id}"));
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

/// The class of a failure, which decides the CLI's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionErrorClass {
    /// The operation was refused for a reason the user can act on (diverged history, a
    /// writer already in the session, a hostile bundle): nothing was changed.
    Refused,
    /// Bad usage: an unknown or malformed id, a bad branch name, an ended session.
    Usage,
    /// A bounded wait ran out.
    Timeout,
    /// cordon could not do its job (I/O, git, the sandbox).
    Infra,
}

/// How a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionErrorKind {
    /// `CORDON_HOME` cannot be determined.
    #[error(transparent)]
    HomeUnknown(cordon_types::HomeError),
    /// The text is not a session id.
    #[error("{0:?} is not a session id")]
    InvalidId(String),
    /// No session has this id.
    #[error("no such session")]
    NotFound,
    /// The session has ended (removed, idle, or its owner gone); only its record is left.
    #[error("the session has ended")]
    Ended,
    /// The session is still being created (or its creator died while creating it).
    #[error("the session is being created")]
    NotReady,
    /// Another writer runs in the session.
    #[error("another writer runs in the session (pid {pid})")]
    WriterBusy {
        /// The process holding the writer lock, as recorded.
        pid: u32,
    },
    /// Another review watcher watches the session.
    #[error("another review watcher watches the session (pid {pid})")]
    WatcherBusy {
        /// The watcher, as recorded.
        pid: u32,
    },
    /// A run could not be recorded in the run history.
    #[error(transparent)]
    Record(Box<cordon_runner::RecordError>),
    /// A bounded wait for the session's writer ran out.
    #[error("a writer still runs in the session after waiting {waited:?}")]
    WaitTimedOut {
        /// How long cordon waited.
        waited: Duration,
    },
    /// A wait for the session's writer was cancelled (the caller's cancel).
    #[error("the wait for the session's writer was cancelled")]
    WaitCancelled,
    /// The host repository has no commit yet: there is no branch to start from.
    #[error("the repository has no commits yet: a session starts from a branch's commit")]
    NoCommits,
    /// The revision to push does not name a branch.
    #[error("{0:?} does not name a branch (a session starts from a branch, or HEAD on one)")]
    NotABranch(String),
    /// The session's branch and the host branch both have commits the other lacks.
    #[error(
        "not a fast-forward: {branch} has {host_only} commit(s) the session lacks, the session has {session_only} new commit(s); they are kept in {session_ref}"
    )]
    Diverged {
        /// The host branch.
        branch: String,
        /// Commits only the host branch has.
        host_only: u64,
        /// Commits only the session has.
        session_only: u64,
        /// The host ref that holds the session's commits.
        session_ref: String,
    },
    /// The branch is checked out in a linked worktree (cordon fast-forwards only the main
    /// checkout's, or a branch checked out nowhere).
    #[error("{branch} is checked out in the worktree {} ; cordon does not change it", worktree.display())]
    CheckedOutElsewhere {
        /// The branch.
        branch: String,
        /// Where it is checked out.
        worktree: PathBuf,
    },
    /// The checked-out branch cannot be fast-forwarded: local changes would be overwritten.
    #[error("the fast-forward of the checked-out {branch} was refused by git: {message}")]
    DirtyCheckout {
        /// The branch.
        branch: String,
        /// What git said.
        message: String,
    },
    /// A bundle that crossed the boundary was refused.
    #[error("bundle refused: {0}")]
    BundleRefused(String),
    /// The change adds or changes a submodule URL that git would not take to a host over the
    /// network: a path of this machine, a `file:` URL, a remote helper (`ext::`, `fd::`), or
    /// a URL that a file of the pulled tree would turn into a local path.
    #[error(".gitmodules points a submodule at {url:?}, which is not a network URL: {reason}")]
    LocalSubmodule {
        /// The URL as `.gitmodules` has it.
        url: String,
        /// What git would do with it.
        reason: String,
    },
    /// The change would write more into the checkout than the pull allows; nothing was
    /// written.
    #[error("{}", checkout_too_large(file.as_deref(), *bytes, *limit))]
    CheckoutTooLarge {
        /// The file past the per-file limit; `None` when the files together are past the
        /// total limit.
        file: Option<String>,
        /// Its size, or the files' sizes added up, in bytes.
        bytes: u64,
        /// The limit it is past, in bytes.
        limit: u64,
    },
    /// A git operation failed.
    #[error(transparent)]
    Git(Box<cordon_git::GitError>),
    /// A program run in the session could not be supervised.
    #[error(transparent)]
    Run(Box<cordon_runner::RunError>),
    /// A git step cordon ran in the session's sandbox failed.
    #[error("{step} failed in the session's sandbox: {detail}")]
    SandboxedGit {
        /// Which step.
        step: &'static str,
        /// Its (redacted) standard error or failure reason.
        detail: String,
    },
    /// The session was not ended: the commits its host branch lacks could not be kept in
    /// the host repository first.
    #[error("the session was not ended: its unpulled commits could not be kept on the host")]
    NotKept(#[source] Box<SessionError>),
    /// An ended session's kept commits are no longer in the host repository (its
    /// `refs/cordon/sessions/<id>` was deleted and git collected the objects).
    #[error("its kept commits are gone from the host repository ({session_ref} at {commit})")]
    KeptCommitsGone {
        /// The ref that held them.
        session_ref: String,
        /// The last of them.
        commit: cordon_git::CommitId,
    },
    /// A variable the watch passes as a secret is not set in cordon's environment.
    #[error("{option} {name}: the variable {name} is not set in cordon's environment")]
    MissingSecret {
        /// The option that names it (`--secret`, `--agent-secret`).
        option: &'static str,
        /// The variable.
        name: String,
    },
    /// The session's tree is a full checkout of its own (made with the `git-worktree`
    /// strategy, or where overlays are not available): it has no layer to share.
    #[error("the session is not an overlay session: only a session over a base tree forks")]
    NotForkable,
    /// A fork asked for no session, or for more than [`crate::MAX_FORKS`].
    #[error("--count {0}: a fork makes 1 to {max} sessions", max = crate::MAX_FORKS)]
    ForkCount(u32),
    /// The session's tree already has [`crate::MAX_LAYERS`] frozen layers.
    #[error("the session already has {0} frozen layers (forks of forks): the most a tree may have")]
    TooManyLayers(usize),
    /// The state file cannot be read or written as JSON.
    #[error("bad state file")]
    State(#[source] serde_json::Error),
    /// A file operation failed.
    #[error(transparent)]
    Io(std::io::Error),
}

impl SessionError {
    pub(crate) fn new(kind: SessionErrorKind) -> Self {
        SessionError {
            id: None,
            path: None,
            kind,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::new(SessionErrorKind::Io(source)).with_path(path)
    }

    pub(crate) fn with_id(mut self, id: &SessionId) -> Self {
        self.id.get_or_insert_with(|| id.clone());
        self
    }

    pub(crate) fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path.get_or_insert_with(|| path.into());
        self
    }

    /// How every door reports it: refused 1 (diverged, busy: a conflict; a hostile bundle: a
    /// refusal), usage 2, a wait that ran out 124, the rest cordon's failure (125).
    pub fn error_class(&self) -> cordon_types::ErrorClass {
        use SessionErrorKind as K;
        use cordon_types::{ErrorClass, ErrorKind, exit_code};
        match self.class() {
            SessionErrorClass::Refused => match &self.kind {
                K::BundleRefused(_)
                | K::LocalSubmodule { .. }
                | K::CheckoutTooLarge { .. }
                | K::TooManyLayers(_)
                | K::WaitCancelled => ErrorClass::new(exit_code::FAILED, ErrorKind::Refused),
                _ => ErrorClass::new(exit_code::FAILED, ErrorKind::Conflict),
            },
            SessionErrorClass::Usage => match &self.kind {
                K::NotFound => ErrorClass::new(exit_code::USAGE, ErrorKind::NotFound),
                _ => ErrorClass::USAGE,
            },
            SessionErrorClass::Timeout => ErrorClass::new(exit_code::TIMED_OUT, ErrorKind::Timeout),
            SessionErrorClass::Infra => ErrorClass::INTERNAL,
        }
    }

    /// What kind of failure this is (the CLI maps it to an exit code).
    pub fn class(&self) -> SessionErrorClass {
        use SessionErrorKind as K;
        match &self.kind {
            K::InvalidId(_)
            | K::NotFound
            | K::Ended
            | K::NotReady
            | K::NotABranch(_)
            | K::NoCommits
            | K::MissingSecret { .. }
            | K::NotForkable
            | K::ForkCount(_)
            | K::KeptCommitsGone { .. } => SessionErrorClass::Usage,
            K::Git(e) if matches!(e.kind, cordon_git::GitErrorKind::BadRefName { .. }) => {
                SessionErrorClass::Usage
            }
            K::WriterBusy { .. }
            | K::WatcherBusy { .. }
            | K::Diverged { .. }
            | K::CheckedOutElsewhere { .. }
            | K::DirtyCheckout { .. }
            | K::BundleRefused(_)
            | K::LocalSubmodule { .. }
            | K::CheckoutTooLarge { .. }
            | K::TooManyLayers(_) => SessionErrorClass::Refused,
            K::WaitTimedOut { .. } => SessionErrorClass::Timeout,
            K::WaitCancelled => SessionErrorClass::Refused,
            K::Run(e) if e.class() == cordon_runner::RunErrorClass::Usage => {
                SessionErrorClass::Usage
            }
            K::HomeUnknown(_)
            | K::Git(_)
            | K::Run(_)
            | K::Record(_)
            | K::SandboxedGit { .. }
            | K::NotKept(_)
            | K::State(_)
            | K::Io(_) => SessionErrorClass::Infra,
        }
    }

    /// What the user can do about it, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        use SessionErrorKind as K;
        match &self.kind {
            K::InvalidId(_) => Some("session ids are 8 characters of a-z and 2-7".to_owned()),
            K::NotFound => Some("`cordon session list` shows the sessions there are".to_owned()),
            K::WriterBusy { .. } => Some(
                "wait for it with --wait DUR, or run a reviewer with --read-only (readers never wait)"
                    .to_owned(),
            ),
            K::Diverged {
                branch,
                session_ref,
                ..
            } => Some(format!(
                "merge by hand: git merge {session_ref} (on {branch}), or rebase the session's work"
            )),
            K::DirtyCheckout { .. } => {
                Some("commit or stash your changes, then pull again".to_owned())
            }
            K::NotABranch(_) => Some("pass --ref BRANCH".to_owned()),
            K::NoCommits => Some("commit something first (`git commit`), then try again".to_owned()),
            K::WatcherBusy { .. } => Some(
                "one watcher per session: `cordon session poke ID` wakes the one that runs".to_owned(),
            ),
            K::LocalSubmodule { .. } => Some(
                "a submodule of a pulled change must have an https, http, ssh or git URL (or \
                 scp-like host:path); add a local or relative one on the host by hand"
                    .to_owned(),
            ),
            K::CheckoutTooLarge { file: Some(_), .. } => Some(
                "if the file is meant to be there, pull with a larger --max-checkout-file"
                    .to_owned(),
            ),
            K::CheckoutTooLarge { file: None, .. } => Some(
                "if the change is meant to be that large, pull with a larger --max-checkout-size"
                    .to_owned(),
            ),
            K::Record(e) => Some(e.hint()),
            K::MissingSecret { name, .. } => Some(format!(
                "export {name} before starting the watch (its value is passed redacted), or leave the option out"
            )),
            K::NotKept(_) => Some(
                "pull them first (`cordon session pull ID`), or end it without keeping them: `cordon session remove --discard ID`"
                    .to_owned(),
            ),
            K::Ended => Some(
                "`cordon session list --all` shows ended sessions; `cordon session show ID` what became of it"
                    .to_owned(),
            ),
            K::Run(e) => e.hint(),
            K::NotForkable => Some(
                "create the session where overlays work (`cordon doctor` says), without CORDON_WORKSPACE_STRATEGY=git-worktree"
                    .to_owned(),
            ),
            K::TooManyLayers(_) => Some(
                "its layers could not be merged (see the fork's flatten_failure); pull and start a new session"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

/// The message of [`SessionErrorKind::CheckoutTooLarge`].
fn checkout_too_large(file: Option<&str>, bytes: u64, limit: u64) -> String {
    match file {
        Some(file) => format!(
            "the change writes {file:?} of {bytes} bytes into the checkout, more than the \
             limit of {limit} bytes per file (--max-checkout-file); nothing was written"
        ),
        None => format!(
            "the change writes {bytes} bytes of files into the checkout, more than the limit \
             of {limit} bytes (--max-checkout-size); nothing was written"
        ),
    }
}

impl From<cordon_workspace::state::StateFileError> for SessionError {
    fn from(e: cordon_workspace::state::StateFileError) -> Self {
        use cordon_workspace::state::StateFileErrorKind;
        match e.kind {
            StateFileErrorKind::Io(source) => SessionError::io(e.path, source),
            StateFileErrorKind::Json(source) => {
                SessionError::new(SessionErrorKind::State(source)).with_path(e.path)
            }
        }
    }
}

impl From<cordon_git::GitError> for SessionError {
    fn from(e: cordon_git::GitError) -> Self {
        SessionError::new(SessionErrorKind::Git(Box::new(e)))
    }
}

impl From<cordon_runner::RunError> for SessionError {
    fn from(e: cordon_runner::RunError) -> Self {
        SessionError::new(SessionErrorKind::Run(Box::new(e)))
    }
}

//! [`GitError`]: what went wrong running git, with the command that was run.

use std::path::PathBuf;

/// A git operation failed.
///
/// `args` are the git arguments cordon chose (without the hardening options it always adds),
/// so the message says which operation failed; `kind` says how.
#[derive(Debug, thiserror::Error)]
#[error("{}", shown(args, kind))]
pub struct GitError {
    /// The arguments of the git invocation (after the hardening options).
    pub args: Vec<String>,
    /// What went wrong.
    #[source]
    pub kind: GitErrorKind,
}

/// `git ARGS: KIND`, or the kind alone when it says all (a repository without commits, a
/// revision that names none): the command line would only hide the point.
fn shown(args: &[String], kind: &GitErrorKind) -> String {
    match kind {
        GitErrorKind::NoCommits | GitErrorKind::UnknownRevision { .. } => kind.to_string(),
        _ => format!("git {}: {kind}", args.join(" ")),
    }
}

impl GitError {
    /// What the user can do about the error, when there is something to say.
    pub fn hint(&self) -> Option<&'static str> {
        match self.kind {
            GitErrorKind::NoCommits => {
                Some("commit something first (`git commit`), then try again")
            }
            GitErrorKind::UnknownRevision { .. } => Some(
                "`git log --oneline` and `git branch -a` show the commits and branches there are",
            ),
            _ => None,
        }
    }

    pub(crate) fn new(args: &[String], kind: GitErrorKind) -> Self {
        GitError {
            args: args.to_vec(),
            kind,
        }
    }

    /// The error of a patch operation, with the arguments of `git apply`.
    pub(crate) fn patch(kind: GitErrorKind) -> Self {
        GitError {
            args: vec!["apply".to_owned()],
            kind,
        }
    }
}

/// How a git operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitErrorKind {
    /// The `git` program could not be started (not installed, not on `PATH`).
    #[error("could not run git")]
    Spawn(#[source] std::io::Error),
    /// git ran and exited unsuccessfully.
    #[error("exited with {}: {}", code.map_or_else(|| "a signal".to_owned(), |c| format!("status {c}")), stderr.trim_end())]
    Failed {
        /// The exit code, `None` when git was killed by a signal.
        code: Option<i32>,
        /// What git wrote to standard error.
        stderr: String,
    },
    /// git's output was not what cordon expected.
    #[error("unexpected output: {0}")]
    UnexpectedOutput(String),
    /// A file operation around git failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The patch is larger than the limit.
    #[error("the patch is {size} bytes, more than the limit of {limit} bytes")]
    PatchTooLarge {
        /// The size of the patch in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The patch could not be understood; nothing was changed.
    #[error("malformed patch: {0}")]
    PatchMalformed(String),
    /// The patch touches a path it may not touch; nothing was changed.
    #[error("patch refused: {path:?} {reason}")]
    PatchRefused {
        /// The offending path, as written in the patch.
        path: String,
        /// Why the path is refused.
        reason: crate::patch::RefusalReason,
    },
    /// A file offered as a bundle is not a well-formed one; nothing was read from it.
    #[error("not a valid bundle: {0}")]
    BadBundle(String),
    /// A ref or branch name git would not accept (or that reads as an option).
    #[error("{name:?} is refused as a branch name: {reason}")]
    BadRefName {
        /// The name as given.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// git ran past its deadline and was killed (with every process of its group).
    #[error("ran past its deadline and was killed")]
    TimedOut,
    /// git was stopped on request (a cancel) and killed (with every process of its group).
    #[error("was stopped (cancelled) and killed")]
    Stopped,
    /// The repository has no commit yet (a fresh `git init`): there is nothing to check out.
    #[error("the repository has no commits yet")]
    NoCommits,
    /// The revision names no commit of the repository.
    #[error("{rev:?} names no commit of the repository")]
    UnknownRevision {
        /// The revision as given.
        rev: String,
    },
    /// The patch does not apply to the workspace as it is; nothing was changed.
    #[error("the patch does not apply: {}", stderr.trim_end())]
    PatchDoesNotApply {
        /// What `git apply --check` said.
        stderr: String,
    },
}

//! Errors of [`crate::prepare`]: what the host cannot enforce, and how to fix it.

use std::path::PathBuf;

/// Why a policy cannot be enforced on this host (or is invalid).
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct SandboxError {
    /// What went wrong.
    pub kind: SandboxErrorKind,
    /// How to fix it, when known.
    pub hint: Option<String>,
}

/// The kinds of [`SandboxError`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxErrorKind {
    /// The host cannot create user namespaces.
    #[error("the sandbox needs user namespaces: {reason}")]
    UserNamespaces {
        /// Why not.
        reason: String,
    },
    /// A protection the policy requires is missing and was not explicitly given up.
    #[error("this host cannot enforce {what}: {reason}")]
    Unenforceable {
        /// The protection (`landlock`, `seccomp`, `cgroup`, ...).
        what: &'static str,
        /// Why not.
        reason: String,
    },
    /// A path in the policy does not exist or cannot be resolved.
    #[error("cannot use {path}: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A path in the policy is not allowed.
    #[error("{path} cannot be bound: {reason}")]
    Forbidden {
        /// The path.
        path: PathBuf,
        /// Why not.
        reason: &'static str,
    },
    /// The sandbox helper executable is not where it should be.
    #[error(
        "cordon's sandbox helper is missing: no executable {}",
        looked_for(looked)
    )]
    NoHelper {
        /// Where it was looked for.
        looked: Vec<PathBuf>,
    },
    /// The path of the running executable (beside which the helper is) is unknown.
    #[error("cannot find the running executable, beside which the sandbox helper is: {0}")]
    CurrentExe(#[source] std::io::Error),
}

fn looked_for(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" nor ")
}

impl SandboxError {
    pub(crate) fn new(kind: SandboxErrorKind, hint: Option<String>) -> Self {
        Self { kind, hint }
    }
}

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
    /// This executable cannot act as the helper, and no dedicated helper is beside it.
    #[error("{} cannot act as cordon's sandbox helper, and no cordon-sandbox-init is beside it", exe.display())]
    NoHelper {
        /// This executable.
        exe: PathBuf,
    },
    /// An environment variable of cordon's that tunes the sandbox has a value it does not
    /// know.
    #[error("{name}={value:?} is not one of {expected}")]
    Setting {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// The values it may take.
        expected: &'static str,
    },
    /// The path of the cordon binary (the helper) is unknown.
    #[error("cannot find the cordon binary to run the sandbox helper: {0}")]
    CurrentExe(#[source] std::io::Error),
}

impl SandboxError {
    pub(crate) fn new(kind: SandboxErrorKind, hint: Option<String>) -> Self {
        Self { kind, hint }
    }
}

//! Errors of verification, split by who must act: the user (bad config, bad input) or the
//! host (infrastructure).

use std::path::PathBuf;

/// `cordon.toml` is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// Why a verification could not produce a verdict.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The configuration is invalid (exit 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The request is unusable: bad ref, unreadable patch, nothing to verify (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The patch was refused: it touches paths outside the workspace, `.git`, symlinks (exit 2).
    #[error("the patch was refused")]
    PatchRefused(#[source] cordon_workspace::WorkspaceError),
    /// cordon could not do its job (exit 3).
    #[error("{context}")]
    Infra {
        /// What cordon was doing.
        context: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl VerifyError {
    /// How every door reports it: bad usage, bad config or a refused patch are the caller's
    /// (exit 2), everything else is cordon's failure (125).
    pub fn error_class(&self) -> cordon_types::ErrorClass {
        use cordon_types::{ErrorClass, ErrorKind, exit_code};
        match self {
            VerifyError::Config(_) => ErrorClass::new(exit_code::USAGE, ErrorKind::Config),
            VerifyError::Usage(_) => ErrorClass::USAGE,
            VerifyError::PatchRefused(_) => ErrorClass::new(exit_code::USAGE, ErrorKind::Refused),
            VerifyError::Infra { .. } => ErrorClass::INTERNAL,
        }
    }

    /// How to fix it, when there is something to say (rendered after the error).
    pub fn hint(&self) -> Option<String> {
        match self {
            VerifyError::PatchRefused(e) => e.hint().map(str::to_owned),
            VerifyError::Config(_) => {
                Some("`cordon schema cordon-toml` prints what cordon.toml may hold".to_owned())
            }
            VerifyError::Usage(_) | VerifyError::Infra { .. } => None,
        }
    }

    pub(crate) fn infra(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        VerifyError::Infra {
            context: context.into(),
            source: source.into(),
        }
    }
}

//! [`StateFileError`]: a file of the state directory could not be read, written or locked.

use std::path::{Path, PathBuf};

/// A file of the state directory could not be read, written or locked; each crate turns it
/// into its own error, naming the same path.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct StateFileError {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// What went wrong.
    #[source]
    pub kind: StateFileErrorKind,
}

/// How a file of the state directory failed (matched exhaustively by each crate's
/// conversion into its own error: a new kind must be placed there too).
#[derive(Debug, thiserror::Error)]
pub enum StateFileErrorKind {
    /// The system refused (a missing directory, a full disk, no permission).
    #[error(transparent)]
    Io(std::io::Error),
    /// A record is not what this version of cordon reads (or could not be serialized).
    #[error(transparent)]
    Json(serde_json::Error),
}

impl StateFileError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> StateFileError {
        StateFileError {
            path: path.to_owned(),
            kind: StateFileErrorKind::Io(source),
        }
    }

    pub(crate) fn json(path: &Path, source: serde_json::Error) -> StateFileError {
        StateFileError {
            path: path.to_owned(),
            kind: StateFileErrorKind::Json(source),
        }
    }
}

//! Errors of the store: one type, [`StoreError`], carrying which database and what happened,
//! with a hint for the user where one helps.

use std::path::PathBuf;

/// An operation on the store failed.
#[derive(Debug, thiserror::Error)]
#[error("{operation} failed on the run store {location}")]
pub struct StoreError {
    /// Where the store is (a file path, or a database URL without its password).
    pub location: String,
    /// What was being done (`open`, `begin a run`, `list runs`, ...).
    pub operation: &'static str,
    /// What went wrong.
    #[source]
    pub kind: StoreErrorKind,
}

impl StoreError {
    pub(crate) fn new(location: &str, operation: &'static str, kind: StoreErrorKind) -> Self {
        Self {
            location: location.to_owned(),
            operation,
            kind,
        }
    }

    /// Whether the store could not be reached or did not answer in time (the database is
    /// down, restarting, refusing connections; SQLite's file stayed locked): worth trying
    /// again later, unlike a refused or damaged write.
    pub fn is_unavailable(&self) -> bool {
        self.kind.is_unavailable()
    }

    /// How the user can fix it, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        match &self.kind {
            StoreErrorKind::NotADatabase | StoreErrorKind::Foreign { .. } => Some(format!(
                "move {} away (cordon then creates a new, empty store there), or set \
                 CORDON_HOME to another directory (or CORDON_STORE to another store)",
                self.location
            )),
            StoreErrorKind::TooNew { .. } => Some(
                "this store was written by a newer cordon: upgrade cordon, or set CORDON_HOME \
                 to another directory"
                    .to_owned(),
            ),
            StoreErrorKind::NoPostgres => Some(
                "install a cordon built with PostgreSQL support (its default build: `cargo \
                 install cordon`, or `--features postgres`), or set CORDON_STORE to an SQLite \
                 file (unset, it is cordon.db in the cordon home)"
                    .to_owned(),
            ),
            StoreErrorKind::NoHome(_) | StoreErrorKind::NotUtf8 => None,
            StoreErrorKind::Directory { .. }
            | StoreErrorKind::File { .. }
            | StoreErrorKind::Sqlite(_)
            | StoreErrorKind::Corrupt { .. } => None,
            #[cfg(feature = "postgres")]
            StoreErrorKind::Postgres(_) | StoreErrorKind::Runtime(_) => None,
        }
    }
}

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// `CORDON_HOME` is relative, or neither it, `XDG_DATA_HOME` nor `HOME` names an
    /// absolute directory.
    #[error(transparent)]
    NoHome(cordon_types::HomeError),
    /// The store's directory cannot be created.
    #[error("cannot create the directory {path}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `CORDON_STORE` is not valid UTF-8.
    #[error("CORDON_STORE is not valid UTF-8")]
    NotUtf8,
    /// The database file cannot be created.
    #[error("cannot create the file {path}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not an SQLite database (or is damaged beyond reading).
    #[error("the file is not an SQLite database (it is damaged, or something else)")]
    NotADatabase,
    /// The file is an SQLite database, but not cordon's.
    #[error("the database is not a cordon store (it holds other tables: {tables})")]
    Foreign {
        /// The tables found, comma-separated.
        tables: String,
    },
    /// The store was migrated by a newer cordon than this one.
    #[error("the store has schema version {found}, this cordon knows up to {known}")]
    TooNew {
        /// The newest version applied to the store.
        found: i64,
        /// The newest version this cordon knows.
        known: i64,
    },
    /// An SQLite query failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// A PostgreSQL connection or query failed.
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] sqlx::Error),
    /// The store is a PostgreSQL database, and this build has no PostgreSQL support (it was
    /// built without the `postgres` feature).
    #[error("this binary was built without PostgreSQL support")]
    NoPostgres,
    /// A stored value cannot be read back (damaged row).
    #[error("a stored value is damaged: {what}")]
    Corrupt {
        /// Which value, and how.
        what: String,
    },
    /// The async runtime of a client/server backend cannot be started.
    #[cfg(feature = "postgres")]
    #[error("cannot start the store's runtime")]
    Runtime(#[source] std::io::Error),
}

impl StoreErrorKind {
    /// Maps SQLite errors that mean "this file is not a database" to [`Self::NotADatabase`].
    pub(crate) fn classify(error: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(failure, _) = &error
            && matches!(
                failure.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            )
        {
            return StoreErrorKind::NotADatabase;
        }
        StoreErrorKind::Sqlite(error)
    }

    /// See [`StoreError::is_unavailable`].
    pub(crate) fn is_unavailable(&self) -> bool {
        match self {
            StoreErrorKind::Sqlite(_) => self.is_busy(),
            #[cfg(feature = "postgres")]
            StoreErrorKind::Postgres(error) => match error {
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed => true,
                // Connection exceptions (08…), a server shutting down or starting (57P…), too
                // many connections (53300).
                sqlx::Error::Database(db) => db
                    .code()
                    .is_some_and(|c| c.starts_with("08") || c.starts_with("57P") || c == "53300"),
                _ => false,
            },
            _ => false,
        }
    }

    /// Whether this is SQLite's "busy"/"locked" (another connection holds a lock that the
    /// busy timeout did not wait for, e.g. while a first opener switches the file to WAL or
    /// recovers its index): worth retrying, never a reason to fail a run.
    pub(crate) fn is_busy(&self) -> bool {
        match self {
            StoreErrorKind::Sqlite(rusqlite::Error::SqliteFailure(failure, _)) => matches!(
                failure.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            _ => false,
        }
    }
}

//! A database of its own on the throw-away PostgreSQL cluster of `scripts/test`
//! (`CORDON_TEST_POSTGRES_URL`, a superuser's URL). Without that variable a test fails in CI
//! and with `CORDON_REQUIRE_SANDBOX=1` ([`capabilities_required`]), else skips saying why.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::capabilities_required;

/// The variable `scripts/test` sets: a PostgreSQL database to connect to as a superuser.
pub const POSTGRES_ENV: &str = "CORDON_TEST_POSTGRES_URL";

/// The superuser URL of the test cluster, or `None` (after saying why) when PostgreSQL is not
/// set up here and not required; panics when it is required.
pub fn admin_url() -> Option<String> {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if capabilities_required() => panic!(
            "error: the PostgreSQL tests are required here (CI=true or \
             CORDON_REQUIRE_SANDBOX=1) but {POSTGRES_ENV} is not set: run them through \
             scripts/test, which starts a throw-away cluster"
        ),
        _ => {
            eprintln!("skipped: {POSTGRES_ENV} is not set (scripts/test sets it)");
            None
        }
    }
}

/// `url` with its database replaced by `database`.
pub fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let query = tail.find('?').map_or("", |at| &tail[at..]);
    format!("{scheme}://{authority}/{database}{query}")
}

/// Runs `sql` with psql against `url`; panics on failure.
pub fn psql(url: &str, sql: &str) {
    let out = Command::new("psql")
        .args(["-v", "ON_ERROR_STOP=1", "-qAtc", sql, url])
        .output()
        .expect("psql (Debian's postgresql-client) runs");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A database of its own, dropped (with its connections) at the end.
pub struct Database {
    /// The superuser URL it was made with.
    pub admin: String,
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
}

impl Database {
    /// A new database named `PREFIX_PID_N`, or `None` (after saying why) when PostgreSQL is
    /// not set up and not required (see [`admin_url`]).
    pub fn create(prefix: &str) -> Option<Database> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let admin = admin_url()?;
        let name = format!(
            "{prefix}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        psql(
            &admin,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        );
        psql(&admin, &format!("CREATE DATABASE {name}"));
        let url = with_database(&admin, &name);
        Some(Database { admin, name, url })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        psql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_database_replaces_the_database_and_keeps_the_query() {
        assert_eq!(
            with_database("postgres://u@localhost/postgres?host=/tmp/x", "db_1"),
            "postgres://u@localhost/db_1?host=/tmp/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h:5432", "db_2"),
            "postgres://u:p@h:5432/db_2"
        );
    }
}

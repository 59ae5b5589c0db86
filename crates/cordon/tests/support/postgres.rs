//! A database of its own on the throw-away PostgreSQL cluster of `scripts/test`
//! (`CORDON_TEST_POSTGRES_URL`, a superuser's URL). Without that variable a test fails in CI
//! and with `CORDON_REQUIRE_SANDBOX=1`, else skips saying why.

use std::process::Command;

/// Whether this run must have PostgreSQL.
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("CORDON_REQUIRE_SANDBOX").is_ok_and(|v| v == "1")
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

/// A database of its own, dropped at the end.
pub struct Database {
    /// The superuser URL it was made with.
    pub admin: String,
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
}

impl Database {
    /// A new database named `PREFIX_PID`, or `None` (after saying why) when PostgreSQL is not
    /// set up and not required.
    pub fn create(prefix: &str) -> Option<Database> {
        let admin = match std::env::var("CORDON_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => url,
            _ if required() => panic!(
                "error: the PostgreSQL tests are required here (CI=true or \
                 CORDON_REQUIRE_SANDBOX=1) but CORDON_TEST_POSTGRES_URL is not set: run them \
                 through scripts/test"
            ),
            _ => {
                eprintln!("skipped: CORDON_TEST_POSTGRES_URL is not set (scripts/test sets it)");
                return None;
            }
        };
        let name = format!("{prefix}_{}", std::process::id());
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

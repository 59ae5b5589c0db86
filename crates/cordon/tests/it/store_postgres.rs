//! `CORDON_STORE=postgres://…`: a recorded `cordon run` lands in PostgreSQL (and not in the
//! SQLite file of `CORDON_HOME`), and `cordon runs` reads it back from there. Needs the
//! throw-away cluster of `scripts/test` (`CORDON_TEST_POSTGRES_URL`); without it, fails in CI
//! and with `CORDON_REQUIRE_SANDBOX=1`, else skips saying why.

use std::process::{Command, Output, Stdio};

use cordon_store::{RunFilter, RunState, Store, StoreLocation};
use cordon_test_support::postgres::{Database, with_database};

fn cordon(home: &std::path::Path, store: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(args)
        .env("CORDON_HOME", home)
        .env("CORDON_STORE", store)
        .stdin(Stdio::null())
        .output()
        .expect("run cordon")
}

#[test]
fn cordon_store_names_a_postgres_database_that_records_and_lists_runs() {
    let Some(database) = Database::create("cordon_cli") else {
        return;
    };
    let admin = database.admin.clone();
    let url = database.url.clone();
    let home = tempfile::tempdir().expect("temp dir");

    let run = cordon(
        home.path(),
        &url,
        &[
            "run",
            "--no-sandbox",
            "--json",
            "--",
            "sh",
            "-c",
            "echo to-postgres; echo oops >&2; exit 3",
        ],
    );
    assert_eq!(
        run.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&run.stdout).expect("a run result");
    let id = result["run_id"]
        .as_str()
        .expect("a recorded run id")
        .to_owned();
    assert!(
        !home.path().join("cordon.db").exists(),
        "nothing was written to the SQLite file"
    );

    // The CLI reads it back from PostgreSQL.
    let list = cordon(home.path(), &url, &["runs", "list", "--json"]);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).expect("JSON");
    assert_eq!(list["runs"][0]["id"], id.as_str());
    assert_eq!(list["runs"][0]["status"], "fail");
    let logs = cordon(
        home.path(),
        &url,
        &["runs", "logs", &id, "--stream", "stdout"],
    );
    assert_eq!(String::from_utf8_lossy(&logs.stdout), "to-postgres\n");

    // And so does the library, through the same variable's value.
    let store = Store::open(&url.parse::<StoreLocation>().unwrap()).expect("open");
    let runs = store.list_runs(&RunFilter::default()).expect("list");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunState::Fail);

    // A wrong URL is an error naming the store, without its password.
    let bad = with_database(
        &admin
            .replacen("://", "://cordon:hunter2@", 1)
            .replacen("cordon@", "", 1),
        "no_such_db",
    );
    let failed = cordon(home.path(), &bad, &["runs", "list"]);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("no_such_db"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

//! The run log of an SQLite store (`Store::open_for_recording`): runs recorded there reach
//! the database when something reads the history, torn and corrupt records are skipped, a
//! record ingested twice changes nothing, and a file that is not a cordon store is refused
//! before any log is written next to it.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{TestStore, count_rows, data, new_run};
use cordon_store::{
    ChunkFilter, RunFilter, RunState, Store, StoreErrorKind, StoreLocation, Stream,
};
use pretty_assertions::assert_eq;
use serde_json::json;

fn paths(t: &TestStore) -> (PathBuf, PathBuf) {
    let StoreLocation::Sqlite(db) = t.location() else {
        panic!("an SQLite store");
    };
    let mut log = db.as_os_str().to_owned();
    log.push("-runlog");
    (db.clone(), PathBuf::from(log))
}

fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).expect("the run log").len()
}

/// Records one finished run with `lines` of output through a recording handle.
fn record(store: &Store, name: &str, lines: usize) -> cordon_store::RunId {
    let id = store.begin_run(&new_run(&[name])).expect("begin");
    let writer = store.transcript(&id).expect("transcript");
    for i in 0..lines {
        writer.write(None, Stream::Stdout, format!("{name} {i}\n").as_bytes());
    }
    writer.finish().expect("finish transcript");
    store
        .finish_run(
            &id,
            RunState::Pass,
            Some(&json!({"schema": "test/v1", "name": name})),
        )
        .expect("finish");
    id
}

fn expected_text(name: &str, lines: usize) -> String {
    (0..lines).map(|i| format!("{name} {i}\n")).collect()
}

#[test]
fn a_recording_handle_writes_the_log_and_the_next_read_moves_it_into_the_database() {
    let t = TestStore::sqlite();
    let (db, log) = paths(&t);
    drop(t.open()); // creates the store and its log
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    assert!(recorder.defers_runs());
    let id = record(&recorder, "logged", 30);
    assert!(log_len(&log) > 0, "the run went to the log");
    assert_eq!(
        count_rows(&db, "SELECT COUNT(*) FROM runs"),
        0,
        "and not to the database"
    );
    drop(recorder);

    let reader = t.open();
    assert!(!reader.defers_runs());
    let runs = reader.list_runs(&RunFilter::default()).expect("list");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, id);
    assert_eq!(runs[0].status, RunState::Pass);
    assert_eq!(log_len(&log), 0, "the read emptied the log");
    let record = reader.get_run(&id).expect("get").expect("exists");
    assert_eq!(record.document_schema.as_deref(), Some("test/v1"));
    let text = data(&reader.logs(&id, &ChunkFilter::default()).expect("logs"));
    assert_eq!(
        String::from_utf8(text).expect("utf-8"),
        expected_text("logged", 30)
    );
}

#[test]
fn a_new_store_opened_for_recording_is_created_checked_and_gets_its_log() {
    let t = TestStore::sqlite();
    let (db, log) = paths(&t);
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    assert!(db.exists() && log.exists());
    let id = record(&recorder, "first", 3);
    let reader = t.open();
    assert_eq!(
        reader
            .get_run(&id)
            .expect("get")
            .expect("exists")
            .run
            .status,
        RunState::Pass
    );
}

#[test]
fn a_store_made_before_the_run_log_gets_one_when_opened_for_recording() {
    let t = TestStore::sqlite();
    let (_, log) = paths(&t);
    drop(t.open());
    std::fs::remove_file(&log).expect("remove the log, as an older cordon left the store");
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    assert!(log.exists());
    let id = record(&recorder, "older", 2);
    assert!(t.open().get_run(&id).expect("get").is_some());
}

#[test]
fn a_foreign_database_is_refused_and_gets_no_log() {
    let t = TestStore::sqlite();
    let (db, log) = paths(&t);
    let connection = rusqlite::Connection::open(&db).expect("create");
    connection
        .execute_batch("CREATE TABLE accounts (id INTEGER PRIMARY KEY)")
        .expect("a foreign table");
    drop(connection);
    let error = Store::open_for_recording(t.location()).expect_err("refused");
    assert!(
        matches!(&error.kind, StoreErrorKind::Foreign { tables } if tables == "accounts"),
        "{error:?}"
    );
    assert!(!log.exists());
    std::fs::write(&db, b"not a database at all, just some bytes").expect("write");
    let error = Store::open_for_recording(t.location()).expect_err("refused");
    assert!(
        matches!(error.kind, StoreErrorKind::NotADatabase),
        "{error:?}"
    );
    assert!(!log.exists());
}

#[test]
fn torn_and_corrupt_records_are_skipped_and_the_rest_is_kept() {
    let t = TestStore::sqlite();
    let (_, log) = paths(&t);
    drop(t.open());
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    let first = record(&recorder, "first", 5);
    // A recorder killed in the middle of its write leaves part of a record; another's records
    // follow it. Here: the start of a copy of the first run's records, then garbage that
    // starts like a record, then a whole run.
    let whole = std::fs::read(&log).expect("read the log");
    {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open the log");
        file.write_all(&whole[..whole.len() / 2]).expect("torn");
        file.write_all(b"CRL1\xff\xff\xff\x7fgarbage that claims a huge body")
            .expect("garbage");
        file.write_all(b"CRL1\x05\0\0\0\0\0\0\0abcde")
            .expect("bad checksum");
    }
    let second = record(&recorder, "second", 7);
    let reader = t.open();
    let runs = reader.list_runs(&RunFilter::default()).expect("list");
    assert_eq!(runs.len(), 2, "both runs, once each: {runs:?}");
    for (id, name, lines) in [(&first, "first", 5), (&second, "second", 7)] {
        let record = reader.get_run(id).expect("get").expect("exists");
        assert_eq!(record.run.status, RunState::Pass);
        let text = data(&reader.logs(id, &ChunkFilter::default()).expect("logs"));
        assert_eq!(
            String::from_utf8(text).expect("utf-8"),
            expected_text(name, lines)
        );
    }
    assert_eq!(log_len(&log), 0);
}

#[test]
fn ingesting_a_record_twice_changes_nothing() {
    let t = TestStore::sqlite();
    let (db, log) = paths(&t);
    drop(t.open());
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    let id = record(&recorder, "twice", 40);
    let bytes = std::fs::read(&log).expect("read the log");
    let reader = t.open();
    let before = reader.get_run(&id).expect("get").expect("exists");
    let chunks = count_rows(&db, "SELECT COUNT(*) FROM transcript_chunks");
    // As if the ingester died after its commit, before emptying the log.
    std::fs::write(&log, &bytes).expect("restore the log");
    let again = reader.get_run(&id).expect("get").expect("exists");
    assert_eq!(again, before);
    assert_eq!(count_rows(&db, "SELECT COUNT(*) FROM runs"), 1);
    assert_eq!(
        count_rows(&db, "SELECT COUNT(*) FROM transcript_chunks"),
        chunks
    );
    let text = data(&reader.logs(&id, &ChunkFilter::default()).expect("logs"));
    assert_eq!(
        String::from_utf8(text).expect("utf-8"),
        expected_text("twice", 40)
    );
}

#[test]
fn records_of_a_run_the_database_never_got_are_dropped() {
    let t = TestStore::sqlite();
    let (db, log) = paths(&t);
    drop(t.open());
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    let id = recorder
        .begin_run(&new_run(&["lost begin"]))
        .expect("begin");
    // The record of the run's start is lost (a torn write at a power loss).
    std::fs::write(&log, b"").expect("lose it");
    let writer = recorder.transcript(&id).expect("transcript");
    writer.write(None, Stream::Stdout, b"orphan output\n");
    writer.finish().expect("finish");
    recorder
        .finish_run(&id, RunState::Pass, None)
        .expect("finish");
    let reader = t.open();
    assert_eq!(reader.get_run(&id).expect("get"), None);
    assert_eq!(count_rows(&db, "SELECT COUNT(*) FROM transcript_chunks"), 0);
    assert_eq!(log_len(&log), 0, "the orphans do not stay in the log");
}

#[test]
fn a_recorder_moves_a_large_log_into_the_database_itself() {
    let t = TestStore::sqlite();
    let (db, log) = paths(&t);
    drop(t.open());
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    // 5 MiB of incompressible output, so the log passes its 1 MiB threshold several times.
    let mut noise = Vec::with_capacity(5 << 20);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while noise.len() < 5 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    let id = recorder.begin_run(&new_run(&["large"])).expect("begin");
    let writer = recorder.transcript(&id).expect("transcript");
    writer.set_limit(64 << 20);
    for piece in noise.chunks(60_000) {
        writer.write(None, Stream::Stdout, piece);
    }
    writer.finish().expect("finish");
    recorder
        .finish_run(&id, RunState::Pass, None)
        .expect("finish");
    assert!(
        log_len(&log) < 2 << 20,
        "the recorder moved the log into the database as it grew: {} bytes left",
        log_len(&log)
    );
    assert_eq!(count_rows(&db, "SELECT COUNT(*) FROM runs"), 1);
    assert!(count_rows(&db, "SELECT COUNT(*) FROM transcript_chunks") > 0);
    let stored = data(&t.open().logs(&id, &ChunkFilter::default()).expect("logs"));
    assert_eq!(stored.len(), noise.len());
    assert!(stored == noise, "the bytes came back as written");
}

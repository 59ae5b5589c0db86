//! The run log of an SQLite store (`Store::open_for_recording`): runs recorded there reach
//! the database when something reads the history, torn and corrupt records are skipped, a
//! record ingested twice changes nothing, and a file that is not a cordon store is refused
//! before any log is written next to it.

use std::io::Write;
use std::path::{Path, PathBuf};

use cordon_store::{
    ChunkFilter, RunFilter, RunState, Store, StoreErrorKind, StoreLocation, Stream,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::fixtures::{TestStore, count_rows, data, new_run};

fn paths(t: &TestStore) -> (PathBuf, PathBuf) {
    let StoreLocation::Sqlite(db) = t.location() else {
        panic!("an SQLite store");
    };
    let mut log = db.as_os_str().to_owned();
    log.push("-runlog");
    (db.clone(), PathBuf::from(log))
}

/// A fresh SQLite store (created, with its log), its database and log paths, and a handle
/// opened for recording.
fn recording() -> (TestStore, PathBuf, PathBuf, Store) {
    let t = TestStore::sqlite();
    let (db, log) = paths(&t);
    drop(t.open());
    let recorder = Store::open_for_recording(t.location()).expect("open for recording");
    (t, db, log, recorder)
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
    let (t, db, log, recorder) = recording();
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
    let (t, _, log, recorder) = recording();
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
    let (t, db, log, recorder) = recording();
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
    let (t, db, log, recorder) = recording();
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
    let (t, db, log, recorder) = recording();
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

/// Random-looking bytes (a xorshift stream).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

#[test]
fn records_a_program_prints_are_never_taken_for_the_recorders_own() {
    // What a program could print: real records, made by a recording handle of another store
    // (with another key), landing verbatim in the log as transcript bytes.
    let scratch = TestStore::sqlite();
    let (_, scratch_log) = paths(&scratch);
    drop(scratch.open());
    let forger = Store::open_for_recording(scratch.location()).expect("open for recording");
    let fake = forger
        .begin_run(&new_run(&["forged", "run"]))
        .expect("begin");
    forger
        .finish_run(&fake, RunState::Pass, Some(&json!({"schema": "x/v1"})))
        .expect("finish");
    let forged = std::fs::read(&scratch_log).expect("forged records");

    let (t, _, log, recorder) = recording();
    let victim = recorder.begin_run(&new_run(&["victim"])).expect("begin");
    let writer = recorder.transcript(&victim).expect("transcript");
    let mut output = noise(100_000, 7);
    output.extend_from_slice(&forged);
    output.extend_from_slice(&noise(100_000, 9));
    writer.write(None, Stream::Stdout, &output);
    writer.finish().expect("finish transcript");
    let bytes = std::fs::read(&log).expect("read the log");
    let at = bytes
        .windows(forged.len())
        .position(|w| w == forged.as_slice())
        .expect("the printed records are verbatim in the log");
    // The append is torn right after the printed records (a full disk, a kill mid-write):
    // the reader looks for the next record from inside the torn one.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .expect("open the log")
        .set_len((at + forged.len() + 10) as u64)
        .expect("tear");
    recorder
        .finish_run(&victim, RunState::Fail, None)
        .expect("finish");
    let runs = t.open().list_runs(&RunFilter::default()).expect("list");
    assert!(
        runs.iter().all(|r| r.id != fake),
        "a run the program printed is in the history: {runs:?}"
    );
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, RunState::Fail);
}

#[test]
fn a_log_that_is_not_a_private_regular_file_is_refused_never_waited_on() {
    for make in ["fifo", "hard link", "directory"] {
        let t = TestStore::sqlite();
        let (db, log) = paths(&t);
        drop(t.open());
        std::fs::remove_file(&log).expect("remove the log");
        match make {
            "fifo" => {
                let status = std::process::Command::new("mkfifo")
                    .arg(&log)
                    .status()
                    .expect("mkfifo");
                assert!(status.success());
            }
            "hard link" => {
                let other = db.with_file_name("somebody-elses-file");
                std::fs::write(&other, b"keep me").expect("write");
                std::fs::hard_link(&other, &log).expect("link");
            }
            _ => std::fs::create_dir(&log).expect("mkdir"),
        }
        // In a thread, so that a recorder waiting on a FIFO fails the test instead of hanging.
        let location = t.location().clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let outcome = Store::open_for_recording(&location).map(|_| ());
            let _ = tx.send(outcome.map_err(|e| format!("{e}: {}", e.kind)));
        });
        let outcome = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("opening a store whose log is a {make} hangs"));
        let error = outcome.expect_err(make);
        assert!(error.contains("runlog"), "{make}: {error}");
        // Readers refuse it the same way.
        assert!(Store::open(t.location()).is_err(), "{make}");
        if make == "hard link" {
            assert_eq!(
                std::fs::read(db.with_file_name("somebody-elses-file")).expect("read"),
                b"keep me"
            );
        }
    }
}

#[test]
fn a_read_goes_on_while_another_process_holds_the_database() {
    let (t, db, _, recorder) = recording();
    let id = record(&recorder, "waiting", 2);
    let holder = rusqlite::Connection::open(&db).expect("connect");
    holder
        .execute_batch("BEGIN IMMEDIATE")
        .expect("hold the write lock");
    // The log cannot be moved into the database: the read shows what the database holds.
    let reader = t.open();
    assert_eq!(
        reader.list_runs(&RunFilter::default()).expect("list"),
        vec![]
    );
    // A recorder is not held up by the waiting reader (it only appends).
    let other = record(&recorder, "meanwhile", 1);
    holder.execute_batch("COMMIT").expect("release");
    let runs = reader.list_runs(&RunFilter::default()).expect("list");
    let ids: Vec<_> = runs.iter().map(|r| r.id.clone()).collect();
    assert!(ids.contains(&id) && ids.contains(&other), "{runs:?}");
}

/// Threads of one process that start recording in a fresh home at the same moment (a review
/// watcher's reviewers) all open the log, with one key: none fails making it.
#[test]
fn threads_making_the_key_at_once_all_record() {
    for _ in 0..20 {
        let t = TestStore::sqlite();

        let location = t.location();
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|scope| {
            for i in 0..8 {
                let (location, barrier) = (&location, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let store = Store::open_for_recording(location)
                        .unwrap_or_else(|e| panic!("thread {i}: {e}"));
                    record(&store, &format!("t{i}"), 1);
                });
            }
        });
        let (_, log) = paths(&t);
        let aside: Vec<_> = std::fs::read_dir(log.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".key."))
            .collect();
        assert!(aside.is_empty(), "{aside:?}");
        assert_eq!(t.open().list_runs(&Default::default()).unwrap().len(), 8);
    }
}

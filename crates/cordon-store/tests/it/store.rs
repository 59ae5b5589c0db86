//! Integration tests of the store: real SQLite files in temporary directories, and real
//! processes (this test binary re-run as a helper) for crashes and concurrency.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cordon_store::{
    ChunkBody, ChunkFilter, NewRun, RunFilter, RunId, RunKind, RunState, Store, StoreErrorKind,
    StoreLocation, Stream,
};
use cordon_test_support::wait_until;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::fixtures::{TestStore, data, each_history_backend, new_run};

/// Set in a re-run of this binary: what the helper should do, and where.
const HELPER_ENV: &str = "CORDON_STORE_TEST_HELPER";
const HELPER_DB_ENV: &str = "CORDON_STORE_TEST_DB";
/// Set (to `1`) when the helper opens the store for recording.
const HELPER_RECORDING_ENV: &str = "CORDON_STORE_TEST_RECORDING";

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("home").join("cordon.db");
    (dir, path)
}

/// How a helper process is told where the store is: a path or a URL.
fn location_text(location: &StoreLocation) -> String {
    match location {
        StoreLocation::Sqlite(path) => path.display().to_string(),
        StoreLocation::Postgres(url) => url.clone(),
        other => panic!("no such backend in the tests: {other:?}"),
    }
}

/// Runs this test binary as a helper doing `role` against the store `t`.
fn spawn_helper(role: &str, t: &TestStore) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "store::helper_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, role)
        .env(HELPER_DB_ENV, location_text(t.location()))
        .env(HELPER_RECORDING_ENV, if t.recording() { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn helper")
}

/// Not a test by itself: the entry point of helper processes (does nothing otherwise).
#[test]
fn helper_process() {
    let Ok(role) = std::env::var(HELPER_ENV) else {
        return;
    };
    let location: StoreLocation = std::env::var(HELPER_DB_ENV)
        .expect("store location")
        .parse()
        .expect("a path or a URL");
    let store = if std::env::var(HELPER_RECORDING_ENV).is_ok_and(|v| v == "1") {
        Store::open_for_recording(&location).expect("helper opens the store for recording")
    } else {
        Store::open(&location).expect("helper opens the store")
    };
    let id = store
        .begin_run(&new_run(&["helper", &role]))
        .expect("begin");
    // The parent learns the id from the first line of our stdout.
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "RUN {id}").expect("print");
        stdout.flush().expect("flush");
    }
    let writer = store.transcript(&id).expect("transcript");
    match role.as_str() {
        "forever" => {
            for i in 0u64.. {
                writer.write(None, Stream::Stdout, format!("line {i}\n").as_bytes());
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        "burst" => {
            for i in 0..200 {
                let stream = if i % 2 == 0 {
                    Stream::Stdout
                } else {
                    Stream::Stderr
                };
                writer.write(None, stream, format!("{id} chunk {i:03}\n").as_bytes());
                // Let each write become its own chunk often enough to interleave commits.
                if i % 10 == 0 {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            writer.finish().expect("finish transcript");
            store
                .finish_run(&id, RunState::Pass, Some(&json!({"schema": "test/v1"})))
                .expect("finish run");
        }
        other => panic!("unknown helper role {other}"),
    }
}

fn read_run_id(child: &mut Child) -> RunId {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    loop {
        let line = lines
            .next()
            .expect("helper printed its run id")
            .expect("read");
        // libtest may print `test store::helper_process ... ` before our line.
        if let Some(at) = line.find("RUN ") {
            let id = line[at + 4..].trim().parse().expect("a run id");
            // Keep draining, so the helper never fails writing to a closed pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return id;
        }
    }
}

each_history_backend!(
    a_killed_writer_is_marked_interrupted_and_its_transcript_survives,
    |t: &TestStore| {
        drop(t.open());
        let mut child = spawn_helper("forever", t);
        let id = read_run_id(&mut child);
        let store = t.open();
        // The helper writes on: wait until more than 50 lines are stored.
        let stored_lines = || {
            data(&store.logs(&id, &ChunkFilter::default()).expect("logs"))
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
        };
        wait_until("50 lines stored", Duration::from_secs(30), || {
            stored_lines() > 50
        });
        // While the writer lives, nothing is interrupted.
        assert_eq!(store.mark_interrupted().expect("mark"), 0);
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        assert_eq!(store.mark_interrupted().expect("mark"), 1);
        assert_eq!(store.mark_interrupted().expect("mark again"), 0);
        let record = store.get_run(&id).expect("get").expect("exists");
        assert_eq!(record.run.status, RunState::Interrupted);
        assert!(record.run.finished_at_ms.is_some());
        let text = String::from_utf8(data(
            &store.logs(&id, &ChunkFilter::default()).expect("logs"),
        ))
        .expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() > 50, "only {} lines survived", lines.len());
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(*line, format!("line {i}"));
        }
        let listed = store
            .list_runs(&RunFilter {
                status: Some(RunState::Interrupted),
                ..RunFilter::default()
            })
            .expect("list");
        assert_eq!(listed.len(), 1);
    }
);

each_history_backend!(
    follow_returns_when_the_run_ends_or_its_owner_dies,
    |t: &TestStore| {
        drop(t.open());
        let mut child = spawn_helper("forever", t);
        let id = read_run_id(&mut child);
        let store = t.open();
        // The writer is killed once `follow` has received some of its output.
        let (following, first_output) = std::sync::mpsc::channel::<()>();
        let killer = std::thread::spawn(move || {
            let _ = first_output.recv();
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
        });
        let mut received = Vec::new();
        let started = Instant::now();
        let end = store
            .follow(
                &id,
                &ChunkFilter::default(),
                Duration::from_millis(50),
                &mut |c| {
                    if let ChunkBody::Data(bytes) = c.body {
                        received.extend_from_slice(&bytes);
                        let _ = following.send(());
                    }
                    std::ops::ControlFlow::Continue(())
                },
            )
            .expect("follow");
        killer.join().expect("killer");
        assert_eq!(end, Some(RunState::Interrupted));
        assert!(started.elapsed() < Duration::from_secs(10));
        let stored = data(&store.logs(&id, &ChunkFilter::default()).expect("logs"));
        assert_eq!(received, stored, "follow saw the whole transcript");
        assert!(!stored.is_empty());
        let unknown: RunId = "r-aaaaaaaaaa".parse().expect("id");
        let none = store
            .follow(
                &unknown,
                &ChunkFilter::default(),
                Duration::from_millis(10),
                &mut |_| std::ops::ControlFlow::Continue(()),
            )
            .expect("follow unknown");
        assert_eq!(none, None);
    }
);

each_history_backend!(concurrent_processes_lose_nothing, |t: &TestStore| {
    let mut children: Vec<Child> = (0..4).map(|_| spawn_helper("burst", t)).collect();
    let ids: Vec<RunId> = children.iter_mut().map(read_run_id).collect();
    for child in &mut children {
        let status = child.wait().expect("wait");
        assert!(status.success(), "helper failed: {status}");
    }
    let store = t.open();
    assert_eq!(
        store.list_runs(&RunFilter::default()).expect("list").len(),
        4
    );
    for id in &ids {
        let record = store.get_run(id).expect("get").expect("exists");
        assert_eq!(record.run.status, RunState::Pass);
        let text = String::from_utf8(data(
            &store.logs(id, &ChunkFilter::default()).expect("logs"),
        ))
        .expect("utf-8");
        let expected: String = (0..200).map(|i| format!("{id} chunk {i:03}\n")).collect();
        assert_eq!(text, expected);
    }
});

each_history_backend!(
    concurrent_threads_with_their_own_stores_lose_nothing,
    |test: &TestStore| {
        drop(test.open());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let location = test.location().clone();
                let recording = test.recording();
                std::thread::spawn(move || {
                    let store = if recording {
                        Store::open_for_recording(&location).expect("open for recording")
                    } else {
                        Store::open(&location).expect("open")
                    };
                    let id = store.begin_run(&new_run(&["thread"])).expect("begin");
                    let writer = store.transcript(&id).expect("transcript");
                    for i in 0..200 {
                        writer.write(None, Stream::Stdout, format!("t{t} {i}\n").as_bytes());
                        if i % 25 == 0 {
                            std::thread::sleep(Duration::from_millis(30));
                        }
                    }
                    writer.finish().expect("finish");
                    store
                        .finish_run(&id, RunState::Fail, None)
                        .expect("finish run");
                    (t, id)
                })
            })
            .collect();
        let store = test.open();
        for thread in threads {
            let (t, id) = thread.join().expect("thread");
            let text = String::from_utf8(data(
                &store.logs(&id, &ChunkFilter::default()).expect("logs"),
            ))
            .expect("utf-8");
            let expected: String = (0..200).map(|i| format!("t{t} {i}\n")).collect();
            assert_eq!(text, expected);
        }
    }
);

#[test]
fn a_file_of_random_bytes_is_refused_clearly() {
    let (dir, _) = temp_db();
    let db = dir.path().join("cordon.db");
    let noise: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&db, &noise).expect("write noise");
    let error = Store::open_sqlite(&db).expect_err("random bytes are no store");
    assert!(
        matches!(error.kind, StoreErrorKind::NotADatabase),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&db.display().to_string()),
        "{error}"
    );
    assert!(error.hint().expect("a hint").contains("move"));
    assert_eq!(
        std::fs::read(&db).expect("untouched"),
        noise,
        "the file is left alone"
    );

    // A damaged SQLite file (right header, garbage after it) is refused too.
    let mut damaged = b"SQLite format 3\0".to_vec();
    damaged.extend_from_slice(&noise);
    std::fs::write(&db, &damaged).expect("write");
    let error = Store::open_sqlite(&db).expect_err("a damaged file is no store");
    assert!(
        matches!(error.kind, StoreErrorKind::NotADatabase),
        "{error:?}"
    );
}

#[test]
fn a_foreign_or_newer_database_is_refused_clearly() {
    let (dir, _) = temp_db();
    let db = dir.path().join("other.db");
    raw_sql(
        &db,
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
    );
    let error = Store::open_sqlite(&db).expect_err("foreign");
    assert!(
        matches!(&error.kind, StoreErrorKind::Foreign { tables } if tables == "users"),
        "{error:?}"
    );
    let rendered = format!("{error}: {}", error.kind);
    assert!(
        rendered.contains("other.db") && rendered.contains("not a cordon store"),
        "{rendered}"
    );

    let db = dir.path().join("newer.db");
    drop(Store::open_sqlite(&db).expect("create"));
    raw_sql(
        &db,
        "INSERT INTO cordon_migrations (version, description, applied_at_ms) VALUES (99, 'x', 0)",
    );
    let error = Store::open_sqlite(&db).expect_err("newer");
    assert!(
        matches!(
            error.kind,
            StoreErrorKind::TooNew { found: 99, known } if known < 99
        ),
        "{error:?}"
    );
    assert!(error.hint().expect("hint").contains("newer cordon"));
}

/// A store written by the first schema (no session column) is migrated in place on open:
/// its runs are kept, and new runs can name their session.
#[test]
fn a_version_1_store_is_migrated_and_keeps_its_runs() {
    let (dir, _) = temp_db();
    let db = dir.path().join("v1.db");
    raw_sql(&db, include_str!("../../migrations/sqlite/0001_init.sql"));
    raw_sql(
        &db,
        "CREATE TABLE cordon_migrations (version INTEGER PRIMARY KEY NOT NULL, \
         description TEXT NOT NULL, applied_at_ms INTEGER NOT NULL); \
         INSERT INTO cordon_migrations VALUES (1, 'runs, stages, transcript chunks', 0); \
         INSERT INTO runs (id, kind, status, repo, command, started_at_ms, owner_pid, host) \
         VALUES ('r-aaaaaaaaaa', 'run', 'pass', '/src/old', '[\"true\"]', 1, 1, 'h')",
    );
    let store = Store::open_sqlite(&db).expect("migrated");
    let runs = store.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].repo.as_deref(), Some("/src/old"));
    assert_eq!(runs[0].session, None);
    let id = store
        .begin_run(&NewRun {
            kind: RunKind::Run,
            repo: None,
            session: Some("abcd2345".into()),
            command: serde_json::json!(["true"]),
        })
        .unwrap();
    let in_session = store
        .list_runs(&RunFilter {
            session: Some("abcd2345".into()),
            ..RunFilter::default()
        })
        .unwrap();
    assert_eq!(in_session.len(), 1);
    assert_eq!(in_session[0].id, id);
}

/// Runs SQL on a database file with a plain SQLite connection.
fn raw_sql(db: &Path, sql: &str) {
    let connection = rusqlite::Connection::open(db).expect("connect");
    connection.execute_batch(sql).expect("sql");
}

#[test]
fn a_blocked_database_costs_bytes_with_a_marker_never_silently() {
    let (_dir, db) = temp_db();
    let store = Store::open_sqlite(&db).expect("open");
    let id = store.begin_run(&new_run(&["flood"])).expect("begin");
    // Hold the write lock from another connection while the program floods its output.
    let blocker = rusqlite::Connection::open(&db).expect("connect");
    blocker.execute_batch("BEGIN IMMEDIATE").expect("lock");
    let writer = store.transcript(&id).expect("transcript");
    let block = vec![b'x'; 1024 * 1024];
    let started = Instant::now();
    for _ in 0..24 {
        writer.write(None, Stream::Stdout, &block);
    }
    writer.write(None, Stream::Stderr, b"lost\n");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "write never waits for the database (its busy timeout is 5 s)"
    );
    blocker.execute_batch("ROLLBACK").expect("unlock");
    drop(blocker);
    // Once the store caught up, output is kept again. Caught up: the last chunk (the marker
    // of the lost `lost\n`) is stored, then a probe written after it is stored too — the
    // writer frees its memory budget after each stored batch, before it stores the next.
    let chunks_where = |stage: Option<&str>, stream| {
        store
            .logs(
                &id,
                &ChunkFilter {
                    stage: stage.map(str::to_owned),
                    stream: Some(stream),
                },
            )
            .expect("logs")
            .into_iter()
            .filter(|c| c.stage.as_deref() == stage)
            .count()
    };
    wait_until("the writer caught up", Duration::from_secs(30), || {
        chunks_where(None, Stream::Stderr) == 1
    });
    writer.write(Some("probe"), Stream::Stdout, b"probe\n");
    wait_until("the probe is stored", Duration::from_secs(30), || {
        chunks_where(Some("probe"), Stream::Stdout) == 1
    });
    writer.write(None, Stream::Stderr, b"tail\n");
    let stats = writer.finish().expect("finish");
    assert!(stats.bytes_lost > 0, "{stats:?}");
    assert_eq!(
        stats.bytes_written + stats.bytes_lost,
        24 * 1024 * 1024 + 10 + 6
    );

    let chunks = store.logs(&id, &ChunkFilter::default()).expect("logs");
    let lost: u64 = chunks
        .iter()
        .map(|c| match c.body {
            ChunkBody::Lost { bytes } => bytes,
            ChunkBody::Data(_) => 0,
        })
        .sum();
    assert_eq!(lost, stats.bytes_lost, "every lost byte is on record");
    assert_eq!(data(&chunks).len() as u64, stats.bytes_written);
    let last = chunks.last().expect("chunks");
    assert_eq!(last.body, ChunkBody::Data(b"tail\n".to_vec()));
    assert_eq!(
        last.offset, 5,
        "the lost bytes keep their place in the stream"
    );
    assert!(
        chunks
            .iter()
            .any(|c| c.stream == Stream::Stderr && c.body == ChunkBody::Lost { bytes: 5 })
    );
}

/// PostgreSQL: a database holding other tables, or migrated by a newer cordon, is refused, and
/// the error names it without its password.
#[test]
fn a_foreign_or_newer_postgres_database_is_refused_clearly() {
    let Some(foreign) = TestStore::postgres() else {
        return;
    };
    foreign.raw_sql("CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT)");
    let error = Store::open(foreign.location()).expect_err("foreign");
    assert!(
        matches!(&error.kind, StoreErrorKind::Foreign { tables } if tables == "users"),
        "{error:?}"
    );
    let Some(newer) = TestStore::postgres() else {
        return;
    };
    drop(newer.open());
    newer.raw_sql(
        "INSERT INTO cordon_migrations (version, description, applied_at_ms) VALUES (99, 'x', 0)",
    );
    let error = Store::open(newer.location()).expect_err("newer");
    assert!(
        matches!(error.kind, StoreErrorKind::TooNew { found: 99, known } if known < 99),
        "{error:?}"
    );
    // Concurrent first opens migrate once (under the advisory lock) and all succeed.
    let Some(fresh) = TestStore::postgres() else {
        return;
    };
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| drop(fresh.open()));
        }
    });
    assert!(
        fresh
            .open()
            .list_runs(&RunFilter::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_store_location_is_a_url_or_a_path_and_messages_hide_passwords() {
    let url: StoreLocation = "postgres://cordon:s3cret@db:5432/cordon".parse().unwrap();
    assert!(matches!(url, StoreLocation::Postgres(_)));
    assert!(!url.display().contains("s3cret"), "{}", url.display());
    assert!(!format!("{url:?}").contains("s3cret"));
    let upper: StoreLocation = "PostgreSQL://me@db/cordon".parse().unwrap();
    assert!(matches!(upper, StoreLocation::Postgres(_)));
    let path: StoreLocation = "/var/lib/cordon/cordon.db".parse().unwrap();
    assert_eq!(
        path,
        StoreLocation::Sqlite("/var/lib/cordon/cordon.db".into())
    );
}

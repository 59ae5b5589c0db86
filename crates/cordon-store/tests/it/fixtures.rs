//! What the store's integration tests share: a fresh store of each backend (PostgreSQL in a
//! database of its own on the throw-away cluster of `scripts/test`), a macro that runs one test
//! body against every backend, and the jobs, claims and runs the tests make.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_test_support::postgres;

use cordon_store::{
    AttemptEnd, Chunk, ChunkBody, Claim, Claimed, JobRow, JobState, NewJob, NewRun, RunKind, Store,
    StoreLocation,
};
use serde_json::json;

/// A throw-away store: its location, and what must live as long as it does.
pub struct TestStore {
    location: StoreLocation,
    _dir: Option<tempfile::TempDir>,
    _database: Option<postgres::Database>,
    /// Whether handles are opened for recording (`Store::open_for_recording`: runs go to the
    /// run log, readers ingest it).
    recording: bool,
}

impl TestStore {
    /// A new SQLite store in a temporary directory.
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path: PathBuf = dir.path().join("cordon.db");
        TestStore {
            location: StoreLocation::Sqlite(path),
            _dir: Some(dir),
            _database: None,
            recording: false,
        }
    }

    /// An SQLite store whose handles are all opened for recording.
    pub fn sqlite_run_log() -> Self {
        TestStore {
            recording: true,
            ..Self::sqlite()
        }
    }

    /// Whether handles are opened for recording.
    pub fn recording(&self) -> bool {
        self.recording
    }

    /// A new PostgreSQL store in a database of its own, or `None` when skipped here.
    pub fn postgres() -> Option<Self> {
        let database = postgres::Database::create("cordon_test")?;
        Some(TestStore {
            location: StoreLocation::Postgres(database.url.clone()),
            _dir: None,
            _database: Some(database),
            recording: false,
        })
    }

    /// Runs SQL on the store's database directly (to age rows, to break things).
    pub fn raw_sql(&self, sql: &str) {
        match &self.location {
            StoreLocation::Postgres(url) => postgres::psql(url, sql),
            StoreLocation::Sqlite(path) => {
                let connection = rusqlite::Connection::open(path).expect("connect");
                connection.execute_batch(sql).expect("sql");
            }
            other => panic!("no such backend in the tests: {other:?}"),
        }
    }

    /// Opens (another handle on) the store, as another process or worker would.
    pub fn open(&self) -> Store {
        if self.recording {
            Store::open_for_recording(&self.location).expect("open the store for recording")
        } else {
            Store::open(&self.location).expect("open the store")
        }
    }

    /// Where the store is.
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// Whether the store is a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        matches!(self.location, StoreLocation::Postgres(_))
    }
}

/// A job of `project` (two attempts, a 1 s timeout).
pub fn job(project: &str, priority: i64, key: Option<&str>) -> NewJob {
    NewJob {
        project: project.into(),
        job_type: "run".into(),
        priority,
        max_attempts: 2,
        timeout_ms: 1000,
        idempotency_key: key.map(str::to_owned),
        inputs: json!({"argv": ["true"]}),
        submitted_by: "t-test".into(),
        rerun_of: None,
        slots: 1,
    }
}

/// What `running_per_project` says, as (project, jobs, slots).
pub fn running(store: &Store) -> Vec<(String, u32, u32)> {
    store
        .running_per_project()
        .unwrap()
        .into_iter()
        .map(|r| (r.project, r.jobs, r.slots))
        .collect()
}

/// Claims for `worker` with a long lease.
pub fn claim(
    store: &Store,
    worker: &str,
    workers: u32,
    concurrency: &(dyn Fn(&str) -> u32 + Sync),
) -> Option<JobRow> {
    claim_with(
        store,
        worker,
        Duration::from_secs(600),
        workers,
        concurrency,
    )
    .job
}

pub fn claim_with(
    store: &Store,
    worker: &str,
    lease: Duration,
    workers: u32,
    concurrency: &(dyn Fn(&str) -> u32 + Sync),
) -> Claimed {
    store
        .claim_job(&Claim {
            worker,
            lease,
            workers,
            concurrency,
        })
        .expect("claim")
}

pub fn done(cpu_ms: Option<u64>) -> AttemptEnd {
    AttemptEnd::Final {
        state: JobState::Succeeded,
        result: Some(json!({"ok": true})),
        failure: None,
        cpu_ms,
    }
}

pub fn retry() -> AttemptEnd {
    AttemptEnd::Retry {
        not_before_ms: 0,
        failure: json!({"category": "infra", "reason": "x"}),
        cpu_ms: None,
    }
}

pub fn new_run(command: &[&str]) -> NewRun {
    NewRun {
        kind: RunKind::Run,
        repo: Some("/src/project".to_owned()),
        session: None,
        command: json!(command),
    }
}

pub fn data(chunks: &[Chunk]) -> Vec<u8> {
    let mut all = Vec::new();
    for chunk in chunks {
        if let ChunkBody::Data(bytes) = &chunk.body {
            all.extend_from_slice(bytes);
        }
    }
    all
}

pub fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut bits = 0u32;
    let mut count = 0;
    for byte in text.bytes().filter(|&b| b != b'=') {
        let value = ALPHABET.iter().position(|&c| c == byte).expect("base64") as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    out
}

pub fn count_rows(db: &Path, sql: &str) -> i64 {
    let connection = rusqlite::Connection::open(db).expect("connect");
    connection
        .query_row(sql, [], |row| row.get(0))
        .expect("count")
}

/// `each_backend!(name, |t: &TestStore| body)`: a test module `name` with one test per
/// backend, each running `body` against a fresh store. Further cases may follow as
/// `test_name => constructor` (a `TestStore` constructor returning the store).
macro_rules! each_backend {
    ($name:ident, $body:expr $(, $case:ident => $make:ident)*) => {
        #[allow(non_upper_case_globals)]
        const $name: fn(&$crate::fixtures::TestStore) = $body;

        mod $name {
            #[test]
            fn sqlite() {
                super::$name(&$crate::fixtures::TestStore::sqlite());
            }

            $(
                #[test]
                fn $case() {
                    super::$name(&$crate::fixtures::TestStore::$make());
                }
            )*

            #[test]
            fn postgres() {
                if let Some(store) = $crate::fixtures::TestStore::postgres() {
                    super::$name(&store);
                }
            }
        }
    };
}

/// [`each_backend!`] for the run history, with a third case: SQLite with every handle opened
/// for recording (runs written to the run log, ingested by every read).
macro_rules! each_history_backend {
    ($name:ident, $body:expr) => {
        $crate::fixtures::each_backend!($name, $body, sqlite_run_log => sqlite_run_log);
    };
}

pub(crate) use {each_backend, each_history_backend};

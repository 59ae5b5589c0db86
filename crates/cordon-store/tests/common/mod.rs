//! What the store's integration tests share: a fresh store of each backend, and a macro that
//! runs one test body against every backend.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cordon_store::{
    AttemptEnd, Chunk, ChunkBody, Claim, Claimed, JobRow, JobState, NewJob, NewRun, RunKind, Store,
    StoreLocation,
};
use serde_json::json;

/// A throw-away store: its location, and what must live as long as it does.
pub struct TestStore {
    location: StoreLocation,
    _dir: Option<tempfile::TempDir>,
    database: Option<TestDatabase>,
    /// Whether handles are opened for recording (`Store::open_for_recording`: runs go to the
    /// run log, readers ingest it).
    recording: bool,
}

/// The variable `scripts/test` sets: a PostgreSQL database to connect to as a superuser.
pub const POSTGRES_ENV: &str = "CORDON_TEST_POSTGRES_URL";

/// Whether a test that cannot run here must fail instead of skipping (`CI=true` or
/// `CORDON_REQUIRE_SANDBOX=1`, as for the sandbox tests).
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("CORDON_REQUIRE_SANDBOX").is_ok_and(|v| v == "1")
}

/// The admin URL, or `None` (after saying why) when PostgreSQL tests may be skipped here.
pub fn postgres_admin_url() -> Option<String> {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if required() => panic!(
            "error: the PostgreSQL tests are required here (CI=true or CORDON_REQUIRE_SANDBOX=1) \
             but {POSTGRES_ENV} is not set: run them through scripts/test, which starts a \
             throw-away cluster"
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
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map_or("", |at| &tail[at..]);
    format!("{scheme}://{authority}/{database}{query}")
}

/// A database created for one test, dropped (with its connections) afterwards.
pub struct TestDatabase {
    admin: String,
    name: String,
}

impl TestDatabase {
    /// Creates a database with a unique name.
    pub fn create(admin: &str) -> Self {
        let name = format!(
            "cordon_test_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        admin_sql(admin, &format!("CREATE DATABASE {name}"));
        TestDatabase {
            admin: admin.to_owned(),
            name,
        }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        with_database(&self.admin, &self.name)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        admin_sql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs one statement on the admin database.
pub fn admin_sql(url: &str, sql: &str) {
    use sqlx::Connection;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut connection = sqlx::PgConnection::connect(url)
            .await
            .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
        sqlx::raw_sql(sql)
            .execute(&mut connection)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        connection.close().await.expect("close");
    });
}

impl TestStore {
    /// A new SQLite store in a temporary directory.
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path: PathBuf = dir.path().join("cordon.db");
        TestStore {
            location: StoreLocation::Sqlite(path),
            _dir: Some(dir),
            database: None,
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
        let admin = postgres_admin_url()?;
        let database = TestDatabase::create(&admin);
        Some(TestStore {
            location: StoreLocation::Postgres(database.url()),
            _dir: None,
            database: Some(database),
            recording: false,
        })
    }

    /// Whether this is the PostgreSQL store.
    pub fn is_postgres(&self) -> bool {
        self.database.is_some()
    }

    /// Runs SQL on the store's database directly (to age rows, to break things).
    pub fn raw_sql(&self, sql: &str) {
        match &self.location {
            StoreLocation::Postgres(url) => admin_sql(url, sql),
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
    }
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

/// Polls `done` every 10 ms until it holds; fails naming `what` after `limit` (a generous
/// bound: only a hang reaches it).
#[track_caller]
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `each_backend!(name, |t: &TestStore| body)`: a test module `name` with one test per
/// backend, each running `body` against a fresh store. Further cases may follow as
/// `test_name => constructor` (a `TestStore` constructor returning the store).
#[macro_export]
macro_rules! each_backend {
    ($name:ident, $body:expr $(, $case:ident => $make:ident)*) => {
        #[allow(non_upper_case_globals)]
        const $name: fn(&$crate::common::TestStore) = $body;

        mod $name {
            #[test]
            fn sqlite() {
                super::$name(&$crate::common::TestStore::sqlite());
            }

            $(
                #[test]
                fn $case() {
                    super::$name(&$crate::common::TestStore::$make());
                }
            )*

            #[test]
            fn postgres() {
                if let Some(store) = $crate::common::TestStore::postgres() {
                    super::$name(&store);
                }
            }
        }
    };
}

/// [`each_backend!`] for the run history, with a third case: SQLite with every handle opened
/// for recording (runs written to the run log, ingested by every read).
#[macro_export]
macro_rules! each_history_backend {
    ($name:ident, $body:expr) => {
        $crate::each_backend!($name, $body, sqlite_run_log => sqlite_run_log);
    };
}

//! What the store's integration tests share: a fresh store of each backend, and a macro that
//! runs one test body against every backend.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use cordon_store::{AttemptEnd, Claim, Claimed, JobRow, JobState, NewJob, Store, StoreLocation};
use serde_json::json;

/// A throw-away store: its location, and what must live as long as it does.
pub struct TestStore {
    location: StoreLocation,
    _dir: Option<tempfile::TempDir>,
}

impl TestStore {
    /// A new SQLite store in a temporary directory.
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path: PathBuf = dir.path().join("cordon.db");
        TestStore {
            location: StoreLocation::Sqlite(path),
            _dir: Some(dir),
        }
    }

    /// Opens (another handle on) the store, as another process or worker would.
    pub fn open(&self) -> Store {
        Store::open(&self.location).expect("open the store")
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

/// `each_backend!(name, |t: &TestStore| body)`: a test module `name` with one test per
/// backend, each running `body` against a fresh store.
#[macro_export]
macro_rules! each_backend {
    ($name:ident, $body:expr) => {
        #[allow(non_upper_case_globals)]
        const $name: fn(&$crate::common::TestStore) = $body;

        mod $name {
            #[test]
            fn sqlite() {
                super::$name(&$crate::common::TestStore::sqlite());
            }
        }
    };
}

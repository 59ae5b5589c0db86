//! What operators see of the job service's processes and of each job's history: the workers
//! (registered at start, a heartbeat while they live, a drain flag any process may set) and
//! every attempt of a job as its own record.
//!
//! A worker whose heartbeat is older than its lease is **lost** (killed, its host gone, cut off
//! from the store): its jobs are reclaimed when their leases run out, and its row stays, shown
//! lost, until the same name registers again or [`Store::forget_lost_workers`] removes it. A
//! worker that stops cleanly removes its own row.

use std::time::Duration;

use crate::backend::dispatch;
use crate::error::StoreError;
use crate::jobs::{AttemptRow, JobId};
use crate::store::{Store, now_ms};

/// A process that runs jobs, as it registers itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Its name (unique among the live workers sharing the store).
    pub name: String,
    /// The host it runs on.
    pub host: String,
    /// The cordon version it runs.
    pub version: String,
    /// Its process id on that host.
    pub pid: u32,
    /// How many jobs it runs at once.
    pub slots: u32,
    /// Its lease: without a heartbeat for this long, it is lost.
    pub lease: Duration,
}

/// How a worker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkerState {
    /// Heartbeats arrive; it takes jobs.
    Live,
    /// Heartbeats arrive; it finishes its running jobs and takes no new ones.
    Draining,
    /// No heartbeat for longer than its lease.
    Lost,
}

impl WorkerState {
    /// The state's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Live => "live",
            WorkerState::Draining => "draining",
            WorkerState::Lost => "lost",
        }
    }
}

/// A worker as stored, with the jobs it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRow {
    /// Its name.
    pub name: String,
    /// Its host.
    pub host: String,
    /// Its cordon version.
    pub version: String,
    /// Its process id.
    pub pid: u32,
    /// Jobs it runs at once.
    pub slots: u32,
    /// Its lease, milliseconds.
    pub lease_ms: u64,
    /// When it registered (Unix epoch ms).
    pub started_at_ms: i64,
    /// Its last heartbeat (Unix epoch ms).
    pub heartbeat_at_ms: i64,
    /// Whether it was asked to drain.
    pub draining: bool,
    /// The jobs the store says it runs.
    pub running: Vec<JobId>,
}

impl WorkerRow {
    /// How it stands at `now_ms`: lost once its last heartbeat is older than its lease.
    pub fn state(&self, now_ms: i64) -> WorkerState {
        let lease = i64::try_from(self.lease_ms).unwrap_or(i64::MAX);
        if self.heartbeat_at_ms.saturating_add(lease) < now_ms {
            WorkerState::Lost
        } else if self.draining {
            WorkerState::Draining
        } else {
            WorkerState::Live
        }
    }
}

impl Store {
    /// Registers a worker (again, under a name it had before: its row starts afresh, not
    /// draining).
    pub fn register_worker(&self, worker: &WorkerInfo) -> Result<(), StoreError> {
        self.call("register a worker", || {
            dispatch!(
                self.backend(),
                OpsBackend::register_worker(worker, now_ms())
            )
        })
    }

    /// A heartbeat of worker `name`: `Some(draining)` (whether it was asked to drain), or
    /// `None` when it is not registered (removed by an operator: it registers again).
    pub fn worker_heartbeat(&self, name: &str) -> Result<Option<bool>, StoreError> {
        self.call("record a worker's heartbeat", || {
            dispatch!(self.backend(), OpsBackend::worker_heartbeat(name, now_ms()))
        })
    }

    /// Asks worker `name` to drain: finish its running jobs, take no new ones (it sees the
    /// flag at its next heartbeat). `false` when no such worker is registered.
    pub fn drain_worker(&self, name: &str) -> Result<bool, StoreError> {
        self.call("drain a worker", || {
            dispatch!(self.backend(), OpsBackend::drain_worker(name))
        })
    }

    /// Removes worker `name` (it stopped cleanly).
    pub fn remove_worker(&self, name: &str) -> Result<(), StoreError> {
        self.call("remove a worker", || {
            dispatch!(self.backend(), OpsBackend::remove_worker(name))
        })
    }

    /// Removes the workers lost for longer than `age` (their last heartbeat older than their
    /// lease plus `age`). Returns how many.
    pub fn forget_lost_workers(&self, age: Duration) -> Result<u64, StoreError> {
        let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        self.call("forget lost workers", || {
            dispatch!(
                self.backend(),
                OpsBackend::forget_lost_workers(now_ms().saturating_sub(age))
            )
        })
    }

    /// Every registered worker, by name, with the jobs it runs.
    pub fn list_workers(&self) -> Result<Vec<WorkerRow>, StoreError> {
        self.call("list workers", || {
            dispatch!(self.backend(), OpsBackend::list_workers())
        })
    }

    /// Every attempt of a job, in order.
    pub fn job_attempts(&self, id: &JobId) -> Result<Vec<AttemptRow>, StoreError> {
        self.call("read a job's attempts", || {
            dispatch!(self.backend(), OpsBackend::job_attempts(id))
        })
    }

    /// Whether the store answers a trivial query within `timeout` (what `/readyz` asks).
    pub fn ping(&self, timeout: Duration) -> Result<(), StoreError> {
        self.call("reach the store", || {
            dispatch!(self.backend(), OpsBackend::ping(timeout))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_lost_once_its_heartbeat_is_older_than_its_lease() {
        let mut worker = WorkerRow {
            name: "w".into(),
            host: "h".into(),
            version: "0".into(),
            pid: 1,
            slots: 2,
            lease_ms: 3000,
            started_at_ms: 0,
            heartbeat_at_ms: 10_000,
            draining: false,
            running: Vec::new(),
        };
        assert_eq!(worker.state(13_000), WorkerState::Live);
        assert_eq!(worker.state(13_001), WorkerState::Lost);
        worker.draining = true;
        assert_eq!(worker.state(12_000), WorkerState::Draining);
        assert_eq!(worker.state(20_000), WorkerState::Lost);
    }
}

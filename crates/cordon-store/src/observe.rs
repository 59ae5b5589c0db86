//! What a store tells the process that uses it, as it happens:
//!
//! - [`EventObserver`]: a job's event was recorded — by this process (told at once, after the
//!   write), or, on PostgreSQL, by any process sharing the store (every event write sends a
//!   `NOTIFY` at its commit, and [`Store::observe_events`] `LISTEN`s for them). Live logs wait
//!   for this instead of polling.
//! - [`OutageObserver`]: the store stopped answering (the first failure of an outage, with its
//!   cause), and answers again (how long it was down, how many operations failed meanwhile):
//!   once per outage, however many operations fail during it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::error::StoreError;
use crate::jobs::JobId;
use crate::store::Store;

/// Told when a job's event is recorded.
pub trait EventObserver: Send + Sync {
    /// An event of `job` was recorded (read it from the store).
    fn recorded(&self, job: &JobId);
    /// Events may have been recorded unseen (the connection that listens for other
    /// processes' events was lost and is back): everything waiting should look again.
    fn resync(&self) {}
}

/// Told when the store becomes unreachable and when it is back.
pub trait OutageObserver: Send + Sync {
    /// The first failure of an outage, with its cause.
    fn failing(&self, error: &StoreError);
    /// The store answers again, after `down` and `failures` failed operations.
    fn recovered(&self, down: Duration, failures: u64);
}

/// Where an outage stands.
#[derive(Debug, Default)]
struct Outage {
    since: Option<Instant>,
    failures: u64,
}

/// The observers of one store, and the outage they are told about.
#[derive(Default)]
pub(crate) struct Observers {
    events: RwLock<Option<Arc<dyn EventObserver>>>,
    outages: RwLock<Option<Arc<dyn OutageObserver>>>,
    /// Set while an outage lasts (the common case, no outage, costs one load).
    down: AtomicBool,
    outage: Mutex<Outage>,
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observers")
            .field("down", &self.down)
            .finish_non_exhaustive()
    }
}

impl Observers {
    /// An operation succeeded: an outage, if one lasted, is over.
    pub(crate) fn succeeded(&self) {
        if !self.down.load(Ordering::Relaxed) {
            return;
        }
        let ended = {
            let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
            self.down.store(false, Ordering::Relaxed);
            outage
                .since
                .take()
                .map(|since| (since.elapsed(), std::mem::take(&mut outage.failures)))
        };
        if let (Some((down, failures)), Some(observer)) = (ended, self.outage_observer()) {
            observer.recovered(down, failures);
        }
    }

    /// An operation failed: the first failure of an outage is told, with its cause.
    pub(crate) fn failed(&self, error: &StoreError) {
        if !error.is_unavailable() {
            return;
        }
        let first = {
            let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
            outage.failures += 1;
            self.down.store(true, Ordering::Relaxed);
            outage.since.get_or_insert_with(Instant::now);
            outage.failures == 1
        };
        if first && let Some(observer) = self.outage_observer() {
            observer.failing(error);
        }
    }

    fn outage_observer(&self) -> Option<Arc<dyn OutageObserver>> {
        self.outages
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn event_observer(&self) -> Option<Arc<dyn EventObserver>> {
        self.events
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Store {
    /// Tells `observer` of every job event this process records from now on; on PostgreSQL,
    /// also of those every other process records (a connection of its own `LISTEN`s, and
    /// comes back after the database does).
    pub fn observe_events(&self, observer: Arc<dyn EventObserver>) -> Result<(), StoreError> {
        *self
            .observers()
            .events
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&observer));
        #[cfg(feature = "postgres")]
        if let crate::backend::AnyBackend::Postgres(backend) = self.backend() {
            backend.listen(observer);
        }
        Ok(())
    }

    /// Tells `observer` when the store becomes unreachable (once per outage) and when it is
    /// back.
    pub fn observe_outages(&self, observer: Arc<dyn OutageObserver>) {
        *self
            .observers()
            .outages
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(observer);
    }

    /// Tells the event observer that `job` has a new event.
    pub(crate) fn event_recorded(&self, job: &JobId) {
        if let Some(observer) = self.observers().event_observer() {
            observer.recorded(job);
        }
    }
}

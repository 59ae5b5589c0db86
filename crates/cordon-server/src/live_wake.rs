//! What wakes a live log when its job has a new event: the store tells this process of every
//! event it records ([`cordon_store::Store::observe_events`]: at once for this process's own
//! writes, through PostgreSQL `LISTEN/NOTIFY` for other processes'), and each followed job
//! has a version counter that its open streams wait on. A stream reads the store only when
//! its job changed, or after [`FALLBACK`] (events another process wrote to a shared SQLite
//! file, which tells no one; a notification lost with a connection).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon_store::{EventObserver, JobId};
use tokio::sync::watch;

/// How long a stream waits for a wake-up before it reads the store anyway.
pub const FALLBACK: Duration = Duration::from_millis(250);

/// The followed jobs and their version counters.
#[derive(Debug, Default)]
pub struct LiveWake {
    jobs: Mutex<HashMap<JobId, watch::Sender<u64>>>,
}

/// One stream's subscription to its job's changes; dropping it forgets the job once no
/// stream follows it.
#[derive(Debug)]
pub struct Subscription {
    wake: Arc<LiveWake>,
    job: JobId,
    /// Changes when the job has new events.
    pub changes: watch::Receiver<u64>,
}

impl LiveWake {
    /// Follows `job`'s changes.
    pub fn subscribe(self: &Arc<Self>, job: &JobId) -> Subscription {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let changes = jobs
            .entry(job.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        Subscription {
            wake: Arc::clone(self),
            job: job.clone(),
            changes,
        }
    }

    fn bump(sender: &watch::Sender<u64>) {
        sender.send_modify(|version| *version = version.wrapping_add(1));
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut jobs = self.wake.jobs.lock().unwrap_or_else(|e| e.into_inner());
        // This subscription's receiver still counts until it is dropped after this.
        if jobs
            .get(&self.job)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            jobs.remove(&self.job);
        }
    }
}

impl EventObserver for LiveWake {
    fn recorded(&self, job: &JobId) {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sender) = jobs.get(job) {
            Self::bump(sender);
        }
    }

    fn resync(&self) {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        for sender in jobs.values() {
            Self::bump(sender);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_event_wakes_the_streams_of_its_job_only_and_is_never_missed() {
        let wake = Arc::new(LiveWake::default());
        let (a, b): (JobId, JobId) = (
            "j-aaaaaaaaaa".parse().unwrap(),
            "j-bbbbbbbbbb".parse().unwrap(),
        );
        let mut first = wake.subscribe(&a);
        let mut second = wake.subscribe(&a);
        let mut other = wake.subscribe(&b);
        // Recorded before the streams wait: seen when they look.
        wake.recorded(&a);
        assert!(first.changes.has_changed().unwrap());
        assert!(second.changes.has_changed().unwrap());
        assert!(!other.changes.has_changed().unwrap());
        first.changes.borrow_and_update();
        assert!(!first.changes.has_changed().unwrap());
        wake.resync();
        assert!(other.changes.has_changed().unwrap());
        other.changes.borrow_and_update();
        second.changes.borrow_and_update();
        // The last stream of a job gone, the job is forgotten.
        drop(first);
        assert!(wake.jobs.lock().unwrap().contains_key(&a));
        drop(second);
        assert!(!wake.jobs.lock().unwrap().contains_key(&a));
        drop(other);
        assert!(wake.jobs.lock().unwrap().is_empty());
    }
}

//! The heartbeat of a process's workers: renews the leases of the jobs it runs, ends the
//! ones whose lease it lost (another worker may run them now) or whose cancel was asked for
//! on any machine, and reclaims jobs whose worker died.
//!
//! One thread per process. Leases are renewed every third of their length; cancel requests
//! are polled every [`CANCEL_POLL`], so a cancel reaches the job's process tree within about
//! half a second wherever the job runs. A second thread, which never waits for the store,
//! ends a job whose lease was not renewed for two thirds of its length (the database was
//! slow or unreachable, the process was paused): before the store may give it to another
//! worker, so two attempts never run at once as long as the machines' clocks agree.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::service::Service;

/// How often cancel requests are looked for.
pub const CANCEL_POLL: Duration = Duration::from_millis(500);

/// How often the lease watchdog looks at the running jobs.
const WATCHDOG_TICK: Duration = Duration::from_millis(200);

/// Starts the heartbeat and the lease watchdog threads; they stop once `stop` is set.
pub(crate) fn start(
    service: &Arc<Service>,
    stop: &Arc<AtomicBool>,
) -> [std::thread::JoinHandle<()>; 2] {
    let spawn = |name: &str, body: fn(&Service, &AtomicBool)| {
        let service = Arc::clone(service);
        let stop = Arc::clone(stop);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(&service, &stop))
            .expect("a heartbeat thread starts")
    };
    [
        spawn("cordon-heartbeat", beat),
        spawn("cordon-lease-watch", watch),
    ]
}

/// Ends every job whose lease went unrenewed for two thirds of its length; never waits for
/// the store.
fn watch(service: &Service, stop: &AtomicBool) {
    let limit = service.lease * 2 / 3;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(WATCHDOG_TICK);
        for (id, job) in service.running_jobs() {
            let since = job
                .renewed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed();
            if since >= limit && !job.is_lost() && !job.has_ended() {
                eprintln!(
                    "cordon: job {id} attempt {}: its lease was not renewed for {}ms; ending its \
                     process tree before another worker may take it",
                    job.attempt,
                    since.as_millis()
                );
                job.lose();
            }
        }
    }
}

fn beat(service: &Service, stop: &AtomicBool) {
    let renew_every = (service.lease / 3).max(Duration::from_millis(100));
    let mut last_renewal = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(CANCEL_POLL.min(renew_every));
        poll_cancels(service);
        if last_renewal.elapsed() >= renew_every {
            last_renewal = Instant::now();
            renew(service);
            worker_beat(service);
            match service.store.expire_leases() {
                Ok(recovered) => crate::worker::log_recovered(service, &recovered),
                Err(error) => eprintln!("cordon: cannot reclaim expired leases: {error}"),
            }
        }
    }
}

/// The heartbeat of this process in the store's list of workers: brings the drain flag, and
/// registers the process again when an operator removed it (or the store lost it). Also
/// beaten by a worker thread after each attempt, before it claims another: a busy worker
/// asked to drain takes no new job.
pub(crate) fn worker_beat(service: &Service) {
    let Some(info) = &service.worker_info else {
        return;
    };
    match service.store.worker_heartbeat(&info.name) {
        Ok(Some(draining)) => {
            if draining && !service.draining.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "cordon: worker {} drains: it finishes its running jobs and takes no new ones",
                    info.name
                );
            }
        }
        Ok(None) => {
            if let Err(error) = service.store.register_worker(info) {
                eprintln!("cordon: cannot register worker {}: {error}", info.name);
            }
        }
        // An unreachable store is told once per outage (the outage log).
        Err(_) => {}
    }
}

/// Cancels the jobs running here whose cancel was asked for (through any API replica).
fn poll_cancels(service: &Service) {
    if service.running_jobs().is_empty() {
        return;
    }
    match service.store.cancel_requests(&service.worker_name) {
        Ok(requests) => {
            for (id, attempt) in requests {
                if let Some(job) = service.running_job(&id)
                    && job.attempt == attempt
                {
                    job.cancel.cancel();
                }
            }
        }
        Err(error) => eprintln!("cordon: cannot read cancel requests: {error}"),
    }
}

/// Renews the lease of every job running here; ends those it lost. A job whose end is
/// recorded (it leaves the running map just after) has no lease left: the store refuses its
/// renewal, which is no loss.
fn renew(service: &Service) {
    for (id, job) in service.running_jobs() {
        if job.has_ended() {
            continue;
        }
        match service
            .store
            .renew_lease(&id, job.attempt, &service.worker_name, service.lease)
        {
            Ok(true) => *job.renewed.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now(),
            Ok(false) => {
                eprintln!(
                    "cordon: job {id} attempt {}: the lease is lost (another worker may run it); \
                     ending its process tree",
                    job.attempt
                );
                job.lose();
            }
            Err(error) => {
                let since = job
                    .renewed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .elapsed();
                eprintln!("cordon: job {id}: cannot renew its lease: {error}");
                if since >= service.lease {
                    eprintln!(
                        "cordon: job {id}: no renewal for {}s, the lease may be gone; ending \
                         its process tree",
                        since.as_secs()
                    );
                    job.lose();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Condvar, Mutex, RwLock};

    use cordon_exec::CancelHandle;
    use cordon_store::{AttemptEnd, Claim, JobState, NewJob, Store, StoreLocation};

    use super::*;
    use crate::policy::Policy;
    use crate::service::RunningJob;

    fn service(store: Store) -> Service {
        Service {
            store,
            policy: RwLock::new(Arc::new(Policy::builtin())),
            secrets: RwLock::default(),
            policy_path: None,
            data_dir: std::env::temp_dir(),
            retry_backoff: Duration::from_millis(50),
            running: Mutex::new(HashMap::new()),
            worker_name: "w".into(),
            lease: Duration::from_secs(30),
            wake: (Mutex::new(0), Condvar::new()),
            shutting_down: AtomicBool::new(false),
            over_budget: Mutex::new(None),
            live_streams: Arc::default(),
            worker_info: None,
            draining: AtomicBool::new(false),
            live_wake: Arc::default(),
            webhook_wake: crate::webhooks::Wake::default(),
        }
    }

    /// A job claimed by `w` and run to its end in the store, as its worker's still-listed
    /// entry (between the end's record and its removal from the running map).
    fn ended_job(service: &Service) -> Arc<RunningJob> {
        let (job, _) = service
            .store
            .insert_job(&NewJob {
                project: "p".into(),
                job_type: "run".into(),
                priority: 0,
                max_attempts: 1,
                timeout_ms: 1000,
                idempotency_key: None,
                inputs: serde_json::json!({}),
                submitted_by: "t".into(),
                rerun_of: None,
                slots: 1,
            })
            .unwrap();
        let claimed = service
            .store
            .claim_job(&Claim {
                worker: "w",
                lease: service.lease,
                workers: 4,
                concurrency: &|_| 4,
            })
            .unwrap()
            .job
            .unwrap();
        assert_eq!(claimed.id, job.id);
        let end = AttemptEnd::Final {
            state: JobState::Succeeded,
            result: None,
            failure: None,
            cpu_ms: None,
        };
        assert!(service.store.end_attempt(&job.id, 1, &end).unwrap());
        let running = Arc::new(RunningJob::new(1, Arc::new(CancelHandle::new().unwrap())));
        service
            .running
            .lock()
            .unwrap()
            .insert(job.id.clone(), Arc::clone(&running));
        running
    }

    #[test]
    fn an_attempt_whose_end_is_recorded_is_not_taken_for_a_lost_lease() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&StoreLocation::Sqlite(dir.path().join("cordon.db"))).unwrap();
        let service = service(store);
        // Its end recorded (as the worker marks it): the refused renewal is no loss.
        let ended = ended_job(&service);
        ended.ended.store(true, Ordering::SeqCst);
        renew(&service);
        assert!(
            !ended.is_lost(),
            "a finished job's lease was taken for lost"
        );
        // Unmarked, the same refusal is a lost lease (what it was taken for before).
        service.running.lock().unwrap().clear();
        let unmarked = ended_job(&service);
        renew(&service);
        assert!(unmarked.is_lost());
    }
}

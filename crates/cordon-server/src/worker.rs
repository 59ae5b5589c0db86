//! Workers: long-lived threads that claim jobs from the store (within the global and
//! per-project limits), run them, and record how each attempt ended — retried with
//! exponential backoff when its failure category says another attempt may succeed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cordon_exec::CancelHandle;
use cordon_store::{AttemptEnd, Claim, JobRow, JobState, Recovered};

use crate::api::JobFailure;
use crate::execute::{Outcome, execute};
use crate::service::{RunningJob, Service, now_ms};

/// How long an idle worker waits for a wake-up before it looks at the queue again (retries
/// whose backoff ended, jobs queued through another process): at first; each empty look
/// doubles it up to [`IDLE_POLL_MAX`], and a job found or a wake-up here starts again. Jobs
/// submitted to this process wake its workers at once; a cluster's idle workers do not
/// hammer the claim (1,000 idle slots poll at most ~500 times a second together).
const IDLE_POLL: Duration = Duration::from_millis(250);

/// The longest wait of an idle worker between looks at the queue.
const IDLE_POLL_MAX: Duration = Duration::from_secs(2);

/// `wait` give or take a fifth, so that idle workers started together do not look together.
fn jittered(wait: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let spread = wait.as_millis() as u64 / 5;
    let offset = u64::from(nanos) % (2 * spread + 1);
    (wait + Duration::from_millis(offset)).saturating_sub(Duration::from_millis(spread))
}

/// How long a claimed job stays a worker's without a renewal, by default: the heartbeat renews
/// it every third of that; a worker that dies loses its jobs to others after at most this.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The default worker name of `cordon serve`: the host name (stable across restarts, so a
/// restarted server recovers the jobs it left running at once, and only those).
pub fn default_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Logs the state (and end) events of jobs reclaimed from a worker that is gone.
pub(crate) fn log_recovered(service: &Service, recovered: &Recovered) {
    let store = &service.store;
    for (ids, state) in [
        (&recovered.requeued, "queued"),
        (&recovered.interrupted, "interrupted"),
        (&recovered.cancelled, "cancelled"),
    ] {
        for id in ids {
            let reason = "the worker running it stopped";
            let data = serde_json::json!({"state": state, "reason": reason});
            let _ = store.append_job_event(id, "state", &data);
            if state != "queued" {
                let _ = store.append_job_event(id, "end", &serde_json::json!({"state": state}));
                crate::webhooks::job_ended(service, id);
            }
        }
    }
}

/// Starts `count` worker threads and, when there is at least one, the heartbeat thread; they
/// stop once `stop` is set and they are idle.
pub fn start(
    service: &Arc<Service>,
    count: u32,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let heartbeat = (count > 0)
        .then(|| crate::heartbeat::start(service, stop))
        .into_iter()
        .flatten()
        .chain((count > 0).then(|| crate::retention::start(service, stop)));
    (0..count)
        .map(|n| {
            let service = Arc::clone(service);
            let stop = Arc::clone(stop);
            std::thread::Builder::new()
                .name(format!("cordon-worker-{n}"))
                .spawn(move || work(&service, &stop))
                .expect("a worker thread starts")
        })
        .chain(heartbeat)
        .collect()
}

fn work(service: &Service, stop: &AtomicBool) {
    let worker = service.worker_name.clone();
    let mut idle = IDLE_POLL;
    while !stop.load(Ordering::SeqCst) {
        let seen = *service.wake.0.lock().unwrap_or_else(|e| e.into_inner());
        if service.draining.load(Ordering::SeqCst) {
            // Drained: no new job; the process stops once its running jobs end.
            let (lock, cvar) = &service.wake;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let _ = cvar.wait_timeout(guard, IDLE_POLL_MAX);
            continue;
        }
        let policy = service.policy();
        service.refresh_over_budget();
        let claimed = service.store.claim_job(&Claim {
            worker: &worker,
            lease: service.lease,
            workers: policy.workers,
            // A project past its daily budget runs nothing more today, whatever it queued.
            concurrency: &|project| {
                if service.is_over_budget(project) {
                    0
                } else {
                    policy.concurrency(project)
                }
            },
        });
        if let Ok(claimed) = &claimed {
            log_recovered(service, &claimed.expired);
        }
        match claimed.map(|c| c.job) {
            Ok(Some(job)) => {
                idle = IDLE_POLL;
                run_attempt(service, job);
                crate::heartbeat::worker_beat(service);
                service.notify();
            }
            Ok(None) => {
                let (lock, cvar) = &service.wake;
                let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
                if *guard == seen {
                    let (guard, waited) = cvar
                        .wait_timeout(guard, jittered(idle))
                        .unwrap_or_else(|e| e.into_inner());
                    idle = if waited.timed_out() && *guard == seen {
                        (idle * 2).min(IDLE_POLL_MAX)
                    } else {
                        IDLE_POLL
                    };
                } else {
                    idle = IDLE_POLL;
                }
            }
            Err(error) => {
                eprintln!("cordon: cannot claim a job: {error}");
                let (lock, cvar) = &service.wake;
                let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
                let _ = cvar.wait_timeout(guard, IDLE_POLL);
            }
        }
    }
}

fn run_attempt(service: &Service, job: JobRow) {
    let store = &service.store;
    let began = std::time::Instant::now();
    crate::logging::job_started(&job, &service.worker_name);
    let started = serde_json::json!({
        "state": "running",
        "attempt": job.attempt,
        "worker": service.worker_name,
    });
    match store.append_attempt_event(&job.id, job.attempt, "state", &started) {
        Ok(Some(_)) => {}
        // Reclaimed between the claim and now: another attempt owns the job.
        Ok(None) => return,
        Err(error) => eprintln!("cordon: job {}: cannot log an event: {error}", job.id),
    }
    let cancel = match CancelHandle::new() {
        Ok(handle) => Arc::new(handle),
        Err(error) => {
            finish(
                service,
                &job,
                Outcome::failed("infra", format!("cannot create a cancel handle: {error}")),
            );
            return;
        }
    };
    let running = Arc::new(RunningJob::new(job.attempt, Arc::clone(&cancel)));
    service
        .running
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(job.id.clone(), Arc::clone(&running));
    // A cancel asked for between the claim and now.
    if matches!(store.get_job(&job.id), Ok(Some(j)) if j.cancel_requested) {
        cancel.cancel();
    }
    let outcome = caught(|| execute(service, &job, &cancel));
    crate::logging::job_ended(&job, &outcome, began.elapsed());
    if running.is_lost() {
        eprintln!(
            "cordon: job {} attempt {}: the lease was lost; its outcome is not recorded",
            job.id, job.attempt
        );
    } else {
        // Still in the running map while its end is recorded: the heartbeat keeps renewing
        // the lease while a failing store is retried.
        finish_with(service, &job, outcome, Some(&running));
    }
    // What the project used changed: the next claim counts the budgets again.
    *service
        .over_budget
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = None;
    // This attempt's entry only (a later attempt of the same job may run here by now).
    let mut map = service.running.lock().unwrap_or_else(|e| e.into_inner());
    if map.get(&job.id).is_some_and(|r| Arc::ptr_eq(r, &running)) {
        map.remove(&job.id);
    }
}

/// The attempt's outcome, or an `infra` failure naming the panic when its work panicked (a
/// bug): the attempt ends and leaves the running map like any other, and the worker thread
/// lives on. The work holds nothing a panic could leave half-changed that the next attempt
/// trusts (each attempt makes its own scratch directory and cancel handle).
fn caught(work: impl FnOnce() -> Outcome) -> Outcome {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned());
        Outcome::failed(
            "infra",
            format!("cordon failed while running the job (a bug; please report it): {what}"),
        )
    })
}

/// How long the end of an attempt is retried when the store fails.
const END_RETRIES: [Duration; 6] = [
    Duration::from_millis(100),
    Duration::from_millis(300),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

fn finish(service: &Service, job: &JobRow, outcome: Outcome) {
    finish_with(service, job, outcome, None);
}

fn finish_with(service: &Service, job: &JobRow, outcome: Outcome, running: Option<&RunningJob>) {
    // The attempt ended now, by this worker's clock, however long its end takes to record
    // (the store may be unreachable for a while).
    let ended_at_ms = now_ms();
    let store = &service.store;
    let shut_down = service.shutting_down.load(Ordering::SeqCst)
        && outcome.state == JobState::Cancelled
        && !matches!(store.get_job(&job.id), Ok(Some(j)) if j.cancel_requested);
    let outcome = if shut_down {
        // The server stopped, not the client: the job goes back to the queue.
        Outcome::failed("infra", "the server stopped while the job ran")
    } else {
        outcome
    };
    let retry = outcome.state == JobState::Failed
        && (job.attempt < job.max_attempts || shut_down)
        && outcome.failure.as_ref().is_some_and(JobFailure::retryable)
        // A job whose cancel was asked for meanwhile is not tried again.
        && !matches!(store.get_job(&job.id), Ok(Some(j)) if j.cancel_requested);
    let failure_json = outcome
        .failure
        .as_ref()
        .map(|f| serde_json::to_value(f).unwrap_or_default());
    let end = if retry {
        let backoff = service
            .retry_backoff
            .saturating_mul(1 << (job.attempt.saturating_sub(1)).min(10));
        AttemptEnd::Retry {
            not_before_ms: now_ms() + i64::try_from(backoff.as_millis()).unwrap_or(i64::MAX),
            failure: failure_json.clone().unwrap_or_default(),
            cpu_ms: Some(outcome.cpu_ms),
        }
    } else {
        AttemptEnd::Final {
            state: outcome.state,
            result: outcome.result.clone(),
            failure: failure_json.clone(),
            cpu_ms: Some(outcome.cpu_ms),
        }
    };
    // A store that fails now and then must not make a finished attempt look dead (its job
    // would run again): the end is retried while the lease is held.
    let mut retries = END_RETRIES.iter();
    loop {
        match store.end_attempt_at(&job.id, job.attempt, &end, ended_at_ms) {
            Ok(true) => {
                if let Some(running) = running {
                    running.ended.store(true, Ordering::SeqCst);
                }
                break;
            }
            Ok(false) => {
                eprintln!(
                    "cordon: job {} attempt {}: no longer running it; result dropped",
                    job.id, job.attempt
                );
                return;
            }
            Err(error) => {
                let pause = retries
                    .next()
                    .filter(|_| !running.is_some_and(RunningJob::is_lost));
                let Some(pause) = pause else {
                    eprintln!(
                        "cordon: job {}: cannot record its end, gave up: {error}",
                        job.id
                    );
                    return;
                };
                eprintln!(
                    "cordon: job {}: cannot record its end (again in {pause:?}): {error}",
                    job.id
                );
                std::thread::sleep(*pause);
            }
        }
    }
    let state = if retry {
        "queued"
    } else {
        outcome.state.as_str()
    };
    let events = [
        (
            "state",
            serde_json::json!({
                "state": state,
                "attempt": job.attempt,
                "failure": failure_json,
                "retry": retry,
            }),
        ),
        (
            "end",
            serde_json::json!({"state": state, "result": outcome.result}),
        ),
    ];
    for (kind, data) in events.into_iter().take(if retry { 1 } else { 2 }) {
        if let Err(error) = store.append_job_event(&job.id, kind, &data) {
            eprintln!("cordon serve: job {}: cannot log an event: {error}", job.id);
        }
    }
    if !retry {
        crate::webhooks::job_ended(service, &job.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_a_jobs_work_ends_the_attempt_as_an_infra_failure() {
        let outcome = caught(|| {
            let inputs: Vec<u32> = Vec::new();
            // A real panic (an index out of bounds), not a constructed outcome.
            let _ = inputs[usize::from(inputs.is_empty())];
            Outcome::succeeded(serde_json::Value::Null)
        });
        assert_eq!(outcome.state, JobState::Failed);
        let failure = outcome.failure.unwrap();
        assert_eq!(failure.category, "infra");
        assert!(
            failure.reason.contains("index out of bounds"),
            "{failure:?}"
        );
        assert!(failure.retryable());
        // A work that does not panic keeps its outcome.
        let fine = caught(|| Outcome::succeeded(serde_json::json!({"ok": true})));
        assert_eq!(fine.state, JobState::Succeeded);
    }
}

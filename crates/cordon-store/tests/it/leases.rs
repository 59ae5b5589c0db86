//! Leases and fencing on every backend: expired leases reclaimed with attempt + 1, the dead
//! attempt's late writes refused, renewals refused after a reclaim, limits counted across
//! workers, the restart of one named worker, cancel requests, CPU budgets and job timing.

use std::time::Duration;

use cordon_store::{AttemptEnd, JobState, Store};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::fixtures::{TestStore, claim, claim_with, done, each_backend, job};

const SHORT: Duration = Duration::from_millis(50);

/// Sleeps past a lease of [`SHORT`]: the lease is a point in time, so waiting it out is the
/// event under test.
fn outlive_short_lease() {
    std::thread::sleep(SHORT * 3);
}

each_backend!(
    an_expired_lease_is_reclaimed_and_the_dead_attempt_is_fenced,
    |t: &TestStore| {
        let store = t.open();
        let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
        let one = |_: &str| 1;
        let first = claim_with(&store, "dead", SHORT, 1, &one).job.unwrap();
        assert_eq!((first.attempt, first.worker.as_deref()), (1, Some("dead")));
        assert_eq!(
            store
                .append_attempt_event(&j.id, 1, "output", &json!({"n": 1}))
                .unwrap(),
            Some(1),
            "the live attempt writes events"
        );
        outlive_short_lease();
        // The next claim (another worker) reclaims the job in the same transaction and takes it.
        let claimed = claim_with(&store, "alive", Duration::from_secs(600), 1, &one);
        assert_eq!(claimed.expired.requeued, vec![j.id.clone()]);
        let second = claimed.job.expect("the reclaimed job is claimed again");
        assert_eq!(
            (second.id.clone(), second.attempt, second.worker.as_deref()),
            (j.id.clone(), 2, Some("alive"))
        );
        // The dead worker wakes up: everything it writes is refused.
        assert!(
            !store
                .renew_lease(&j.id, 1, "dead", Duration::from_secs(600))
                .unwrap(),
            "renewal refused after the reclaim"
        );
        assert_eq!(
            store
                .append_attempt_event(&j.id, 1, "output", &json!({"late": true}))
                .unwrap(),
            None,
            "late event refused"
        );
        let late = AttemptEnd::Final {
            state: JobState::Failed,
            result: Some(json!({"from": "the dead attempt"})),
            failure: None,
            cpu_ms: Some(5),
        };
        assert!(
            !store.end_attempt(&j.id, 1, &late).unwrap(),
            "late end refused"
        );
        // The live attempt writes and ends normally.
        assert!(
            store
                .renew_lease(&j.id, 2, "alive", Duration::from_secs(600))
                .unwrap()
        );
        assert_eq!(
            store
                .append_attempt_event(&j.id, 2, "output", &json!({"n": 2}))
                .unwrap(),
            Some(2)
        );
        assert!(store.end_attempt(&j.id, 2, &done(Some(7))).unwrap());
        let row = store.get_job(&j.id).unwrap().unwrap();
        assert_eq!(row.state, JobState::Succeeded);
        assert_eq!(row.result, Some(json!({"ok": true})));
        assert_eq!(row.lease_expires_at_ms, None);
        let events = store.job_events(&j.id, 0, 10).unwrap();
        assert_eq!(
            events.iter().map(|e| e.data.clone()).collect::<Vec<_>>(),
            vec![json!({"n": 1}), json!({"n": 2})]
        );
        let timings = store.attempt_timings(0, 10).unwrap();
        let outcomes: Vec<(u32, &str, Option<&str>, Option<u64>)> = timings
            .iter()
            .map(|a| (a.attempt, a.outcome.as_str(), a.worker.as_deref(), a.cpu_ms))
            .collect();
        assert_eq!(
            outcomes,
            vec![
                (1, "lost", Some("dead"), None),
                (2, "succeeded", Some("alive"), Some(7))
            ]
        );
        assert!(
            timings
                .iter()
                .all(|a| a.project == "p" && a.job_type == "run")
        );
        // The same attempts as a histogram: one series per outcome, counted under each bound
        // that their recorded duration does not exceed.
        let durations: Vec<u64> = timings.iter().map(|t| t.duration_ms).collect();
        let bounds = [0, durations[0], durations[1], u64::from(u32::MAX)];
        let histogram = store.attempt_histogram(&bounds).unwrap();
        let series: Vec<(&str, &str, &str, u64, u64)> = histogram
            .iter()
            .map(|h| {
                (
                    h.project.as_str(),
                    h.job_type.as_str(),
                    h.outcome.as_str(),
                    h.count,
                    h.sum_ms,
                )
            })
            .collect();
        assert_eq!(
            series,
            vec![
                ("p", "run", "lost", 1, durations[0]),
                ("p", "run", "succeeded", 1, durations[1])
            ]
        );
        for (h, d) in histogram.iter().zip(&durations) {
            let expected: Vec<u64> = bounds.iter().map(|b| u64::from(d <= b)).collect();
            assert_eq!(h.at_most, expected, "{h:?}");
        }
    }
);

each_backend!(
    an_expired_lease_without_attempts_left_is_interrupted,
    |t: &TestStore| {
        let store = t.open();
        let mut last = job("p", 0, None);
        last.max_attempts = 1;
        let (j, _) = store.insert_job(&last).unwrap();
        claim_with(&store, "dead", SHORT, 1, &|_| 1).job.unwrap();
        assert_eq!(
            store.expire_leases().unwrap().interrupted,
            vec![],
            "not yet"
        );
        outlive_short_lease();
        let recovered = store.expire_leases().unwrap();
        assert_eq!(recovered.interrupted, vec![j.id.clone()]);
        let row = store.get_job(&j.id).unwrap().unwrap();
        assert_eq!(row.state, JobState::Interrupted);
        assert_eq!(row.failure.unwrap()["category"], "infra");
        assert!(store.expire_leases().unwrap().interrupted.is_empty());
    }
);

each_backend!(a_renewed_lease_is_not_reclaimed, |t: &TestStore| {
    let store = t.open();
    let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
    claim_with(&store, "w", SHORT, 1, &|_| 1).job.unwrap();
    assert!(
        store
            .renew_lease(&j.id, 1, "w", Duration::from_secs(600))
            .unwrap()
    );
    assert!(
        !store
            .renew_lease(&j.id, 1, "another", Duration::from_secs(600))
            .unwrap(),
        "only the holder renews"
    );
    outlive_short_lease();
    assert_eq!(store.expire_leases().unwrap(), Default::default());
    assert_eq!(
        store.get_job(&j.id).unwrap().unwrap().state,
        JobState::Running
    );
});

each_backend!(limits_hold_across_workers_and_stores, |t: &TestStore| {
    // Two workers, each with its own store handle (as on two machines), one database.
    let a = t.open();
    let b = t.open();
    for project in ["p", "p", "p", "q", "q", "r"] {
        a.insert_job(&job(project, 0, None)).unwrap();
    }
    let one = |_: &str| 1;
    let mut taken = Vec::new();
    for (store, worker) in [(&a, "a"), (&b, "b"), (&a, "a"), (&b, "b")] {
        taken.push(claim(store, worker, 3, &one).map(|j| j.project));
    }
    assert_eq!(taken[3], None, "three in all, whichever worker asks");
    let mut projects: Vec<String> = taken.into_iter().flatten().collect();
    projects.sort();
    assert_eq!(projects, ["p", "q", "r"], "one per project");
    assert!(
        claim(&b, "b", 10, &one).is_none(),
        "each project at its limit"
    );
});

each_backend!(
    recovering_one_worker_leaves_the_others_jobs_alone,
    |t: &TestStore| {
        let store = t.open();
        store.insert_job(&job("p", 0, None)).unwrap();
        store.insert_job(&job("q", 0, None)).unwrap();
        let any = |_: &str| 5;
        let mine = claim(&store, "me", 5, &any).unwrap();
        let theirs = claim(&store, "them", 5, &any).unwrap();
        let recovered = store.recover_jobs("me").unwrap();
        assert_eq!(recovered.requeued, vec![mine.id.clone()]);
        assert!(recovered.interrupted.is_empty());
        let theirs = store.get_job(&theirs.id).unwrap().unwrap();
        assert_eq!(
            (theirs.state, theirs.worker.as_deref()),
            (JobState::Running, Some("them"))
        );
        assert!(
            store
                .renew_lease(&theirs.id, 1, "them", Duration::from_secs(60))
                .unwrap()
        );
        assert!(
            !store
                .renew_lease(&mine.id, 1, "me", Duration::from_secs(60))
                .unwrap(),
            "the recovered attempt is over"
        );
    }
);

each_backend!(
    cancel_requests_reach_the_worker_running_the_job,
    |t: &TestStore| {
        let store = t.open();
        store.insert_job(&job("p", 0, None)).unwrap();
        store.insert_job(&job("q", 0, None)).unwrap();
        let any = |_: &str| 5;
        let a = claim(&store, "w1", 5, &any).unwrap();
        let b = claim(&store, "w2", 5, &any).unwrap();
        assert!(store.cancel_requests("w1").unwrap().is_empty());
        store.cancel_job(&a.id).unwrap();
        store.cancel_job(&b.id).unwrap();
        assert_eq!(
            store.cancel_requests("w1").unwrap(),
            vec![(a.id.clone(), 1)]
        );
        assert_eq!(
            store.cancel_requests("w2").unwrap(),
            vec![(b.id.clone(), 1)]
        );
        // A cancelled job whose worker died ends cancelled, not requeued.
        let recovered = store.recover_jobs("w2").unwrap();
        assert_eq!(recovered.cancelled, vec![b.id.clone()]);
        assert_eq!(
            store.get_job(&b.id).unwrap().unwrap().state,
            JobState::Cancelled
        );
        assert!(store.cancel_requests("w2").unwrap().is_empty());
    }
);

each_backend!(usage_counts_wall_and_cpu_per_project, |t: &TestStore| {
    let store = t.open();
    let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
    store.insert_job(&job("q", 0, None)).unwrap();
    let any = |_: &str| 5;
    let claimed = claim(&store, "w", 5, &any).unwrap();
    assert_eq!(claimed.id, j.id);
    let since = claimed.started_at_ms.unwrap() - 1000;
    std::thread::sleep(Duration::from_millis(20));
    let running = store.project_usage("p", since).unwrap();
    assert!(running.wall_ms >= 20, "{running:?}");
    assert_eq!(
        running.cpu_ms, 0,
        "a running attempt's CPU is not known yet"
    );
    assert!(store.end_attempt(&j.id, 1, &done(Some(1234))).unwrap());
    let ended = store.project_usage("p", since).unwrap();
    assert_eq!(ended.cpu_ms, 1234);
    assert!(ended.wall_ms >= running.wall_ms);
    assert_eq!(store.project_wall_ms("p", since).unwrap(), ended.wall_ms);
    assert_eq!(
        store.project_usage("q", since).unwrap(),
        Default::default(),
        "q never ran"
    );
    let future = store.project_usage("p", i64::MAX / 2).unwrap();
    assert_eq!(future, Default::default());
    let depth = store.queue_depth().unwrap();
    assert_eq!(
        depth
            .iter()
            .map(|d| (d.project.as_str(), d.queued, d.ready))
            .collect::<Vec<_>>(),
        vec![("q", 1, 1)]
    );
});

/// Opened by itself, for a store handle per thread.
fn open_each(t: &TestStore, n: usize) -> Vec<Store> {
    (0..n).map(|_| t.open()).collect()
}

each_backend!(
    concurrent_claimers_never_exceed_the_limits,
    |t: &TestStore| {
        let stores = open_each(t, 4);
        for i in 0..40 {
            stores[0]
                .insert_job(&job(["p", "q", "r"][i % 3], 0, None))
                .unwrap();
        }
        // Each thread claims, checks the running counts while it holds its job, then ends it.
        let over = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for (n, store) in stores.iter().enumerate() {
                let over = &over;
                scope.spawn(move || {
                    let worker = format!("w{n}");
                    let mut idle = 0;
                    while idle < 20 {
                        let Some(j) = claim(store, &worker, 3, &|p| if p == "p" { 1 } else { 2 })
                        else {
                            idle += 1;
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        };
                        idle = 0;
                        let running = store.running_per_project().unwrap();
                        let total: u32 = running.iter().map(|r| r.jobs).sum();
                        let p = running
                            .iter()
                            .find(|r| r.project == "p")
                            .map_or(0, |r| r.jobs);
                        if total > 3 || p > 1 {
                            over.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                        assert!(store.end_attempt(&j.id, j.attempt, &done(None)).unwrap());
                    }
                });
            }
        });
        assert!(
            !over.load(std::sync::atomic::Ordering::SeqCst),
            "a limit was exceeded"
        );
        assert_eq!(
            stores[0].jobs_per_state().unwrap(),
            vec![(JobState::Succeeded, 40)]
        );
    }
);

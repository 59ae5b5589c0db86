//! The job queue on every backend: limits at the claim, fairness, priority, fenced attempt
//! ends, restart recovery, idempotency, tokens and audit.

use std::collections::HashMap;

use cordon_store::{AttemptEnd, JobFilter, JobState, NewJob};
use pretty_assertions::assert_eq;
use serde_json::json;

each_backend!(
    claims_respect_global_and_project_limits_and_share_fairly,
    |t: &TestStore| {
        let store = t.open();
        for _ in 0..4 {
            store.insert_job(&job("busy", 0, None)).unwrap();
        }
        store.insert_job(&job("quiet", 0, None)).unwrap();
        let limits: HashMap<&str, u32> = [("busy", 2), ("quiet", 1)].into();
        let concurrency = |p: &str| limits[p];
        let first = claim(&store, "w", 3, &concurrency).unwrap();
        assert_eq!(first.project, "busy", "oldest head first when nothing runs");
        assert_eq!(first.worker.as_deref(), Some("w"));
        assert!(first.lease_expires_at_ms.is_some());
        let second = claim(&store, "w", 3, &concurrency).unwrap();
        assert_eq!(
            second.project, "quiet",
            "the project with fewer running jobs goes next"
        );
        let third = claim(&store, "w", 3, &concurrency).unwrap();
        assert_eq!(third.project, "busy");
        assert!(claim(&store, "w", 3, &concurrency).is_none(), "workers = 3");
        assert!(
            claim(&store, "w", 10, &concurrency).is_none(),
            "busy's concurrency = 2"
        );
        assert_eq!(
            running(&store),
            vec![("busy".to_owned(), 2, 2), ("quiet".to_owned(), 1, 1)]
        );
    }
);

each_backend!(priority_orders_a_projects_queue, |t: &TestStore| {
    let store = t.open();
    let (low, _) = store.insert_job(&job("p", 0, None)).unwrap();
    let (high, _) = store.insert_job(&job("p", 5, None)).unwrap();
    let one = |_: &str| 1;
    assert_eq!(claim(&store, "w", 1, &one).unwrap().id, high.id);
    assert!(store.end_attempt(&high.id, 1, &done(None)).unwrap());
    assert_eq!(claim(&store, "w", 1, &one).unwrap().id, low.id);
});

each_backend!(a_retry_waits_for_its_backoff, |t: &TestStore| {
    let store = t.open();
    let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
    let any = |_: &str| 1;
    claim(&store, "w", 1, &any).unwrap();
    let later = AttemptEnd::Retry {
        not_before_ms: i64::MAX / 2,
        failure: json!({"category": "infra", "reason": "x"}),
        cpu_ms: Some(3),
    };
    assert!(store.end_attempt(&j.id, 1, &later).unwrap());
    assert!(
        claim(&store, "w", 1, &any).is_none(),
        "still in its backoff"
    );
    let depth = store.queue_depth().unwrap();
    assert_eq!(
        (depth[0].project.as_str(), depth[0].queued, depth[0].ready),
        ("p", 1, 0)
    );
});

each_backend!(
    a_stale_attempt_cannot_overwrite_a_newer_one,
    |t: &TestStore| {
        let store = t.open();
        let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
        let any = |_: &str| 1;
        let claimed = claim(&store, "w", 1, &any).unwrap();
        assert_eq!(claimed.attempt, 1);
        assert!(store.end_attempt(&j.id, 1, &retry()).unwrap());
        let again = claim(&store, "w", 1, &any).unwrap();
        assert_eq!(again.attempt, 2);
        let late = AttemptEnd::Final {
            state: JobState::Succeeded,
            result: Some(json!({"from": "attempt 1"})),
            failure: None,
            cpu_ms: None,
        };
        assert!(
            !store.end_attempt(&j.id, 1, &late).unwrap(),
            "attempt 1's late write is refused"
        );
        assert_eq!(store.get_job(&j.id).unwrap().unwrap().result, None);
    }
);

each_backend!(
    restart_recovery_requeues_running_jobs_with_attempts_left_and_marks_the_rest,
    |t: &TestStore| {
        let store = t.open();
        let (a, _) = store.insert_job(&job("p", 0, None)).unwrap();
        let (b, _) = store.insert_job(&job("q", 0, None)).unwrap();
        let any = |_: &str| 5;
        claim(&store, "w", 5, &any).unwrap();
        claim(&store, "w", 5, &any).unwrap();
        // b used its last attempt (max 2).
        store.end_attempt(&b.id, 1, &retry()).unwrap();
        assert_eq!(claim(&store, "w", 5, &any).unwrap().id, b.id);
        let recovered = store.recover_jobs("w").unwrap();
        assert_eq!(recovered.requeued, vec![a.id.clone()]);
        assert_eq!(recovered.interrupted, vec![b.id.clone()]);
        assert_eq!(
            store.get_job(&a.id).unwrap().unwrap().state,
            JobState::Queued
        );
        assert_eq!(
            store.get_job(&b.id).unwrap().unwrap().state,
            JobState::Interrupted
        );
        assert_eq!(claim(&store, "w", 5, &any).unwrap().attempt, 2);
    }
);

each_backend!(idempotency_keys_are_per_project, |t: &TestStore| {
    let store = t.open();
    let (first, created) = store.insert_job(&job("p", 0, Some("k"))).unwrap();
    assert!(created);
    let (again, created) = store.insert_job(&job("p", 0, Some("k"))).unwrap();
    assert!(!created);
    assert_eq!(again.id, first.id);
    let (other, created) = store.insert_job(&job("q", 0, Some("k"))).unwrap();
    assert!(created);
    assert_ne!(other.id, first.id);
    let listed = store
        .list_jobs(&JobFilter {
            projects: vec!["p".into()],
            limit: 10,
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        store.find_job_by_key("p", "k").unwrap().map(|j| j.id),
        Some(first.id)
    );
});

each_backend!(
    cancel_ends_queued_jobs_and_flags_running_ones,
    |t: &TestStore| {
        let store = t.open();
        let (queued, _) = store.insert_job(&job("p", 0, None)).unwrap();
        assert_eq!(
            store.cancel_job(&queued.id).unwrap(),
            Some(JobState::Cancelled)
        );
        let (running, _) = store.insert_job(&job("p", 0, None)).unwrap();
        claim(&store, "w", 1, &|_| 1).unwrap();
        assert_eq!(
            store.cancel_job(&running.id).unwrap(),
            Some(JobState::Running)
        );
        assert!(
            store
                .get_job(&running.id)
                .unwrap()
                .unwrap()
                .cancel_requested
        );
    }
);

each_backend!(
    tokens_are_found_by_hash_until_revoked_or_expired_and_mutations_are_audited,
    |t: &TestStore| {
        let store = t.open();
        let id = store
            .create_token("abc", "p", &["read".into()], None)
            .unwrap();
        assert_eq!(store.find_token("abc").unwrap().unwrap().id, id);
        assert!(store.find_token("abd").unwrap().is_none());
        store.create_token("old", "p", &[], Some(1)).unwrap();
        assert!(store.find_token("old").unwrap().is_none(), "expired");
        assert_eq!(store.list_tokens().unwrap().len(), 2);
        assert!(store.revoke_token(&id).unwrap());
        assert!(store.find_token("abc").unwrap().is_none());
        assert!(!store.revoke_token(&id).unwrap());
        store.audit("t-x", "job.submit", "j-x", &json!({})).unwrap();
        let log = store.audit_log().unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(
            (log[0].1.as_str(), log[0].2.as_str()),
            ("t-x", "job.submit")
        );
    }
);

each_backend!(
    events_are_numbered_per_job_and_read_after_a_seq,
    |t: &TestStore| {
        let store = t.open();
        let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
        for n in 0..5 {
            assert_eq!(
                store
                    .append_job_event(&j.id, "output", &json!({"n": n}))
                    .unwrap(),
                n + 1
            );
        }
        let after = store.job_events(&j.id, 3, 10).unwrap();
        assert_eq!(after.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![4, 5]);
        assert_eq!(after[0].data, json!({"n": 3}));
        let per_state = store.jobs_per_state().unwrap();
        assert_eq!(per_state, vec![(JobState::Queued, 1)]);
    }
);

use crate::fixtures::{TestStore, claim, done, each_backend, job, retry, running};

each_backend!(
    a_job_holding_several_slots_counts_as_that_many_at_the_claim_and_in_the_budget,
    |t: &TestStore| {
        let store = t.open();
        let limits: HashMap<&str, u32> = [("p", 3), ("q", 4)].into();
        let concurrency = |p: &str| limits[p];
        let one = store.insert_job(&job("p", 0, None)).unwrap().0;
        let wide = store
            .insert_job(&NewJob {
                slots: 3,
                job_type: "session.compare".into(),
                ..job("p", 0, None)
            })
            .unwrap()
            .0;
        let after = store.insert_job(&job("p", 0, None)).unwrap().0;
        assert_eq!(wide.slots, 3);
        assert_eq!(claim(&store, "w", 8, &concurrency).unwrap().id, one.id);
        // The wide job is the head of p's queue and needs 3 of p's 3 slots: with one busy it
        // waits, and the job queued after it waits behind it (no overtaking in a project).
        assert!(claim(&store, "w", 8, &concurrency).is_none());
        assert!(store.end_attempt(&one.id, 1, &done(None)).unwrap());
        let claimed = claim(&store, "w", 8, &concurrency).unwrap();
        assert_eq!((claimed.id.clone(), claimed.slots), (wide.id.clone(), 3));
        assert!(
            claim(&store, "w", 8, &concurrency).is_none(),
            "p's 3 slots are all the wide job's"
        );
        // Across projects: 3 of the 4 workers are held, so q gets one more job, not two.
        store.insert_job(&job("q", 0, None)).unwrap();
        store.insert_job(&job("q", 0, None)).unwrap();
        assert_eq!(claim(&store, "w", 4, &concurrency).unwrap().project, "q");
        assert!(claim(&store, "w", 4, &concurrency).is_none(), "workers = 4");
        // What the dashboard and /metrics show: jobs, and the slots they hold.
        assert_eq!(
            running(&store),
            vec![("p".to_owned(), 1, 3), ("q".to_owned(), 1, 1)]
        );
        // Its wall time is charged once per slot.
        let started = claimed.started_at_ms.unwrap();
        assert!(
            store
                .end_attempt_at(&wide.id, 1, &done(Some(10)), started + 1000)
                .unwrap()
        );
        let used = store.project_usage("p", started).unwrap();
        assert_eq!(used.wall_ms, 3000, "{used:?}");
        assert_eq!(used.cpu_ms, 10);
        // A limit lowered below a queued job's slots does not keep it waiting for ever: it
        // takes what the project may have.
        let narrow = |p: &str| u32::from(p == "p");
        assert_eq!(claim(&store, "w", 8, &narrow).unwrap().id, after.id);
        assert!(store.end_attempt(&after.id, 1, &done(None)).unwrap());
        let big = store
            .insert_job(&NewJob {
                slots: 5,
                ..job("p", 0, None)
            })
            .unwrap()
            .0;
        let q_running: Vec<_> = store
            .list_jobs(&JobFilter {
                projects: vec!["q".into()],
                state: Some(JobState::Running),
                before: None,
                limit: 10,
            })
            .unwrap();
        for j in q_running {
            assert!(store.end_attempt(&j.id, 1, &done(None)).unwrap());
        }
        assert_eq!(claim(&store, "w", 8, &narrow).unwrap().id, big.id);
    }
);

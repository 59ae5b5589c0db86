//! The job queue on a real SQLite store: limits at the claim, fairness, priority, fenced
//! attempt ends, restart recovery, idempotency, tokens and audit.

use std::collections::HashMap;

use cordon_store::{AttemptEnd, JobFilter, JobState, NewJob, Store};
use pretty_assertions::assert_eq;
use serde_json::json;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("cordon.db")).unwrap();
    (dir, store)
}

fn job(project: &str, priority: i64, key: Option<&str>) -> NewJob {
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

#[test]
fn claims_respect_global_and_project_limits_and_share_fairly() {
    let (_dir, store) = store();
    for _ in 0..4 {
        store.insert_job(&job("busy", 0, None)).unwrap();
    }
    store.insert_job(&job("quiet", 0, None)).unwrap();
    let limits: HashMap<&str, u32> = [("busy", 2), ("quiet", 1)].into();
    let concurrency = |p: &str| limits[p];
    let first = store.claim_job(3, &concurrency).unwrap().unwrap();
    assert_eq!(first.project, "busy", "oldest head first when nothing runs");
    let second = store.claim_job(3, &concurrency).unwrap().unwrap();
    assert_eq!(
        second.project, "quiet",
        "the project with fewer running jobs goes next"
    );
    let third = store.claim_job(3, &concurrency).unwrap().unwrap();
    assert_eq!(third.project, "busy");
    assert!(
        store.claim_job(3, &concurrency).unwrap().is_none(),
        "workers = 3"
    );
    assert!(
        store.claim_job(10, &concurrency).unwrap().is_none(),
        "busy's concurrency = 2"
    );
    assert_eq!(
        store.running_per_project().unwrap(),
        vec![("busy".to_owned(), 2), ("quiet".to_owned(), 1)]
    );
}

#[test]
fn priority_orders_a_projects_queue() {
    let (_dir, store) = store();
    let (low, _) = store.insert_job(&job("p", 0, None)).unwrap();
    let (high, _) = store.insert_job(&job("p", 5, None)).unwrap();
    let one = |_: &str| 1;
    assert_eq!(store.claim_job(1, &one).unwrap().unwrap().id, high.id);
    let done = AttemptEnd::Final {
        state: JobState::Succeeded,
        result: Some(json!({"ok": true})),
        failure: None,
    };
    assert!(store.end_attempt(&high.id, 1, &done).unwrap());
    assert_eq!(store.claim_job(1, &one).unwrap().unwrap().id, low.id);
}

#[test]
fn a_stale_attempt_cannot_overwrite_a_newer_one() {
    let (_dir, store) = store();
    let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
    let any = |_: &str| 1;
    let claimed = store.claim_job(1, &any).unwrap().unwrap();
    assert_eq!(claimed.attempt, 1);
    let retry = AttemptEnd::Retry {
        not_before_ms: 0,
        failure: json!({"category": "infra", "reason": "x"}),
    };
    assert!(store.end_attempt(&j.id, 1, &retry).unwrap());
    let again = store.claim_job(1, &any).unwrap().unwrap();
    assert_eq!(again.attempt, 2);
    let late = AttemptEnd::Final {
        state: JobState::Succeeded,
        result: Some(json!({"from": "attempt 1"})),
        failure: None,
    };
    assert!(
        !store.end_attempt(&j.id, 1, &late).unwrap(),
        "attempt 1's late write is refused"
    );
    assert_eq!(store.get_job(&j.id).unwrap().unwrap().result, None);
}

#[test]
fn recovery_requeues_running_jobs_with_attempts_left_and_marks_the_rest() {
    let (_dir, store) = store();
    let (a, _) = store.insert_job(&job("p", 0, None)).unwrap();
    let (b, _) = store.insert_job(&job("q", 0, None)).unwrap();
    let any = |_: &str| 5;
    store.claim_job(5, &any).unwrap().unwrap();
    store.claim_job(5, &any).unwrap().unwrap();
    // b used its last attempt (max 2).
    let retry = AttemptEnd::Retry {
        not_before_ms: 0,
        failure: json!({"category": "infra", "reason": "x"}),
    };
    store.end_attempt(&b.id, 1, &retry).unwrap();
    assert_eq!(store.claim_job(5, &any).unwrap().unwrap().id, b.id);
    let recovered = store.recover_jobs().unwrap();
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
    assert_eq!(store.claim_job(5, &any).unwrap().unwrap().attempt, 2);
}

#[test]
fn idempotency_keys_are_per_project() {
    let (_dir, store) = store();
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
}

#[test]
fn cancel_ends_queued_jobs_and_flags_running_ones() {
    let (_dir, store) = store();
    let (queued, _) = store.insert_job(&job("p", 0, None)).unwrap();
    assert_eq!(
        store.cancel_job(&queued.id).unwrap(),
        Some(JobState::Cancelled)
    );
    let (running, _) = store.insert_job(&job("p", 0, None)).unwrap();
    store.claim_job(1, &|_| 1).unwrap().unwrap();
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

#[test]
fn tokens_are_found_by_hash_until_revoked_or_expired_and_mutations_are_audited() {
    let (_dir, store) = store();
    let id = store
        .create_token("abc", "p", &["read".into()], None)
        .unwrap();
    assert_eq!(store.find_token("abc").unwrap().unwrap().id, id);
    assert!(store.find_token("abd").unwrap().is_none());
    store.create_token("old", "p", &[], Some(1)).unwrap();
    assert!(store.find_token("old").unwrap().is_none(), "expired");
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

#[test]
fn events_are_numbered_per_job_and_read_after_a_seq() {
    let (_dir, store) = store();
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
}

//! What operators see, on every backend: workers (heartbeats, drain, lost), each attempt's
//! own record and log, the worker's clock for an attempt's end, re-run links, token names and
//! last use, webhook deliveries and their tries, event observers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon_store::{
    DeliveryState, DeliveryTry, EventObserver, JobId, NewDelivery, TryVerdict, WorkerInfo,
    WorkerState,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::fixtures::{TestStore, claim, done, each_backend, job, retry};

fn worker(name: &str, lease_ms: u64) -> WorkerInfo {
    WorkerInfo {
        name: name.into(),
        host: "host-a".into(),
        version: "0.1.0".into(),
        pid: 42,
        slots: 2,
        lease: Duration::from_millis(lease_ms),
    }
}

each_backend!(
    workers_register_beat_drain_and_show_their_jobs,
    |t: &TestStore| {
        let store = t.open();
        store.register_worker(&worker("w1", 60_000)).unwrap();
        store.register_worker(&worker("w2", 60_000)).unwrap();
        let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
        let any = |_: &str| 4;
        claim(&store, "w2", 4, &any).unwrap();
        let listed = store.list_workers().unwrap();
        let names: Vec<&str> = listed.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["w1", "w2"]);
        assert_eq!(listed[1].running, vec![j.id.clone()]);
        assert!(listed[0].running.is_empty());
        let now = listed[0].heartbeat_at_ms;
        assert_eq!(listed[0].state(now), WorkerState::Live);
        assert_eq!((listed[0].slots, listed[0].pid), (2, 42));

        assert_eq!(store.worker_heartbeat("w1").unwrap(), Some(false));
        assert!(store.drain_worker("w1").unwrap());
        assert_eq!(store.worker_heartbeat("w1").unwrap(), Some(true));
        let w1 = &store.list_workers().unwrap()[0];
        assert_eq!(w1.state(w1.heartbeat_at_ms), WorkerState::Draining);
        assert!(!store.drain_worker("nobody").unwrap());
        assert_eq!(store.worker_heartbeat("nobody").unwrap(), None);

        // Registering again under the name starts afresh.
        store.register_worker(&worker("w1", 60_000)).unwrap();
        assert_eq!(store.worker_heartbeat("w1").unwrap(), Some(false));
        store.remove_worker("w1").unwrap();
        let names: Vec<String> = store
            .list_workers()
            .unwrap()
            .into_iter()
            .map(|w| w.name)
            .collect();
        assert_eq!(names, ["w2"]);
    }
);

each_backend!(
    a_worker_without_heartbeats_is_lost_and_forgotten_later,
    |t: &TestStore| {
        let store = t.open();
        store.register_worker(&worker("gone", 1)).unwrap();
        store.register_worker(&worker("here", 60_000)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let states: Vec<(String, WorkerState)> = store
            .list_workers()
            .unwrap()
            .into_iter()
            .map(|w| (w.name.clone(), w.state(now)))
            .collect();
        assert_eq!(
            states,
            [
                ("gone".to_owned(), WorkerState::Lost),
                ("here".to_owned(), WorkerState::Live)
            ]
        );
        assert_eq!(
            store
                .forget_lost_workers(Duration::from_secs(3600))
                .unwrap(),
            0
        );
        assert_eq!(store.forget_lost_workers(Duration::ZERO).unwrap(), 1);
        assert_eq!(store.list_workers().unwrap().len(), 1);
    }
);

each_backend!(
    every_attempt_is_its_own_record_with_its_own_log,
    |t: &TestStore| {
        let store = t.open();
        let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
        let any = |_: &str| 1;
        store
            .append_job_event(&j.id, "state", &json!({"state": "queued"}))
            .unwrap();
        claim(&store, "w1", 1, &any).unwrap();
        store
            .append_attempt_event(&j.id, 1, "output", &json!({"text": "start\n"}))
            .unwrap();
        assert!(store.end_attempt(&j.id, 1, &retry()).unwrap());
        // The backoff of `retry()` is in the past: the next claim takes it.
        claim(&store, "w2", 1, &any).unwrap();
        store
            .append_attempt_event(&j.id, 2, "output", &json!({"text": "start\n"}))
            .unwrap();
        store
            .append_attempt_event(&j.id, 2, "output", &json!({"text": "done\n"}))
            .unwrap();
        // Attempt 1's late write is refused: it never reaches attempt 2's log.
        assert_eq!(
            store
                .append_attempt_event(&j.id, 1, "output", &json!({"text": "zombie\n"}))
                .unwrap(),
            None
        );
        // The worker's clock: the attempt ended 1234 ms after it started, however late the
        // store took the write.
        let started = store
            .get_job(&j.id)
            .unwrap()
            .unwrap()
            .started_at_ms
            .unwrap();
        assert!(
            store
                .end_attempt_at(&j.id, 2, &done(Some(5)), started + 1234)
                .unwrap()
        );

        let attempts = store.job_attempts(&j.id).unwrap();
        let summary: Vec<(u32, Option<&str>, Option<&str>)> = attempts
            .iter()
            .map(|a| (a.attempt, a.worker.as_deref(), a.outcome.as_deref()))
            .collect();
        assert_eq!(
            summary,
            [
                (1, Some("w1"), Some("retry")),
                (2, Some("w2"), Some("succeeded"))
            ]
        );
        assert_eq!(attempts[1].finished_at_ms, Some(started + 1234));
        assert_eq!(attempts[1].cpu_ms, Some(5));
        assert_eq!(
            store.get_job(&j.id).unwrap().unwrap().finished_at_ms,
            Some(started + 1234)
        );
        let text = |attempt: u32| -> Vec<String> {
            store
                .attempt_events(&j.id, attempt, 0, 100)
                .unwrap()
                .into_iter()
                .filter(|e| e.kind == "output")
                .map(|e| e.data["text"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(text(1), ["start\n"]);
        assert_eq!(text(2), ["start\n", "done\n"]);
        let all = store.job_events(&j.id, 0, 100).unwrap();
        let labels: Vec<(String, u32)> = all.iter().map(|e| (e.kind.clone(), e.attempt)).collect();
        assert_eq!(
            labels,
            [
                ("state".to_owned(), 0),
                ("output".to_owned(), 1),
                ("output".to_owned(), 2),
                ("output".to_owned(), 2)
            ]
        );
        // An attempt's events keep their numbers in the job's log (resumable either way).
        let second: Vec<u64> = store
            .attempt_events(&j.id, 2, 0, 100)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(second, [3, 4]);
        assert_eq!(
            store
                .attempt_events(&j.id, 2, 3, 100)
                .unwrap()
                .iter()
                .map(|e| e.seq)
                .collect::<Vec<_>>(),
            [4]
        );
    }
);

each_backend!(a_rerun_names_its_original, |t: &TestStore| {
    let store = t.open();
    let (original, _) = store.insert_job(&job("p", 0, None)).unwrap();
    let mut again = job("p", 0, None);
    again.rerun_of = Some(original.id.clone());
    let (rerun, created) = store.insert_job(&again).unwrap();
    assert!(created);
    assert_eq!(rerun.rerun_of, Some(original.id.clone()));
    assert_eq!(
        store.get_job(&rerun.id).unwrap().unwrap().rerun_of,
        Some(original.id)
    );
    assert_eq!(
        store.get_job(&rerun.id).unwrap().unwrap().inputs,
        original.inputs
    );
});

each_backend!(tokens_have_names_and_a_last_use, |t: &TestStore| {
    let store = t.open();
    let id = store
        .create_named_token("h1", "p", &["read".into()], None, Some("ci runner"))
        .unwrap();
    let row = store.token_by_hash("h1").unwrap().unwrap();
    assert_eq!(
        (row.name.as_deref(), row.last_used_at_ms),
        (Some("ci runner"), None)
    );
    store.touch_token(&id).unwrap();
    assert!(
        store
            .token_by_hash("h1")
            .unwrap()
            .unwrap()
            .last_used_at_ms
            .is_some()
    );
    // Revoked: not found as a live token, still found by its hash (to say why it fails).
    assert!(store.revoke_token(&id).unwrap());
    assert!(store.find_token("h1").unwrap().is_none());
    let revoked = store.token_by_hash("h1").unwrap().unwrap();
    assert!(revoked.revoked_at_ms.is_some());
    assert_eq!(store.token_by_hash("nope").unwrap(), None);
});

each_backend!(
    webhook_deliveries_are_taken_once_and_record_every_try,
    |t: &TestStore| {
        let store = t.open();
        let other = t.open();
        let (j, _) = store.insert_job(&job("p", 0, None)).unwrap();
        let hooks = [
            NewDelivery {
                url: "http://127.0.0.1:1/a".into(),
                secret: "HOOK_A".into(),
            },
            NewDelivery {
                url: "http://127.0.0.1:1/b".into(),
                secret: "HOOK_B".into(),
            },
        ];
        let ids = store
            .enqueue_deliveries(&j.id, "p", &hooks, "{\"job\":1}", 3)
            .unwrap();
        assert_eq!(ids.len(), 2);
        assert!(store.next_delivery_at().unwrap().is_some());
        let lock = Duration::from_secs(60);
        let first = store.claim_delivery(lock).unwrap().unwrap();
        let second = other.claim_delivery(lock).unwrap().unwrap();
        assert_ne!(first.id, second.id, "a locked delivery is not taken again");
        assert!(store.claim_delivery(lock).unwrap().is_none());
        assert_eq!(first.body, "{\"job\":1}");
        let failed_try = DeliveryTry {
            number: 1,
            at_ms: 1000,
            duration_ms: 3,
            status: Some(500),
            error: Some("the receiver answered 500".into()),
        };
        store
            .record_delivery_try(&first.id, &failed_try, TryVerdict::Retry { next_at_ms: 0 })
            .unwrap();
        let again = store.claim_delivery(lock).unwrap().unwrap();
        assert_eq!((again.id.as_str(), again.tries), (first.id.as_str(), 1));
        let ok_try = DeliveryTry {
            number: 2,
            at_ms: 2000,
            duration_ms: 1,
            status: Some(204),
            error: None,
        };
        store
            .record_delivery_try(&first.id, &ok_try, TryVerdict::Delivered)
            .unwrap();
        let gave_up = DeliveryTry {
            number: 1,
            at_ms: 1500,
            duration_ms: 0,
            status: None,
            error: Some("connection refused".into()),
        };
        other
            .record_delivery_try(&second.id, &gave_up, TryVerdict::Failed)
            .unwrap();
        assert!(store.claim_delivery(lock).unwrap().is_none());
        assert_eq!(store.next_delivery_at().unwrap(), None);
        let listed = store.job_deliveries(&j.id).unwrap();
        let by_url: Vec<(String, DeliveryState, u32, usize)> = listed
            .iter()
            .map(|d| (d.url.clone(), d.state, d.tries, d.try_log.len()))
            .collect();
        let mut expected = vec![
            (first.url.clone(), DeliveryState::Delivered, 2, 2),
            (second.url.clone(), DeliveryState::Failed, 1, 1),
        ];
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(by_url, expected);
        let delivered = listed.iter().find(|d| d.id == first.id).unwrap();
        assert_eq!(delivered.try_log, vec![failed_try, ok_try]);
        assert_eq!(delivered.finished_at_ms, Some(2000));
        assert_eq!(delivered.secret, first.secret);
    }
);

/// Collects the jobs it is told of.
#[derive(Default)]
struct Seen(Mutex<Vec<JobId>>);

impl EventObserver for Seen {
    fn recorded(&self, job: &JobId) {
        self.0.lock().unwrap().push(job.clone());
    }
}

each_backend!(
    recorded_events_are_told_here_and_to_other_handles_on_postgres,
    |t: &TestStore| {
        let writer = t.open();
        let reader = t.open();
        let here = Arc::new(Seen::default());
        let there = Arc::new(Seen::default());
        writer.observe_events(here.clone()).unwrap();
        reader.observe_events(there.clone()).unwrap();
        let (j, _) = writer.insert_job(&job("p", 0, None)).unwrap();
        // The listener of the other handle may still be connecting: write until it hears one
        // (on SQLite, another handle hears nothing: processes do not share SQLite events).
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            writer
                .append_job_event(&j.id, "state", &json!({"state": "queued"}))
                .unwrap();
            if !t.is_postgres() || !there.0.lock().unwrap().is_empty() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no NOTIFY heard");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(here.0.lock().unwrap().iter().all(|id| *id == j.id));
        assert!(!here.0.lock().unwrap().is_empty());
        if t.is_postgres() {
            assert!(there.0.lock().unwrap().iter().all(|id| *id == j.id));
        }
    }
);

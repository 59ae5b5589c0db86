//! Claims per second: `W` workers (threads, each with its own store handle, as on separate
//! machines) claim and end `J` queued jobs across 4 projects until the queue is empty, with
//! the cluster-wide limits of a real policy (workers = W, concurrency 2 per project).
//!
//! ```sh
//! cargo run --release -p cordon-store --example claim_rate -- postgres://…  2000 1 2 4
//! cargo run --release -p cordon-store --example claim_rate -- /tmp/claims.db 2000 1 2 4
//! ```

use std::time::{Duration, Instant};

use cordon_store::{AttemptEnd, Claim, JobState, NewJob, Store, StoreLocation};

fn main() {
    let mut args = std::env::args().skip(1);
    let location: StoreLocation = args.next().expect("a store URL or path").parse().unwrap();
    let jobs: usize = args
        .next()
        .map_or(2000, |n| n.parse().expect("a job count"));
    let counts: Vec<u32> = args.map(|n| n.parse().expect("a worker count")).collect();
    for workers in if counts.is_empty() {
        vec![1, 2, 4]
    } else {
        counts
    } {
        let setup = Store::open(&location).expect("open");
        for i in 0..jobs {
            setup
                .insert_job(&NewJob {
                    project: format!("p{}", i % 4),
                    job_type: "run".into(),
                    priority: 0,
                    max_attempts: 1,
                    timeout_ms: 1000,
                    idempotency_key: None,
                    inputs: serde_json::json!({"argv": ["true"]}),
                    submitted_by: "bench".into(),
                    rerun_of: None,
                    slots: 1,
                })
                .expect("enqueue");
        }
        let stores: Vec<Store> = (0..workers)
            .map(|_| Store::open(&location).expect("open"))
            .collect();
        let started = Instant::now();
        let claimed: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(n, store)| {
                    scope.spawn(move || {
                        let worker = format!("bench-{n}");
                        let mut mine = 0;
                        let mut empty = 0;
                        while empty < 3 {
                            let claim = store
                                .claim_job(&Claim {
                                    worker: &worker,
                                    lease: Duration::from_secs(60),
                                    workers,
                                    concurrency: &|_| 2,
                                })
                                .expect("claim");
                            let Some(job) = claim.job else {
                                empty += 1;
                                std::thread::sleep(Duration::from_millis(2));
                                continue;
                            };
                            empty = 0;
                            mine += 1;
                            let done = AttemptEnd::Final {
                                state: JobState::Succeeded,
                                result: None,
                                failure: None,
                                cpu_ms: Some(0),
                            };
                            assert!(store.end_attempt(&job.id, job.attempt, &done).expect("end"));
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("worker")).sum()
        });
        let elapsed = started.elapsed();
        assert_eq!(claimed, jobs, "every job claimed exactly once");
        println!(
            "{workers} worker(s): {claimed} claims + ends in {:.2} s = {:.0} claims/s",
            elapsed.as_secs_f64(),
            claimed as f64 / elapsed.as_secs_f64()
        );
    }
}

//! The job service on many processes sharing one PostgreSQL store, as on many machines: two
//! API servers (`cordon serve --no-workers`) and three workers (`cordon worker`), 300 jobs
//! across four projects through both servers, a worker killed with SIGKILL mid-job, another
//! paused with SIGSTOP past its lease and resumed (its late writes refused), live logs and
//! cancels across processes. Limits are checked from the attempts the store recorded. Needs
//! the throw-away cluster of `scripts/test` (`CORDON_TEST_POSTGRES_URL`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_store::{JobId, JobState, Store, StoreLocation};
use cordon_test_support::TestDir;
use cordon_test_support::cordon_bin;
use cordon_test_support::postgres::Database;
use cordon_test_support::server::{Server, sleepers};
use serde_json::{Value, json};

const POLICY: &str = r#"
workers = 4

[projects."*"]
concurrency = 2
max_timeout = "60s"
max_attempts = 3
allow = [["sh", "*"]]
"#;

/// A `cordon worker` process; its standard error goes to a file the test can read.
struct Worker {
    child: Child,
    name: String,
    stderr: PathBuf,
}

impl Worker {
    fn start(dir: &Path, policy: &Path, store: &str, name: &str) -> Worker {
        let stderr = dir.join(format!("{name}.stderr"));
        let mut child = Command::new(cordon_bin())
            .args([
                "worker",
                "--slots",
                "2",
                "--lease",
                "3s",
                "--retry-backoff",
                "100ms",
            ])
            .args(["--name", name, "--config"])
            .arg(policy)
            .env("CORDON_HOME", dir.join(format!("home-{name}")))
            .env("CORDON_STORE", store)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("cordon worker starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            format!("cordon worker: {name} runs 2 slot(s)"),
            "{}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        );
        Worker {
            child,
            name: name.to_owned(),
            stderr,
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (at most `limit`) until `ready` gives a value.
fn wait_for<T>(what: &str, limit: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The most attempts of `timings` that overlap in time (attempts are half-open intervals).
fn max_overlap(intervals: &[(i64, i64)]) -> usize {
    let mut points: Vec<(i64, i32)> = intervals
        .iter()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    // Ends before starts at the same instant: a slot freed and taken again is not overlap.
    points.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in points {
        now += step;
        most = most.max(now);
    }
    most as usize
}

fn job_of(store: &Store, id: &str) -> cordon_store::JobRow {
    store
        .get_job(&id.parse::<JobId>().unwrap())
        .unwrap()
        .expect("the job exists")
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "test code: one scenario read top to bottom, a cluster's life step by step"
)]
fn serve_cluster_two_api_servers_three_workers_one_postgres() {
    let Some(database) = Database::create("cordon_cluster") else {
        return;
    };
    let dir = Arc::new(TestDir::new());
    let policy = dir.write("cordon-server.toml", POLICY);
    let api = |dir: &Arc<TestDir>| {
        Server::start_with(Arc::clone(dir), policy.clone(), |c| {
            c.arg("--no-workers").env("CORDON_STORE", &database.url);
        })
    };
    let servers = [api(&dir), api(&dir)];
    let mut workers: Vec<Worker> = ["w1", "w2", "w3"]
        .iter()
        .map(|name| Worker::start(dir.path(), &policy, &database.url, name))
        .collect();
    let store = Store::open(&StoreLocation::Postgres(database.url.clone())).unwrap();
    let projects = ["p0", "p1", "p2", "p3"];
    let tokens: BTreeMap<&str, String> = projects
        .iter()
        .map(|p| (*p, servers[0].token(p, "submit,read")))
        .collect();

    // Two long jobs to be victims: one of a worker killed, one of a worker paused.
    let submit = |server: &Server, project: &str, script: &str| -> String {
        let (status, job) = server.submit(
            &tokens[project],
            &json!({"project": project, "type": "run", "inputs": {"argv": ["sh", "-c", script]}}),
        );
        assert_eq!(status, 201, "{job}");
        job["id"].as_str().unwrap().to_owned()
    };
    let killed = submit(&servers[0], "p0", "echo started; sleep 3.0101; echo done");
    let paused = submit(&servers[1], "p1", "echo started; sleep 3.0202; echo done");

    // 300 short jobs, from 8 client threads, half through each API server.
    let ids: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|client| {
                let (servers, submit) = (&servers, &submit);
                scope.spawn(move || {
                    (0..300)
                        .filter(|n| n % 8 == client)
                        .map(|n| {
                            let project = projects[n % 4];
                            submit(
                                &servers[n % 2],
                                project,
                                &format!("echo job-{n}; sleep 0.05"),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(ids.len(), 300);

    // kill -9 of the worker running the first victim, mid-job.
    let running_on = |id: &str| {
        let job = job_of(&store, id);
        (job.state == JobState::Running)
            .then_some(job.worker)
            .flatten()
    };
    let victim = wait_for("the first victim to run", Duration::from_secs(120), || {
        running_on(&killed).filter(|_| sleepers("3.0101") > 0)
    });
    let at = workers.iter().position(|w| w.name == victim).unwrap();
    let mut dead = workers.remove(at);
    dead.signal("KILL");
    let _ = dead.child.wait();

    // SIGSTOP of the worker running the second victim, past its lease; then SIGCONT.
    let frozen = wait_for("the second victim to run", Duration::from_secs(120), || {
        running_on(&paused).filter(|w| *w != victim && sleepers("3.0202") > 0)
    });
    let stopped = workers.iter().find(|w| w.name == frozen).unwrap();
    stopped.signal("STOP");
    wait_for(
        "the paused worker's job to be taken by another",
        Duration::from_secs(60),
        || {
            let job = job_of(&store, &paused);
            (job.attempt >= 2 && job.worker.as_deref() != Some(frozen.as_str())).then_some(())
        },
    );
    stopped.signal("CONT");
    // The resumed worker learns that its lease is gone and ends its copy, writing nothing.
    wait_for(
        "the resumed worker to give its job up",
        Duration::from_secs(30),
        || {
            let said = stopped.stderr();
            (said.contains("the lease is lost")
                || said.contains("refuses its writes")
                || said.contains("lease was not renewed"))
            .then_some(())
        },
    );

    // Everything ends, each job exactly once.
    let all: Vec<String> = ids
        .iter()
        .cloned()
        .chain([killed.clone(), paused.clone()])
        .collect();
    // A worker records the final state, then appends the state and end events: wait for
    // both (reading the events the moment the state is final can come between the two).
    let has_ended = |id: &String| {
        let job = job_of(&store, id);
        job.state.is_final()
            && store
                .job_events(&job.id, 0, 100_000)
                .unwrap()
                .iter()
                .any(|e| e.kind == "end")
    };
    wait_for("every job to end", Duration::from_secs(600), || {
        all.iter().all(has_ended).then_some(())
    });
    for id in &all {
        let job = job_of(&store, id);
        assert_eq!(job.state, JobState::Succeeded, "{id}: {job:?}");
        let events = store.job_events(&job.id, 0, 100_000).unwrap();
        let ends = events.iter().filter(|e| e.kind == "end").count();
        assert_eq!(ends, 1, "{id}: one end event, not {ends}");
    }
    let timings = store.attempt_timings(0, 100_000).unwrap();
    // Every attempt that did not end by itself was on the killed or the paused worker; the
    // victims' first attempts were; each job ended by one attempt that succeeded.
    for t in timings.iter().filter(|t| t.outcome == "lost") {
        let worker = t.worker.as_deref().unwrap_or("");
        assert!(
            worker == victim || worker == frozen,
            "{} attempt {} lost on {worker}",
            t.job_id,
            t.attempt
        );
    }
    let attempts_of = |id: &str| -> Vec<(u32, String)> {
        let mut list: Vec<(u32, String)> = timings
            .iter()
            .filter(|t| t.job_id.as_str() == id)
            .map(|t| (t.attempt, t.outcome.clone()))
            .collect();
        list.sort();
        list
    };
    for id in [&killed, &paused] {
        let attempts = attempts_of(id);
        assert_eq!(
            attempts.first(),
            Some(&(1, "lost".to_owned())),
            "{attempts:?}"
        );
        assert_eq!(
            attempts.last().map(|a| a.1.as_str()),
            Some("succeeded"),
            "{attempts:?}"
        );
        assert_eq!(
            attempts.iter().filter(|a| a.1 == "succeeded").count(),
            1,
            "{attempts:?}"
        );
    }
    // The paused attempt's result was never recorded: its output after the pause ("done")
    // appears once, from the attempt that finished.
    let events = store
        .job_events(&paused.parse::<JobId>().unwrap(), 0, 1000)
        .unwrap();
    let done = events
        .iter()
        .filter(|e| e.kind == "output")
        .filter(|e| e.data["text"].as_str().unwrap_or("").contains("done"))
        .count();
    assert_eq!(done, 1, "{events:?}");

    // Limits held for the whole cluster: from the recorded start and end of every attempt.
    let interval =
        |t: &cordon_store::AttemptTiming| (t.started_at_ms, t.started_at_ms + t.duration_ms as i64);
    let everything: Vec<(i64, i64)> = timings.iter().map(interval).collect();
    let most = max_overlap(&everything);
    if most > 4 {
        let mut sorted: Vec<_> = timings
            .iter()
            .map(|t| {
                (
                    t.started_at_ms,
                    t.duration_ms,
                    &t.project,
                    &t.outcome,
                    &t.worker,
                    &t.job_id,
                    t.attempt,
                )
            })
            .collect();
        sorted.sort();
        for row in &sorted {
            eprintln!("{row:?}");
        }
    }
    assert!(most <= 4, "{most} jobs ran at once (at most 4)");
    for project in projects {
        let mine: Vec<(i64, i64)> = timings
            .iter()
            .filter(|t| t.project == project)
            .map(interval)
            .collect();
        let most = max_overlap(&mine);
        assert!(most <= 2, "{project}: {most} jobs ran at once");
    }
    let workers_used: std::collections::BTreeSet<_> =
        timings.iter().filter_map(|t| t.worker.clone()).collect();
    assert!(
        workers_used.len() >= 3,
        "jobs spread over the workers: {workers_used:?}"
    );

    // Live logs through either API server, resumable on the other.
    let token = &tokens["p0"];
    let from_a = servers[0].events(token, &killed, None);
    let from_b = servers[1].events(token, &killed, None);
    assert_eq!(from_a, from_b);
    let middle = from_a[from_a.len() / 2].0;
    let rest = servers[1].events(token, &killed, Some(middle));
    assert_eq!(rest.as_slice(), &from_a[from_a.len() / 2 + 1..]);

    // A cancel through one API server reaches the worker running the job.
    let long = submit(&servers[0], "p3", "echo started; sleep 30.0303");
    wait_for("the long job to run", Duration::from_secs(60), || {
        (running_on(&long).is_some() && sleepers("30.0303") > 0).then_some(())
    });
    let asked = Instant::now();
    let (status, _) = servers[1].json(
        "POST",
        &format!("/v1/jobs/{long}/cancel"),
        &tokens["p3"],
        &Value::Null,
    );
    assert_eq!(status, 200);
    wait_for(
        "the cancelled job's tree to die",
        Duration::from_secs(10),
        || {
            (sleepers("30.0303") == 0 && job_of(&store, &long).state == JobState::Cancelled)
                .then_some(())
        },
    );
    let took = asked.elapsed();
    eprintln!("cancel reached the worker and its job ended in {took:?}");
    assert!(took < Duration::from_secs(5), "the cancel took {took:?}");
    drop(workers);
}

//! `cordon serve` end to end: a real server on a loopback ephemeral port (its ready line is
//! the synchronisation point), a real SQLite store in a temp home, jobs in the real sandbox,
//! real git repositories; the live log (SSE) is how tests wait for jobs.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};

use cordon_test_support::cordon_bin;
use cordon_test_support::git;
use cordon_test_support::server::{Server, outputs, run_job, sleepers};
use serde_json::{Value, json};

const POLICY: &str = r#"
workers = 3

[projects.a]
concurrency = 1
max_timeout = "60s"
max_attempts = 3
allow = [["sh", "*"], ["cat", "*"], ["git", "clone", "*"]]
deny = [{ argv = ["sh", "-c", "rm -rf /"], reason = "never" }]
secrets = ["SERVE_TEST_SECRET"]

[projects.b]
concurrency = 2
job_types = ["run"]
allow = [["sh", "*"]]

[projects.tight]
max_timeout = "10s"
max_attempts = 2
daily_budget = { wall = "1s" }
allow = [["sh", "*"]]
"#;

#[test]
fn serve_runs_a_job_in_the_sandbox_with_live_redacted_logs() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "secrets": ["SERVE_TEST_SECRET"],
                "inputs": {"argv": ["sh", "-c", "echo hello; echo \"s=$SERVE_TEST_SECRET\" >&2; test ! -e /etc/shadow-not-here"]}}),
    );
    assert_eq!(status, 201, "{job}");
    assert_eq!(job["schema"], "cordon.job/v1");
    assert_eq!(job["state"], "queued");
    assert_eq!(job["inputs"]["secrets"], json!(["SERVE_TEST_SECRET"]));
    let id = job["id"].as_str().unwrap();
    let events = server.events(&token, id, None);
    let kinds: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"state"));
    assert_eq!(kinds.last(), Some(&"end"));
    let seqs: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "ids in order"
    );
    let text = outputs(&events);
    assert!(text.contains("hello\n"), "{text}");
    assert!(!text.contains("hunter2"), "the secret is redacted: {text}");
    let job = server.job(&token, id);
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempt"], 1);
    assert_eq!(job["result"]["schema"], "cordon.run-result/v1");
    assert_eq!(job["result"]["sandbox"]["enabled"], true, "{job}");
    assert!(!job.to_string().contains("hunter2"));
    let (status, _, transcript) = server.request(
        "GET",
        &format!("/v1/jobs/{id}/transcript"),
        Some(&token),
        &[],
        b"",
    );
    assert_eq!(status, 200);
    let transcript = String::from_utf8(transcript).unwrap();
    assert!(
        transcript.contains("hello") && !transcript.contains("hunter2"),
        "{transcript}"
    );
    // The listing and the metrics see it.
    let (status, list) = server.json("GET", "/v1/jobs?state=succeeded", &token, &Value::Null);
    assert_eq!(status, 200);
    assert_eq!(list["schema"], "cordon.job-list/v1");
    assert_eq!(list["jobs"][0]["id"], id);
    let operator = server.token("*", "admin");
    let (status, _, metrics) = server.request("GET", "/metrics", Some(&operator), &[], b"");
    assert_eq!(status, 200);
    assert!(
        String::from_utf8(metrics)
            .unwrap()
            .contains("cordon_jobs{state=\"succeeded\"} 1")
    );
}

#[test]
fn serve_refuses_bad_tokens_and_hides_other_projects_jobs() {
    let server = Server::start(POLICY);
    let a = server.token("a", "submit,read");
    let b = server.token("b", "submit,read");
    let read_only = server.token("a", "read");
    let body = run_job("a", "true").to_string();
    for auth in [None, Some("cdn_nope"), Some("")] {
        let (status, _, answer) = server.request("POST", "/v1/jobs", auth, &[], body.as_bytes());
        assert_eq!(status, 401, "{}", String::from_utf8_lossy(&answer));
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["schema"], "cordon.api-error/v1");
    }
    let (status, answer) = server.submit(&read_only, &run_job("a", "true"));
    assert_eq!((status, answer["error"].as_str()), (403, Some("forbidden")));
    let (status, answer) = server.submit(&b, &run_job("a", "true"));
    assert_eq!(
        (status, answer["rule"].as_str()),
        (403, Some("token.project"))
    );
    let job = server.run_to_end(&a, &run_job("a", "true"));
    let id = job["id"].as_str().unwrap();
    for path in [
        format!("/v1/jobs/{id}"),
        format!("/v1/jobs/{id}/events"),
        format!("/v1/jobs/{id}/transcript"),
    ] {
        let (status, _, _) = server.request("GET", &path, Some(&b), &[], b"");
        assert_eq!(status, 404, "{path}: another project's job is not found");
    }
    let (status, _, _) =
        server.request("POST", &format!("/v1/jobs/{id}/cancel"), Some(&b), &[], b"");
    assert_eq!(status, 404);
    let (status, list) = server.json("GET", "/v1/jobs?project=a", &b, &Value::Null);
    assert_eq!((status, list["jobs"].as_array().unwrap().len()), (200, 0));
    // A revoked token stops working.
    let listed = Command::new(cordon_bin())
        .args(["token", "list"])
        .env("CORDON_HOME", &server.home)
        .output()
        .unwrap();
    let listing = String::from_utf8(listed.stdout).unwrap();
    assert!(
        !listing.contains("cdn_"),
        "secrets are never listed: {listing}"
    );
    let b_id = listing
        .lines()
        .find(|l| l.contains("\tb\t"))
        .and_then(|l| l.split('\t').next())
        .unwrap();
    let revoke = Command::new(cordon_bin())
        .args(["token", "revoke", b_id])
        .env("CORDON_HOME", &server.home)
        .status()
        .unwrap();
    assert!(revoke.success());
    let (status, _, _) = server.request("GET", "/v1/jobs", Some(&b), &[], b"");
    assert_eq!(status, 401);
}

#[test]
fn serve_answers_malformed_and_oversized_requests_with_400_and_413() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let cases: [(&[u8], &str); 5] = [
        (b"{not json", "invalid job request"),
        (
            br#"{"project":"a","type":"run","inputs":{"argv":["sh"]},"colour":1}"#,
            "colour",
        ),
        (br#"{"type":"run","inputs":{}}"#, "project"),
        (br#"{"project":"a","type":"rm","inputs":{}}"#, "rm"),
        (
            br#"{"project":"a","type":"run","inputs":{"argv":["sh"],"cwd":"/"}}"#,
            "cwd",
        ),
    ];
    for (body, field) in cases {
        let (status, _, answer) = server.request("POST", "/v1/jobs", Some(&token), &[], body);
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"], "bad_request");
        assert!(
            answer["message"].as_str().unwrap().contains(field),
            "{answer}"
        );
    }
    let huge = vec![b'x'; 5 * 1024 * 1024];
    let (status, _, body) = server.request("POST", "/v1/jobs", Some(&token), &[], &huge);
    assert_eq!(status, 413);
    // The error document, as for every other refusal.
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (answer["schema"].as_str(), answer["error"].as_str()),
        (Some("cordon.api-error/v1"), Some("too_large")),
        "{answer}"
    );
    let (status, _, _) = server.request("GET", "/v1/jobs/j-nothere234", Some(&token), &[], b"");
    assert_eq!(status, 404);
    let (status, _, _) = server.request("GET", "/v1/jobs?limit=x", Some(&token), &[], b"");
    assert_eq!(status, 400);
    // The server is still fine.
    let (status, _, body) = server.request("GET", "/healthz", None, &[], b"");
    assert_eq!((status, body.as_slice()), (200, b"ok\n".as_slice()));
}

#[test]
fn serve_refuses_what_policy_does_not_allow_with_the_rule() {
    let server = Server::start(POLICY);
    let a = server.token("a", "submit,read");
    let b = server.token("b", "submit,read");
    let cases = [
        (&a, run_job("a", "rm -rf /"), "projects.a.deny[0]"),
        (
            &a,
            json!({"project": "a", "type": "run", "inputs": {"argv": ["python3", "-c", "1"]}}),
            "projects.a.allow",
        ),
        (
            &b,
            json!({"project": "b", "type": "repo.clone", "inputs": {"url": "/tmp"}}),
            "projects.b.job_types",
        ),
        (
            &a,
            json!({"project": "a", "type": "run", "timeout": "2h", "inputs": {"argv": ["sh"]}}),
            "projects.a.max_timeout",
        ),
        (
            &a,
            json!({"project": "a", "type": "run", "secrets": ["HOME"], "inputs": {"argv": ["sh"]}}),
            "projects.a.secrets",
        ),
        (
            &a,
            json!({"project": "a", "type": "run", "env_keys": ["PATH"], "inputs": {"argv": ["sh"]}}),
            "projects.a.env_keys",
        ),
    ];
    for (token, body, rule) in cases {
        let (status, answer) = server.submit(token, &body);
        assert_eq!(status, 403, "{body}: {answer}");
        assert_eq!(answer["error"], "policy");
        assert_eq!(answer["rule"], rule, "{answer}");
    }
    let (_, list) = server.json("GET", "/v1/jobs", &a, &Value::Null);
    assert_eq!(list["jobs"], json!([]), "nothing refused was queued");
}

#[test]
fn serve_duplicate_idempotency_keys_racing_make_one_job() {
    let server = Arc::new(Server::start(POLICY));
    let token = Arc::new(server.token("a", "submit,read"));
    let barrier = Arc::new(Barrier::new(8));
    let answers: Vec<(u16, Value)> = (0..8)
        .map(|_| {
            let (server, token, barrier) = (
                Arc::clone(&server),
                Arc::clone(&token),
                Arc::clone(&barrier),
            );
            std::thread::spawn(move || {
                let mut body = run_job("a", "echo once");
                body["idempotency_key"] = json!("k-1");
                barrier.wait();
                server.submit(&token, &body)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(created, 1, "{answers:?}");
    assert!(answers.iter().all(|(s, _)| *s == 201 || *s == 200));
    let id = answers[0].1["id"].as_str().unwrap().to_owned();
    assert!(answers.iter().all(|(_, j)| j["id"] == id.as_str()));
    let events = server.events(&token, &id, None);
    assert_eq!(outputs(&events), "once\n", "it ran once");
    let (_, list) = server.json("GET", "/v1/jobs", &token, &Value::Null);
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
}

#[test]
fn serve_refuses_an_idempotency_key_reused_for_a_different_request_with_409() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let mut body = run_job("a", "echo first");
    body["idempotency_key"] = json!("k-2");
    let (status, first) = server.submit(&token, &body);
    assert_eq!(status, 201, "{first}");
    // Different inputs, a different type, or malformed inputs under the same key: refused,
    // and the answer names the job the key holds instead of passing it off as this one's.
    let mut other = run_job("a", "echo second");
    other["idempotency_key"] = json!("k-2");
    let malformed = json!({"project": "a", "type": "session.pull", "idempotency_key": "k-2",
                           "inputs": {"session": "not an object"}});
    for request in [other, malformed] {
        let (status, answer) = server.submit(&token, &request);
        assert_eq!(status, 409, "{answer}");
        assert_eq!(answer["error"], "conflict");
        assert_eq!(
            answer["job"], first["id"],
            "the answer names the job: {answer}"
        );
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .contains(first["id"].as_str().unwrap()),
            "{answer}"
        );
    }
    // The same request again still gets its job back.
    let (status, again) = server.submit(&token, &body);
    assert_eq!((status, &again["id"]), (200, &first["id"]));
    let (_, list) = server.json("GET", "/v1/jobs", &token, &Value::Null);
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1, "{list}");
}

#[test]
fn serve_kills_a_job_past_its_timeout_keeps_partial_logs_and_retries_it() {
    let server = Server::start(POLICY);
    let token = server.token("tight", "submit,read");
    let mut body = run_job("tight", "echo partial; sleep 30");
    body["timeout"] = json!("300ms");
    let job = server.run_to_end(&token, &body);
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["failure"]["category"], "timeout");
    assert_eq!(job["attempt"], 2, "retried once (max_attempts = 2)");
    assert_eq!(job["result"]["status"], "timeout");
    let events = server.events(&token, job["id"].as_str().unwrap(), None);
    assert_eq!(
        outputs(&events),
        "partial\npartial\n",
        "both attempts' logs kept"
    );
    let retries = events
        .iter()
        .filter(|e| e.1 == "state" && e.2["retry"] == true)
        .count();
    assert_eq!(retries, 1);
}

#[test]
fn serve_refuses_a_project_over_its_daily_budget_with_429() {
    let server = Server::start(POLICY);
    let token = server.token("tight", "submit,read");
    let mut body = run_job("tight", "sleep 1.2");
    body["idempotency_key"] = json!("nightly");
    let job = server.run_to_end(&token, &body);
    assert_eq!(job["state"], "succeeded", "{job}");
    // A retried submission still gets its job back.
    let (status, again) = server.submit(&token, &body);
    assert_eq!((status, &again["id"]), (200, &job["id"]));
    let (status, answer) = server.submit(&token, &run_job("tight", "true"));
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"], "budget");
    assert!(
        answer["resets_at"]
            .as_str()
            .unwrap()
            .ends_with("T00:00:00Z"),
        "{answer}"
    );
}

#[test]
fn serve_bounds_the_live_logs_a_token_holds_open() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let other = server.token("a", "read");
    let (_, job) = server.submit(&token, &run_job("a", "echo started; sleep 60"));
    let id = job["id"].as_str().unwrap().to_owned();
    // 32 open at once are fine; the 33rd is refused with 429 while they stay open.
    let mut held: Vec<_> = (0..32)
        .map(|i| {
            let (status, stream) = server.open_events(&token, &id);
            assert_eq!(status, 200, "stream {i}");
            stream
        })
        .collect();
    let (status, _, body) = server.request(
        "GET",
        &format!("/v1/jobs/{id}/events"),
        Some(&token),
        &[],
        b"",
    );
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, answer["error"].as_str()),
        (429, Some("busy")),
        "{answer}"
    );
    // Another token is not held back by this one's streams.
    let (status, _) = server.open_events(&other, &id);
    assert_eq!(status, 200);
    // When the streams end (the job ends), their places come back.
    let (status, _) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200);
    for stream in &mut held {
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(String::from_utf8_lossy(&rest).contains("event: end"));
    }
    drop(held);
    let events = server.events(&token, &id, None);
    assert_eq!(events.last().unwrap().1, "end");
}

#[test]
fn serve_cancels_running_and_queued_jobs() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let (_, running) = server.submit(&token, &run_job("a", "echo started; sleep 60"));
    let running = running["id"].as_str().unwrap().to_owned();
    // Project a runs one job at a time: this one waits.
    let (_, queued) = server.submit(&token, &run_job("a", "echo never"));
    let queued = queued["id"].as_str().unwrap().to_owned();
    let (status, after) = server.json(
        "POST",
        &format!("/v1/jobs/{queued}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!((status, after["state"].as_str()), (200, Some("cancelled")));
    server.wait_for_output(&token, &running);
    let t0 = std::time::Instant::now();
    let (status, _) = server.json(
        "POST",
        &format!("/v1/jobs/{running}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200);
    let events = server.events(&token, &running, None);
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    let job = server.job(&token, &running);
    assert_eq!(job["state"], "cancelled", "{job}");
    assert_eq!(job["attempt"], 1, "a cancel is not retried");
    assert_eq!(job["result"]["status"], "cancelled");
    assert_eq!(outputs(&events), "started\n");
    assert_eq!(
        server.job(&token, &queued)["attempt"],
        0,
        "the queued job never ran"
    );
}

#[test]
fn serve_live_log_resumes_after_last_event_id_and_survives_disconnects() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(&token, &run_job("a", "echo one; echo two"));
    let id = job["id"].as_str().unwrap();
    let all = server.events(&token, id, None);
    let resumed = server.events(&token, id, Some(2));
    assert_eq!(resumed.as_slice(), &all[2..], "no loss, no duplicates");
    // Clients that go away mid-stream do not disturb the server.
    for _ in 0..5 {
        let mut n = 0;
        server.follow(&token, id, None, |_| {
            n += 1;
            n < 2
        });
    }
    let (_, long) = server.submit(&token, &run_job("a", "echo x; sleep 1; echo y"));
    let long = long["id"].as_str().unwrap().to_owned();
    server.follow(&token, &long, None, |e| e.1 != "output");
    let events = server.events(&token, &long, None);
    assert_eq!(outputs(&events), "x\ny\n");
    assert_eq!(server.job(&token, &long)["state"], "succeeded");
}

#[test]
fn serve_recovers_jobs_after_sigkill_without_losing_or_doubling_them() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let (_, job) = server.submit(&token, &run_job("a", "echo attempt; sleep 2.0173"));
    let id = job["id"].as_str().unwrap().to_owned();
    let (_, waiting) = server.submit(&token, &run_job("a", "echo queued-one"));
    let waiting = waiting["id"].as_str().unwrap().to_owned();
    server.follow(&token, &id, None, |e| e.1 != "output");
    assert!(sleepers("2.0173") > 0, "the job's program runs");
    let mut server = server;
    server.kill9();
    // The dead server's sandboxed process tree dies with it.
    cordon_test_support::wait_until(
        "the killed server's job tree dies",
        std::time::Duration::from_secs(5),
        || sleepers("2.0173") == 0,
    );
    let server = server.restart();
    let events = server.events(&token, &id, None);
    let job = server.job(&token, &id);
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempt"], 2, "interrupted once, requeued, ran again");
    assert_eq!(outputs(&events), "attempt\nattempt\n");
    let events = server.events(&token, &waiting, None);
    assert_eq!(outputs(&events), "queued-one\n", "the queued job ran once");
    assert_eq!(server.job(&token, &waiting)["attempt"], 1);
    // Each worker's scratch directories are under scratch/<worker name>/.
    let scratch = server.home.join("serve/scratch");
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|worker| {
            std::fs::read_dir(worker.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "scratch directories left: {left:?}");
}

#[test]
fn serve_keeps_global_and_per_project_limits() {
    let server = Server::start(POLICY);
    let a = server.token("a", "submit,read");
    let b = server.token("b", "submit,read");
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push((
            &a,
            server
                .submit(&a, &run_job("a", &format!("echo a{i}; sleep 0.3")))
                .1,
        ));
        ids.push((
            &b,
            server
                .submit(&b, &run_job("b", &format!("echo b{i}; sleep 0.3")))
                .1,
        ));
    }
    let mut spans: Vec<(String, u64, u64)> = Vec::new();
    for (token, job) in ids {
        let id = job["id"].as_str().unwrap();
        server.events(token, id, None);
        let job = server.job(token, id);
        assert_eq!(job["state"], "succeeded", "{job}");
        let ms = |k: &str| {
            humantime::parse_rfc3339(job[k].as_str().unwrap())
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        };
        spans.push((
            job["project"].as_str().unwrap().into(),
            ms("started_at"),
            ms("finished_at"),
        ));
    }
    let overlap = |filter: &dyn Fn(&str) -> bool| {
        spans
            .iter()
            .filter(|s| filter(&s.0))
            .map(|s| {
                spans
                    .iter()
                    .filter(|o| filter(&o.0) && o.1 <= s.1 && s.1 < o.2)
                    .count()
            })
            .max()
            .unwrap()
    };
    assert_eq!(
        overlap(&|p| p == "a"),
        1,
        "project a: concurrency 1: {spans:?}"
    );
    assert!(
        overlap(&|p| p == "b") <= 2,
        "project b: concurrency 2: {spans:?}"
    );
    assert!(overlap(&|_| true) <= 3, "workers = 3: {spans:?}");
}

fn repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "hello from the repo\n").unwrap();
    std::fs::write(
        repo.join("cordon.toml"),
        "[[stage]]\nname = \"check\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"cat README\"]\n",
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "init"]);
    repo
}

#[test]
fn serve_chains_clone_then_run_then_verify_on_a_real_repository() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.clone", "inputs": {"url": src.display().to_string(), "ref": "main"}}),
    );
    assert_eq!(clone["state"], "succeeded", "{clone}");
    let head = git(&src, &["rev-parse", "HEAD"]);
    assert_eq!(clone["result"]["commit"], head.trim());
    let from = json!({"from_job": clone["id"]});
    let ran = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["cat", "README"], "workspace": from}}),
    );
    assert_eq!(ran["state"], "succeeded", "{ran}");
    assert_eq!(ran["result"]["stdout"]["head"], "hello from the repo\n");
    let verified = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": {"workspace": from}}),
    );
    assert_eq!(verified["state"], "succeeded", "{verified}");
    assert_eq!(verified["result"]["schema"], "cordon.run-report/v1");
    assert_eq!(verified["result"]["overall"], "pass");
    // A patch that breaks the stage: the gate blocks, the job fails with the stage's category.
    let patch = "--- a/README\n+++ /dev/null\n@@ -1 +0,0 @@\n-hello from the repo\n";
    let failed = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": {"workspace": from, "patch": patch}}),
    );
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["attempt"], 1, "a test failure is not retried");
    assert_eq!(failed["failure"]["category"], "test", "{failed}");
    // A verify whose plan holds a disallowed command is refused before anything runs.
    let b = server.token("b", "submit,read");
    let (status, _) = server.submit(
        &b,
        &json!({"project": "b", "type": "verify", "inputs": {"workspace": from}}),
    );
    assert_eq!(status, 403, "project b may not verify");
}

#[test]
fn serve_openapi_document_is_the_committed_one() {
    let server = Server::start(POLICY);
    let (status, _, body) = server.request("GET", "/openapi.json", None, &[], b"");
    assert_eq!(status, 200);
    let committed =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/openapi.json"))
            .unwrap();
    assert!(
        body == committed,
        "schema/openapi.json is stale; run UPDATE_SCHEMAS=1 cargo test --workspace schema"
    );
}

#[test]
fn serve_clone_apply_verify_is_three_small_jobs() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.clone", "inputs": {"url": src.display().to_string()}}),
    );
    assert_eq!(clone["state"], "succeeded", "{clone}");
    let from = json!({"from_job": clone["id"]});
    let patch = "--- a/README\n+++ b/README\n@@ -1 +1,2 @@\n hello from the repo\n+patched\n\
                 --- /dev/null\n+++ b/NEW\n@@ -0,0 +1 @@\n+new file\n";
    // The wrong expectation: refused, nothing applied.
    let wrong = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch",
                "inputs": {"workspace": from, "patch": patch, "expect_files": ["README"]}}),
    );
    assert_eq!(wrong["state"], "failed", "{wrong}");
    assert_eq!(wrong["failure"]["category"], "usage");
    let escape = "--- /dev/null\n+++ b/../outside\n@@ -0,0 +1 @@\n+x\n";
    let escaped = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch", "inputs": {"workspace": from, "patch": escape}}),
    );
    assert_eq!(escaped["state"], "failed", "{escaped}");
    let applied = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch",
                "inputs": {"workspace": from, "patch": patch, "expect_files": ["NEW", "README"]}}),
    );
    assert_eq!(applied["state"], "succeeded", "{applied}");
    let result = &applied["result"];
    assert_eq!(result["applied_files"], json!(["NEW", "README"]));
    assert_eq!(
        result["diff"],
        json!({"files": 2, "insertions": 2, "deletions": 0})
    );
    assert_eq!(result["patch_id"].as_str().unwrap().len(), 32);
    assert_ne!(result["commit"], clone["result"]["commit"]);
    let verified = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": {"workspace": {"from_job": applied["id"]}}}),
    );
    assert_eq!(verified["state"], "succeeded", "{verified}");
    let stage = &verified["result"]["stages"][0];
    assert!(
        stage["stdout"]["head"]
            .as_str()
            .unwrap()
            .contains("patched"),
        "the verify saw the applied patch: {stage}"
    );
}

#[test]
fn serve_stops_on_sigterm_and_requeues_what_was_running() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let (_, job) = server.submit(&token, &run_job("a", "echo go; sleep 30"));
    let id = job["id"].as_str().unwrap().to_owned();
    server.follow(&token, &id, None, |e| e.1 != "output");
    let mut server = server;
    let t0 = std::time::Instant::now();
    cordon_test_support::signal(server.child.id() as i32, libc::SIGTERM);
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(10),
        "it did not wait for the job"
    );
    let server = server.restart();
    let job = server.job(&token, &id);
    assert_eq!(job["failure"]["category"], "infra", "{job}");
    // Requeued by the stop, and claimed again by the new server.
    server.follow(&token, &id, None, |e| {
        !(e.1 == "state" && e.2["state"] == "running" && e.2["attempt"] == 2)
    });
    assert_eq!(server.job(&token, &id)["attempt"], 2);
    let (status, after) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200, "{after}");
    server.events(&token, &id, None);
    assert_eq!(server.job(&token, &id)["state"], "cancelled");
}

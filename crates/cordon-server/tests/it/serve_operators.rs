//! What an operator of `cordon serve` relies on: readiness while the store is down (a
//! PostgreSQL store cut off through a relay, the cluster the other tests share left running),
//! the cause of an outage logged once, durations from the worker's own clock; failures that
//! another attempt cannot fix end the job at once, with their real cause.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_test_support::postgres::Database;
use cordon_test_support::postgres_relay::Relay;
use cordon_test_support::server::Server;
use cordon_test_support::{TestDir, repo_with};
use serde_json::{Value, json};

const POLICY: &str = r#"
workers = 2

[projects.a]
max_timeout = "60s"
max_attempts = 3
allow = [["sh", "*"], ["true"], ["git", "*"]]
"#;

/// Milliseconds since the epoch of an RFC 3339 time of a job document.
fn ms(time: &Value) -> i64 {
    let at = humantime::parse_rfc3339(time.as_str().expect("a time")).expect("RFC 3339");
    at.duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Waits until `check` holds (up to 30 s).
fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn readyz_is_503_while_postgresql_is_down_and_a_job_that_ended_meanwhile_keeps_its_duration() {
    let Some(database) = Database::create("cordon_serve_ready") else {
        return;
    };
    let dir = Arc::new(TestDir::new());
    let relay_dir = dir.path().join("pg");
    std::fs::create_dir(&relay_dir).unwrap();
    let relay = Relay::start(&database.url, &relay_dir);
    let policy = dir.write("cordon-server.toml", POLICY);
    let log = dir.path().join("serve.stderr");
    let server = Server::start_with(Arc::clone(&dir), policy, |c| {
        c.env("CORDON_STORE", &relay.url)
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
    });
    let token = server.token("a", "submit,read");
    let get = |path: &str| server.request("GET", path, None, &[], b"");
    assert_eq!(get("/readyz").0, 200);
    assert_eq!(get("/healthz").0, 200);

    // A 2 s job; the store is cut off while it runs and mended 4 s after it ended.
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo go; sleep 2"]}}),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    server.wait_for_output(&token, &id);
    relay.cut();
    let cut_at = Instant::now();

    // Liveness stays up, readiness goes down, the API says the store is unavailable.
    let (status, _, body) = get("/readyz");
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    assert_eq!(get("/healthz").0, 200);
    let (status, headers, body) =
        server.request("GET", &format!("/v1/jobs/{id}"), Some(&token), &[], b"");
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, answer["error"].as_str()),
        (503, Some("unavailable")),
        "{answer}"
    );
    assert!(
        headers.to_ascii_lowercase().contains("retry-after: 1"),
        "{headers}"
    );
    for _ in 0..5 {
        assert_eq!(get("/readyz").0, 503);
    }
    std::thread::sleep(Duration::from_secs(6).saturating_sub(cut_at.elapsed()));
    relay.mend();
    until("readiness", || get("/readyz").0 == 200);

    until("the job's end", || {
        let (status, job) = server.json("GET", &format!("/v1/jobs/{id}"), &token, &Value::Null);
        status == 200 && job["state"] == "succeeded"
    });
    let job = server.job(&token, &id);
    let took = ms(&job["finished_at"]) - ms(&job["started_at"]);
    assert!(
        (1900..4000).contains(&took),
        "the 2 s job took {took} ms by its record: {job}"
    );

    // One line for the outage, with its cause, and one when it is over.
    let text = std::fs::read_to_string(&log).unwrap();
    let down: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("the store does not answer"))
        .collect();
    assert_eq!(down.len(), 1, "{text}");
    assert!(text.contains("caused by:"), "{text}");
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("the store answers again"))
            .count(),
        1,
        "{text}"
    );
    drop(server);
    drop(relay);
    drop(database);
}

/// The job's attempts as its `state` events tell them: (attempt, failure category).
fn failed_attempts(server: &Server, token: &str, id: &str) -> Vec<(u64, String)> {
    server
        .events(token, id, None)
        .into_iter()
        .filter(|(_, kind, data)| kind == "state" && !data["failure"].is_null())
        .map(|(_, _, data)| {
            (
                data["attempt"].as_u64().unwrap(),
                data["failure"]["category"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_refused_patch_fails_once_with_its_real_cause() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo_with(
        server.dir.path(),
        &[
            ("calc/__init__.py", "def add(a, b):\n    return a + b\n"),
            (
                "cordon.toml",
                "[[stage]]\nname = \"check\"\ncategory = \"test\"\nrun = [\"true\"]\n",
            ),
        ],
    );
    // Made against other content: the first line differs.
    let patch = "--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,2 +1,2 @@\n\
                 -def add(x, y):\n-    return x + y\n+def add(a, b):\n+    return b + a\n";
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": {
            "repo": src.display().to_string(), "patch": patch}}),
    );
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["attempt"], 1, "not retried: {job}");
    assert_eq!(job["failure"]["category"], "usage", "{job}");
    let reason = job["failure"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the patch was refused: "), "{reason}");
    assert!(
        reason.contains("calc/__init__.py"),
        "the cause is lost: {reason}"
    );
    let id = job["id"].as_str().unwrap();
    assert_eq!(
        failed_attempts(&server, &token, id),
        [(1, "usage".to_owned())]
    );
}

#[test]
fn an_argument_list_too_long_for_the_kernel_fails_once() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    // One argument past the kernel's 128 KiB for a single string.
    let long = "x".repeat(200 * 1024);
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "true", long]}}),
    );
    let failure = &job["failure"];
    assert_eq!(job["state"], "failed", "{failure}");
    assert_eq!(job["attempt"], 1, "not retried: {failure}");
    assert_eq!(failure["category"], "usage", "{failure}");
    let reason = job["failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("Argument list too long"), "{reason}");
}

//! What an operator of `cordon serve` relies on: readiness while the store is down (a
//! PostgreSQL store cut off through a relay, the cluster the other tests share left running),
//! the cause of an outage logged once, durations from the worker's own clock; failures that
//! another attempt cannot fix end the job at once, with their real cause.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_test_support::postgres::Database;
use cordon_test_support::postgres_relay::Relay;
use cordon_test_support::server::Server;
use cordon_test_support::{TestDir, cordon_bin, repo_with};
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

#[test]
fn a_job_whose_server_was_killed_keeps_both_attempts_with_their_own_logs() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo hello; sleep 2"]}}),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    server.wait_for_output(&token, &id);
    let mut server = server;
    server.kill9();
    // The restarted server takes back what its worker left running: attempt 2.
    let server = server.restart();
    let events = server.events(&token, &id, None);
    let job = server.job(&token, &id);
    assert_eq!(
        (job["state"].as_str(), job["attempt"].as_u64()),
        (Some("succeeded"), Some(2))
    );

    // The live log says which attempt wrote each output.
    let outputs: Vec<(u64, &str)> = events
        .iter()
        .filter(|(_, kind, _)| kind == "output")
        .map(|(_, _, data)| {
            (
                data["attempt"].as_u64().unwrap(),
                data["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(outputs, [(1, "hello\n"), (2, "hello\n")], "{events:?}");

    let (status, list) = server.json(
        "GET",
        &format!("/v1/jobs/{id}/attempts"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["schema"], "cordon.attempt-list/v1");
    let attempts = list["attempts"].as_array().unwrap();
    let summary: Vec<(u64, &str)> = attempts
        .iter()
        .map(|a| {
            (
                a["attempt"].as_u64().unwrap(),
                a["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, [(1, "lost"), (2, "succeeded")], "{list}");
    for attempt in attempts {
        assert!(attempt["worker"].is_string(), "{attempt}");
        assert!(attempt["finished_at"].is_string(), "{attempt}");
    }
    // The second attempt started after the first ended, and ran its 2 s.
    assert!(
        ms(&attempts[1]["started_at"]) >= ms(&attempts[0]["finished_at"]),
        "{list}"
    );
    assert!(
        attempts[1]["duration_ms"].as_u64().unwrap() >= 2000,
        "{list}"
    );

    // Each attempt's own log; the job's transcript holds both.
    let text = |query: &str| {
        let (status, _, body) = server.request(
            "GET",
            &format!("/v1/jobs/{id}/transcript{query}"),
            Some(&token),
            &[],
            b"",
        );
        (status, String::from_utf8(body).unwrap())
    };
    assert_eq!(text("?attempt=1"), (200, "hello\n".to_owned()));
    assert_eq!(text("?attempt=2"), (200, "hello\n".to_owned()));
    assert_eq!(text(""), (200, "hello\nhello\n".to_owned()));
    assert_eq!(text("?attempt=3").0, 404);

    // The job's page lists both attempts, each with its own log.
    let cookie = login(&server, &token);
    let (status, html) = page(&server, &cookie, &format!("/jobs/{id}"));
    assert_eq!(status, 200);
    assert!(
        html.contains("data-attempt=\"1\"") && html.contains("data-attempt=\"2\""),
        "{html}"
    );
    // Each attempt's timeline: the second's open, the first's (interrupted by the kill)
    // folded below it.
    assert!(
        html.contains("aria-label=\"Stages of attempt 2\"")
            && html.contains("<details class=\"earlier-attempt\" data-attempt=\"1\">")
            && html.contains("aria-label=\"Stages of attempt 1\""),
        "{html}"
    );
    let (status, log) = page(&server, &cookie, &format!("/jobs/{id}/download/log-1.txt"));
    assert_eq!((status, log.as_str()), (200, "hello\n"));
}

/// A `cordon worker` on the server's store (its home's SQLite file), one slot.
fn start_worker(server: &Server, name: &str, lease: &str) -> Child {
    let mut child = Command::new(cordon_bin())
        .args([
            "worker", "--slots", "1", "--lease", lease, "--name", name, "--config",
        ])
        .arg(&server.policy)
        .env("CORDON_HOME", &server.home)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cordon worker starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), format!("cordon worker: {name} runs 1 slot(s)"));
    child
}

/// The workers as `GET /v1/workers` lists them: (name, state, running jobs).
fn workers(server: &Server, token: &str) -> Vec<(String, String, Vec<String>)> {
    let (status, list) = server.json("GET", "/v1/workers", token, &Value::Null);
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["schema"], "cordon.worker-list/v1");
    list["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["slots"], 1, "{w}");
            assert!(
                w["heartbeat_at"].is_string() && w["version"].is_string(),
                "{w}"
            );
            (
                w["name"].as_str().unwrap().to_owned(),
                w["state"].as_str().unwrap().to_owned(),
                serde_json::from_value(w["running"].clone()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn workers_are_listed_drain_on_request_and_a_killed_one_is_shown_lost() {
    let dir = Arc::new(TestDir::new());
    let policy = dir.write("cordon-server.toml", POLICY);
    let server = Server::start_with(dir, policy, |c| {
        c.arg("--no-workers");
    });
    let operator = server.token("*", "admin");
    let token = server.token("a", "submit,read");
    // A project token does not see the workers.
    let (status, _) = server.json("GET", "/v1/workers", &token, &Value::Null);
    assert_eq!(status, 403);
    assert_eq!(workers(&server, &operator), []);

    let mut first = start_worker(&server, "w1", "10s");
    assert_eq!(
        workers(&server, &operator),
        [("w1".into(), "live".into(), vec![])]
    );
    let (_, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo go; sleep 2"]}}),
    );
    let id = job["id"].as_str().unwrap().to_owned();
    server.wait_for_output(&token, &id);
    assert_eq!(
        workers(&server, &operator),
        [("w1".into(), "live".into(), vec![id.clone()])]
    );

    // Drained: the running job ends normally, the next one waits, the worker stops.
    let drain = Command::new(cordon_bin())
        .args(["worker", "--drain", "--name", "w1"])
        .env("CORDON_HOME", &server.home)
        .output()
        .unwrap();
    assert!(
        drain.status.success(),
        "{}",
        String::from_utf8_lossy(&drain.stderr)
    );
    let unknown = Command::new(cordon_bin())
        .args(["worker", "--drain", "--name", "nobody"])
        .env("CORDON_HOME", &server.home)
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    until("the drain to be seen", || {
        workers(&server, &operator)[0].1 == "draining"
    });
    let (_, next) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["true"]}}),
    );
    let next = next["id"].as_str().unwrap().to_owned();
    let status = first.wait().unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(server.job(&token, &id)["state"], "succeeded");
    assert_eq!(server.job(&token, &next)["state"], "queued");
    assert_eq!(
        workers(&server, &operator),
        [],
        "a drained worker leaves the list"
    );

    // A worker killed with SIGKILL is shown lost once its lease runs out.
    let mut second = start_worker(&server, "w2", "1s");
    until("the queued job to run", || {
        server.job(&token, &next)["state"] == "succeeded"
    });
    second.kill().unwrap();
    second.wait().unwrap();
    until("the killed worker to be lost", || {
        workers(&server, &operator) == [("w2".into(), "lost".into(), vec![])]
    });
    // The Workers page shows it so, to operators only.
    let (status, html) = page(&server, &login(&server, &operator), "/workers");
    assert_eq!(status, 200);
    assert!(html.contains("data-worker=\"w2\""), "{html}");
    assert!(html.contains("status-lost"), "{html}");
    let (_, html) = page(&server, &login(&server, &token), "/workers");
    assert!(!html.contains("data-worker"), "{html}");
}

/// A raw HTTP/1.1 exchange with the server (TCP): (status, head, body).
fn raw(server: &Server, request: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(&server.url).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (
        head[9..12].parse().unwrap(),
        head.to_owned(),
        body.to_owned(),
    )
}

/// Logs in to the dashboard with `token`; returns the login's cookie.
fn login(server: &Server, token: &str) -> String {
    let form = format!("token={token}");
    let (status, head, _) = raw(
        server,
        &format!(
            "POST /login HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            server.url,
            form.len()
        ),
    );
    assert_eq!(status, 303, "{head}");
    head.lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .and_then(|c| c.split(';').next())
        .expect("a login cookie")
        .to_owned()
}

/// A dashboard page as the login of `cookie` sees it.
fn page(server: &Server, cookie: &str, path: &str) -> (u16, String) {
    let (status, _, body) = raw(
        server,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n",
            server.url
        ),
    );
    (status, body)
}

#[test]
fn a_cancel_answers_the_final_state_and_a_rerun_submits_the_job_again() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let (_, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "priority": 3,
                "inputs": {"argv": ["sh", "-c", "echo go; sleep 30"]}}),
    );
    let id = job["id"].as_str().unwrap().to_owned();
    // Not ended yet: nothing to re-run.
    let (status, answer) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/rerun"),
        &token,
        &Value::Null,
    );
    assert_eq!(
        (status, answer["error"].as_str()),
        (409, Some("conflict")),
        "{answer}"
    );
    server.wait_for_output(&token, &id);
    let (status, cancelled) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(
        cancelled["state"], "cancelled",
        "the final state, not `running`"
    );

    let (status, again) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/rerun"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 201, "{again}");
    let new = again["id"].as_str().unwrap();
    assert_ne!(new, id);
    assert_eq!(again["rerun_of"], id.as_str());
    assert_eq!(
        (
            &again["inputs"],
            &again["priority"],
            &again["type"],
            &again["timeout_ms"]
        ),
        (
            &job["inputs"],
            &job["priority"],
            &job["type"],
            &job["timeout_ms"]
        )
    );
    assert!(job.get("rerun_of").is_none(), "{job}");
    // Another project's token sees neither.
    let other = server.token("b", "submit,read");
    let (status, _) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/rerun"),
        &other,
        &Value::Null,
    );
    assert_eq!(status, 404);
    let (status, cancelled) = server.json(
        "POST",
        &format!("/v1/jobs/{new}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(
        (status, cancelled["state"].as_str()),
        (200, Some("cancelled"))
    );
}

/// The requests a receiver got: each one's head (lowercased) and body.
type Requests = Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

/// A webhook receiver on a loopback port: answers 500 to the first request, 200 after;
/// keeps every request (its head, lowercased, and its body).
struct Receiver {
    port: u16,
    seen: Requests,
}

impl Receiver {
    fn start() -> Receiver {
        Receiver::start_with(None)
    }

    /// A receiver over TLS with `config` (a certificate of the test's own authority).
    fn start_tls(config: Arc<rustls::ServerConfig>) -> Receiver {
        Receiver::start_with(Some(config))
    }

    fn start_with(tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Requests = Arc::default();
        let keep = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                match &tls {
                    None => answer(stream, &keep),
                    Some(config) => {
                        let Ok(connection) = rustls::ServerConnection::new(Arc::clone(config))
                        else {
                            continue;
                        };
                        answer(rustls::StreamOwned::new(connection, stream), &keep);
                    }
                }
            }
        });
        Receiver { port, seen }
    }
}

/// Reads one request from `stream`, keeps it, and answers 500 to the first, 200 after.
fn answer(mut stream: impl std::io::Read + std::io::Write, seen: &Requests) {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    let _ = stream.read_exact(&mut body);
    if head.is_empty() {
        return; // a handshake that failed: nothing was asked
    }
    let first = {
        let mut seen = seen.lock().unwrap();
        seen.push((head, body));
        seen.len() == 1
    };
    let status = if first {
        "500 Internal Server Error"
    } else {
        "200 OK"
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let _ = stream.flush();
}

fn header<'a>(head: &'a str, name: &str) -> &'a str {
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {head}"))
        .trim()
}

#[test]
fn a_jobs_end_is_posted_to_its_webhook_signed_and_retried_after_a_500() {
    use hmac::{Hmac, Mac};
    use std::os::unix::fs::PermissionsExt;

    let receiver = Receiver::start();
    let dir = Arc::new(TestDir::new());
    let secrets = dir.write("secrets.env", "HOOK_SECRET=whsec-test-0123456789\n");
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let policy = dir.write(
        "cordon-server.toml",
        &format!(
            "secrets_file = {:?}\n{POLICY}webhooks = [{{ url = \"http://127.0.0.1:{}/hook\", \
             secret = \"HOOK_SECRET\" }}]\n",
            secrets.display().to_string(),
            receiver.port
        ),
    );
    let server = Server::start_in(dir, policy);
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["true"]}}),
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    let id = job["id"].as_str().unwrap();
    until("two tries", || receiver.seen.lock().unwrap().len() >= 2);

    let seen = receiver.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "delivered once the receiver took it");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (head, body) in &seen {
        assert!(head.starts_with("post /hook http/1.1"), "{head}");
        assert_eq!(
            header(head, "x-cordon-delivery"),
            header(&seen[0].0, "x-cordon-delivery")
        );
        let timestamp: u64 = header(head, "x-cordon-timestamp").parse().unwrap();
        assert!(now.abs_diff(timestamp) < 60, "{timestamp} vs {now}");
        // What a receiver checks: HMAC-SHA256 over `TIMESTAMP.BODY` with the shared secret.
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"whsec-test-0123456789").unwrap();
        mac.update(format!("{timestamp}.").as_bytes());
        mac.update(body);
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            header(head, "x-cordon-signature"),
            format!("sha256={expected}")
        );
        let document: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(
            (
                document["schema"].as_str(),
                document["id"].as_str(),
                document["state"].as_str()
            ),
            (Some("cordon.job/v1"), Some(id), Some("succeeded"))
        );
    }
    assert_eq!(seen[0].1, seen[1].1, "the same body on every try");

    // The delivery and its tries, as recorded (the second try's answer is recorded just
    // after the receiver sent it).
    let deliveries = || {
        let path = format!("/v1/jobs/{id}/deliveries");
        let (status, list) = server.json("GET", &path, &token, &Value::Null);
        assert_eq!(status, 200, "{list}");
        list
    };
    until("the delivery's record", || {
        deliveries()["deliveries"][0]["state"] != "pending"
    });
    let list = deliveries();
    assert_eq!(list["schema"], "cordon.delivery-list/v1");
    let delivery = &list["deliveries"][0];
    assert_eq!(list["deliveries"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(
        (delivery["state"].as_str(), delivery["tries"].as_u64()),
        (Some("delivered"), Some(2)),
        "{list}"
    );
    assert_eq!(
        delivery["id"].as_str(),
        Some(header(&seen[0].0, "x-cordon-delivery"))
    );
    let statuses: Vec<Value> = delivery["try_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(500), json!(200)], "{list}");
    assert!(
        !list.to_string().contains("whsec-test"),
        "no secret value: {list}"
    );
}

/// An `https://` receiver is reached over TLS and verified against the host's trust store
/// (here `SSL_CERT_FILE`: the test's own authority); one whose certificate the store does not
/// trust gets nothing, and the delivery's try records why.
#[test]
fn a_webhook_over_https_is_delivered_to_a_trusted_receiver_only() {
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
        KeyUsagePurpose, SanType,
    };
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use std::os::unix::fs::PermissionsExt;

    let dir = Arc::new(TestDir::new());
    // An authority of the test's own, and a receiver's certificate for "localhost" from it.
    let authority = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), Issuer::new(params, key))
    };
    let server_config = |issuer: &Issuer<'static, KeyPair>| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.subject_alt_names =
            vec![SanType::DnsName("localhost".to_owned().try_into().unwrap())];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, issuer).unwrap();
        let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap(),
        )
    };
    let (trusted_pem, trusted) = authority("cordon test authority");
    let (_, stranger) = authority("an authority nobody trusts");
    let ca = dir.write("ca.pem", &trusted_pem);
    let good = Receiver::start_tls(server_config(&trusted));
    let bad = Receiver::start_tls(server_config(&stranger));

    let secrets = dir.write("secrets.env", "HOOK_SECRET=whsec-test-0123456789\n");
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let policy = dir.write(
        "cordon-server.toml",
        &format!(
            "secrets_file = {:?}\n{POLICY}webhooks = [\
             {{ url = \"https://localhost:{}/hook\", secret = \"HOOK_SECRET\" }}, \
             {{ url = \"https://localhost:{}/hook\", secret = \"HOOK_SECRET\" }}]\n",
            secrets.display().to_string(),
            good.port,
            bad.port,
        ),
    );
    let server = Server::start_with(dir, policy, |command| {
        command.env("SSL_CERT_FILE", &ca).env_remove("SSL_CERT_DIR");
    });
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["true"]}}),
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    let id = job["id"].as_str().unwrap();
    until("the trusted receiver's two tries", || {
        good.seen.lock().unwrap().len() >= 2
    });
    let seen = good.seen.lock().unwrap().clone();
    assert!(
        seen[1].0.starts_with("post /hook http/1.1"),
        "{}",
        seen[1].0
    );
    let document: Value = serde_json::from_slice(&seen[1].1).unwrap();
    assert_eq!(document["id"].as_str(), Some(id));

    // The untrusted receiver: every try refused at the handshake, recorded with its reason.
    let deliveries = || {
        let (status, list) = server.json(
            "GET",
            &format!("/v1/jobs/{id}/deliveries"),
            &token,
            &Value::Null,
        );
        assert_eq!(status, 200, "{list}");
        list
    };
    until("a refused try of the untrusted receiver", || {
        deliveries()["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| {
                d["url"]
                    .as_str()
                    .is_some_and(|u| u.contains(&bad.port.to_string()))
                    && d["tries"].as_u64().unwrap_or(0) >= 1
            })
    });
    let list = deliveries();
    let refused = list["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| {
            d["url"]
                .as_str()
                .is_some_and(|u| u.contains(&bad.port.to_string()))
        })
        .unwrap();
    assert_ne!(refused["state"], "delivered", "{list}");
    assert!(
        bad.seen.lock().unwrap().is_empty(),
        "the untrusted receiver got a request"
    );
    assert!(
        list.to_string().contains("UnknownIssuer") || list.to_string().contains("certificate"),
        "the try says why: {list}"
    );
}

#[test]
fn tokens_have_names_and_a_last_use_and_a_refused_one_says_why() {
    let server = Server::start(POLICY);
    let cordon = |args: &[&str]| {
        let out = Command::new(cordon_bin())
            .args(args)
            .env("CORDON_HOME", &server.home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let created: Value = serde_json::from_str(&cordon(&[
        "token",
        "create",
        "--project",
        "a",
        "--name",
        "ci",
        "--json",
    ]))
    .unwrap();
    assert_eq!(created["name"], "ci");
    assert!(created.get("last_used_at").is_none(), "{created}");
    let secret = created["secret"].as_str().unwrap().to_owned();
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, _) = server.json("GET", "/v1/jobs", &secret, &Value::Null);
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&cordon(&["token", "list", "--json"])).unwrap();
    let listed = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(listed["name"], "ci");
    assert!(listed["last_used_at"].is_string(), "{listed}");
    let text = cordon(&["token", "list"]);
    assert!(
        text.contains(&format!("{id}\ta\tsubmit,read\tlive\tci\tused ")),
        "{text}"
    );

    // Unknown, expired and revoked tokens are refused, each saying why.
    let refused = |token: &str| {
        let (status, answer) = server.json("GET", "/v1/jobs", token, &Value::Null);
        assert_eq!(
            (status, answer["error"].as_str()),
            (401, Some("unauthorized"))
        );
        answer["message"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        refused("cdn_nothing"),
        "this token is unknown to this server"
    );
    let short = cordon(&["token", "create", "--project", "a", "--expires", "1s"]);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(refused(short.trim()), "this token has expired");
    cordon(&["token", "revoke", &id]);
    assert_eq!(refused(&secret), "this token was revoked");
}

/// The resident memory of a process, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

#[test]
fn large_submissions_leave_the_api_process_its_memory() {
    let dir = Arc::new(TestDir::new());
    let policy = dir.write(
        "cordon-server.toml",
        "[projects.a]\nallow = [[\"sh\", \"*\"]]\nmax_queued = 1000\n",
    );
    let server = Server::start_with(dir, policy, |c| {
        c.arg("--no-workers");
    });
    let token = server.token("a", "submit,read");
    let submit = |argv: Value| {
        let body = json!({"project": "a", "type": "run", "inputs": {"argv": argv}}).to_string();
        let (status, _, _) = server.request("POST", "/v1/jobs", Some(&token), &[], body.as_bytes());
        assert_eq!(status, 201);
    };
    submit(json!(["sh", "-c", "true"]));
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(server.child.id());
    // 20 bodies just under the 4 MiB limit (before the fix: 37 → 61 MiB, and it stayed).
    let long = "x".repeat(4 * 1024 * 1024 - 4096);
    for _ in 0..20 {
        submit(json!(["sh", "-c", "true", long]));
    }
    std::thread::sleep(Duration::from_secs(1));
    let after = rss_kib(server.child.id());
    assert!(
        after * 2 <= before * 3,
        "VmRSS {before} KiB before, {after} KiB after 20 submissions of 4 MiB"
    );
}

#[test]
fn the_projects_page_and_metrics_count_the_slots_a_running_compare_holds() {
    // An API server alone; the test is the worker that claimed a compare of 3 candidates and
    // one plain job of project a (4 of its 4 slots in use, in 2 jobs).
    let dir = Arc::new(TestDir::new());
    let policy = dir.write(
        "cordon-server.toml",
        "workers = 4\n\n[projects.a]\nconcurrency = 4\nallow = [[\"true\"]]\n",
    );
    let server = Server::start_with(dir, policy, |c| {
        c.arg("--no-workers");
    });
    let operator = server.token("*", "admin,read");
    let store = cordon_store::Store::open(&cordon_store::StoreLocation::Sqlite(
        server.home.join("cordon.db"),
    ))
    .unwrap();
    let job = |job_type: &str, slots: u32| cordon_store::NewJob {
        project: "a".into(),
        job_type: job_type.into(),
        priority: 0,
        max_attempts: 1,
        timeout_ms: 60_000,
        idempotency_key: None,
        inputs: json!({}),
        submitted_by: "t-test".into(),
        rerun_of: None,
        slots,
    };
    store.insert_job(&job("session.compare", 3)).unwrap();
    store.insert_job(&job("run", 1)).unwrap();
    for _ in 0..2 {
        let claimed = store
            .claim_job(&cordon_store::Claim {
                worker: "test-worker",
                lease: Duration::from_secs(600),
                workers: 4,
                concurrency: &|_| 4,
            })
            .unwrap();
        assert!(claimed.job.is_some(), "{claimed:?}");
    }

    let (status, _, metrics) = server.request("GET", "/metrics", Some(&operator), &[], b"");
    assert_eq!(status, 200);
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(
        metrics.contains("cordon_jobs_running{project=\"a\"} 2\n")
            && metrics.contains("cordon_job_slots_running{project=\"a\"} 4\n"),
        "{metrics}"
    );
    let (status, html) = page(&server, &login(&server, &operator), "/projects");
    assert_eq!(status, 200);
    let row = html
        .split("data-project=\"a\"")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("no row for project a: {html}"));
    assert!(
        row.contains("value=\"4\"") && row.contains("4 / 4") && row.contains("(2 jobs)"),
        "{row}"
    );
    assert!(
        html.contains("In use on this server: <strong>4</strong> of 4 worker slots"),
        "{html}"
    );
}

//! `cordon serve` and `cordon worker` log through `tracing`: one line per request (method,
//! path, status, ms, project), per job start and end, and at shutdown; `--log-format json`
//! writes each as one JSON object.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestDir, server::Server, signal, wait_until};

const POLICY: &str = "[projects.a]\nallow = [[\"sh\", \"*\"]]\n";

/// The JSON lines of a log file.
fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The lines whose message is `message`.
fn with_message<'a>(log: &'a [Value], message: &str) -> Vec<&'a Value> {
    log.iter().filter(|l| l["message"] == message).collect()
}

#[test]
fn serve_logs_requests_jobs_and_its_shutdown_as_json_lines() {
    let dir = Arc::new(TestDir::new());
    let policy = dir.write("cordon-server.toml", POLICY);
    let log = dir.path().join("serve.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut server = Server::start_with(Arc::clone(&dir), policy, |command| {
        command
            .args(["--log-format", "json"])
            .stderr(Stdio::from(file));
    });
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo hi"]}}),
    );
    let id = job["id"].as_str().unwrap().to_owned();
    let (status, _, _) = server.request("GET", "/healthz", None, &[], b"");
    assert_eq!(status, 200);
    signal(i32::try_from(server.child.id()).unwrap(), libc::SIGTERM);
    assert!(server.child.wait().unwrap().success());

    let log = lines(&log);
    let requests = with_message(&log, "request");
    let submit = requests
        .iter()
        .find(|l| l["method"] == "POST" && l["path"] == "/v1/jobs")
        .unwrap_or_else(|| panic!("{log:#?}"));
    assert_eq!(submit["status"], 201);
    assert_eq!(submit["project"], "a");
    assert!(submit["ms"].is_u64(), "{submit}");
    let health = requests.iter().find(|l| l["path"] == "/healthz").unwrap();
    assert_eq!(
        (health["status"].clone(), health["project"].clone()),
        (json!(200), json!("-"))
    );
    let started = with_message(&log, "job started");
    let ended = with_message(&log, "job ended");
    assert_eq!(started.len(), 1, "{log:#?}");
    assert_eq!(
        (started[0]["job"].clone(), started[0]["project"].clone()),
        (json!(id), json!("a"))
    );
    assert_eq!(ended[0]["state"], "succeeded");
    assert_eq!(ended[0]["job_type"], "run");
    assert_eq!(with_message(&log, "shutdown")[0]["process"], "serve");
}

#[test]
fn a_worker_logs_its_jobs_and_its_shutdown() {
    let dir = Arc::new(TestDir::new());
    let policy = dir.write("cordon-server.toml", POLICY);
    let store = dir.path().join("shared.db");
    let server = Server::start_with(Arc::clone(&dir), policy.clone(), |command| {
        command.arg("--no-workers").env("CORDON_STORE", &store);
    });
    let log = dir.path().join("worker.log");
    let mut worker = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["worker", "--log-format", "json", "--name", "w1", "--config"])
        .arg(&policy)
        .env("CORDON_HOME", dir.path().join("worker-home"))
        .env("CORDON_STORE", &store)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    // Its ready line.
    let mut ready = String::new();
    BufReader::new(worker.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert!(ready.starts_with("cordon worker: w1"), "{ready}");
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "exit 3"]}}),
    );
    assert_eq!(job["state"], "failed");
    wait_until(
        "the worker logged the job's end",
        Duration::from_secs(30),
        || !with_message(&lines(&log), "job ended").is_empty(),
    );
    signal(i32::try_from(worker.id()).unwrap(), libc::SIGTERM);
    assert!(worker.wait().unwrap().success());
    let log = lines(&log);
    let ended = with_message(&log, "job ended");
    assert_eq!(ended[0]["state"], "failed", "{log:#?}");
    assert_eq!(ended[0]["failure"], "exit");
    assert_eq!(with_message(&log, "job started")[0]["worker"], "w1");
    assert_eq!(with_message(&log, "shutdown")[0]["process"], "worker");
}

//! The operator dashboard end to end, in a real browser: a real `cordon serve` on a loopback
//! port with its own home (store, policy, tokens), real git repositories of a passing and a
//! failing Python project verified in the real sandbox, a long-running job, a review session
//! with a round; then Debian's chromium, driven by `playwright-core` from a Node script
//! (`tests/dashboard/browser.mjs`), logs in and checks what a person would see. The script
//! names every check it passed; the test requires all of them.
//!
//! Needs chromium and playwright-core (`scripts/test` installs both: `need_chromium`,
//! `need_playwright`); without them the test fails under `CORDON_REQUIRE_SANDBOX=1` or CI.
//! `CORDON_UPDATE_SCREENSHOTS=1` writes the screenshots to `docs/` (else to a temp dir).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use support::{TestDir, git};

const POLICY: &str = r#"
workers = 4

[projects.web]
concurrency = 3
max_timeout = "5m"
daily_budget = { wall = "2h" }
allow = [["sh", "*"], ["git", "clone", "*"], ["python3", "*"]]

[projects."*"]
concurrency = 1
max_timeout = "1m"
allow = [["sh", "*"]]
"#;

/// What the browser script must report as passed, in its order.
const CHECKS: &[&str] = &[
    "login-required",
    "login",
    "jobs-table",
    "security-headers",
    "filters",
    "live-table",
    "failed-job",
    "downloads",
    "xss",
    "live-log",
    "other-project-hidden",
    "csrf",
    "read-only-cannot-cancel",
    "operator-jobs",
    "contrast",
    "operator-projects",
    "operator-sessions",
    "phone-width",
    "keyboard",
    "cancel",
    "logout",
    "no-dialogs-no-csp-violations",
];

const PYPROJECT: &str = "[project]\nname = \"demo\"\nversion = \"0.1\"\n\n\
                         [tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n";

/// The failing test's assertion message is the XSS probe.
const PY_TESTS: &str = "import sys, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))
import demo


def test_add():
    assert demo.add(2, 3) == 5, \"<script>alert(1)</script>\"


def test_ok():
    assert demo.add(2, 2) == 4
";

const PROBE: &str = "<script>alert(1)</script>";

/// A Python project whose `add` multiplies when `broken`.
fn python_repo(dir: &Path, name: &str, broken: bool) -> PathBuf {
    let repo = dir.join(name);
    std::fs::create_dir_all(repo.join("demo")).unwrap();
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    std::fs::write(repo.join("pyproject.toml"), PYPROJECT).unwrap();
    let op = if broken { "*" } else { "+" };
    std::fs::write(
        repo.join("demo/__init__.py"),
        format!("def add(a, b):\n    return a {op} b\n"),
    )
    .unwrap();
    std::fs::write(repo.join("tests/test_demo.py"), PY_TESTS).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "init"]);
    repo
}

/// A running `cordon serve` with its own home.
struct Server {
    child: Child,
    addr: String,
    home: PathBuf,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let home = dir.join("home");
        let policy = dir.join("cordon-server.toml");
        std::fs::write(&policy, POLICY).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cordon"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&policy)
            .env("CORDON_HOME", &home)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cordon serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("cordon serve: listening on http://")
            .unwrap_or_else(|| panic!("no ready line: {line:?}"))
            .to_owned();
        Server { child, addr, home }
    }

    fn cordon(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cordon"));
        command.env("CORDON_HOME", &self.home);
        command
    }

    fn token(&self, project: &str, scopes: &str) -> String {
        let out = self
            .cordon()
            .args(["token", "create", "--project", project, "--scope", scopes])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// One HTTP/1.1 request with a bearer token; returns (status, JSON body).
    fn api(&self, method: &str, path: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head[9..12].parse().unwrap();
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        };
        let value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{method} {path}: {status} {e}: {body}"));
        (status, value)
    }

    fn submit(&self, token: &str, body: Value) -> String {
        let (status, job) = self.api("POST", "/v1/jobs", token, Some(&body));
        assert_eq!(status, 201, "{job}");
        job["id"].as_str().unwrap().to_owned()
    }

    /// Follows a job's live log until `stop` says so or the log ends.
    fn follow(&self, token: &str, id: &str, mut stop: impl FnMut(&str, &Value) -> bool) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        write!(
            stream,
            "GET /v1/jobs/{id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut name = String::new();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Some(v) = line.strip_prefix("event: ") {
                name = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                let data: Value = serde_json::from_str(v).unwrap();
                if stop(&name, &data) || name == "end" {
                    return;
                }
            }
        }
    }

    /// Waits for a job's end; returns its document.
    fn finish(&self, token: &str, id: &str) -> Value {
        self.follow(token, id, |_, _| false);
        self.api("GET", &format!("/v1/jobs/{id}"), token, None).1
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The playwright-core package directory: `CORDON_TEST_PLAYWRIGHT`, else the one
/// `scripts/test` installs under `target/test-tools`.
fn playwright() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CORDON_TEST_PLAYWRIGHT") {
        return Some(PathBuf::from(dir)).filter(|d| d.join("package.json").is_file());
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools");
    std::fs::read_dir(tools)
        .ok()?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("playwright-core-")
        })
        .map(|e| e.path().join("node_modules/playwright-core"))
        .find(|d| d.join("package.json").is_file())
}

/// Debian's chromium: `CORDON_TEST_CHROMIUM`, else `/usr/bin/chromium`.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("CORDON_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    path.is_file().then_some(path)
}

fn node_available() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A review session of `repo` with one finished round and one item waiting.
fn session_with_a_round(server: &Server, repo: &Path) -> String {
    let run = |args: &[&str]| {
        let out = server
            .cordon()
            .current_dir(repo)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let record: Value = serde_json::from_str(&run(&["session", "create", "--json"])).unwrap();
    let id = record["id"].as_str().unwrap().to_owned();
    run(&["session", "poke", &id, "--comment", "please rename add"]);
    let mut watcher = server
        .cordon()
        .current_dir(repo)
        .args([
            "session", "watch", &id, "--source", "true", "--fixer", "true",
        ])
        .args([
            "--max-rounds",
            "1",
            "--backoff-min",
            "50ms",
            "--json-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let events = BufReader::new(watcher.stdout.take().unwrap());
    let mut finished = None;
    for line in events.lines() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["event"]["kind"] == "round_finished" {
            finished = Some(event);
            break;
        }
    }
    let finished = finished.expect("the watcher finished a round");
    assert_eq!(finished["event"]["exit_code"], 0, "{finished}");
    support::signal(watcher.id() as i32, libc::SIGTERM);
    watcher.wait().unwrap();
    run(&[
        "session",
        "poke",
        &id,
        "--comment",
        &format!("{PROBE} still broken"),
    ]);
    id
}

#[test]
fn dashboard_in_a_real_browser_shows_jobs_failures_live_logs_and_sessions() {
    let (Some(playwright), Some(chromium), true) = (playwright(), chromium(), node_available())
    else {
        support::missing_capability(
            "the dashboard test needs node, Debian's chromium (/usr/bin/chromium or \
             CORDON_TEST_CHROMIUM) and playwright-core (CORDON_TEST_PLAYWRIGHT; scripts/test \
             installs them)",
        );
        return;
    };
    if !support::sandbox_available() {
        return;
    }
    let dir = TestDir::new();
    let server = Server::start(dir.path());
    let web = server.token("web", "submit,read");
    let read_only = server.token("web", "read");
    let other = server.token("other", "submit,read");
    let hostile_project = "x<img src=x onerror=alert(2)>";
    let hostile = server.token(hostile_project, "submit,read");
    let operator = server.token("*", "admin");

    let passing = python_repo(dir.path(), "passing", false);
    let failing = python_repo(dir.path(), "failing", true);
    let clone = |repo: &Path| {
        let id = server.submit(
            &web,
            json!({"project": "web", "type": "repo.clone", "inputs": {"url": repo.display().to_string()}}),
        );
        let job = server.finish(&web, &id);
        assert_eq!(job["state"], "succeeded", "{job}");
        id
    };
    let (clone_pass, clone_fail) = (clone(&passing), clone(&failing));
    let verify = |from: &str| {
        server.submit(
            &web,
            json!({"project": "web", "type": "verify", "inputs": {"workspace": {"from_job": from}}}),
        )
    };
    let (pass, fail) = (verify(&clone_pass), verify(&clone_fail));
    let probe = server.submit(
        &web,
        json!({"project": "web", "type": "run", "idempotency_key": PROBE,
               "inputs": {"argv": ["sh", "-c", format!("printf '%s\\n' '{PROBE}'; exit 3")]}}),
    );
    let elsewhere = server.submit(
        &other,
        json!({"project": "other", "type": "run", "inputs": {"argv": ["sh", "-c", "echo other"]}}),
    );
    let odd = server.submit(
        &hostile,
        json!({"project": hostile_project, "type": "run", "inputs": {"argv": ["sh", "-c", "true"]}}),
    );
    for (token, id, state) in [
        (&web, &pass, "succeeded"),
        (&web, &fail, "failed"),
        (&web, &probe, "failed"),
        (&other, &elsewhere, "succeeded"),
        (&hostile, &odd, "succeeded"),
    ] {
        let job = server.finish(token, id);
        assert_eq!(job["state"], state, "{job}");
    }
    let session = session_with_a_round(&server, &passing);
    // The long job runs until the browser cancels it (at most 10 minutes).
    let long = server.submit(
        &web,
        json!({"project": "web", "type": "run", "inputs": {"argv": ["sh", "-c",
            "i=0; while [ $i -lt 6000 ]; do i=$((i+1)); echo \"tick $i\"; sleep 0.1; done"]}}),
    );
    server.follow(&web, &long, |event, _| event == "output");

    let shots = if std::env::var("CORDON_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
    } else {
        dir.path().join("shots")
    };
    std::fs::create_dir_all(&shots).unwrap();
    let scene = json!({
        "url": format!("http://{}", server.addr),
        "tokens": {"web": web, "read_only": read_only, "other": other, "operator": operator},
        "jobs": {"pass": pass, "fail": fail, "probe": probe, "other": elsewhere, "odd": odd,
                 "long": long, "clone_pass": clone_pass},
        "hostile_project": hostile_project,
        "session": session,
        "probe": PROBE,
        "shots": shots.display().to_string(),
        "chromium": chromium.display().to_string(),
        "playwright": playwright.display().to_string(),
        "profile": dir.path().join("chromium-profile").display().to_string(),
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dashboard/browser.mjs");
    let out = Command::new("node")
        .arg(&script)
        .env("DASHBOARD_SCENE", scene.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the browser checks failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(passed, CHECKS, "{stdout}\n{stderr}");

    // What the browser did reached the service: the long job is cancelled, and the operator
    // token sees every project through the API as in the dashboard.
    let job = server.finish(&web, &long);
    assert_eq!(job["state"], "cancelled", "{job}");
    let (status, list) = server.api("GET", "/v1/jobs?limit=100", &operator, None);
    assert_eq!(status, 200, "{list}");
    let projects: std::collections::BTreeSet<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["project"].as_str().unwrap())
        .collect();
    assert_eq!(
        projects,
        ["other", "web", hostile_project].into_iter().collect()
    );
    for name in ["jobs.png", "job-failed.png"] {
        let png = std::fs::read(shots.join(name)).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
            "{name}"
        );
    }
}

#[test]
fn dashboard_operator_tokens_see_every_project_and_project_tokens_only_theirs() {
    let dir = TestDir::new();
    let server = Server::start(dir.path());
    let web = server.token("web", "submit,read");
    let other = server.token("other", "submit,read");
    let operator = server.token("*", "admin");
    // A token for every project must be an operator's.
    let refused = server
        .cordon()
        .args(["token", "create", "--project", "*", "--scope", "read"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("admin scope"));
    let cancelled = |token: &str, project: &str| {
        let id = server.submit(
            token,
            json!({"project": project, "type": "run", "inputs": {"argv": ["sh", "-c", "sleep 30"]}}),
        );
        let (status, _) = server.api("POST", &format!("/v1/jobs/{id}/cancel"), &operator, None);
        assert_eq!(status, 200, "the operator may cancel any project's job");
        server.finish(token, &id);
        id
    };
    let (in_web, in_other) = (cancelled(&web, "web"), cancelled(&other, "other"));
    let (_, all) = server.api("GET", "/v1/jobs", &operator, None);
    let ids: Vec<&str> = all["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [in_other.as_str(), in_web.as_str()], "newest first");
    let (_, only) = server.api("GET", "/v1/jobs?project=web", &operator, None);
    assert_eq!(only["jobs"][0]["id"], in_web.as_str());
    assert_eq!(only["jobs"].as_array().unwrap().len(), 1);
    let (status, job) = server.api("GET", &format!("/v1/jobs/{in_other}"), &operator, None);
    assert_eq!((status, job["project"].as_str()), (200, Some("other")));
    // A project token still sees its project only.
    let (status, _) = server.api("GET", &format!("/v1/jobs/{in_other}"), &web, None);
    assert_eq!(status, 404);
    let (_, mine) = server.api("GET", "/v1/jobs", &web, None);
    assert_eq!(mine["jobs"].as_array().unwrap().len(), 1);
    // An operator token submits for no project.
    for project in ["web", "*"] {
        let (status, answer) = server.api(
            "POST",
            "/v1/jobs",
            &operator,
            Some(&json!({"project": project, "type": "run", "inputs": {"argv": ["true"]}})),
        );
        assert!(
            status == 400 || status == 403,
            "{project}: {status} {answer}"
        );
    }
}

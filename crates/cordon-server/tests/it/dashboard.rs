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

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cordon_test_support::cordon_bin;
use cordon_test_support::git;
use cordon_test_support::server::Server;
use serde_json::{Value, json};

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

/// `cordon` with the server's home.
fn cordon(server: &Server) -> Command {
    let mut command = Command::new(cordon_bin());
    command.env("CORDON_HOME", &server.home);
    command
}

/// Submits a job; returns its id.
fn submit(server: &Server, token: &str, body: Value) -> String {
    let (status, job) = server.submit(token, &body);
    assert_eq!(status, 201, "{job}");
    job["id"].as_str().unwrap().to_owned()
}

/// Waits for a job's end; returns its document.
fn finish(server: &Server, token: &str, id: &str) -> Value {
    server.events(token, id, None);
    server.job(token, id)
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
        let out = cordon(server)
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
    let mut watcher = cordon(server)
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
    cordon_test_support::signal(watcher.id() as i32, libc::SIGTERM);
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
    let Some((playwright, chromium)) = browser() else {
        return;
    };
    if !cordon_test_support::sandbox_available() {
        return;
    }
    let server = Server::start(POLICY);
    let dir = std::sync::Arc::clone(&server.dir);
    let web = server.token("web", "submit,read");
    let read_only = server.token("web", "read");
    let other = server.token("other", "submit,read");
    let hostile_project = "x<img src=x onerror=alert(2)>";
    let hostile = server.token(hostile_project, "submit,read");
    let operator = server.token("*", "admin");

    let passing = python_repo(dir.path(), "passing", false);
    let failing = python_repo(dir.path(), "failing", true);
    let clone = |repo: &Path| {
        let id = submit(
            &server,
            &web,
            json!({"project": "web", "type": "repo.clone", "inputs": {"url": repo.display().to_string()}}),
        );
        let job = finish(&server, &web, &id);
        assert_eq!(job["state"], "succeeded", "{job}");
        id
    };
    let (clone_pass, clone_fail) = (clone(&passing), clone(&failing));
    let verify = |from: &str| {
        submit(
            &server,
            &web,
            json!({"project": "web", "type": "verify", "inputs": {"workspace": {"from_job": from}}}),
        )
    };
    let (pass, fail) = (verify(&clone_pass), verify(&clone_fail));
    let probe = submit(
        &server,
        &web,
        json!({"project": "web", "type": "run", "idempotency_key": PROBE,
               "inputs": {"argv": ["sh", "-c", format!("printf '%s\\n' '{PROBE}'; exit 3")]}}),
    );
    let elsewhere = submit(
        &server,
        &other,
        json!({"project": "other", "type": "run", "inputs": {"argv": ["sh", "-c", "echo other"]}}),
    );
    let odd = submit(
        &server,
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
        let job = finish(&server, token, id);
        assert_eq!(job["state"], state, "{job}");
    }
    let session = session_with_a_round(&server, &passing);
    // The long job runs until the browser cancels it (at most 10 minutes).
    let long = submit(
        &server,
        &web,
        json!({"project": "web", "type": "run", "inputs": {"argv": ["sh", "-c",
            "i=0; while [ $i -lt 6000 ]; do i=$((i+1)); echo \"tick $i\"; sleep 0.1; done"]}}),
    );
    server.follow(&web, &long, None, |e| e.1 != "output");

    let shots = if std::env::var("CORDON_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
    } else {
        dir.path().join("shots")
    };
    std::fs::create_dir_all(&shots).unwrap();
    let scene = json!({
        "url": format!("http://{}", server.url),
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
    browser_checks("browser.mjs", &scene, CHECKS);

    // What the browser did reached the service: the long job is cancelled, and the operator
    // token sees every project through the API as in the dashboard.
    let job = finish(&server, &web, &long);
    assert_eq!(job["state"], "cancelled", "{job}");
    let (status, list) = server.json("GET", "/v1/jobs?limit=100", &operator, &Value::Null);
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
    let server = Server::start(POLICY);
    let web = server.token("web", "submit,read");
    let other = server.token("other", "submit,read");
    let operator = server.token("*", "admin");
    // A token for every project must be an operator's.
    let refused = cordon(&server)
        .args(["token", "create", "--project", "*", "--scope", "read"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("admin scope"));
    let cancelled = |token: &str, project: &str| {
        let id = submit(
            &server,
            token,
            json!({"project": project, "type": "run", "inputs": {"argv": ["sh", "-c", "sleep 30"]}}),
        );
        let path = format!("/v1/jobs/{id}/cancel");
        let (status, _) = server.json("POST", &path, &operator, &Value::Null);
        assert_eq!(status, 200, "the operator may cancel any project's job");
        finish(&server, token, &id);
        id
    };
    let (in_web, in_other) = (cancelled(&web, "web"), cancelled(&other, "other"));
    let (_, all) = server.json("GET", "/v1/jobs", &operator, &Value::Null);
    let ids: Vec<&str> = all["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [in_other.as_str(), in_web.as_str()], "newest first");
    let (_, only) = server.json("GET", "/v1/jobs?project=web", &operator, &Value::Null);
    assert_eq!(only["jobs"][0]["id"], in_web.as_str());
    assert_eq!(only["jobs"].as_array().unwrap().len(), 1);
    let (status, job) = server.json(
        "GET",
        &format!("/v1/jobs/{in_other}"),
        &operator,
        &Value::Null,
    );
    assert_eq!((status, job["project"].as_str()), (200, Some("other")));
    // A project token still sees its project only.
    let (status, _) = server.json("GET", &format!("/v1/jobs/{in_other}"), &web, &Value::Null);
    assert_eq!(status, 404);
    let (_, mine) = server.json("GET", "/v1/jobs", &web, &Value::Null);
    assert_eq!(mine["jobs"].as_array().unwrap().len(), 1);
    // An operator token submits for no project.
    for project in ["web", "*"] {
        let (status, answer) = server.submit(
            &operator,
            &json!({"project": project, "type": "run", "inputs": {"argv": ["true"]}}),
        );
        assert!(
            status == 400 || status == 403,
            "{project}: {status} {answer}"
        );
    }
}

#[test]
fn dashboard_shows_a_comparison_and_each_candidates_report() {
    let Some((playwright, chromium)) = browser() else {
        return;
    };
    if !cordon_test_support::sandbox_available() {
        return;
    }
    use crate::serve_fork_compare::{POLICY, hold_a_slot, submit_compare, three_forks};
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let forked = three_forks(&server, &token);
    let compare = submit_compare(&server, &token, &forked, &[2, 1, 0]);
    let job = finish(&server, &token, &compare);
    assert_eq!(job["state"], "succeeded", "{job}");
    let fork = server.job(&token, &forked.fork_job);
    let ids = &forked.ids;
    // A second comparison waits for its two slots while a job holds one of them.
    let blocker = hold_a_slot(&server, &token);
    let waiting = submit_compare(&server, &token, &forked, &[0, 1]);
    assert_eq!(server.job(&token, &waiting)["state"], "queued");
    let scene = json!({
        "url": format!("http://{}", server.url),
        "token": token,
        "compare": compare,
        "waiting": waiting,
        "fork": forked.fork_job,
        "forks": ids,
        "source": fork["result"]["source"],
        "ranked": [ids[0], ids[2], ids[1]],
        "shots": server.dir.path().display().to_string(),
        "chromium": chromium.display().to_string(),
        "playwright": playwright.display().to_string(),
        "profile": server.dir.path().join("chromium-profile").display().to_string(),
    });
    browser_checks(
        "compare.mjs",
        &scene,
        &[
            "login",
            "ranked-table",
            "candidate-links",
            "fork-sessions",
            "waiting-reason",
            "no-csp-violations",
        ],
    );
    let (status, after) = server.json(
        "POST",
        &format!("/v1/jobs/{blocker}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200, "{after}");
    let job = finish(&server, &token, &waiting);
    assert_eq!(job["state"], "succeeded", "{job}");
}

/// playwright-core's directory and chromium's path, when node and both are here; otherwise
/// the missing capability is reported (a failure under CI) and `None`.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let (Some(playwright), Some(chromium), true) = (playwright(), chromium(), node_available())
    else {
        cordon_test_support::missing_capability(
            "the dashboard test needs node, Debian's chromium (/usr/bin/chromium or \
             CORDON_TEST_CHROMIUM) and playwright-core (CORDON_TEST_PLAYWRIGHT; scripts/test \
             installs them)",
        );
        return None;
    };
    Some((playwright, chromium))
}

/// Runs the browser script `tests/dashboard/NAME` against `scene` (in DASHBOARD_SCENE) and
/// checks that it passed exactly `expected`, in order.
fn browser_checks(name: &str, scene: &Value, expected: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/dashboard")
        .join(name);
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
        "the browser checks of {name} failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(passed, expected, "{stdout}\n{stderr}");
}

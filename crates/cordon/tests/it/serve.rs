//! `cordon serve`'s own flags and `cordon jobs` against a real server, as the CLI's client
//! commands: the default policy `serve --print-default-policy` prints, and jobs submitted,
//! followed, shown, listed and cancelled from the command line. (The service's own tests are
//! `cordon-server`'s.)

use std::io::Write;
use std::process::{Command, Stdio};

use cordon_test_support::TestDir;
use cordon_test_support::server::{Server, run_job};
use serde_json::{Value, json};

use crate::support;

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
fn serve_prints_its_default_policy_as_a_valid_config() {
    let dir = TestDir::new();
    let out = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["serve", "--print-default-policy"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[projects.\"*\"]"), "{text}");
    let policy = dir.write("p.toml", &text);
    let parsed = cordon_server::Policy::load(&policy).unwrap();
    assert_eq!(parsed, cordon_server::Policy::builtin());
}

/// Issue 35, the policy pitfall: the deny rule `["sh", "-c", "*rm*"]` reads as "no rm" but
/// matched only the literal argument `*rm*` (rules match whole arguments), so `sh -c "rm -rf
/// x"` ran, and the loader took the rule silently. A rule with `*` inside an argument, or an
/// empty rule (it matched every command), is refused when the policy is loaded, naming the
/// rule; the printed default policy says how rules match; the deny that does hold (the
/// shell itself) refuses the command.
#[test]
fn serve_refuses_policy_rules_that_cannot_match_the_way_they_read() {
    use std::io::BufRead;
    let dir = TestDir::new();
    for (rules, message) in [
        (
            "allow = [[\"sh\", \"*\"]]\ndeny = [{ argv = [\"sh\", \"-c\", \"*rm*\"], reason = \"no rm\" }]",
            "projects.a.deny[0]: \"*rm*\" cannot match the way it reads",
        ),
        (
            "allow = [[\"cat\", \"*.txt\"]]",
            "projects.a.allow[0]: \"*.txt\" cannot match the way it reads",
        ),
        ("allow = [[]]", "projects.a.allow[0] is empty"),
    ] {
        let policy = dir.write("p.toml", &format!("[projects.a]\n{rules}\n"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_cordon"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&policy)
            .env("CORDON_HOME", dir.path().join("home"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if !line.is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started with {rules}: {line}");
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{rules}: {stderr}");
        assert!(stderr.contains(message), "{rules}: {stderr}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["serve", "--print-default-policy"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for documented in [
        "whole\n#   arguments only",
        "\"*\" is the only pattern, and only as a whole argument",
        "`sh -c \"rm -rf x\"` cannot be denied by\n#   what the script says",
    ] {
        assert!(text.contains(documented), "{documented:?} in {text}");
    }
    let server = Server::start(
        "[projects.a]\nallow = [[\"sh\", \"*\"]]\ndeny = [{ argv = [\"sh\", \"-c\", \"*\"], reason = \"no shell scripts\" }]\n",
    );
    let token = server.token("a", "submit,read");
    let (status, answer) = server.submit(&token, &run_job("a", "rm -rf x"));
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["rule"], "projects.a.deny[0]", "{answer}");
}

#[test]
fn serve_jobs_cli_submits_follows_shows_lists_and_cancels() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let jobs = |args: &[&str], stdin: &[u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cordon"))
            .arg("jobs")
            .args(args)
            .args(["--server", &format!("http://{}", server.url)])
            .env("CORDON_TOKEN", &token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    };
    let body = run_job("a", "echo out; echo err >&2").to_string();
    let out = jobs(&["submit", "--json", "-"], body.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = job["id"].as_str().unwrap();
    let out = jobs(&["logs", "--follow", id], b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("err\n") && stderr.contains("succeeded"),
        "{stderr}"
    );
    let out = jobs(&["show", "--json", id], b"");
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["state"], "succeeded");
    let out = jobs(&["list", "--json", "--state", "succeeded"], b"");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["jobs"][0]["id"], id);
    let out = jobs(&["logs", id], b"");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\nerr\n");
    // A failing job: --follow exits 1; a refused one: the error document (--json), the
    // message naming the rule, and exit 1.
    let body = run_job("a", "exit 3").to_string();
    let out = jobs(&["submit", "--json", "-"], body.as_bytes());
    let failing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = jobs(&["logs", "-f", failing["id"].as_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(1));
    let out = jobs(
        &["submit", "--json", "-"],
        run_job("a", "rm -rf /").to_string().as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1));
    let document = support::error_document::error_document(&out);
    assert_eq!(
        (&document["kind"], &document["http_status"]),
        (&json!("refused"), &json!(403)),
        "{document:#}"
    );
    assert_eq!(document["api_error"]["schema"], "cordon.api-error/v1");
    assert_eq!(document["api_error"]["error"], "policy");
    assert_eq!(document["api_error"]["rule"], "projects.a.deny[0]");
    assert!(String::from_utf8_lossy(&out.stderr).contains("projects.a.deny[0]"));
    // An unknown job is a usage error (2), with or without --json.
    let out = jobs(&["cancel", "j-nothere234"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let out = jobs(&["cancel", "--json", "j-nothere234"], b"");
    let document = support::error_document::error_document(&out);
    assert_eq!(
        (&document["kind"], &document["api_error"]["error"]),
        (&json!("not_found"), &json!("not_found")),
        "{document:#}"
    );
}

//! `cordon token` and `cordon jobs` as people and scripts use them: text by default, the
//! service's documents with `--json`, the API's refusals as messages naming the rule.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use cordon_test_support::server::Server;
use serde_json::Value;

const POLICY: &str = r#"
[projects.a]
allow = [["sh", "*"]]
"#;

fn cordon(server: &Server, token: Option<&str>, args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cordon"));
    command
        .args(args)
        .env("CORDON_HOME", &server.home)
        .env("CORDON_SERVER", format!("http://{}", server.url))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("CORDON_TOKEN", token);
    }
    let mut child = command.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn token_commands_print_text_or_their_documents() {
    let server = Server::start(POLICY);
    let created: Value = serde_json::from_str(&stdout(&cordon(
        &server,
        None,
        &[
            "token",
            "create",
            "--project",
            "a",
            "--scope",
            "read",
            "--json",
        ],
        "",
    )))
    .unwrap();
    assert_eq!(created["schema"], "cordon.token/v1");
    assert_eq!(created["state"], "live");
    assert_eq!(created["scopes"], serde_json::json!(["read"]));
    let secret = created["secret"].as_str().unwrap();
    let id = created["id"].as_str().unwrap();
    // The secret works.
    let (status, _) = server.json("GET", "/v1/jobs", secret, &Value::Null);
    assert_eq!(status, 200);
    let listed = stdout(&cordon(&server, None, &["token", "list"], ""));
    assert!(listed.contains(&format!("{id}\ta\tread\tlive")), "{listed}");
    assert!(!listed.contains(secret), "a list never shows secrets");
    let revoked: Value = serde_json::from_str(&stdout(&cordon(
        &server,
        None,
        &["token", "revoke", id, "--json"],
        "",
    )))
    .unwrap();
    assert_eq!(revoked["state"], "revoked");
    assert!(revoked.get("secret").is_none());
    let again = cordon(&server, None, &["token", "revoke", id], "");
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stderr).contains("no live token"));
    let list: Value = serde_json::from_str(&stdout(&cordon(
        &server,
        None,
        &["token", "list", "--json"],
        "",
    )))
    .unwrap();
    assert_eq!(list["schema"], "cordon.token-list/v1");
    assert_eq!(list["tokens"][0]["state"], "revoked");
    // The documents' schemas are printed by `cordon schema`.
    let schema = stdout(&cordon(&server, None, &["schema", "token"], ""));
    assert!(schema.contains("cordon.token/v1"), "{schema}");
}

#[test]
fn jobs_commands_print_text_or_the_services_documents() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let body = r#"{"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo hi"]}}"#;
    let id = stdout(&cordon(
        &server,
        Some(&token),
        &["jobs", "submit", "-"],
        body,
    ));
    let id = id.trim();
    assert!(id.starts_with("j-") && !id.contains('\n'), "{id}");
    let events = stdout(&cordon(
        &server,
        Some(&token),
        &["jobs", "logs", "--json", id],
        "",
    ));
    let lines: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(
        (last["event"].as_str(), last["data"]["state"].as_str()),
        (Some("end"), Some("succeeded"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "output" && l["data"]["text"] == "hi\n"),
        "{events}"
    );
    let shown = stdout(&cordon(&server, Some(&token), &["jobs", "show", id], ""));
    assert!(
        shown.starts_with(&format!("{id}\ta\trun\tsucceeded\tattempt 1/")),
        "{shown}"
    );
    let doc: Value = serde_json::from_str(&stdout(&cordon(
        &server,
        Some(&token),
        &["jobs", "show", id, "--json"],
        "",
    )))
    .unwrap();
    assert_eq!(doc["schema"], "cordon.job/v1");
    let list: Value = serde_json::from_str(&stdout(&cordon(
        &server,
        Some(&token),
        &["jobs", "list", "--json"],
        "",
    )))
    .unwrap();
    assert_eq!(list["jobs"][0]["id"], id);
    let text = stdout(&cordon(&server, Some(&token), &["jobs", "list"], ""));
    assert!(text.lines().next().unwrap().starts_with(id), "{text}");
    // A refusal is a message with the rule, and exit 1.
    let refused = cordon(
        &server,
        Some(&token),
        &["jobs", "submit", "-"],
        r#"{"project": "a", "type": "run", "inputs": {"argv": ["curl", "x"]}}"#,
    );
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("projects.a.allow") && stderr.contains("policy"),
        "{stderr}"
    );
    assert!(
        refused.stdout.is_empty(),
        "text mode prints no error document"
    );
}

#[test]
fn jobs_run_and_verify_shortcuts_submit_and_follow_with_stages_and_verdict() {
    let server = Server::start(
        r#"
[projects.a]
allow = [["sh", "*"], ["git", "*"], ["true"]]
"#,
    );
    let token = server.token("a", "submit,read");
    // Without a project, and without CORDON_PROJECT, nothing is submitted.
    let none = cordon(&server, Some(&token), &["jobs", "run", "--", "true"], "");
    assert_eq!(none.status.code(), Some(2), "{none:?}");
    // `jobs run -- CMD ARGS…`: the id; with --wait, the output and the end.
    let id = stdout(&cordon(
        &server,
        Some(&token),
        &[
            "jobs",
            "run",
            "--project",
            "a",
            "--",
            "sh",
            "-c",
            "echo from-run",
        ],
        "",
    ));
    assert!(id.trim().starts_with("j-"), "{id}");
    let waited = cordon(
        &server,
        Some(&token),
        &[
            "jobs",
            "run",
            "--project",
            "a",
            "--wait",
            "--",
            "sh",
            "-c",
            "echo waited; exit 3",
        ],
        "",
    );
    assert_eq!(waited.status.code(), Some(1), "a failed job: exit 1");
    assert_eq!(String::from_utf8_lossy(&waited.stdout), "waited\n");
    assert!(
        String::from_utf8_lossy(&waited.stderr).contains(": failed"),
        "{waited:?}"
    );

    // `jobs verify --repo --wait`: each stage's start and end, and the verdict.
    let repo = cordon_test_support::repo_with(
        server.dir.path(),
        &[(
            "cordon.toml",
            "[[stage]]\nname = \"check\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"echo checking\"]\n",
        )],
    );
    let verified = cordon(
        &server,
        Some(&token),
        &[
            "jobs",
            "verify",
            "--project",
            "a",
            "--repo",
            repo.to_str().unwrap(),
            "--wait",
        ],
        "",
    );
    let stderr = String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "{verified:?}");
    assert!(
        String::from_utf8_lossy(&verified.stdout).contains("checking"),
        "{verified:?}"
    );
    assert!(
        stderr.contains("── stage check: running") && stderr.contains("── stage check: pass ("),
        "{stderr}"
    );
    assert!(stderr.contains("── verdict: pass"), "{stderr}");
}

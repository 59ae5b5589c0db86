//! `/mcp` of `cordon serve` end to end, driven by the official MCP Python SDK over
//! Streamable HTTP with a project's token: the same session of calls as over stdio (tools,
//! run, verify of a failing patch with progress per stage, a session forked and its forks
//! compared, a cancelled run, refusals), each
//! call a job of the token's project under its policy; and a token of another project can
//! neither see nor touch the first one's runs. A real server, the real sandbox.

use super::support as mcp_support;
use crate::support;
use crate::support::server::Server;
use serde_json::json;

const POLICY: &str = r#"
workers = 3

[projects.alpha]
concurrency = 3
max_timeout = "2m"
allow = [["sh", "*"], ["true"], ["git", "*"], ["python3", "*"], ["no-such-program-xyz"]]

[projects.beta]
allow = [["sh", "*"], ["true"]]
"#;

const TOOLS: [&str; 12] = [
    "run",
    "verify",
    "workspace_create",
    "workspace_apply",
    "session_create",
    "session_exec",
    "session_pull",
    "session_remove",
    "session_fork",
    "session_compare",
    "runs_show",
    "runs_logs",
];

#[test]
fn the_same_calls_over_streamable_http_are_jobs_of_the_tokens_project() {
    if !support::sandbox_available() {
        return;
    }
    let server = Server::start(POLICY);
    let token = server.token("alpha", "submit,read");
    let repo = mcp_support::project(server.dir.path());
    let outside = server.dir.path().join("home");
    let env = json!({
        "url": format!("http://{}/mcp", server.url),
        "token": token,
        "repo": repo,
        "outside": outside,
        "tools": TOOLS,
        "grace": 2.0,
        "network_bound": "projects.alpha.network.run",
        "timeout_bound": "projects.alpha.max_timeout",
    });
    mcp_support::python_client("http", "tools,run,verify,sessions,cancel,bounds", &env);
    // Every call was a job of the project, like any other.
    let (status, list) = server.json(
        "GET",
        "/v1/jobs?limit=100",
        &token,
        &serde_json::Value::Null,
    );
    assert_eq!(status, 200, "{list}");
    let types: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["type"].as_str().unwrap())
        .collect();
    for wanted in ["run", "verify", "session.fork", "session.compare"] {
        assert!(types.contains(&wanted), "{wanted}: {types:?}");
    }
}

#[test]
fn a_token_of_another_project_cannot_see_or_touch_the_first_ones_runs() {
    if !support::sandbox_available() {
        return;
    }
    let server = Server::start(POLICY);
    let alpha = server.token("alpha", "submit,read");
    let beta = server.token("beta", "submit,read");
    let repo = mcp_support::project(server.dir.path());
    let run = server.run_to_end(
        &alpha,
        &support::server::run_job("alpha", "echo alpha-secret-output"),
    );
    assert_eq!(run["state"], "succeeded", "{run}");
    let clone = server.run_to_end(
        &alpha,
        &json!({"project": "alpha", "type": "repo.clone", "inputs": {"url": repo}}),
    );
    assert_eq!(clone["state"], "succeeded", "{clone}");
    let env = json!({
        "url": format!("http://{}/mcp", server.url),
        "token": beta,
        "victim_job": run["id"],
        "victim_workspace": clone["id"],
    });
    mcp_support::python_client("http", "isolation", &env);
    // No token, no MCP.
    let (status, headers, _) = server.request(
        "POST",
        "/mcp",
        None,
        &[("Accept", "application/json, text/event-stream")],
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    assert_eq!(status, 401, "{headers}");
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{headers}"
    );
}

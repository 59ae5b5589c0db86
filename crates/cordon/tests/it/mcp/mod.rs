//! `cordon mcp` end to end over stdio, driven by the official MCP SDKs as clients (Python,
//! and TypeScript once): the tools and their schemas, `run`, `verify` of a failing patch with
//! a progress notification per stage, a cancelled run whose process tree is gone within the
//! grace period, and calls beyond the operator's bounds refused as tool errors naming the
//! bound. The real `cordon`, the real sandbox, real repositories.

#[cfg(feature = "server")]
mod serve;
mod support;

use crate::support as test_support;

use std::process::Command;

use crate::support::TestDir;
use serde_json::json;

/// cordon's grace period between SIGTERM and SIGKILL (`cordon run --grace`'s default), in
/// seconds: a cancelled run's whole tree is gone within it.
const GRACE_SECONDS: f64 = 2.0;

const TOOLS: [&str; 16] = [
    "run",
    "verify",
    "workspace_create",
    "workspace_apply",
    "workspace_diff",
    "workspace_remove",
    "session_create",
    "session_exec",
    "session_diff",
    "session_pull",
    "session_show",
    "session_remove",
    "session_fork",
    "session_compare",
    "runs_show",
    "runs_logs",
];

/// `client.py stdio SCENARIOS` against `cordon mcp ARGS --repo REPO`.
fn stdio(scenarios: &str, args: &[&str]) -> String {
    let dir = TestDir::new();
    let repo = support::project(dir.path());
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    all.extend(["--repo".to_owned(), repo.display().to_string()]);
    let env = json!({
        "args": all,
        "repo": repo,
        "outside": outside,
        "tools": TOOLS,
        "grace": GRACE_SECONDS,
        "network_bound": "--allow-network none",
        "timeout_bound": "--max-timeout 30s",
    });
    support::python_client("stdio", scenarios, &env)
}

#[test]
fn the_tools_are_listed_with_valid_schemas_and_truthful_annotations() {
    stdio("tools", &[]);
}

#[test]
fn run_answers_the_run_result_and_records_it() {
    if !test_support::sandbox_available() {
        return;
    }
    stdio("run", &[]);
}

#[test]
fn verify_of_a_failing_patch_blocks_the_gate_with_the_test_and_place_and_a_progress_per_stage() {
    if !test_support::sandbox_available() {
        return;
    }
    stdio("verify", &[]);
}

#[test]
fn a_cancelled_run_loses_its_whole_process_tree_within_the_grace_period() {
    if !test_support::sandbox_available() {
        return;
    }
    let out = stdio("cancel", &[]);
    eprintln!("{out}");
}

#[test]
fn calls_beyond_the_operators_bounds_are_tool_errors_naming_the_bound() {
    if !test_support::sandbox_available() {
        return;
    }
    stdio("bounds", &["--max-timeout", "30s", "--memory", "512MiB"]);
}

#[test]
fn workspaces_and_sessions_are_used_as_an_agent_uses_them() {
    if !test_support::overlay_available() {
        return;
    }
    stdio("places", &[]);
}

/// The official TypeScript SDK's client: initialise, list the tools, run, and a refusal.
#[test]
fn the_typescript_sdk_drives_the_stdio_server() {
    if !test_support::sandbox_available() {
        return;
    }
    let sdk = support::typescript_sdk();
    let dir = TestDir::new();
    let repo = support::project(dir.path());
    let out = Command::new("node")
        .arg(support::script("client.mjs"))
        .env("MCP_SDK", &sdk)
        .env("CORDON_BIN", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_HOME", test_support::test_home())
        .env("MCP_REPO", &repo)
        .output()
        .expect("node starts");
    support::passed(&out, "client.mjs");
}

/// `--allow-no-sandbox` makes the option exist; without it, it does not (see `tools`).
#[test]
fn no_sandbox_exists_only_when_the_operator_allows_it() {
    let dir = TestDir::new();
    let repo = support::project(dir.path());
    let out = Command::new(support::python())
        .arg("-c")
        .arg(NO_SANDBOX_CHECK)
        .env("CORDON_BIN", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_HOME", test_support::test_home())
        .env("MCP_REPO", &repo)
        .output()
        .unwrap();
    support::passed(&out, "the no_sandbox check");
}

const NO_SANDBOX_CHECK: &str = r#"
import os, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=os.environ["CORDON_BIN"],
        args=["mcp", "--allow-no-sandbox", "--repo", os.environ["MCP_REPO"]], env=dict(os.environ))
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            run = next(t for t in (await s.list_tools()).tools if t.name == "run")
            assert "no_sandbox" in run.input_schema["properties"], run.input_schema
            result = await s.call_tool("run", {"argv": ["sh", "-c", "echo unsandboxed"], "no_sandbox": True})
            assert not result.is_error, result
            doc = result.structured_content
            assert doc["sandbox"]["enabled"] is False, doc["sandbox"]
            assert "unsandboxed" in doc["stdout"]["head"], doc["stdout"]

anyio.run(main)
"#;

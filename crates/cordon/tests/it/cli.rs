//! The CLI's own surface: help, schemas, and the one contract of every command — its exit
//! codes, and the `cordon.error/v1` document a failed `--json` command prints.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::error_document::{error_document, schema_errors};
use crate::support::{TestDir, cordon, repo_with};

#[test]
fn printed_schemas_are_the_committed_ones() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    for (document, file) in [
        ("run-result", "run-result.v1.json"),
        ("run-report", "run-report.v1.json"),
        ("cordon-toml", "cordon-toml.v1.json"),
        ("run-list", "run-list.v1.json"),
        ("run-record", "run-record.v1.json"),
        ("run-export", "run-export.v1.json"),
        ("run-chunk", "run-chunk.v1.json"),
        ("workspace", "workspace.v1.json"),
        ("workspace-info", "workspace-info.v1.json"),
        ("workspace-list", "workspace-list.v1.json"),
        ("workspace-apply", "workspace-apply.v1.json"),
        ("workspace-diff", "workspace-diff.v1.json"),
        ("gc", "gc.v1.json"),
        ("verify-plan", "verify-plan.v1.json"),
        ("error", "error.v1.json"),
        ("doctor", "doctor.v1.json"),
        ("session", "session.v1.json"),
        ("session-list", "session-list.v1.json"),
        ("session-push", "session-push.v1.json"),
        ("session-pull", "session-pull.v1.json"),
        ("session-fork", "session-fork.v1.json"),
        ("session-compare", "session-compare.v1.json"),
    ] {
        let out = cordon().args(["schema", document]).output().unwrap();
        assert!(out.status.success());
        let committed = std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            committed,
            "{document}"
        );
    }
}

#[test]
fn every_command_explains_itself() {
    for command in [
        "run",
        "verify",
        "workspace",
        "gc",
        "runs",
        "doctor",
        "schema",
        "session",
    ] {
        let out = cordon().args([command, "--help"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{command}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: cordon"), "{command}: {text}");
        assert!(text.len() > 200, "{command} --help is too thin: {text}");
    }
    let out = cordon().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `cordon ARGS` (with `--json` inserted after the subcommand words when `json`).
fn run_cli(args: &[&str], json: bool, configure: impl Fn(&mut std::process::Command)) -> Output {
    let mut command = cordon();
    configure(&mut command);
    let words = args
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .count()
        .min(2);
    command.args(&args[..words]);
    if json {
        command.arg("--json");
    }
    command.args(&args[words..]);
    command.output().unwrap()
}

/// Without `--json`: the exit code, nothing on stdout, the message on stderr. With it: the
/// same exit code and a valid `cordon.error/v1` document on stdout, which it returns.
#[track_caller]
fn fails_with(code: i32, args: &[&str], configure: impl Fn(&mut std::process::Command)) -> Value {
    let out = run_cli(args, false, &configure);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error:"), "{args:?}: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{args:?}: no document without --json: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run_cli(args, true, &configure);
    assert_eq!(out.status.code(), Some(code), "{args:?} --json");
    let document = error_document(&out);
    assert_eq!(document["code"], code, "{args:?}: {document:#}");
    document
}

#[test]
fn the_validator_catches_what_the_error_schema_forbids() {
    let good = json!({"schema": "cordon.error/v1", "code": 2, "kind": "usage",
        "message": "m", "causes": [], "hints": ["h"]});
    assert_eq!(schema_errors(&good), Vec::<String>::new());
    for (field, bad) in [
        ("schema", json!("cordon.verify-error/v1")),
        ("kind", json!("infra")),
        ("code", json!(300)),
        ("hints", json!([1])),
        ("overall", json!("error")),
        ("line", json!("seven")),
    ] {
        let mut document = good.clone();
        document[field] = bad;
        assert!(!schema_errors(&document).is_empty(), "{field}");
    }
    let mut document = good;
    document.as_object_mut().unwrap().remove("message");
    assert!(!schema_errors(&document).is_empty());
}

#[test]
fn a_command_line_clap_refuses_exits_2_in_every_command_family() {
    for args in [
        &["run", "--bogus", "--", "true"][..],
        &["run", "--timeout", "soon", "--", "true"],
        &["verify", "--bogus"],
        &["verify", "--parallel-stages", "0"],
        &["workspace", "list", "--bogus"],
        &["workspace", "show"],
        &["session", "list", "--bogus"],
        &["session", "pull"],
        &["gc", "--older-than", "soon"],
        &["runs", "list", "--status", "nope"],
        &["doctor", "--bogus"],
        &["token", "create"],
        &["jobs", "list", "--limit", "many"],
        &["schema", "nope"],
        &["serve", "--max-body", "lots"],
        &["worker", "--lease", "long"],
    ] {
        let document = fails_with(2, args, |_| {});
        assert_eq!(document["kind"], "usage", "{args:?}: {document:#}");
        assert!(!document["message"].as_str().unwrap().is_empty());
    }
    // The program's own `--json` after `--` asks nothing of cordon.
    let out = cordon()
        .args(["run", "--bogus", "--", "jq", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn cordon_run_with_a_bad_flag_exits_2_not_125() {
    let out = cordon()
        .args(["run", "--bogus", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = cordon()
        .args(["run", "--json", "--bogus", "--", "true"])
        .output()
        .unwrap();
    let document = error_document(&out);
    assert_eq!(
        (&document["code"], &document["kind"], &document["message"]),
        (
            &json!(2),
            &json!("usage"),
            &json!("unexpected argument '--bogus' found")
        )
    );
}

#[test]
fn usage_errors_cordon_finds_after_parsing_exit_2_with_their_kind() {
    let dir = TestDir::new();
    let not_a_repo = dir.path().join("plain");
    std::fs::create_dir_all(&not_a_repo).unwrap();
    let not_a_repo = not_a_repo.to_str().unwrap();
    let no_token = |c: &mut std::process::Command| {
        c.env_remove("CORDON_TOKEN");
    };
    for (args, kind) in [
        (
            &["run", "--no-sandbox", "--cwd", "/no/such/dir", "--", "true"][..],
            "usage",
        ),
        (
            &["run", "--workspace", "abcd2345", "--", "true"],
            "not_found",
        ),
        (
            &["run", "--no-sandbox", "--memory", "1GiB", "--", "true"],
            "usage",
        ),
        (&["verify", "--repo", not_a_repo], "usage"),
        (&["workspace", "show", "abcd2345"], "not_found"),
        (&["workspace", "show", "NOT-AN-ID"], "usage"),
        (&["session", "show", "abcd2345"], "not_found"),
        (&["runs", "show", "r-nothere"], "not_found"),
        (&["token", "revoke", "t-nothere"], "not_found"),
    ] {
        let document = fails_with(2, args, |_| {});
        assert_eq!(document["kind"], kind, "{args:?}: {document:#}");
    }
    let document = fails_with(2, &["jobs", "list"], no_token);
    assert_eq!(document["message"], "CORDON_TOKEN is not set");
    assert_eq!(
        document["hints"],
        json!(["create one with `cordon token create --project P`"])
    );
}

#[test]
fn a_bad_configuration_file_is_a_config_error_naming_the_file_and_line() {
    let dir = TestDir::new();
    let repo = repo_with(
        dir.path(),
        &[("cordon.toml", "[[stage]]\nname = \"x\"\nrun = 7\n")],
    );
    let repo = repo.to_str().unwrap();
    let document = fails_with(2, &["verify", "--explain", "--repo", repo], |_| {});
    assert_eq!(document["kind"], "config", "{document:#}");
    assert!(
        document["file"].as_str().unwrap().ends_with("cordon.toml"),
        "{document:#}"
    );
    assert_eq!(document["line"], 3, "{document:#}");
    assert!(
        document["hints"][0]
            .as_str()
            .unwrap()
            .contains("cordon schema cordon-toml"),
        "{document:#}"
    );
    // `serve` has no --json: the message names the file.
    let out = cordon()
        .args(["serve", "--config", "/no/such/policy.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/policy.toml"));
}

#[test]
fn cordon_failing_exits_125_in_every_command_family() {
    let dir = TestDir::new();
    let repo = repo_with(dir.path(), &[("README", "hello\n")]);
    let repo = repo.to_str().unwrap();
    // A cordon home that cannot be created: nothing can be recorded or made.
    let broken_home = |c: &mut std::process::Command| {
        c.env("CORDON_HOME", "/proc/cordon-cannot-be-here");
    };
    for args in [
        &["run", "--no-sandbox", "--", "true"][..],
        &["verify", "--repo", repo],
        &["workspace", "create", "--repo", repo],
        &["session", "create", "--repo", repo],
        &["gc"],
        &["runs", "list"],
        &["token", "list"],
    ] {
        let document = fails_with(125, args, broken_home);
        assert_eq!(document["kind"], "internal", "{args:?}: {document:#}");
    }
    // The sandbox helper is missing.
    let document = fails_with(125, &["run", "--", "true"], |c| {
        c.env("CORDON_SANDBOX_HELPER", "/nonexistent");
    });
    assert!(
        document["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent"),
        "{document:#}"
    );
    // The job service cannot be reached.
    let document = fails_with(
        125,
        &["jobs", "list", "--server", "http://127.0.0.1:1"],
        |c| {
            c.env("CORDON_TOKEN", "t");
        },
    );
    assert_eq!(document["kind"], "unavailable", "{document:#}");
}

#[test]
fn help_explains_the_exit_codes() {
    let help = |args: &[&str]| {
        let out = cordon().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = help(&["--help"]);
    for line in [
        "Exit codes (every command):",
        "2      usage error",
        "125    cordon itself failed",
        "cordon.error/v1",
    ] {
        assert!(top.contains(line), "{line}: {top}");
    }
    let run = help(&["run", "--help"]);
    assert!(run.contains("2 when the command line is wrong"), "{run}");
    assert!(run.contains("125 when cordon itself failed"), "{run}");
    let verify = help(&["verify", "--help"]);
    assert!(verify.contains("125 cordon itself failed"), "{verify}");
    assert!(!verify.contains("3 infrastructure"), "{verify}");
}

//! The smaller traps: tables that survive commands with newlines, `runs list --kind`,
//! `cordon schema` listing its documents, an empty repository's error, git's detached
//! maintenance not reported as a leftover, `cordon jobs` naming the URL that answered 401, a
//! compact default policy, and no run file left in the shared /tmp (even when a run is
//! killed).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::{Fixture, text};
use crate::support::{self, TestDir, server::Server, signal, wait_reaped, wait_until};

/// Only a hang reaches this.
const HANG: Duration = Duration::from_secs(60);

#[test]
fn tables_keep_one_line_per_run_whatever_the_command() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let script = "echo one\necho two";
    f.ok(&["run", "--", "sh", "-c", script]);
    let id = text(&f.ok(&["session", "create"]).stdout).trim().to_owned();
    f.ok(&["session", "exec", &id, "--", "sh", "-c", script]);
    let listed = text(&f.ok(&["runs", "list"]).stdout);
    assert_eq!(listed.lines().count(), 3, "{listed}");
    assert!(listed.contains(r#"sh -c "echo one\necho two""#), "{listed}");
    let shown = text(&f.ok(&["session", "show", &id]).stdout);
    assert_eq!(shown.lines().count(), 2, "{shown}");
    assert!(shown.contains(r#"sh -c "echo one\necho two""#), "{shown}");
}

#[test]
fn runs_list_tells_the_watchers_runs_from_the_users_own() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.ok(&["run", "--", "true"]);
    let id = text(&f.ok(&["session", "create"]).stdout).trim().to_owned();
    f.ok(&[
        "session",
        "watch",
        &id,
        "--source",
        "echo polled",
        "--fixer",
        "true",
        "--idle-timeout",
        "10ms",
        "--backoff-min",
        "10ms",
    ]);
    let kinds = |kind: &str| -> Vec<String> {
        let list = f.json(&["runs", "list", "--json", "--kind", kind]);
        list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["kind"].as_str().unwrap().to_owned())
            .collect()
    };
    let watch = kinds("watch");
    assert!(
        !watch.is_empty() && watch.iter().all(|k| k == "watch"),
        "{watch:?}"
    );
    assert_eq!(kinds("run"), ["run"]);
    assert!(kinds("verify").is_empty());
    let listed = text(&f.ok(&["runs", "list", "--kind", "watch"]).stdout);
    assert!(
        listed.lines().skip(1).all(|l| l.contains(" watch ")),
        "{listed}"
    );
    let out = f.cordon(&["runs", "list", "--kind", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("expected one of: run, verify, watch"));
}

#[test]
fn schema_without_a_name_lists_the_documents_it_prints() {
    let f = Fixture::new();
    let listed = text(&f.ok(&["schema"]).stdout);
    let names: Vec<&str> = listed
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert!(names.len() > 20, "{listed}");
    for name in ["run-result", "workspace", "session", "error", "job"] {
        assert!(names.contains(&name), "{name}: {listed}");
    }
    for name in names {
        let schema: serde_json::Value =
            serde_json::from_slice(&f.ok(&["schema", name]).stdout).unwrap();
        assert!(schema.get("$schema").is_some(), "{name}");
    }
}

#[test]
fn an_empty_repository_says_it_has_no_commits() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let empty = TestDir::new();
    support::git(empty.path(), &["init", "-q"]);
    let dir = empty.path().to_str().unwrap();
    for args in [
        &["verify", "--repo", dir][..],
        &["workspace", "create", "--repo", dir],
        &["session", "create", "--repo", dir],
    ] {
        let out = f.cordon(args);
        let said = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains("the repository has no commits yet"),
            "{args:?}: {said}"
        );
        assert!(!said.contains("exited with status"), "{args:?}: {said}");
    }
}

#[test]
fn gits_detached_maintenance_is_not_a_leftover() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = text(&f.ok(&["session", "create"]).stdout).trim().to_owned();
    for i in 0..3 {
        // gc.auto=1: git's automatic maintenance has work after every commit.
        let script = format!(
            "echo {i} >> f.txt && git add f.txt && \
             git -c gc.auto=1 -c user.name=a -c user.email=a@a commit -qm c{i}"
        );
        let out = f.ok(&["session", "exec", &id, "--json", "--", "sh", "-c", &script]);
        let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(result["leaked"]["processes_killed"], 0, "{result:#}");
        let out = f.ok(&["session", "exec", &id, "--", "git", "status", "--short"]);
        assert!(
            !text(&out.stderr).contains("leftover"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn jobs_name_the_url_that_refused_the_token() {
    let server = Server::start("[projects.a]\nallow = [[\"sh\", \"*\"]]\n");
    let f = Fixture::new();
    let out = f
        .command(&["jobs", "list"])
        .env("CORDON_SERVER", format!("http://{}", server.url))
        .env("CORDON_TOKEN", "cdn_not_a_token_of_this_server")
        .output()
        .unwrap();
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "http://{}/v1/jobs?limit=50 answered 401",
            server.url
        )),
        "{said}"
    );
    assert!(
        said.contains("hint: this server does not accept CORDON_TOKEN"),
        "{said}"
    );
}

#[test]
fn the_default_policy_is_compact() {
    let f = Fixture::new();
    let policy = text(&f.ok(&["serve", "--print-default-policy"]).stdout);
    assert!(policy.contains("\n    [\"cargo\", \"*\"],\n"), "{policy}");
    assert!(policy.lines().count() < 80, "{policy}");
    let file = f.home.write("cordon-server.toml", &policy);
    // It is a policy the service takes as it is.
    let _server = Server::start_in(std::sync::Arc::new(TestDir::new()), file);
}

/// Names in `dir` (none when it is missing).
fn names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn run_files_stay_out_of_tmp_and_a_killed_runs_are_removed_by_the_next() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let tmp = TestDir::new();
    let runs = f.home.path().join("run");
    // A run in a checkout: cordon shows the sandbox a scrubbed copy of .git/config.
    f.command(&["run", "--", "git", "config", "--list"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(names(tmp.path()), Vec::<String>::new());
    assert_eq!(names(&runs), Vec::<String>::new());

    // Killed while its program runs: its files are left, until the next run.
    let started = tmp.path().join("started");
    let mut child = f
        .command(&[
            "run",
            "--rw",
            tmp.path().to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &format!("touch {}; sleep 60", started.display()),
        ])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the program started", HANG, || started.exists());
    let left = names(&runs);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with(&format!("{}-git-", child.id())),
        "{left:?}"
    );
    let pid = i32::try_from(child.id()).unwrap();
    signal(pid, libc::SIGKILL);
    let _ = child.wait();
    wait_reaped(pid, HANG);
    f.command(&["run", "--", "true"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(names(&runs), Vec::<String>::new());
    assert_eq!(names(tmp.path()), ["started"]);
}

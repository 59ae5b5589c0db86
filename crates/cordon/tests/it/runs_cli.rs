//! `cordon runs`: the real binary against a store populated through `cordon-store`, in a
//! temporary `CORDON_HOME` per test.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cordon_store::{NewRun, RunId, RunKind, RunState, StageRecord, Store, Stream};
use pretty_assertions::assert_eq;
use serde_json::json;

fn cordon(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(args)
        .env("CORDON_HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("run cordon")
}

/// The binary has the `runs` subcommand (a missing one fails every test, never skips).
fn wired() -> bool {
    let help = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["runs", "--help"])
        .output()
        .expect("run cordon");
    assert!(
        help.status.success(),
        "`cordon runs` is missing from the CLI"
    );
    true
}

fn stdout_json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "cordon failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

/// A store with a finished `run` (document + transcript) and a running `verify`.
struct Fixture {
    home: tempfile::TempDir,
    store: Store,
    passed: RunId,
    verifying: RunId,
}

const BINARY: &[u8] = &[0, 159, 146, 150, 255, b'\n'];

fn fixture() -> Fixture {
    let home = tempfile::tempdir().expect("temp dir");
    let store = Store::open_sqlite(&home.path().join("cordon.db")).expect("open");
    let passed = store
        .begin_run(&NewRun {
            kind: RunKind::Run,
            repo: Some("/src/project".to_owned()),
            session: None,
            command: json!(["cargo", "test"]),
        })
        .expect("begin");
    let writer = store.transcript(&passed).expect("transcript");
    writer.write(None, Stream::Stdout, b"compiling\n");
    writer.write(
        None,
        Stream::Stderr,
        b"warning: token [REDACTED:GITHUB_TOKEN]\n",
    );
    writer.write(None, Stream::Stdout, BINARY);
    writer.write(None, Stream::Stdout, b"test result: ok\n");
    writer.finish().expect("finish transcript");
    let document = json!({"schema": "cordon.run-result/v1", "status": "pass", "exit_code": 0});
    store
        .finish_run(&passed, RunState::Pass, Some(&document))
        .expect("finish");
    // Started in the same millisecond or not, it lists first: ties go to the later insert.
    let verifying = store
        .begin_run(&NewRun {
            kind: RunKind::Verify,
            repo: Some("/src/other".to_owned()),
            session: None,
            command: json!(["cordon", "verify"]),
        })
        .expect("begin");
    store
        .record_stage(
            &verifying,
            &StageRecord {
                index: 0,
                name: "lint".to_owned(),
                status: cordon_types::StageStatus::Pass,
                document: json!({"name": "lint"}),
            },
        )
        .expect("stage");
    let writer = store.transcript(&verifying).expect("transcript");
    writer.write(Some("lint"), Stream::Stdout, b"lint ok\n");
    writer.write(Some("test"), Stream::Stdout, b"testing\n");
    writer.finish().expect("finish transcript");
    Fixture {
        home,
        store,
        passed,
        verifying,
    }
}

#[test]
fn runs_list_shows_newest_first_and_filters() {
    if !wired() {
        return;
    }
    let f = fixture();
    let home = f.home.path();
    let table = cordon(home, &["runs", "list"]);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let text = String::from_utf8(table.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("STATUS"),
        "{text}"
    );
    assert!(lines[1].starts_with(f.verifying.as_str()) && lines[1].contains("running"));
    assert!(lines[2].starts_with(f.passed.as_str()) && lines[2].contains("pass"));
    assert!(lines[2].contains("cargo test") && lines[2].contains("/src/project"));

    let list = stdout_json(&cordon(home, &["runs", "list", "--json"]));
    assert_eq!(list["schema"], "cordon.run-list/v1");
    let ids: Vec<&str> = list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, vec![f.verifying.as_str(), f.passed.as_str()]);

    let passed = stdout_json(&cordon(
        home,
        &["runs", "list", "--json", "--status", "pass"],
    ));
    assert_eq!(passed["runs"].as_array().expect("runs").len(), 1);
    assert_eq!(passed["runs"][0]["id"], f.passed.as_str());
    let limited = stdout_json(&cordon(home, &["runs", "list", "--json", "--limit", "1"]));
    assert_eq!(limited["runs"][0]["id"], f.verifying.as_str());
    assert_eq!(limited["runs"].as_array().expect("runs").len(), 1);

    let bad = cordon(home, &["runs", "list", "--status", "bogus"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn runs_list_filters_by_canonical_repo() {
    if !wired() {
        return;
    }
    let home = tempfile::tempdir().expect("temp dir");
    let repo = home.path().join("repo");
    std::fs::create_dir(&repo).expect("repo dir");
    let canonical = std::fs::canonicalize(&repo).expect("canonical");
    let store = Store::open_sqlite(&home.path().join("cordon.db")).expect("open");
    let here = store
        .begin_run(&NewRun {
            kind: RunKind::Run,
            repo: Some(canonical.display().to_string()),
            session: None,
            command: json!(["true"]),
        })
        .expect("begin");
    store
        .begin_run(&NewRun {
            kind: RunKind::Run,
            repo: None,
            session: None,
            command: json!(["false"]),
        })
        .expect("begin");
    // A relative, non-canonical spelling of the same directory.
    let spelled = format!("{}/../repo", repo.display());
    let output = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["runs", "list", "--json", "--repo", &spelled])
        .env("CORDON_HOME", home.path())
        .output()
        .expect("run cordon");
    let list = stdout_json(&output);
    let runs = list["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["id"], here.as_str());
}

#[test]
fn runs_show_prints_the_stored_document() {
    if !wired() {
        return;
    }
    let f = fixture();
    let home = f.home.path();
    let shown = cordon(home, &["runs", "show", f.passed.as_str()]);
    assert!(shown.status.success());
    let text = String::from_utf8(shown.stdout).expect("utf-8");
    assert!(
        text.starts_with(&format!("run {}  pass\n", f.passed)),
        "{text}"
    );
    assert!(
        text.contains("\"schema\": \"cordon.run-result/v1\""),
        "{text}"
    );

    let record = stdout_json(&cordon(
        home,
        &["runs", "show", "--json", f.passed.as_str()],
    ));
    assert_eq!(record["schema"], "cordon.run-record/v1");
    assert_eq!(
        record["document"],
        json!({"schema": "cordon.run-result/v1", "status": "pass", "exit_code": 0})
    );
    assert_eq!(record["run"]["status"], "pass");

    let running = stdout_json(&cordon(
        home,
        &["runs", "show", "--json", f.verifying.as_str()],
    ));
    assert_eq!(
        running["run"]["status"], "running",
        "its owner (this test) is alive"
    );
    assert_eq!(running["stages"][0]["name"], "lint");
    assert_eq!(running["document"], serde_json::Value::Null);
}

#[test]
fn runs_logs_prints_the_exact_transcript_in_order() {
    if !wired() {
        return;
    }
    let f = fixture();
    let home = f.home.path();
    let all = cordon(home, &["runs", "logs", f.passed.as_str()]);
    assert!(all.status.success());
    let mut expected = b"compiling\nwarning: token [REDACTED:GITHUB_TOKEN]\n".to_vec();
    expected.extend_from_slice(BINARY);
    expected.extend_from_slice(b"test result: ok\n");
    assert_eq!(all.stdout, expected);

    let stderr = cordon(
        home,
        &["runs", "logs", f.passed.as_str(), "--stream", "stderr"],
    );
    assert_eq!(stderr.stdout, b"warning: token [REDACTED:GITHUB_TOKEN]\n");

    let stage = cordon(
        home,
        &["runs", "logs", f.verifying.as_str(), "--stage", "test"],
    );
    assert_eq!(stage.stdout, b"testing\n");

    let lines = cordon(home, &["runs", "logs", "--json", f.passed.as_str()]);
    let chunks: Vec<serde_json::Value> = String::from_utf8(lines.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        chunks[0]["body"],
        json!({"kind": "text", "text": "compiling\n"})
    );
    assert_eq!(chunks[1]["stream"], "stderr");
    assert!(
        chunks.iter().any(|c| c["body"]["kind"] == "base64"),
        "{chunks:?}"
    );
}

#[test]
fn runs_logs_follow_tails_until_the_run_ends() {
    if !wired() {
        return;
    }
    let f = fixture();
    let id = f.verifying.clone();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["runs", "logs", "--follow", "--stage", "later", id.as_str()])
        .env("CORDON_HOME", f.home.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.expect("read")).is_err() {
                break;
            }
        }
    });
    let next_line = || {
        printed
            .recv_timeout(Duration::from_secs(30))
            .expect("the follower prints the line")
    };
    // Each line is written only once the follower printed the one before: it tails.
    let writer = f.store.transcript(&id).expect("transcript");
    for i in 0..3 {
        writer.write(
            Some("later"),
            Stream::Stdout,
            format!("step {i}\n").as_bytes(),
        );
        assert_eq!(next_line(), format!("step {i}"));
    }
    writer.finish().expect("finish transcript");
    // A finished transcript is not a finished run: the follower goes on, and prints what a
    // later writer of the same run adds.
    let writer = f.store.transcript(&id).expect("transcript again");
    writer.write(Some("later"), Stream::Stdout, b"step 3\n");
    writer.finish().expect("finish transcript");
    assert_eq!(next_line(), "step 3");
    assert!(
        child.try_wait().expect("poll").is_none(),
        "follow ended early"
    );
    f.store
        .finish_run(&id, RunState::Fail, None)
        .expect("finish run");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "follow never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    assert_eq!(
        printed.recv_timeout(Duration::from_secs(30)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected),
        "nothing more is printed"
    );
}

#[test]
fn runs_export_is_one_json_document_with_the_transcript() {
    if !wired() {
        return;
    }
    let f = fixture();
    let export = stdout_json(&cordon(
        f.home.path(),
        &["runs", "export", f.passed.as_str()],
    ));
    assert_eq!(export["schema"], "cordon.run-export/v1");
    assert_eq!(export["record"]["run"]["id"], f.passed.as_str());
    assert_eq!(
        export["record"]["document"]["schema"],
        "cordon.run-result/v1"
    );
    let transcript = export["transcript"].as_array().expect("transcript");
    assert_eq!(transcript.len(), 3, "{transcript:?}");
    assert_eq!(transcript[1]["stream"], "stderr");
}

#[test]
fn unknown_ids_exit_2_with_a_clear_message() {
    if !wired() {
        return;
    }
    let f = fixture();
    for args in [
        ["runs", "show", "r-aaaaaaaaaa"],
        ["runs", "logs", "r-aaaaaaaaaa"],
        ["runs", "export", "r-aaaaaaaaaa"],
        ["runs", "show", "not-an-id"],
    ] {
        let output = cordon(f.home.path(), &args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(output.stderr).expect("utf-8");
        assert!(
            stderr.starts_with(&format!("error: no run with id {}\n", args[2])),
            "{args:?}: {stderr}"
        );
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn a_damaged_store_is_reported_not_panicked_on() {
    if !wired() {
        return;
    }
    let home = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        home.path().join("cordon.db"),
        b"this is not a database at all\n",
    )
    .expect("write");
    let output = cordon(home.path(), &["runs", "list"]);
    assert_eq!(output.status.code(), Some(125));
    let stderr = String::from_utf8(output.stderr).expect("utf-8");
    assert!(
        stderr.starts_with("error: open failed on the run store "),
        "{stderr}"
    );
    assert!(stderr.contains("not an SQLite database"), "{stderr}");
    assert!(stderr.contains("hint: move "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

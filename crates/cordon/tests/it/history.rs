//! Every `cordon run` and `cordon verify` is recorded, redacted, and survives cordon's death.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use crate::support;
use crate::support::{DRAINED_SH, TestDir, cordon, git};

const SECRET: &str = "hist-secret-5e4d3c2b1a09";

fn in_home(home: &Path, args: &[&str]) -> Output {
    cordon()
        .env("CORDON_HOME", home)
        .env("MY_TOKEN", SECRET)
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every file under `dir`, bytes included (database, WAL, shared memory).
fn all_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                out.push((p.display().to_string(), bytes));
            }
        }
    }
    out
}

#[test]
fn a_run_is_recorded_with_its_transcript_and_no_secret_reaches_the_disk() {
    let home = TestDir::new();
    // The secret is also split across two reads of cordon's (the second part is written once
    // the first was read).
    let script = format!(
        "{DRAINED_SH}echo \"out $MY_TOKEN\"; echo err-line >&2; printf '%s' \"$MY_TOKEN\" | head -c 9; \
         drained; printf '%s\\n' \"$MY_TOKEN\" | tail -c +10"
    );
    let out = in_home(
        home.path(),
        &[
            "run", "--json", "--secret", "MY_TOKEN", "--", "sh", "-c", &script,
        ],
    );
    let result = json(&out);
    let id = result["run_id"]
        .as_str()
        .expect("a recorded run has an id")
        .to_owned();
    assert!(id.starts_with("r-"));

    let list = json(&in_home(home.path(), &["runs", "list", "--json"]));
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["id"], id.as_str());
    assert_eq!(runs[0]["status"], "pass");

    let shown = json(&in_home(home.path(), &["runs", "show", &id, "--json"]));
    assert_eq!(shown["document"]["stdout"], result["stdout"]);

    let logs = in_home(home.path(), &["runs", "logs", &id]);
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(text.contains("out [REDACTED:MY_TOKEN]"), "{text}");
    assert!(text.contains("err-line"), "{text}");
    let out_only = in_home(home.path(), &["runs", "logs", &id, "--stream", "stdout"]);
    assert!(!String::from_utf8_lossy(&out_only.stdout).contains("err-line"));

    for (file, bytes) in all_bytes(home.path()) {
        let found = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes())
            || bytes.windows(9).any(|w| w == &SECRET.as_bytes()[..9]) && file.ends_with(".db");
        assert!(!found, "{file} holds the secret (or its first bytes)");
    }
    let export = json(&in_home(home.path(), &["runs", "export", &id]));
    assert!(!export.to_string().contains(SECRET));
}

#[test]
fn sigkill_mid_run_leaves_an_interrupted_run_with_its_transcript() {
    let home = TestDir::new();
    let mut child = cordon()
        .env("CORDON_HOME", home.path())
        .args([
            "run",
            "--json",
            "--",
            "sh",
            "-c",
            "echo line-1; sleep 0.3; echo line-2; sleep 60",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The transcript is flushed every 250 ms: wait until the second line is stored.
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        assert!(
            Instant::now() < deadline,
            "the run never showed up with both lines"
        );
        std::thread::sleep(Duration::from_millis(200));
        let list = in_home(home.path(), &["runs", "list", "--json"]);
        if !list.status.success() {
            continue;
        }
        let Some(id) = json(&list)["runs"][0]["id"].as_str().map(str::to_owned) else {
            continue;
        };
        let logs = in_home(home.path(), &["runs", "logs", &id]);
        if String::from_utf8_lossy(&logs.stdout).contains("line-2") {
            break id;
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let list = json(&in_home(home.path(), &["runs", "list", "--json"]));
    assert_eq!(list["runs"][0]["status"], "interrupted", "{list:#}");
    let logs = in_home(home.path(), &["runs", "logs", &id]);
    assert_eq!(String::from_utf8_lossy(&logs.stdout), "line-1\nline-2\n");
}

#[test]
fn concurrent_runs_share_one_store() {
    let home = TestDir::new();
    let children: Vec<_> = (0..4)
        .map(|i| {
            cordon()
                .env("CORDON_HOME", home.path())
                .args(["run", "--json", "--", "sh", "-c"])
                .arg(format!("for n in $(seq 1 200); do echo run{i}-$n; done"))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        ids.push(json(&out)["run_id"].as_str().unwrap().to_owned());
    }
    for (i, id) in ids.iter().enumerate() {
        let logs = in_home(home.path(), &["runs", "logs", id]);
        let text = String::from_utf8_lossy(&logs.stdout);
        assert_eq!(text.lines().count(), 200, "run {i}");
        assert!(text.lines().all(|l| l.starts_with(&format!("run{i}-"))));
    }
    let list = json(&in_home(
        home.path(),
        &["runs", "list", "--json", "--limit", "10"],
    ));
    assert_eq!(list["runs"].as_array().unwrap().len(), 4);
}

#[test]
fn verify_is_recorded_with_stages_and_per_stage_logs() {
    let repo = TestDir::new();
    let home = TestDir::new();
    repo.write(
        "cordon.toml",
        "[[stage]]\nname = \"one\"\ncategory = \"test\"\nrun = [\"sh\", \"-c\", \"echo from-one\"]\n\n[[stage]]\nname = \"two\"\ncategory = \"build\"\nrun = [\"sh\", \"-c\", \"echo from-two >&2\"]\n",
    );
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-qm", "x"]);
    let out = in_home(
        home.path(),
        &["verify", "--json", "--repo", repo.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0));
    let report = json(&out);
    let id = report["run_id"].as_str().unwrap().to_owned();
    let shown = json(&in_home(home.path(), &["runs", "show", &id, "--json"]));
    assert_eq!(shown["run"]["kind"], "verify", "{shown:#}");
    assert_eq!(shown["stages"].as_array().unwrap().len(), 2);
    assert_eq!(shown["document"]["overall"], "pass");
    let logs = in_home(home.path(), &["runs", "logs", &id, "--stage", "two"]);
    assert_eq!(String::from_utf8_lossy(&logs.stdout), "from-two\n");
    let all = in_home(home.path(), &["runs", "logs", &id]);
    assert_eq!(String::from_utf8_lossy(&all.stdout), "from-one\nfrom-two\n");
}

#[test]
fn a_verification_that_reached_no_verdict_is_recorded_with_its_error_document() {
    let dir = TestDir::new();
    let home = TestDir::new();
    let repo = support::repo_with(dir.path(), &[("README", "hi\n")]);
    let out = in_home(
        home.path(),
        &[
            "verify",
            "--json",
            "--ref",
            "no-such-ref",
            "--repo",
            repo.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let printed = support::error_document::error_document(&out);
    let list = json(&in_home(home.path(), &["runs", "list", "--json"]));
    let id = list["runs"][0]["id"].as_str().unwrap().to_owned();
    let shown = json(&in_home(home.path(), &["runs", "show", &id, "--json"]));
    assert_eq!(shown["run"]["status"], "error", "{shown:#}");
    assert_eq!(shown["document_schema"], "cordon.error/v1", "{shown:#}");
    assert_eq!(
        shown["document"], printed,
        "the recorded document is the printed one"
    );
}

#[test]
fn a_damaged_store_stops_recording_runs_with_a_clear_error() {
    let home = TestDir::new();
    std::fs::write(
        home.path().join("cordon.db"),
        b"this is not a database at all, just text",
    )
    .unwrap();
    let out = in_home(home.path(), &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cordon.db"), "{stderr}");
    assert!(stderr.contains("--no-record"), "{stderr}");
    let out = in_home(home.path(), &["run", "--no-record", "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn gc_older_than_deletes_old_runs() {
    let home = TestDir::new();
    let out = in_home(home.path(), &["run", "--json", "--", "echo", "x"]);
    let id = json(&out)["run_id"].as_str().unwrap().to_owned();
    let report = json(&in_home(
        home.path(),
        &["gc", "--json", "--older-than", "1h"],
    ));
    assert_eq!(report["runs"]["deleted"], 0);
    std::thread::sleep(Duration::from_millis(20));
    let report = json(&in_home(
        home.path(),
        &["gc", "--json", "--older-than", "10ms"],
    ));
    assert_eq!(report["runs"]["deleted"], 1);
    let out = in_home(home.path(), &["runs", "show", &id]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn transcripts_are_bounded_by_transcript_limit() {
    let home = TestDir::new();
    let out = in_home(
        home.path(),
        &[
            "run",
            "--json",
            "--transcript-limit",
            "1KiB",
            "--",
            "sh",
            "-c",
            "head -c 10000 /dev/zero | tr '\\0' x",
        ],
    );
    let id = json(&out)["run_id"].as_str().unwrap().to_owned();
    assert!(String::from_utf8_lossy(&out.stderr).contains("past --transcript-limit"));
    let logs = in_home(home.path(), &["runs", "logs", &id]);
    assert_eq!(logs.stdout.len(), 1024, "the head is kept");
    let export = json(&in_home(home.path(), &["runs", "export", &id]));
    assert!(
        export.to_string().contains("lost"),
        "the rest is marked: {export}"
    );
}

#[test]
fn the_history_is_out_of_sight_of_sandboxed_programs() {
    let parent = TestDir::new();
    let home = parent.path().join("state");
    std::fs::create_dir(&home).unwrap();
    // A first run creates the database.
    assert!(in_home(&home, &["run", "--", "true"]).status.success());
    let out = cordon()
        .env("CORDON_HOME", &home)
        .args(["run", "--json", "--cwd"])
        .arg(parent.path())
        .args([
            "--",
            "sh",
            "-c",
            "ls -A state/ && echo LISTED; echo forged > state/cordon.db || echo REFUSED",
        ])
        .output()
        .unwrap();
    let result = json(&out);
    let stdout = result["stdout"]["head"].as_str().unwrap();
    // Masked: an empty directory that cannot be written (it reads as empty, never as an error
    // that tools stumble on).
    assert!(
        stdout.starts_with("LISTED\n") && stdout.contains("REFUSED"),
        "{result:#}"
    );
    assert!(!stdout.contains("cordon.db"), "{result:#}");
    let db = std::fs::read(home.join("cordon.db")).unwrap();
    assert!(db.starts_with(b"SQLite format 3"));
}

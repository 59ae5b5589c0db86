//! `cordon serve`'s job types and policy end to end, beyond the basics of `serve.rs`:
//! sessions as jobs, verify of a repository and ref by category, network per job type,
//! the secrets file, the Unix socket, and retries of infrastructure failures. A real server,
//! real git repositories, the real sandbox; jobs are followed through their live logs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cordon_test_support::cordon_bin;
use cordon_test_support::server::{Server, outputs};
use cordon_test_support::{TestDir, git, repo_with};
use serde_json::{Value, json};

const POLICY: &str = r#"
workers = 3

[projects.a]
concurrency = 2
max_timeout = "60s"
allow = [["sh", "*"], ["cat", "*"], ["git", "*"], ["true"]]

[projects.b]
allow = [["true"]]
"#;

/// A repository with one commit: a README and a `cordon.toml` of an optional lint stage and
/// a required test stage.
fn repo(dir: &Path) -> PathBuf {
    repo_with(
        dir,
        &[
            ("README", "hello from the repo\n"),
            (
                "cordon.toml",
                r#"
[[stage]]
name = "lint"
category = "lint"
required = false
run = ["sh", "-c", "echo linting"]

[[stage]]
name = "check"
category = "test"
run = ["sh", "-c", "cat README"]
"#,
            ),
        ],
    )
}

fn clone(server: &Server, token: &str, src: &Path) -> Value {
    let clone = server.run_to_end(
        token,
        &json!({"project": "a", "type": "repo.clone", "inputs": {"url": src.display().to_string()}}),
    );
    assert_eq!(clone["state"], "succeeded", "{clone}");
    clone
}

#[test]
fn serve_session_jobs_create_exec_review_pull_and_remove() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = clone(&server, &token, &src);
    let workspace = json!({"from_job": clone["id"]});
    let created = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.create", "inputs": {"workspace": workspace}}),
    );
    assert_eq!(created["state"], "succeeded", "{created}");
    assert_eq!(created["result"]["schema"], "cordon.session/v1");
    assert_eq!(created["result"]["state"], "active", "{created}");
    let session = json!({"from_job": created["id"]});

    // The writer commits in the session.
    let wrote = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.exec", "inputs": {"session": session, "argv": [
            "sh", "-c",
            "echo from the agent > AGENT && git add AGENT && \
             git -c user.name=agent -c user.email=agent@x commit -qm agent && echo committed"
        ]}}),
    );
    assert_eq!(wrote["state"], "succeeded", "{wrote}");
    assert!(
        wrote["result"]["stdout"]["head"]
            .as_str()
            .unwrap()
            .contains("committed"),
        "{wrote}"
    );
    // A reviewer reads but cannot write: the kernel refuses.
    let reviewed = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.exec", "inputs": {"session": session, "read_only": true,
            "argv": ["sh", "-c", "cat AGENT; echo tamper > AGENT"]}}),
    );
    assert_eq!(reviewed["state"], "failed", "{reviewed}");
    let text = reviewed["result"]["stdout"]["head"].as_str().unwrap();
    assert!(text.contains("from the agent"), "{reviewed}");
    let stderr = reviewed["result"]["stderr"]["head"].as_str().unwrap();
    assert!(stderr.contains("Read-only file system"), "{stderr}");

    // Another project cannot name this session: for it, there is no such job.
    let other = server.token("b", "submit,read");
    let (status, refused) = server.submit(
        &other,
        &json!({"project": "b", "type": "session.exec", "inputs": {"session": session, "argv": ["true"]}}),
    );
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("no session.create or session.fork job"),
        "{refused}"
    );

    // Pulled back: the workspace's branch fast-forwards; a run there sees the agent's file.
    let pulled = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.pull", "inputs": {"session": session}}),
    );
    assert_eq!(pulled["state"], "succeeded", "{pulled}");
    assert_eq!(
        pulled["result"]["schema"], "cordon.session-pull/v1",
        "{pulled}"
    );
    assert_eq!(pulled["result"]["commits"], 1, "{pulled}");
    let seen = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"workspace": workspace,
            "argv": ["sh", "-c", "cat AGENT && git log --format=%s -1"]}}),
    );
    assert_eq!(seen["state"], "succeeded", "{seen}");
    let text = seen["result"]["stdout"]["head"].as_str().unwrap();
    assert_eq!(text, "from the agent\nagent\n", "{seen}");

    // Removed: later session jobs fail as usage, the session's tree is gone.
    let removed = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.remove", "inputs": {"session": session}}),
    );
    assert_eq!(removed["state"], "succeeded", "{removed}");
    assert_eq!(removed["result"]["state"], "ended", "{removed}");
    let tree = PathBuf::from(created["result"]["path"].as_str().unwrap());
    assert!(!tree.exists(), "{} still exists", tree.display());
    let late = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.exec", "inputs": {"session": session, "argv": ["true"]}}),
    );
    assert_eq!(late["state"], "failed", "{late}");
    assert_eq!(late["failure"]["category"], "usage", "{late}");
}

#[test]
fn serve_session_remove_ends_a_running_session_exec() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = clone(&server, &token, &src);
    let created = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.create", "inputs": {"workspace": {"from_job": clone["id"]}}}),
    );
    let session = json!({"from_job": created["id"]});
    let marker = format!("serve-session-sleeper-{}", std::process::id());
    let (status, long) = server.submit(
        &token,
        &json!({"project": "a", "type": "session.exec", "inputs": {"session": session,
            "argv": ["sh", "-c", format!("echo started; sleep 300; : {marker}")]}}),
    );
    assert_eq!(status, 201, "{long}");
    let long_id = long["id"].as_str().unwrap().to_owned();
    // Started: its first output arrived.
    server.follow(&token, &long_id, None, |e| e.1 != "output");
    let removed = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.remove", "inputs": {"session": session}}),
    );
    assert_eq!(removed["state"], "succeeded", "{removed}");
    let events = server.events(&token, &long_id, None);
    assert_eq!(events.last().unwrap().2["state"], "cancelled", "{events:?}");
    assert_eq!(
        cordon_test_support::server::sleepers(&marker),
        0,
        "the exec's tree died"
    );
}

#[test]
fn serve_verifies_a_repository_at_a_ref_by_category() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    git(&src, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(src.join("README"), "hello from the feature\n").unwrap();
    git(&src, &["commit", "-qam", "feature"]);
    git(&src, &["checkout", "-q", "main"]);
    let verified = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": {
            "repo": src.display().to_string(), "ref": "feature", "categories": ["test"]}}),
    );
    assert_eq!(verified["state"], "succeeded", "{verified}");
    let stages = verified["result"]["stages"].as_array().unwrap();
    let status: Vec<(&str, &str)> = stages
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        status,
        [("lint", "skipped"), ("check", "pass")],
        "{verified}"
    );
    assert!(
        stages[1]["stdout"]["head"]
            .as_str()
            .unwrap()
            .contains("hello from the feature"),
        "{verified}"
    );
    // Bad inputs are refused at submission, with the field.
    for (inputs, field) in [
        (
            json!({"repo": src.display().to_string(), "categories": ["tests"]}),
            "categories",
        ),
        (json!({"categories": ["test"]}), "exactly one of"),
        (json!({"repo": "--upload-pack=x"}), "inputs.repo"),
    ] {
        let (status, answer) = server.submit(
            &token,
            &json!({"project": "a", "type": "verify", "inputs": inputs}),
        );
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(field),
            "{answer}"
        );
    }
}

#[test]
fn a_verify_jobs_live_log_names_the_stage_of_each_output_of_parallel_stages() {
    // Parallel stages run at once only on overlay workspaces.
    if !cordon_test_support::overlay_available() {
        return;
    }
    // Project `a` lets two parallel stages run at once; `c` keeps the default, one.
    let server = Server::start(
        r#"
workers = 2

[projects.a]
max_timeout = "60s"
allow = [["sh", "*"], ["git", "*"]]
limits = { parallel_stages = 2 }

[projects.c]
max_timeout = "60s"
allow = [["sh", "*"], ["git", "*"]]
"#,
    );
    // Two parallel stages, each printing its own lines while the other runs.
    let line = |name: &str| {
        format!(
            "[[stage]]\nname = \"{name}\"\ncategory = \"test\"\nparallel = true\nrun = [\"sh\", \"-c\", \"for i in 1 2 3 4 5; do echo from-{name}-$i; sleep 0.2; done\"]\n"
        )
    };
    let config = format!("{}\n{}", line("left"), line("right"));
    let src = repo_with(server.dir.path(), &[("cordon.toml", config.as_str())]);
    // A candidate (a ref beyond the base): its parallel stages run on layers of their own.
    git(&src, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(src.join("README"), "a change\n").unwrap();
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-qm", "feature"]);
    // The order the stages spoke in, as each project's live log tells it.
    let speakers = |project: &str| -> Vec<String> {
        let token = server.token(project, "submit,read");
        let verified = server.run_to_end(
            &token,
            &json!({"project": project, "type": "verify", "inputs": {
                "repo": src.display().to_string(), "ref": "feature"}}),
        );
        assert_eq!(verified["state"], "succeeded", "{verified}");
        let id = verified["id"].as_str().unwrap();
        let mut by_stage = std::collections::BTreeMap::<String, String>::new();
        let mut speakers: Vec<String> = Vec::new();
        for (_, kind, data) in server.events(&token, id, None) {
            if kind == "output" {
                let stage = data["stage"].as_str().unwrap_or("(none)").to_owned();
                if speakers.last() != Some(&stage) {
                    speakers.push(stage.clone());
                }
                by_stage
                    .entry(stage)
                    .or_default()
                    .push_str(data["text"].as_str().unwrap());
            }
        }
        assert_eq!(
            by_stage.keys().collect::<Vec<_>>(),
            ["left", "right"],
            "{by_stage:?}"
        );
        // Every line under its own stage.
        for (name, other) in [("left", "right"), ("right", "left")] {
            let text = &by_stage[name];
            for i in 1..=5 {
                assert!(text.contains(&format!("from-{name}-{i}\n")), "{by_stage:?}");
            }
            assert!(!text.contains(&format!("from-{other}")), "{by_stage:?}");
        }
        speakers
    };
    // Two at once: the log goes from one to the other and back.
    let at_once = speakers("a");
    assert!(
        at_once.len() >= 3,
        "the stages did not interleave: {at_once:?}"
    );
    // One at a time (the default: the project's limits hold for the job): one, then the other.
    assert_eq!(speakers("c"), ["left", "right"]);
}

const NETWORK_POLICY: &str = r#"
[projects.a]
max_timeout = "60s"
allow = [["sh", "*"], ["git", "clone", "*"]]
network = { run = { allow = ["*.example.org"] }, verify = "none", "repo.clone" = "none" }
"#;

#[test]
fn serve_network_is_limited_per_job_type() {
    let server = Server::start(NETWORK_POLICY);
    let token = server.token("a", "submit,read");
    let run = |network: Value| {
        server.submit(
            &token,
            &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "true"], "network": network}}),
        )
    };
    let (status, answer) = run(json!("host"));
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["rule"], "projects.a.network.run", "{answer}");
    let (status, answer) = run(json!({"allow": ["evil.com"]}));
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = run(json!({"allow": ["pkg.example.org:443"]}));
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = run(json!("none"));
    assert_eq!(status, 201, "{answer}");

    // A clone from the network is refused when repo.clone has none; a local path is not.
    for url in [
        "https://git.example.org/x.git",
        "git@github.com:o/r.git",
        "ssh://git@host:2222/r",
    ] {
        let (status, answer) = server.submit(
            &token,
            &json!({"project": "a", "type": "repo.clone", "inputs": {"url": url}}),
        );
        assert_eq!(status, 403, "{url}: {answer}");
        assert_eq!(answer["rule"], "projects.a.network.repo.clone", "{answer}");
    }
    let src = repo(server.dir.path());
    let cloned = clone(&server, &token, &src);

    // A verify whose plan asks for more network than verify jobs may have: refused before
    // any stage runs.
    std::fs::write(
        src.join("cordon.toml"),
        "[[stage]]\nname = \"fetch\"\ncategory = \"setup\"\nnetwork = \"host\"\n\
         run = [\"sh\", \"-c\", \"echo fetched > /tmp/ran\"]\n",
    )
    .unwrap();
    git(&src, &["commit", "-qam", "network"]);
    let refused = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": {"repo": src.display().to_string()}}),
    );
    assert_eq!(refused["state"], "failed", "{refused}");
    assert_eq!(refused["failure"]["category"], "policy", "{refused}");
    let reason = refused["failure"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("fetch")
            && reason.contains("network host")
            && reason.contains("nothing ran"),
        "{reason}"
    );
    assert!(refused["result"].is_null(), "{refused}");
    drop(cloned);
}

#[test]
fn serve_secrets_file_values_reach_only_asking_jobs_and_are_redacted() {
    let dir = Arc::new(TestDir::new());
    let secrets = dir.write(
        "secrets.env",
        "# deploy\nFILE_SECRET=s3cr3t-from-the-file-42\n",
    );
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let policy = dir.write(
        "cordon-server.toml",
        &format!(
            "secrets_file = {:?}\n[projects.a]\nallow = [[\"sh\", \"*\"]]\nsecrets = [\"FILE_SECRET\"]\n\
             [projects.b]\nallow = [[\"sh\", \"*\"]]\n",
            secrets.display().to_string()
        ),
    );
    let server = Server::start_in(Arc::clone(&dir), policy.clone());
    let token = server.token("a", "submit,read");
    // The program prints the value it guesses without the job's inputs holding it (they are
    // stored as submitted).
    let script = "printf '%s\\n' \"got:$FILE_SECRET\"; printf 's3cr3t-%s\\n' from-the-file-42";
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "secrets": ["FILE_SECRET"],
                "inputs": {"argv": ["sh", "-c", script]}}),
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    let stdout = job["result"]["stdout"]["head"].as_str().unwrap();
    assert!(!stdout.contains("s3cr3t"), "{stdout}");
    assert!(stdout.contains("got:[REDACTED"), "{stdout}");
    let id = job["id"].as_str().unwrap();
    let log = outputs(&server.events(&token, id, None));
    assert!(
        log.contains("got:[REDACTED") && !log.contains("s3cr3t"),
        "{log}"
    );
    // A job that did not ask has no such variable; the value is still redacted if it finds
    // it some other way.
    let without = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", script]}}),
    );
    let stdout = without["result"]["stdout"]["head"].as_str().unwrap();
    assert!(stdout.starts_with("got:\n"), "{stdout}");
    assert!(!stdout.contains("s3cr3t"), "{stdout}");
    // Another project may not ask for it.
    let other = server.token("b", "submit,read");
    let (status, answer) = server.submit(
        &other,
        &json!({"project": "b", "type": "run", "secrets": ["FILE_SECRET"],
                "inputs": {"argv": ["sh", "-c", "true"]}}),
    );
    assert_eq!(status, 403, "{answer}");
    // The value never reaches the store (its file, or its write-ahead log not yet copied
    // into it).
    drop(server);
    let mut db = std::fs::read(dir.path().join("home/cordon.db")).unwrap();
    db.extend(std::fs::read(dir.path().join("home/cordon.db-wal")).unwrap_or_default());
    let needle = b"s3cr3t-from-the-file-42";
    assert!(
        !db.windows(needle.len()).any(|w| w == needle),
        "the secret is in the store"
    );

    // Another project's job learns nothing from redaction: its guesses come back as printed,
    // with no marker telling the right one (or the secret's name).
    let server = Server::start_in(Arc::clone(&dir), policy.clone());
    let other = server.token("b", "submit,read");
    let guesses = server.run_to_end(
        &other,
        &json!({"project": "b", "type": "run", "inputs": {"argv": ["sh", "-c",
                "printf 'Password1\\ns3cr3t-from-the-file-42\\nWinter2024\\n'"]}}),
    );
    assert_eq!(
        guesses["result"]["stdout"]["head"], "Password1\ns3cr3t-from-the-file-42\nWinter2024\n",
        "{guesses}"
    );
    drop(server);

    // A secrets file others can read is refused at start, naming the file.
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(cordon_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&policy)
        .env("CORDON_HOME", dir.path().join("home"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("secrets.env") && stderr.contains("chmod 600"),
        "{stderr}"
    );
}

#[test]
fn serve_verify_stage_asking_for_a_secret_the_job_did_not_name_is_refused() {
    let dir = Arc::new(TestDir::new());
    let policy = dir.write(
        "cordon-server.toml",
        "[projects.a]\nallow = [[\"sh\", \"*\"], [\"git\", \"clone\", \"*\"]]\nsecrets = [\"SERVE_TEST_SECRET\"]\n",
    );
    let server = Server::start_in(Arc::clone(&dir), policy);
    let token = server.token("a", "submit,read");
    let src = repo_with(
        dir.path(),
        &[(
            "cordon.toml",
            "[[stage]]\nname = \"leak\"\ncategory = \"test\"\nsecrets = [\"SERVE_TEST_SECRET\"]\n\
             run = [\"sh\", \"-c\", \"echo $SERVE_TEST_SECRET\"]\n",
        )],
    );
    let inputs = json!({"repo": src.display().to_string()});
    let refused = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": inputs}),
    );
    assert_eq!(refused["failure"]["category"], "policy", "{refused}");
    assert!(
        refused["failure"]["reason"]
            .as_str()
            .unwrap()
            .contains("SERVE_TEST_SECRET"),
        "{refused}"
    );
    // Named by the job (and allowed for the project): it runs, redacted.
    let named = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify", "secrets": ["SERVE_TEST_SECRET"], "inputs": inputs}),
    );
    assert_eq!(named["state"], "succeeded", "{named}");
    let stdout = named["result"]["stages"][0]["stdout"]["head"]
        .as_str()
        .unwrap();
    assert!(
        stdout.contains("[REDACTED") && !stdout.contains("hunter2"),
        "{stdout}"
    );
}

#[test]
fn serve_listens_on_a_unix_socket_only_its_user_may_use() {
    let dir = Arc::new(TestDir::new());
    let policy = dir.write("cordon-server.toml", POLICY);
    let socket = dir.path().join("cordon.sock");
    let listen = format!("unix:{}", socket.display());
    let server = Server::start_with(Arc::clone(&dir), policy, |c| {
        c.args(["--listen", &listen]);
    });
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo over the socket"]}}),
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    // The CLI client reaches it too.
    let out = Command::new(cordon_bin())
        .args(["jobs", "--server", &listen, "list"])
        .env("CORDON_TOKEN", &token)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(job["id"].as_str().unwrap()),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A second server refuses to steal a live socket.
    let out = Command::new(cordon_bin())
        .args(["serve", "--listen", &listen])
        .env("CORDON_HOME", dir.path().join("home2"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another server answers"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn serve_retries_a_stage_that_fails_as_infra_twice_then_passes() {
    let dir = Arc::new(TestDir::new());
    // The tool lives in a toolchain directory the sandbox shows ($CARGO_HOME/bin); it is
    // missing for the first two attempts (an infrastructure failure: the host lacks it).
    let cargo_home = dir.path().join("cargo-home");
    let bin = cargo_home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let policy = dir.write(
        "cordon-server.toml",
        "[projects.a]\nmax_attempts = 3\nallow = [[\"cordon-flaky-tool\", \"*\"], [\"git\", \"clone\", \"*\"]]\n",
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let server = Server::start_with(Arc::clone(&dir), policy, |c| {
        c.args(["--retry-backoff", "2s"])
            .env("CARGO_HOME", &cargo_home)
            .env("PATH", &path);
    });
    let token = server.token("a", "submit,read");
    let src = repo_with(
        dir.path(),
        &[(
            "cordon.toml",
            "[[stage]]\nname = \"t\"\ncategory = \"test\"\nrun = [\"cordon-flaky-tool\", \"ok\"]\n",
        )],
    );
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "verify", "inputs": {"repo": src.display().to_string()}}),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let mut retries = Vec::new();
    let mut events = Vec::new();
    server.follow(&token, &id, None, |e| {
        events.push(e.clone());
        if e.1 == "state" && e.2["retry"] == true {
            retries.push((e.2["attempt"].clone(), e.2["failure"]["category"].clone()));
            if retries.len() == 2 {
                // The host gets the tool before the third attempt (4 s of backoff away).
                let tool = bin.join("cordon-flaky-tool");
                std::fs::write(&tool, "#!/bin/sh\necho \"tool says $1\"\n").unwrap();
                std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        e.1 != "end"
    });
    assert_eq!(
        retries,
        [(json!(1), json!("infra")), (json!(2), json!("infra"))],
        "{events:?}"
    );
    let done = server.job(&token, &id);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["attempt"], 3, "{done}");
    assert!(
        done["result"]["stages"][0]["stdout"]["head"]
            .as_str()
            .unwrap()
            .contains("tool says ok"),
        "{done}"
    );
}

#[test]
fn serve_refuses_a_project_past_its_daily_cpu_budget() {
    let server = Server::start(
        "[projects.a]\nallow = [[\"sh\", \"*\"]]\ndaily_budget = { wall = \"8h\", cpu = \"300ms\" }\n",
    );
    let token = server.token("a", "submit,read");
    // A second of CPU at least (a busy shell loop), well inside the wall budget.
    let burn = "end=$(( $(date +%s) + 2 )); while [ $(date +%s) -lt $end ]; do :; done";
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", burn]}}),
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    let resource = &job["result"]["resource"];
    let cpu = resource["cpu_user_ms"].as_u64().unwrap() + resource["cpu_sys_ms"].as_u64().unwrap();
    assert!(cpu >= 300, "the loop used {cpu} ms of CPU: {resource}");
    let (status, answer) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "true"]}}),
    );
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"], "budget", "{answer}");
}

#[test]
fn serve_metrics_need_an_admin_token_and_show_its_projects() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    for (project, argv) in [
        ("a", json!(["sh", "-c", "true"])),
        ("a", json!(["sh", "-c", "exit 3"])),
        ("b", json!(["true"])),
    ] {
        let mine = server.token(project, "submit,read");
        let job = server.run_to_end(
            &mine,
            &json!({"project": project, "type": "run", "inputs": {"argv": argv}}),
        );
        assert!(job["state"].as_str().unwrap().ends_with("ed"), "{job}");
    }
    let get = |token: Option<&str>| {
        let (status, _, body) = server.request("GET", "/metrics", token, &[], b"");
        (status, String::from_utf8(body).unwrap())
    };
    assert_eq!(get(None).0, 401);
    assert_eq!(get(Some(&token)).0, 403, "submit,read is not enough");
    let (status, mine) = get(Some(&server.token("a", "admin")));
    assert_eq!(status, 200, "{mine}");
    let bucket = |outcome: &str, project: &str| {
        format!(
            "cordon_attempt_duration_seconds_count{{project=\"{project}\",type=\"run\",outcome=\"{outcome}\"}} 1"
        )
    };
    assert!(mine.contains(&bucket("succeeded", "a")), "{mine}");
    assert!(mine.contains(&bucket("failed", "a")), "{mine}");
    assert!(
        !mine.contains("project=\"b\""),
        "another project's series: {mine}"
    );
    assert!(
        !mine.contains("cordon_jobs{"),
        "the all-projects totals are for operators"
    );
    let (status, all) = get(Some(&server.token("*", "admin")));
    assert_eq!(status, 200);
    assert!(all.contains(&bucket("succeeded", "b")), "{all}");
    assert!(all.contains("cordon_jobs{state=\"failed\"} 1"), "{all}");
    assert!(
        all.contains("le=\"+Inf\"}")
            && all.contains("# TYPE cordon_attempt_duration_seconds histogram"),
        "{all}"
    );
}

#[test]
fn serve_run_jobs_cannot_plant_git_configuration_that_the_host_would_run() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = clone(&server, &token, &src);
    let workspace = json!({"from_job": clone["id"]});
    let marker = server.dir.path().join("host-ran-the-filter");
    // A program tries to define a filter (and to move the work tree) in the workspace's git
    // configuration, and to switch it on for every file.
    let plant = format!(
        "git config filter.x.clean 'touch {m}; cat'; git config core.worktree /; \
         printf '[filter \"x\"]\\n\\tclean = touch {m}\\n' >> .git/config; \
         echo '* filter=x' > .gitattributes; echo planted",
        m = marker.display()
    );
    let planted = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"workspace": workspace, "argv": ["sh", "-c", plant]}}),
    );
    assert_eq!(planted["state"], "succeeded", "{planted}");
    let stderr = planted["result"]["stderr"]["head"].as_str().unwrap();
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    // The host's git then works in that workspace: the filter never runs. The planted
    // `.gitattributes` makes the tree dirty, so the patch is refused (its check ran git
    // status there, without the filter)...
    let patch = "--- a/README\n+++ b/README\n@@ -1 +1,2 @@\n hello from the repo\n+patched\n";
    let refused = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch", "inputs": {"workspace": workspace, "patch": patch}}),
    );
    assert_eq!(refused["failure"]["category"], "usage", "{refused}");
    assert!(!marker.exists(), "the host ran the planted filter");
    // ... and a patch that brings the attributes itself is staged and committed by the host's
    // git without the filter either.
    let cleaned = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"workspace": workspace,
            "argv": ["sh", "-c", "git clean -fdq"]}}),
    );
    assert_eq!(cleaned["state"], "succeeded", "{cleaned}");
    let patch = format!("{patch}--- /dev/null\n+++ b/.gitattributes\n@@ -0,0 +1 @@\n+* filter=x\n");
    let applied = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch", "inputs": {"workspace": workspace, "patch": patch}}),
    );
    assert_eq!(applied["state"], "succeeded", "{applied}");
    assert!(!marker.exists(), "the host ran the planted filter");
    let config = std::fs::read_to_string(
        PathBuf::from(clone["result"]["workspace"].as_str().unwrap()).join(".git/config"),
    )
    .unwrap();
    assert!(!config.contains("filter"), "{config}");
}

#[test]
fn serve_bounds_what_a_flooding_job_writes_to_its_live_log() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "yes flood | head -c 30000000; echo tail-end"]}}),
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["result"]["stdout"]["bytes_total"], 30_000_009);
    assert!(
        job["result"]["stdout"]["tail"]
            .as_str()
            .unwrap()
            .ends_with("tail-end\n"),
        "the result keeps the tail"
    );
    let id = job["id"].as_str().unwrap();
    let (status, _, transcript) = server.request(
        "GET",
        &format!("/v1/jobs/{id}/transcript"),
        Some(&token),
        &[],
        b"",
    );
    assert_eq!(status, 200);
    let text = String::from_utf8(transcript).unwrap();
    assert!(text.len() < 9 << 20, "the log holds {} bytes", text.len());
    assert!(text.len() >= 8 << 20, "the log holds {} bytes", text.len());
    assert!(text.contains("the live log stops here"), "the cut is said");
    assert!(!text.contains("tail-end"));
}

#[test]
fn serve_a_second_server_under_the_same_worker_name_takes_nothing_from_the_first() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo started; sleep 2; echo done"]}}),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    server.follow(&token, &id, None, |e| e.1 != "output");
    // The same home and host name, another port: refused before it recovers anything.
    let out = Command::new(cordon_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&server.policy)
        .env("CORDON_HOME", &server.home)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("another process on this host runs workers named"),
        "{stderr}"
    );
    let events = server.events(&token, &id, None);
    let job = server.job(&token, &id);
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(
        job["attempt"], 1,
        "the first server's job was left alone: {events:?}"
    );
}

#[test]
fn serve_jobs_queued_before_a_budget_ran_out_wait_for_the_next_day() {
    let server = Server::start(
        "[projects.a]\nconcurrency = 1\nallow = [[\"sh\", \"*\"]]\ndaily_budget = { wall = \"1s\" }\n",
    );
    let token = server.token("a", "submit,read");
    let submit = |script: &str| {
        let (status, job) = server.submit(
            &token,
            &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", script]}}),
        );
        assert_eq!(status, 201, "{job}");
        job["id"].as_str().unwrap().to_owned()
    };
    // Both accepted while the project has used nothing; the first spends the budget.
    let first = submit("sleep 1.5");
    let second = submit("echo should not run today");
    let events = server.events(&token, &first, None);
    assert_eq!(events.last().unwrap().2["state"], "succeeded", "{events:?}");
    // Budgets are counted again after every attempt and every 5 s: past that, the second is
    // still waiting.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    while std::time::Instant::now() < deadline {
        assert_eq!(server.job(&token, &second)["state"], "queued");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // The job says why it waits (the first one, ended, says nothing).
    let waiting = server.job(&token, &second)["waiting"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        waiting.contains("spent its daily budget") && waiting.contains("resets at"),
        "{waiting}"
    );
    assert!(server.job(&token, &first).get("waiting").is_none());
    let (status, answer) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "true"]}}),
    );
    assert_eq!(status, 429, "{answer}");
}

/// A TCP server that accepts connections and never answers: each accepted connection is
/// sent (and so kept open) to the receiver.
fn silent_server() -> (u16, std::sync::mpsc::Receiver<std::net::TcpStream>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if tx.send(stream).is_err() {
                break;
            }
        }
    });
    (port, rx)
}

/// The job once it ended; fails the test when it still runs after `within` (it hangs).
fn ended_within(server: &Server, token: &str, id: &str, within: std::time::Duration) -> Value {
    let t0 = std::time::Instant::now();
    loop {
        let job = server.job(token, id);
        if !matches!(job["state"].as_str(), Some("queued" | "running")) {
            return job;
        }
        assert!(
            t0.elapsed() < within,
            "still {} after {within:?}: {job}",
            job["state"]
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Waits (at most 10 s) until no process's command line holds `marker`.
fn gone(marker: &str) -> usize {
    let t0 = std::time::Instant::now();
    loop {
        let left = cordon_test_support::server::sleepers(marker);
        if left == 0 || t0.elapsed() > std::time::Duration::from_secs(10) {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn serve_clone_from_a_server_that_never_answers_ends_by_timeout_cancel_and_shutdown() {
    let server = Server::start(
        r#"
workers = 4

[projects.a]
concurrency = 4
max_timeout = "60s"
max_attempts = 1
allow = [["sh", "*"], ["true"], ["git", "clone", "*"]]
"#,
    );
    let token = server.token("a", "submit,read");
    let (port, accepted) = silent_server();
    let url = |what: &str| {
        format!(
            "http://127.0.0.1:{port}/stall-{what}-{}.git",
            std::process::id()
        )
    };
    let mut held = Vec::new();
    // Waits until the job's git connects to the silent server, or the job ended first (on a
    // heavily loaded machine git may not even connect within a 3 s job timeout; what follows
    // checks the same things either way).
    let mut connected = |what: &str, id: &str| {
        let t0 = std::time::Instant::now();
        loop {
            match accepted.recv_timeout(std::time::Duration::from_millis(200)) {
                Ok(stream) => {
                    held.push(stream);
                    return;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(e) => panic!("the silent server stopped: {e}"),
            }
            let job = server.job(&token, id);
            if !matches!(job["state"].as_str(), Some("queued" | "running")) {
                return;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(90),
                "the {what} clone never connected and its job still runs: {job}"
            );
        }
    };
    let long = std::time::Duration::from_secs(30);

    // A job whose clone hangs ends by its timeout (the clone counts against it), git and its
    // helpers killed: a repo.clone, a verify of a repository, a run of a repository.
    for (name, job_type, inputs) in [
        ("clone", "repo.clone", json!({"url": url("clone")})),
        ("verify", "verify", json!({"repo": url("verify")})),
        (
            "run-timeout",
            "run",
            json!({"repo": url("run-timeout"), "argv": ["true"]}),
        ),
    ] {
        let (status, job) = server.submit(
            &token,
            &json!({"project": "a", "type": job_type, "timeout": "3s", "inputs": inputs}),
        );
        assert_eq!(status, 201, "{job}");
        connected(name, job["id"].as_str().unwrap());
        let job = ended_within(&server, &token, job["id"].as_str().unwrap(), long);
        assert_eq!(job["state"], "failed", "{name}: {job}");
        assert_eq!(job["failure"]["category"], "timeout", "{name}: {job}");
        assert_eq!(
            gone(&url(name)),
            0,
            "{name}: a git process of the clone is left"
        );
    }

    // ... and a cancel ends it at once.
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "timeout": "60s",
                "inputs": {"repo": url("run"), "argv": ["true"]}}),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    connected("run", &id);
    let (status, after) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200, "{after}");
    let job = ended_within(&server, &token, &id, std::time::Duration::from_secs(15));
    assert_eq!(job["state"], "cancelled", "{job}");
    assert_eq!(gone(&url("run")), 0, "a git process of the clone is left");

    // SIGTERM stops the server while a clone hangs: the clone is killed, the job requeued.
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "repo.clone", "timeout": "60s",
                "inputs": {"url": url("stop")}}),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    connected("stop", &id);
    let mut server = server;
    cordon_test_support::signal(server.child.id() as i32, libc::SIGTERM);
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(t0.elapsed() < long, "the server did not stop");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    assert_eq!(gone(&url("stop")), 0, "a git process of the clone is left");
    let server = server.restart();
    let job = server.job(&token, &id);
    assert_eq!(job["failure"]["category"], "infra", "{job}");
    drop(held);
}

#[test]
fn serve_apply_patch_refuses_a_dirty_workspace_and_commits_only_the_patch() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = clone(&server, &token, &src);
    let from = json!({"from_job": clone["id"]});
    let workspace = PathBuf::from(clone["result"]["workspace"].as_str().unwrap());
    // A run job leaves a changed file and a new one in the workspace.
    let dirty = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"workspace": from,
            "argv": ["sh", "-c", "echo changed >> README && echo evil > evil.txt"]}}),
    );
    assert_eq!(dirty["state"], "succeeded", "{dirty}");
    let add_b = "--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+b\n";
    let refused = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch",
                "inputs": {"workspace": from, "patch": add_b, "expect_files": ["b.txt"]}}),
    );
    assert_eq!(refused["state"], "failed", "{refused}");
    assert_eq!(refused["failure"]["category"], "usage", "{refused}");
    assert_eq!(refused["attempt"], 1, "not retried: {refused}");
    let reason = refused["failure"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("evil.txt") && reason.contains("README"),
        "{reason}"
    );
    // Nothing applied, nothing of the run job's wiped, nothing committed.
    assert!(!workspace.join("b.txt").exists());
    assert!(workspace.join("evil.txt").exists());
    assert!(
        std::fs::read_to_string(workspace.join("README"))
            .unwrap()
            .contains("changed")
    );
    assert_eq!(
        git(&workspace, &["rev-parse", "HEAD"]).trim(),
        clone["result"]["commit"].as_str().unwrap()
    );
    // The way out the error names: a run job puts the tree back.
    let cleaned = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"workspace": from,
            "argv": ["sh", "-c", "git checkout-index --all --force && git clean -fdq"]}}),
    );
    assert_eq!(cleaned["state"], "succeeded", "{cleaned}");
    // A wrong expectation on the clean tree: the patch's own paths are put back, only them.
    let wrong = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch",
                "inputs": {"workspace": from, "patch": add_b, "expect_files": ["c.txt"]}}),
    );
    assert_eq!(wrong["failure"]["category"], "usage", "{wrong}");
    assert_eq!(git(&workspace, &["status", "--porcelain"]), "");
    let applied = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.applyPatch",
                "inputs": {"workspace": from, "patch": add_b, "expect_files": ["b.txt"]}}),
    );
    assert_eq!(applied["state"], "succeeded", "{applied}");
    let commit = applied["result"]["commit"].as_str().unwrap();
    assert_eq!(
        git(
            &workspace,
            &["diff-tree", "--no-commit-id", "--name-only", "-r", commit]
        ),
        "b.txt\n",
        "the commit holds the patch alone"
    );
}

#[test]
fn serve_apply_patch_jobs_racing_on_one_workspace_each_commit_their_own_files() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = clone(&server, &token, &src);
    let from = json!({"from_job": clone["id"]});
    let workspace = PathBuf::from(clone["result"]["workspace"].as_str().unwrap());
    let patch = |dir: &str| -> String {
        (0..3000)
            .map(|i| format!("--- /dev/null\n+++ b/{dir}/f{i}\n@@ -0,0 +1 @@\n+{dir} {i}\n"))
            .collect()
    };
    let ids: Vec<String> = ["left", "right"]
        .iter()
        .map(|dir| {
            let (status, job) = server.submit(
                &token,
                &json!({"project": "a", "type": "repo.applyPatch",
                        "inputs": {"workspace": from, "patch": patch(dir)}}),
            );
            assert_eq!(status, 201, "{job}");
            job["id"].as_str().unwrap().to_owned()
        })
        .collect();
    for (id, dir) in ids.iter().zip(["left", "right"]) {
        server.events(&token, id, None);
        let job = server.job(&token, id);
        assert_eq!(job["state"], "succeeded", "{job}");
        let files = git(
            &workspace,
            &[
                "diff-tree",
                "--no-commit-id",
                "--name-only",
                "-r",
                job["result"]["commit"].as_str().unwrap(),
            ],
        );
        let files: Vec<&str> = files.lines().collect();
        assert_eq!(files.len(), 3000, "{dir}: {} files", files.len());
        assert!(
            files.iter().all(|f| f.starts_with(&format!("{dir}/"))),
            "{dir}'s commit holds another job's files"
        );
    }
    assert_eq!(git(&workspace, &["status", "--porcelain"]), "");
}

#[test]
fn serve_session_exec_pull_and_fork_waiting_for_the_writer_end_on_cancel() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = clone(&server, &token, &src);
    let created = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.create", "inputs": {"workspace": {"from_job": clone["id"]}}}),
    );
    let session = json!({"from_job": created["id"]});
    let marker = format!("serve-writer-sleeper-{}", std::process::id());
    let (status, first) = server.submit(
        &token,
        &json!({"project": "a", "type": "session.exec", "timeout": "60s", "inputs": {"session": session,
            "argv": ["sh", "-c", format!("echo started; sleep 300; : {marker}")]}}),
    );
    assert_eq!(status, 201, "{first}");
    let first = first["id"].as_str().unwrap().to_owned();
    server.follow(&token, &first, None, |e| e.1 != "output");
    // The second writer waits for the first: running, no output.
    let (status, second) = server.submit(
        &token,
        &json!({"project": "a", "type": "session.exec", "timeout": "60s",
                "inputs": {"session": session, "argv": ["true"]}}),
    );
    assert_eq!(status, 201, "{second}");
    let second = second["id"].as_str().unwrap().to_owned();
    server.follow(&token, &second, None, |e| {
        !(e.1 == "state" && e.2["state"] == "running")
    });
    let cancel = |id: &str| {
        let (status, after) = server.json(
            "POST",
            &format!("/v1/jobs/{id}/cancel"),
            &token,
            &Value::Null,
        );
        assert_eq!(status, 200, "{after}");
    };
    cancel(&second);
    let job = ended_within(&server, &token, &second, std::time::Duration::from_secs(15));
    assert_eq!(job["state"], "cancelled", "{job}");
    assert_eq!(job["failure"]["category"], "cancelled", "{job}");
    // A pull waits for the writer too, and ends on cancel as promptly.
    let (status, pull) = server.submit(
        &token,
        &json!({"project": "a", "type": "session.pull", "timeout": "60s",
                "inputs": {"session": session}}),
    );
    assert_eq!(status, 201, "{pull}");
    let pull = pull["id"].as_str().unwrap().to_owned();
    server.follow(&token, &pull, None, |e| {
        !(e.1 == "state" && e.2["state"] == "running")
    });
    cancel(&pull);
    let job = ended_within(&server, &token, &pull, std::time::Duration::from_secs(15));
    assert_eq!(job["state"], "cancelled", "{job}");
    // A fork waits for the writer (the source's state must hold still), and ends on cancel.
    let (status, fork) = server.submit(
        &token,
        &json!({"project": "a", "type": "session.fork", "timeout": "60s",
                "inputs": {"session": session, "count": 2}}),
    );
    assert_eq!(status, 201, "{fork}");
    let fork = fork["id"].as_str().unwrap().to_owned();
    server.follow(&token, &fork, None, |e| {
        !(e.1 == "state" && e.2["state"] == "running")
    });
    cancel(&fork);
    let job = ended_within(&server, &token, &fork, std::time::Duration::from_secs(15));
    assert_eq!(job["state"], "cancelled", "{job}");
    // The first writer was never disturbed.
    assert_eq!(server.job(&token, &first)["state"], "running");
    cancel(&first);
    let job = ended_within(&server, &token, &first, std::time::Duration::from_secs(15));
    assert_eq!(job["state"], "cancelled", "{job}");
    assert_eq!(gone(&marker), 0);
}

#[test]
fn serve_session_exec_wait_for_the_writer_counts_against_its_timeout() {
    // One attempt: a retry (the writer gone by then) would not wait.
    let server =
        Server::start(&POLICY.replace("concurrency = 2\n", "concurrency = 2\nmax_attempts = 1\n"));
    let token = server.token("a", "submit,read");
    let src = repo(server.dir.path());
    let clone = clone(&server, &token, &src);
    let created = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.create", "inputs": {"workspace": {"from_job": clone["id"]}}}),
    );
    let session = json!({"from_job": created["id"]});
    // The first writer holds the session for 4 s once it started.
    let (status, first) = server.submit(
        &token,
        &json!({"project": "a", "type": "session.exec", "timeout": "60s",
                "inputs": {"session": session, "argv": ["sh", "-c", "echo started; sleep 4"]}}),
    );
    assert_eq!(status, 201, "{first}");
    let first = first["id"].as_str().unwrap().to_owned();
    server.follow(&token, &first, None, |e| e.1 != "output");
    // The second, with 5 s in all, waits most of them: its program gets what is left (about
    // 1 s), not 5 s again.
    let second = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.exec", "timeout": "5s",
                "inputs": {"session": session, "argv": ["sh", "-c", "sleep 300"]}}),
    );
    assert_eq!(second["failure"]["category"], "timeout", "{second}");
    let ran = second["result"]["duration_ms"].as_u64().unwrap();
    assert!(
        ran < 4000,
        "the program ran {ran} ms after its job waited for the writer: {second}"
    );
    assert_eq!(
        ended_within(&server, &token, &first, std::time::Duration::from_secs(30))["state"],
        "succeeded"
    );
}

/// A job whose final state is in the store without its `end` event (as when the store
/// refused that write): its live log ends by itself with an `end` made up from the state,
/// whose `id` is the last real event's (the API's schema wants one; resuming from it loses
/// nothing).
#[test]
fn a_live_log_whose_job_ended_without_its_end_event_ends_with_one_that_has_an_id() {
    let dir = Arc::new(TestDir::new());
    let policy = dir.write("cordon-server.toml", POLICY);
    // No workers: the job stays queued until the store itself cancels it, behind the
    // service's back (no state or end event is logged).
    let server = Server::start_with(Arc::clone(&dir), policy, |c| {
        c.arg("--no-workers");
    });
    let token = server.token("a", "submit,read");
    let (status, job) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["true"]}}),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let mut events = Vec::new();
    let mut cancelled = false;
    server.follow(&token, &id, None, |event| {
        events.push(event.clone());
        if !cancelled {
            cancelled = true;
            let store = cordon_store::Store::open(&cordon_store::StoreLocation::Sqlite(
                server.home.join("cordon.db"),
            ))
            .unwrap();
            let after = store.cancel_job(&id.parse().unwrap()).unwrap();
            assert_eq!(after, Some(cordon_store::JobState::Cancelled));
        }
        event.1 != "end"
    });
    let (seq, name, data) = events.last().unwrap();
    assert_eq!(name, "end", "{events:?}");
    assert_eq!(data["state"], "cancelled", "{events:?}");
    let last_real = events[events.len() - 2].0;
    assert_eq!(*seq, last_real, "{events:?}");
}

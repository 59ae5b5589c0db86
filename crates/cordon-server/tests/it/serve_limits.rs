//! `cordon serve` holds every job to its project's limits and keeps one project out of
//! another's data: memory, processes and output bounded by default and at most the policy's;
//! clones of `/proc`, of cordon's own state or of git data that leads elsewhere refused;
//! `repo` inputs only where `repo.clone` is allowed; a live log whose `end` event went missing
//! still ends. A real server, the real sandbox.

use cordon_test_support::cordon_bin;
use cordon_test_support::server::Server;
use cordon_test_support::{TestDir, git, repo_with};
use serde_json::{Value, json};

const POLICY: &str = r#"
workers = 2

[projects.a]
concurrency = 2
max_timeout = "60s"
allow = [["sh", "*"], ["python3", "*"], ["git", "*"], ["true"]]
limits = { memory = "256MiB", pids = 32, output_limit = "64KiB" }

[projects.b]
job_types = ["run"]
allow = [["true"], ["git", "*"]]
"#;

/// Whether a run result (or a stage result) says the limit `kind` was hit.
fn hit(result: &Value, kind: &str) -> bool {
    result["limits_hit"]
        .as_array()
        .is_some_and(|hit| hit.contains(&json!(kind)))
}

fn run(project: &str, script: &str) -> Value {
    json!({"project": project, "type": "run", "inputs": {"argv": ["sh", "-c", script]}})
}

#[test]
fn serve_refuses_limits_above_the_projects_and_malformed_ones() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    for (field, value, status, rule) in [
        (
            "memory",
            json!("1GiB"),
            403,
            Some("projects.a.limits.memory"),
        ),
        ("pids", json!(33), 403, Some("projects.a.limits.pids")),
        (
            "output_limit",
            json!("1MiB"),
            403,
            Some("projects.a.limits.output_limit"),
        ),
        ("pids", json!(0), 400, None),
        ("memory", json!("1"), 400, None),
        ("memory", json!("lots"), 400, None),
    ] {
        let mut body = run("a", "true");
        body["inputs"][field] = value.clone();
        let (got, answer) = server.submit(&token, &body);
        assert_eq!(got, status, "{field} = {value}: {answer}");
        assert_eq!(answer["rule"].as_str(), rule, "{answer}");
    }
    let (_, list) = server.json("GET", "/v1/jobs", &token, &Value::Null);
    assert_eq!(list["jobs"], json!([]), "nothing refused was queued");
}

#[test]
fn serve_jobs_that_ask_for_no_limits_get_the_projects() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    // Processes: 32 at most, whatever the job does.
    let forks = server.run_to_end(
        &token,
        &run(
            "a",
            "n=0; for i in $(seq 1 100); do (sleep 2) 2>/dev/null & n=$((n+1)); done 2>/dev/null; \
             wait; echo started; ls /proc | grep -c '^[0-9]' >&2",
        ),
    );
    assert!(hit(&forks["result"], "pids"), "{forks}");
    // Memory: 256 MiB at most.
    let hog = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["python3", "-c",
                "b = bytearray(600 << 20); print('held', len(b) >> 20)"]}}),
    );
    assert!(
        !hog["result"]["stdout"]["head"]
            .as_str()
            .unwrap_or("")
            .contains("held"),
        "{hog}"
    );
    assert!(hit(&hog["result"], "memory"), "{hog}");
    // Output: 64 KiB kept of 1 MB written.
    let flood = server.run_to_end(
        &token,
        &run("a", "head -c 1000000 /dev/zero | tr '\\\\0' x"),
    );
    let stdout = &flood["result"]["stdout"];
    assert_eq!(stdout["bytes_total"], 1_000_000, "{stdout}");
    let kept = stdout["head"].as_str().unwrap().len() + stdout["tail"].as_str().unwrap().len();
    assert!(kept <= 64 << 10, "{kept} bytes kept");
    assert_eq!(stdout["truncated"], true);
}

#[test]
fn serve_refuses_clones_of_proc_and_of_cordons_own_state() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let links = TestDir::new();
    let state_link = links.path().join("state");
    std::os::unix::fs::symlink(server.home.join("serve"), &state_link).unwrap();
    let workspace_of_another_job = server.home.join("serve/workspaces");
    std::fs::create_dir_all(&workspace_of_another_job).unwrap();
    for url in [
        "/proc/self/cwd".to_owned(),
        "/proc/1/root/tmp".to_owned(),
        "file:///proc/self/cwd".to_owned(),
        server.home.display().to_string(),
        workspace_of_another_job.display().to_string(),
        state_link.display().to_string(),
        "relative/path".to_owned(),
    ] {
        let (status, answer) = server.submit(
            &token,
            &json!({"project": "a", "type": "repo.clone", "inputs": {"url": url}}),
        );
        assert_eq!(status, 403, "{url}: {answer}");
        assert_eq!(answer["rule"], "repository", "{answer}");
    }
    // A repository of its own is cloned as before.
    let src = TestDir::new();
    let repo = repo_with(src.path(), &[("README", "hi\n")]);
    let clone = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "repo.clone", "inputs": {"url": repo.display().to_string()}}),
    );
    assert_eq!(clone["state"], "succeeded", "{clone}");
}

#[test]
fn serve_run_of_a_repo_needs_repo_clone_among_the_projects_job_types() {
    let server = Server::start(POLICY);
    let token = server.token("b", "submit,read");
    let src = TestDir::new();
    let repo = repo_with(src.path(), &[("README", "hi\n")]);
    let (status, answer) = server.submit(
        &token,
        &json!({"project": "b", "type": "run",
                "inputs": {"repo": repo.display().to_string(), "argv": ["true"]}}),
    );
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["rule"], "projects.b.job_types");
}

#[test]
fn serve_takes_the_bearer_scheme_in_any_case_and_a_submit_token_may_cancel() {
    let server = Server::start(POLICY);
    let submit_only = server.token("a", "submit");
    let reader = server.token("a", "read");
    let (status, _, _) = server.request(
        "GET",
        "/v1/jobs",
        None,
        &[("Authorization", &format!("bearer {reader}"))],
        b"",
    );
    assert_eq!(status, 200);
    let (status, job) = server.submit(&submit_only, &run("a", "sleep 30"));
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap();
    let (status, after) = server.json(
        "POST",
        &format!("/v1/jobs/{id}/cancel"),
        &submit_only,
        &Value::Null,
    );
    assert_eq!(status, 200, "{after}");
    let events = server.events(&reader, id, None);
    assert_eq!(events.last().unwrap().2["state"], "cancelled", "{events:?}");
}

#[test]
fn serve_ends_a_live_log_whose_end_event_went_missing() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let job = server.run_to_end(&token, &run("a", "echo done"));
    let id = job["id"].as_str().unwrap().to_owned();
    // The store lost the job's `end` event (a write refused under load).
    let db = server.home.join("cordon.db");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=30); \
             n = c.execute(\"DELETE FROM job_events WHERE job_id = ? AND kind = 'end'\", \
             (sys.argv[2],)).rowcount; c.commit(); print(n)",
        ])
        .arg(&db)
        .arg(&id)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "{out:?}");
    let events = server.events(&token, &id, None);
    let last = events.last().unwrap();
    assert_eq!(last.1, "end", "{events:?}");
    assert_eq!(last.2["state"], "succeeded");
    assert!(last.2["note"].as_str().unwrap().contains("missing"));
}

#[test]
fn serve_verify_stages_get_the_projects_limits_whatever_the_repository_asks() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let src = TestDir::new();
    let forks =
        "for i in $(seq 1 100); do (sleep 2) 2>/dev/null & done 2>/dev/null; wait; echo done";
    let many: String = (0..65)
        .map(|i| format!("[[stage]]\nname = \"s{i}\"\ncategory = \"test\"\nrun = [\"true\"]\n"))
        .collect();
    let repo = repo_with(
        src.path(),
        &[(
            "cordon.toml",
            &format!(
                "[[stage]]\nname = \"forks\"\ncategory = \"test\"\npids = 100000\nmemory = \"64GiB\"\n\
                 run = [\"sh\", \"-c\", {forks:?}]\n"
            ),
        )],
    );
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify",
                "inputs": {"repo": repo.display().to_string()}}),
    );
    let stage = &job["result"]["stages"][0];
    assert_eq!(stage["name"], "forks", "{job}");
    assert!(hit(stage, "pids"), "{stage}");
    // A plan of more stages than a verify job runs is refused before anything runs.
    let src = TestDir::new();
    let repo = repo_with(src.path(), &[("cordon.toml", &many)]);
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "verify",
                "inputs": {"repo": repo.display().to_string()}}),
    );
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["failure"]["category"], "policy", "{job}");
    assert!(
        job["failure"]["reason"]
            .as_str()
            .unwrap()
            .contains("65 stages"),
        "{job}"
    );
}

#[test]
fn serve_a_queued_job_loses_env_keys_the_reloaded_policy_no_longer_allows() {
    let dir = std::sync::Arc::new(TestDir::new());
    let rules = "[projects.c]\nconcurrency = 1\nallow = [[\"sh\", \"*\"]]\n";
    let policy = dir.write(
        "cordon-server.toml",
        &format!("{rules}env_keys = [\"SERVE_TEST_SECRET\"]\n"),
    );
    let server = Server::start_in(std::sync::Arc::clone(&dir), policy.clone());
    let token = server.token("c", "submit,read");
    let (_, first) = server.submit(&token, &run("c", "echo started; sleep 60"));
    let first = first["id"].as_str().unwrap().to_owned();
    server.wait_for_output(&token, &first);
    // Queued behind the first (concurrency 1), allowed the variable when submitted.
    let mut asking = run("c", "echo \"value:${SERVE_TEST_SECRET:-unset}\"");
    asking["env_keys"] = json!(["SERVE_TEST_SECRET"]);
    let (status, queued) = server.submit(&token, &asking);
    assert_eq!(status, 201, "{queued}");
    // The operator takes the variable away and reloads; the reload is seen when a new
    // submission asking for it is refused.
    std::fs::write(&policy, rules).unwrap();
    let pid = server.child.id().to_string();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, _) = server.submit(&token, &asking);
        if status == 403 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the policy was not reloaded"
        );
        // (The poll's interval; what it waits for is the refusal above.)
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, _) = server.json(
        "POST",
        &format!("/v1/jobs/{first}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200);
    let id = queued["id"].as_str().unwrap();
    let events = server.events(&token, id, None);
    let output = cordon_test_support::server::outputs(&events);
    assert_eq!(output, "value:unset\n", "{events:?}");
}

#[test]
fn serve_a_full_queue_takes_no_more_until_jobs_have_run() {
    let server =
        Server::start("[projects.q]\nconcurrency = 1\nmax_queued = 2\nallow = [[\"sh\", \"*\"]]\n");
    let token = server.token("q", "submit,read");
    let (_, first) = server.submit(&token, &run("q", "echo started; sleep 60"));
    let first = first["id"].as_str().unwrap().to_owned();
    server.wait_for_output(&token, &first);
    for _ in 0..2 {
        let (status, job) = server.submit(&token, &run("q", "true"));
        assert_eq!(status, 201, "{job}");
    }
    let (status, answer) = server.submit(&token, &run("q", "true"));
    assert_eq!(
        (status, answer["error"].as_str()),
        (429, Some("busy")),
        "{answer}"
    );
    assert!(answer["message"].as_str().unwrap().contains("max_queued"));
    // It says when to look again.
    let (status, headers, _) = server.request(
        "POST",
        "/v1/jobs",
        Some(&token),
        &[],
        run("q", "true").to_string().as_bytes(),
    );
    assert_eq!(status, 429);
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("\r\nretry-after: 1\r\n"),
        "{headers}"
    );
    // When the queue moves, submissions are taken again.
    let (status, _) = server.json(
        "POST",
        &format!("/v1/jobs/{first}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, _) = server.submit(&token, &run("q", "true"));
        if status == 201 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the queue never moved"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn serve_ends_the_live_logs_of_a_revoked_token() {
    let server = Server::start(POLICY);
    let submitter = server.token("a", "submit,read");
    let reader = server.token("a", "read");
    let (_, job) = server.submit(
        &submitter,
        &run(
            "a",
            "for i in $(seq 1 100); do echo tick $i; sleep 0.2; done",
        ),
    );
    let id = job["id"].as_str().unwrap().to_owned();
    let cordon = |args: &[&str]| {
        let out = std::process::Command::new(cordon_bin())
            .args(args)
            .env("CORDON_HOME", &server.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let mut revoked = None;
    let mut after = 0;
    server.follow(&reader, &id, None, |e| {
        if e.1 == "output" && revoked.is_none() {
            let tokens: Value =
                serde_json::from_str(&cordon(&["token", "list", "--json"])).unwrap();
            let token_id = tokens["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["scopes"] == json!(["read"]))
                .unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned();
            cordon(&["token", "revoke", &token_id]);
            revoked = Some(std::time::Instant::now());
        } else if revoked.is_some() {
            after += 1;
        }
        true
    });
    let revoked = revoked.expect("the job printed");
    // The stream ended by itself, long before the job's 20 s, without its end event.
    assert!(revoked.elapsed() < std::time::Duration::from_secs(15));
    assert!(after < 60, "{after} events after the revocation");
    let job = server.job(&submitter, &id);
    assert_eq!(job["state"], "running", "the job itself goes on");
}

#[test]
fn serve_checks_a_local_clone_source_again_when_the_clone_runs() {
    let server = Server::start(
        "[projects.c]\nconcurrency = 1\nallow = [[\"sh\", \"*\"], [\"git\", \"*\"]]\n",
    );
    let token = server.token("c", "submit,read");
    let (_, blocker) = server.submit(&token, &run("c", "echo started; sleep 60"));
    let blocker = blocker["id"].as_str().unwrap().to_owned();
    server.wait_for_output(&token, &blocker);
    // Submitted while the path leads to a repository of its own...
    let src = TestDir::new();
    let repo = repo_with(src.path(), &[("README", "hi\n")]);
    let links = TestDir::new();
    let link = links.path().join("repo");
    std::os::unix::fs::symlink(&repo, &link).unwrap();
    let (status, clone) = server.submit(
        &token,
        &json!({"project": "c", "type": "repo.clone", "inputs": {"url": link.display().to_string()}}),
    );
    assert_eq!(status, 201, "{clone}");
    // ...then turned towards cordon's own state before the clone runs.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&server.home, &link).unwrap();
    let (status, _) = server.json(
        "POST",
        &format!("/v1/jobs/{blocker}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200);
    let id = clone["id"].as_str().unwrap();
    server.events(&token, id, None);
    let job = server.job(&token, id);
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["failure"]["category"], "policy", "{job}");
    assert_eq!(job["attempt"], 1, "a refusal is not retried");
}

#[test]
fn serve_removes_unused_workspaces_but_not_one_a_queued_job_names() {
    let server = Server::start(
        "workspace_retention = \"2s\"\n[projects.c]\nconcurrency = 1\n\
         allow = [[\"sh\", \"*\"], [\"git\", \"*\"]]\n",
    );
    let token = server.token("c", "submit,read");
    let src = TestDir::new();
    let repo = repo_with(src.path(), &[("README", "hi\n")]);
    let clone = |server: &Server| {
        let job = server.run_to_end(
            &token,
            &json!({"project": "c", "type": "repo.clone",
                    "inputs": {"url": repo.display().to_string()}}),
        );
        assert_eq!(job["state"], "succeeded", "{job}");
        (
            job["id"].as_str().unwrap().to_owned(),
            std::path::PathBuf::from(job["result"]["workspace"].as_str().unwrap()),
        )
    };
    // B first, then A: when A's time is up, B's is too.
    let (b, b_path) = clone(&server);
    let (a, a_path) = clone(&server);
    let (_, blocker) = server.submit(&token, &run("c", "echo started; sleep 60"));
    let blocker = blocker["id"].as_str().unwrap().to_owned();
    server.wait_for_output(&token, &blocker);
    let (status, queued) = server.submit(
        &token,
        &json!({"project": "c", "type": "run",
                "inputs": {"workspace": {"from_job": b}, "argv": ["sh", "-c", "cat README"]}}),
    );
    assert_eq!(status, 201, "{queued}");
    // The sweep removes A's workspace (nobody names it)...
    cordon_test_support::wait_until(
        &format!("{} removed", a_path.display()),
        std::time::Duration::from_secs(60),
        || !a_path.exists(),
    );
    // ...and keeps B's, which the queued job names.
    assert!(b_path.is_dir(), "a named workspace was removed");
    let (status, _) = server.json(
        "POST",
        &format!("/v1/jobs/{blocker}/cancel"),
        &token,
        &Value::Null,
    );
    assert_eq!(status, 200);
    let id = queued["id"].as_str().unwrap();
    assert_eq!(
        cordon_test_support::server::outputs(&server.events(&token, id, None)),
        "hi\n"
    );
    // A job naming the removed workspace is told it is gone.
    let late = server.run_to_end(
        &token,
        &json!({"project": "c", "type": "run",
                "inputs": {"workspace": {"from_job": a}, "argv": ["sh", "-c", "true"]}}),
    );
    assert_eq!(late["failure"]["category"], "usage", "{late}");
    assert!(
        late["failure"]["reason"].as_str().unwrap().contains("gone"),
        "{late}"
    );
}

const TWO_PROJECTS: &str = r#"
workers = 1

[projects.alpha]
allow = [["git", "*"]]

[projects.beta]
allow = [["git", "*"], ["sh", "*"]]
"#;

/// A bare repository at `path` whose `main` names `commit` (objects to come from elsewhere).
fn bare_naming(path: &std::path::Path, commit: &str) {
    std::fs::create_dir_all(path).unwrap();
    git(path, &["init", "-q", "--bare", "-b", "main"]);
    std::fs::write(path.join("refs/heads/main"), format!("{commit}\n")).unwrap();
}

/// Issue 35 W1: the source check resolved symlinks only, and git then followed a `.git` file,
/// a `.git` symlink, `objects/info/alternates` (also nested), a `commondir`, a symlinked
/// `objects` or a sibling `NAME.git` into project alpha's workspace: a clone with project
/// beta's token returned alpha's commit. Every route is refused now, at submission, and again
/// when the clone runs (a source swapped after its submission).
#[test]
fn serve_clone_cannot_follow_git_redirections_into_another_projects_workspace() {
    let server = Server::start(TWO_PROJECTS);
    let alpha = server.token("alpha", "submit,read");
    let beta = server.token("beta", "submit,read");
    let src = TestDir::new();
    let secret = repo_with(src.path(), &[("SECRET", "alpha's data\n")]);
    let cloned = server.run_to_end(
        &alpha,
        &json!({"project": "alpha", "type": "repo.clone", "inputs": {"url": secret.display().to_string()}}),
    );
    assert_eq!(cloned["state"], "succeeded", "{cloned}");
    let commit = cloned["result"]["commit"].as_str().unwrap().to_owned();
    let git_dir =
        std::path::PathBuf::from(cloned["result"]["workspace"].as_str().unwrap()).join(".git");
    let objects = git_dir.join("objects");

    let beta_dir = TestDir::new();
    let place = |name: &str| {
        let path = beta_dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    };
    let mut sources = Vec::new();
    // A gitfile.
    let gitfile = place("gitfile");
    std::fs::write(
        gitfile.join(".git"),
        format!("gitdir: {}\n", git_dir.display()),
    )
    .unwrap();
    sources.push(gitfile);
    // A `.git` symlink.
    let linked = place("linked");
    std::os::unix::fs::symlink(&git_dir, linked.join(".git")).unwrap();
    sources.push(linked);
    // Alternates, absolute.
    let alternates = beta_dir.path().join("alternates");
    bare_naming(&alternates, &commit);
    std::fs::write(
        alternates.join("objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .unwrap();
    sources.push(alternates);
    // Alternates of alternates: the first hop stays inside the source.
    let nested = beta_dir.path().join("nested");
    bare_naming(&nested, &commit);
    let hop = nested.join("hop/objects");
    std::fs::create_dir_all(hop.join("info")).unwrap();
    std::fs::write(nested.join("objects/info/alternates"), "../hop/objects\n").unwrap();
    std::fs::write(
        hop.join("info/alternates"),
        format!("{}\n", objects.display()),
    )
    .unwrap();
    sources.push(nested);
    // A worktree-style git directory whose common directory is alpha's.
    let common = place("commondir");
    std::fs::write(common.join("HEAD"), "ref: refs/heads/work\n").unwrap();
    std::fs::write(common.join("commondir"), format!("{}\n", git_dir.display())).unwrap();
    sources.push(common);
    // A symlinked object directory.
    let objects_link = beta_dir.path().join("objects-link");
    bare_naming(&objects_link, &commit);
    std::fs::remove_dir_all(objects_link.join("objects")).unwrap();
    std::os::unix::fs::symlink(&objects, objects_link.join("objects")).unwrap();
    sources.push(objects_link);
    // An empty directory, and git's fallback to `NAME.git` beside it.
    let sibling = place("sibling");
    std::os::unix::fs::symlink(&git_dir, beta_dir.path().join("sibling.git")).unwrap();
    sources.push(sibling);

    for source in &sources {
        let (status, answer) = server.submit(
            &beta,
            &json!({"project": "beta", "type": "repo.clone", "inputs": {"url": source.display().to_string()}}),
        );
        assert_eq!(status, 403, "{}: {answer}", source.display());
        assert_eq!(answer["rule"], "repository", "{answer}");
        assert!(!answer.to_string().contains(&commit), "{answer}");
    }

    // Checked again when the clone runs: a clean repository at submission, a gitfile once
    // the single worker gets to it.
    let swapped = repo_with(&place("swapped"), &[("README", "beta's own\n")]);
    let (status, busy) = server.submit(
        &beta,
        &json!({"project": "beta", "type": "run", "inputs": {"argv": ["sh", "-c", "sleep 2"]}}),
    );
    assert_eq!(status, 201, "{busy}");
    let (status, job) = server.submit(
        &beta,
        &json!({"project": "beta", "type": "repo.clone", "inputs": {"url": swapped.display().to_string()}}),
    );
    assert_eq!(status, 201, "{job}");
    std::fs::remove_dir_all(swapped.join(".git")).unwrap();
    std::fs::write(
        swapped.join(".git"),
        format!("gitdir: {}\n", git_dir.display()),
    )
    .unwrap();
    let id = job["id"].as_str().unwrap();
    let done = loop {
        let job = server.job(&beta, id);
        if job["state"] != "queued" && job["state"] != "running" {
            break job;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(done["state"], "failed", "{done}");
    assert!(!done.to_string().contains(&commit), "{done}");

    // A repository of beta's own is cloned as before, bare too.
    let own = repo_with(&place("own"), &[("README", "beta's own\n")]);
    let bare = beta_dir.path().join("own.git");
    git(
        beta_dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &own.display().to_string(),
            "own.git",
        ],
    );
    for url in [own, bare] {
        let clone = server.run_to_end(
            &beta,
            &json!({"project": "beta", "type": "repo.clone", "inputs": {"url": url.display().to_string()}}),
        );
        assert_eq!(clone["state"], "succeeded", "{clone}");
    }
}

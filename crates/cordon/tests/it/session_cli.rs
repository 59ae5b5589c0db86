//! `cordon session` through the real binary: real git repositories in temp dirs, the real
//! kernel sandbox, real processes (killed with SIGKILL mid-way).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;

use crate::support;
use crate::support::{TestDir, cordon, git};

/// A host repository (branch `main`, checked out) and a `CORDON_HOME` of the test's own.
struct Fixture {
    repo: TestDir,
    home: TestDir,
}

/// A commit inside the session, by the agent (who sets its own identity).
const AGENT_COMMIT: &str = "git -c user.name=agent -c user.email=a@a commit -q";

impl Fixture {
    fn new() -> Fixture {
        let f = Fixture {
            repo: TestDir::new(),
            home: TestDir::new(),
        };
        git(f.repo.path(), &["init", "-q", "-b", "main"]);
        f.repo.write("a.txt", "alpha\n");
        git(f.repo.path(), &["add", "-A"]);
        git(f.repo.path(), &["commit", "-qm", "init"]);
        f
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = cordon();
        command
            .env("CORDON_HOME", self.home.path())
            .current_dir(self.repo.path())
            .args(args);
        command
    }

    fn cordon(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.cordon(args);
        assert!(
            out.status.success(),
            "{args:?} exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// Creates a session of the repository's checked-out branch; its id.
    fn create(&self, extra: &[&str]) -> String {
        let mut args = vec!["session", "create", "--json"];
        args.extend_from_slice(extra);
        let rec = self.json(&args);
        assert_eq!(rec["schema"], "cordon.session/v1");
        assert_eq!(rec["state"], "active");
        rec["id"].as_str().unwrap().to_owned()
    }

    /// Runs a shell script in the session as a writer; must exit 0.
    fn agent(&self, id: &str, script: &str) -> Output {
        self.ok(&["session", "exec", id, "--", "sh", "-c", script])
    }

    fn show(&self, id: &str) -> serde_json::Value {
        self.json(&["session", "show", id, "--json"])
    }

    fn head(&self, rev: &str) -> String {
        git(self.repo.path(), &["rev-parse", rev]).trim().to_owned()
    }

    /// Everything about the host checkout that a refused pull must leave alone.
    fn host_snapshot(&self) -> (String, String, Vec<u8>, String) {
        let refs = git(self.repo.path(), &["show-ref", "--heads", "--tags"]);
        let status = git(self.repo.path(), &["status", "--porcelain=v1", "-uall"]);
        let index = std::fs::read(self.repo.path().join(".git/index")).unwrap();
        let head = std::fs::read_to_string(self.repo.path().join(".git/HEAD")).unwrap();
        (refs, status, index, head)
    }

    /// A file of the session's tree as its programs see it, read on the host: from an overlay
    /// session's upper layer, else its base tree; or from its own checkout.
    fn read(&self, id: &str, rel: &str) -> Option<String> {
        let shown = self.show(id);
        let own = std::fs::read_to_string(self.tree(id).join(rel)).ok();
        match shown["tree_base"].as_str() {
            Some(commit) if own.is_none() => std::fs::read_to_string(
                self.home
                    .path()
                    .join("bases")
                    .join(commit)
                    .join("tree")
                    .join(rel),
            )
            .ok(),
            _ => own,
        }
    }

    /// Where the session's files are on the host: an overlay session's upper layer (what
    /// its programs wrote, and its `.git`), or its tree.
    fn tree(&self, id: &str) -> PathBuf {
        let shown = self.show(id);
        let tree = PathBuf::from(shown["path"].as_str().unwrap());
        if shown["tree_base"].is_string() {
            tree.parent().unwrap().join("layer/upper")
        } else {
            tree
        }
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Starts `cordon ARGS` with piped stdin/stdout and waits for the line `ready` on its
/// stdout (the program inside printed it: it runs).
fn spawn_until_ready(mut command: Command) -> (Child, std::process::ChildStdin) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(line)) if line == "ready" => break,
            Some(Ok(_)) => {}
            _ => {
                let out = child.wait_with_output().unwrap();
                panic!("the program never got ready: {}", stderr(&out));
            }
        }
    }
    // Keep draining stdout so the program never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (child, stdin)
}

#[test]
fn push_exec_pull_fast_forwards_the_checked_out_branch() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let base = f.head("main");
    // Push (a new session) and start the agent in it, in one step.
    let out = f.ok(&[
        "session",
        "push",
        "--json",
        "--",
        "sh",
        "-c",
        &format!("echo beta > b.txt && git add b.txt && {AGENT_COMMIT} -m agent-1"),
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["schema"], "cordon.session-push/v1");
    assert_eq!(report["created"], true);
    let id = report["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(report["session"]["base_commit"], base.as_str());
    // A second program, a second commit; the host repository is never visible inside.
    let repo = f.repo.path().display().to_string();
    // Nor is the session's own state (cordon's home is masked: only the path to the tree is
    // there), whatever the path tried.
    let home = f.home.path().display().to_string();
    let state = format!("{home}/sessions/{id}/state.json");
    f.agent(
        &id,
        &format!(
            "test ! -e '{repo}/a.txt' && test ! -e ../state.json && ! cat '{state}' 2>/dev/null && \
             {{ test ! -e '{home}/sessions/{id}' || test \"$(ls -A '{home}/sessions/{id}')\" = tree; }} && \
             echo gamma > c.txt && git add c.txt && {AGENT_COMMIT} -m agent-2"
        ),
    );
    assert_eq!(f.head("main"), base, "nothing reaches the host before pull");

    let pulled = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(pulled["schema"], "cordon.session-pull/v1");
    assert_eq!(pulled["outcome"], "merged");
    assert_eq!(pulled["commits"], 2);
    assert_eq!(pulled["checked_out"], true);
    let new = f.head("main");
    assert_eq!(pulled["to"], new.as_str());
    assert_eq!(f.head(&format!("refs/cordon/sessions/{id}")), new);
    assert_eq!(
        git(f.repo.path(), &["log", "--format=%s", "main"]),
        "agent-2\nagent-1\ninit\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.repo.path().join("c.txt")).unwrap(),
        "gamma\n"
    );
    assert_eq!(git(f.repo.path(), &["status", "--porcelain"]), "");

    // Pulling again changes nothing; the runs are in the record and in the run history.
    let again = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(again["outcome"], "up_to_date");
    let rec = f.show(&id);
    assert_eq!(rec["base_commit"], new.as_str());
    let runs = rec["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert_eq!(run["exit_code"], 0);
        let run_id = run["run_id"].as_str().unwrap();
        let shown = f.json(&["runs", "show", run_id, "--json"]);
        assert_eq!(shown["run"]["repo"], rec["path"]);
        assert_eq!(
            shown["run"]["session"],
            id.as_str(),
            "the run record names its session"
        );
    }
    let listed = f.json(&["runs", "list", "--session", &id, "--json"]);
    assert_eq!(listed["runs"].as_array().unwrap().len(), 2, "{listed:#}");
    let none = f.json(&["runs", "list", "--session", "zzzzzzzz", "--json"]);
    assert_eq!(none["runs"].as_array().unwrap().len(), 0, "{none:#}");
}

#[test]
fn pull_after_the_host_moved_on_is_refused_and_changes_nothing() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    f.agent(
        &id,
        &format!("echo session >> a.txt && {AGENT_COMMIT} -am session"),
    );
    f.repo.write("a.txt", "host\n");
    git(f.repo.path(), &["commit", "-qam", "host"]);
    f.repo.write("dirty.txt", "uncommitted\n");
    let before = f.host_snapshot();

    let out = f.cordon(&["session", "pull", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains("main has 1 commit(s) the session lacks, the session has 1 new commit(s)")
            && message.contains(&format!("refs/cordon/sessions/{id}")),
        "{message}"
    );
    assert_eq!(f.host_snapshot(), before);
    assert_eq!(
        std::fs::read_to_string(f.repo.path().join("a.txt")).unwrap(),
        "host\n"
    );
    // The session's commits wait in cordon's ref, for a merge by hand.
    assert_eq!(
        git(
            f.repo.path(),
            &[
                "log",
                "-1",
                "--format=%s",
                &format!("refs/cordon/sessions/{id}")
            ]
        ),
        "session\n"
    );
}

#[test]
fn a_dirty_checkout_that_the_fast_forward_would_overwrite_refuses() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    f.agent(
        &id,
        &format!("echo session > a.txt && {AGENT_COMMIT} -am session"),
    );
    f.repo.write("a.txt", "my own edit\n");
    let before = f.host_snapshot();
    let out = f.cordon(&["session", "pull", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("refused by git"), "{}", stderr(&out));
    assert_eq!(f.host_snapshot(), before);
    assert_eq!(
        std::fs::read_to_string(f.repo.path().join("a.txt")).unwrap(),
        "my own edit\n"
    );
}

#[test]
fn pull_into_a_branch_not_checked_out_moves_only_that_ref() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    git(f.repo.path(), &["branch", "feature"]);
    let id = f.create(&["--ref", "feature"]);
    f.agent(
        &id,
        &format!("echo f > f.txt && git add f.txt && {AGENT_COMMIT} -m feat"),
    );
    let main_before = f.head("main");
    let status_before = git(f.repo.path(), &["status", "--porcelain"]);
    let pulled = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(pulled["into"], "feature");
    assert_eq!(pulled["outcome"], "merged");
    assert_eq!(pulled["checked_out"], false);
    assert_eq!(f.head("feature"), pulled["to"].as_str().unwrap());
    assert_eq!(f.head("main"), main_before);
    assert!(!f.repo.path().join("f.txt").exists());
    assert_eq!(
        git(f.repo.path(), &["status", "--porcelain"]),
        status_before
    );
    // A branch that does not exist yet is created.
    let pulled = f.json(&["session", "pull", &id, "--into", "review/new", "--json"]);
    assert_eq!(pulled["outcome"], "merged");
    assert_eq!(f.head("review/new"), f.head("feature"));
}

#[test]
fn a_reviewer_cannot_write_a_file_or_a_commit() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    let tree = f.tree(&id);
    let out = f.cordon(&[
        "session",
        "exec",
        &id,
        "--read-only",
        "--",
        "sh",
        "-c",
        &format!(
            "git log --oneline >&2; echo x > new.txt; echo $? ; echo x >> a.txt; echo $?; \
             echo x > .git/refs/heads/evil; echo $?; {AGENT_COMMIT} --allow-empty -m review; echo $?"
        ),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let codes: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(codes.len(), 4, "{codes:?}");
    assert!(
        codes.iter().all(|c| c != "0"),
        "every write must fail: {codes:?}"
    );
    let errors = stderr(&out);
    assert!(
        errors.contains("init"),
        "the reviewer reads the history: {errors}"
    );
    assert!(errors.contains("Read-only file system"), "{errors}");
    assert!(!tree.join("new.txt").exists());
    assert!(!tree.join(".git/refs/heads/evil").exists());
    assert_eq!(f.read(&id, "a.txt").as_deref(), Some("alpha\n"));
    let pulled = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(pulled["outcome"], "up_to_date");
}

#[test]
fn two_writers_one_waits_or_is_refused_and_readers_never_wait() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    // Writer 1 commits, says ready, and holds the session until its input closes.
    let (first, first_input) = spawn_until_ready(f.command(&[
        "session",
        "exec",
        &id,
        "--",
        "sh",
        "-c",
        &format!("echo 1 > one.txt && git add one.txt && {AGENT_COMMIT} -m one && echo ready && {{ read line || true; }}"),
    ]));
    let refused = f.cordon(&["session", "exec", &id, "--", "true"]);
    assert_eq!(refused.status.code(), Some(125));
    assert!(
        stderr(&refused).contains("another writer runs in the session"),
        "{}",
        stderr(&refused)
    );
    let reader = f.ok(&[
        "session",
        "exec",
        &id,
        "--read-only",
        "--",
        "git",
        "log",
        "--format=%s",
    ]);
    assert_eq!(String::from_utf8_lossy(&reader.stdout), "one\ninit\n");
    let busy = f.show(&id);
    assert_eq!(busy["writer"]["pid"], first.id());
    assert_eq!(busy["writer"]["activity"], "exec");
    // A pull with a short bound runs out (124) and changes nothing.
    let timed_out = f.cordon(&["session", "pull", &id, "--wait", "100ms"]);
    assert_eq!(timed_out.status.code(), Some(124), "{}", stderr(&timed_out));
    // Writer 2 waits for writer 1, then runs.
    let second = f
        .command(&[
            "session",
            "exec",
            &id,
            "--wait",
            "60s",
            "--",
            "sh",
            "-c",
            &format!("echo 2 > two.txt && git add two.txt && {AGENT_COMMIT} -m two"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(first_input);
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let second = second.wait_with_output().unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(
        git(f.repo.path(), &["log", "--format=%s", "main"]),
        "two\none\ninit\n"
    );
}

#[test]
fn two_sessions_of_one_repository_side_by_side() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let a = f.create(&[]);
    let b = f.create(&["--branch", "second"]);
    assert_ne!(a, b);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            f.agent(
                &a,
                &format!("echo a > a2.txt && git add a2.txt && {AGENT_COMMIT} -m from-a"),
            )
        });
        scope.spawn(|| {
            f.agent(
                &b,
                &format!("echo b > b2.txt && git add b2.txt && {AGENT_COMMIT} -m from-b"),
            )
        });
    });
    assert_eq!(f.show(&b)["branch"], "second");
    let pa = f.json(&["session", "pull", &a, "--json"]);
    assert_eq!(pa["outcome"], "merged");
    let pb = f.json(&["session", "pull", &b, "--into", "b-work", "--json"]);
    assert_eq!(pb["outcome"], "merged");
    assert_eq!(
        git(f.repo.path(), &["log", "-1", "--format=%s", "main"]),
        "from-a\n"
    );
    assert_eq!(
        git(f.repo.path(), &["log", "-1", "--format=%s", "b-work"]),
        "from-b\n"
    );
    // b's work on top of the old main does not fast-forward the new main.
    let out = f.cordon(&["session", "pull", &b, "--into", "main"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let list = f.json(&["session", "list", "--json"]);
    assert_eq!(list["schema"], "cordon.session-list/v1");
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2);
}

#[test]
fn kill_9_of_exec_mid_command_leaves_a_session_that_pull_continues() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    let (mut child, input) = spawn_until_ready(f.command(&[
        "session",
        "exec",
        &id,
        "--",
        "sh",
        "-c",
        &format!("echo k > k.txt && git add k.txt && {AGENT_COMMIT} -m before-the-kill && echo ready && read line"),
    ]));
    let pid = child.id() as i32;
    support::signal(pid, libc::SIGKILL);
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    drop(input);
    // The state is readable; it names the dead writer; the next commands continue.
    let rec = f.show(&id);
    assert_eq!(rec["state"], "active");
    assert_eq!(rec["writer"]["pid"], pid);
    assert_eq!(rec["runs"][0]["exit_code"], serde_json::Value::Null);
    let pulled = f.json(&["session", "pull", &id, "--wait", "30s", "--json"]);
    assert_eq!(pulled["outcome"], "merged");
    assert_eq!(
        git(f.repo.path(), &["log", "-1", "--format=%s"]),
        "before-the-kill\n"
    );
    f.agent(&id, "git status --short");
    assert_eq!(f.show(&id)["writer"], serde_json::Value::Null);
}

#[test]
fn gc_ends_idle_sessions_and_transient_ones_whose_owner_is_gone() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let idle = f.create(&["--idle-timeout", "1s"]);
    let busy = f.create(&[]);
    // A transient session owned by a shell that has exited by now.
    let owner_script = format!(
        "CORDON_HOME='{}' '{}' session create --transient --repo '{}'",
        f.home.path().display(),
        env!("CARGO_BIN_EXE_cordon"),
        f.repo.path().display()
    );
    let orphan = Command::new("sh")
        .args(["-c", &owner_script])
        .output()
        .unwrap();
    assert!(orphan.status.success(), "{}", stderr(&orphan));
    let orphan = String::from_utf8_lossy(&orphan.stdout).trim().to_owned();
    let idle_tree = f.tree(&idle);
    support::wait_until("the idle session ends", Duration::from_secs(30), || {
        let report = f.json(&["gc", "--json"]);
        let ended = &report["sessions"]["ended"];
        ended
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == idle.as_str())
            || f.show(&idle)["state"] == "ended"
    });
    let rec = f.show(&idle);
    assert_eq!(rec["state"], "ended");
    assert_eq!(rec["end_reason"], "idle");
    assert!(!idle_tree.exists());
    let rec = f.show(&orphan);
    assert_eq!(rec["state"], "ended");
    assert_eq!(rec["end_reason"], "owner_gone");
    assert_eq!(f.show(&busy)["state"], "active");
    // Ended sessions refuse work with a clear usage error.
    let out = f.cordon(&["session", "pull", &idle]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the session has ended"),
        "{}",
        stderr(&out)
    );
    // remove ends a session; gc --older-than later deletes ended records.
    f.ok(&["session", "remove", &busy]);
    assert_eq!(f.show(&busy)["end_reason"], "removed");
    support::wait_until("ended records are deleted", Duration::from_secs(30), || {
        let report = f.json(&["gc", "--older-than", "1ms", "--json"]);
        !report["sessions"]["deleted"].as_array().unwrap().is_empty()
            && f.cordon(&["session", "show", &busy]).status.code() == Some(2)
    });
}

#[test]
fn bad_ids_and_branch_names_are_usage_errors() {
    let f = Fixture::new();
    for bad in ["../../etc", "ABCDEFGH", "x", "abcd234/"] {
        for args in [
            vec!["session", "show", bad],
            vec!["session", "pull", bad],
            vec!["session", "remove", bad],
        ] {
            let out = f.cordon(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("is not a session id"),
                "{}",
                stderr(&out)
            );
        }
    }
    let out = f.cordon(&["session", "show", "abcd2345"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no such session"));
    for bad in ["../../x", "a..b", "-rf", "x.lock", "a b", "HEAD"] {
        let out = f.cordon(&["session", "create", &format!("--branch={bad}")]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("refused as a branch name"),
            "{}",
            stderr(&out)
        );
    }
    let out = f.cordon(&["session", "create", "--ref", "HEAD~0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        !f.home.path().join("sessions").exists()
            || std::fs::read_dir(f.home.path().join("sessions"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn pull_refuses_bad_target_branches_and_local_submodules() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    for bad in ["../../etc/passwd", "a..b", "refs/../x"] {
        let out = f.cordon(&["session", "pull", &id, "--into", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
    }
    f.agent(
        &id,
        &format!(
            "printf '[submodule \"x\"]\\n\\tpath = x\\n\\turl = /etc\\n' > .gitmodules && git add .gitmodules && {AGENT_COMMIT} -m sub"
        ),
    );
    let before = f.host_snapshot();
    let out = f.cordon(&["session", "pull", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("at \"/etc\", which is not a network URL"),
        "{}",
        stderr(&out)
    );
    assert_eq!(f.host_snapshot(), before);
    let refs = git(f.repo.path(), &["for-each-ref", "refs/cordon"]);
    assert_eq!(refs, "", "the session's ref is deleted again");
}

/// Issue 35 V2: a submodule URL git would not take to a host over the network is refused in
/// every spelling git accepts (a bare relative path next to a committed symlink to a host
/// repository, the superproject's own `.git`, a path with a colon, backslashes, remote
/// helpers, `file::`), and so is a network URL that a file of the pulled tree makes local
/// (`git clone` tries a URL as a path first) — also when that file comes in a later pull
/// than the URL.
#[test]
fn pull_refuses_every_submodule_url_git_would_read_as_local() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let base = f.head("main");
    let id = f.create(&[]);
    let victim = TestDir::new();
    git(victim.path(), &["init", "-q", "-b", "main"]);
    let host = victim.path().display().to_string();
    // Each case: the URL, and what the agent adds next to it.
    let cases: Vec<(String, String)> = vec![
        ("hostrepo".into(), format!("ln -s '{host}' hostrepo")),
        (".git".into(), String::new()),
        (
            "sub/dir".into(),
            format!("mkdir sub && ln -s '{host}' sub/dir"),
        ),
        ("..\\hostrepo".into(), String::new()),
        (format!("{host}/.git"), String::new()),
        (format!("file://{host}"), String::new()),
        (format!("file::{host}"), String::new()),
        ("ext::sh -c touch% /tmp/pwned".into(), String::new()),
        ("fd::3".into(), String::new()),
        ("evil:repo".into(), format!("ln -s '{host}' evil:repo")),
        (
            "https://example.com/x.git".into(),
            format!("mkdir -p https:/example.com && ln -s '{host}' https:/example.com/x.git"),
        ),
    ];
    let with_url = |url: &str, extra: &str, reset: bool| {
        let reset = if reset {
            format!("git reset -q --hard {base} && git clean -qfdx && ")
        } else {
            String::new()
        };
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!("{extra} && ")
        };
        f.ok(&[
            "session",
            "exec",
            &id,
            "--env",
            &format!("URL={url}"),
            "--",
            "sh",
            "-c",
            &format!(
                "{reset}{extra}git config -f .gitmodules submodule.x.path x && \
                 git config -f .gitmodules submodule.x.url \"$URL\" && \
                 git add -A && {AGENT_COMMIT} -m sub"
            ),
        ]);
    };
    let refused = |url: &str| {
        let before = f.host_snapshot();
        let out = f.cordon(&["session", "pull", &id]);
        assert_eq!(out.status.code(), Some(1), "{url}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("which is not a network URL"),
            "{url}: {}",
            stderr(&out)
        );
        assert_eq!(f.host_snapshot(), before, "{url}");
        let refs = git(f.repo.path(), &["for-each-ref", "refs/cordon"]);
        assert_eq!(refs, "", "{url}: the session's ref is deleted again");
    };
    for (url, extra) in &cases {
        with_url(url, extra, true);
        refused(url);
    }
    // A network URL with nothing named like it comes through; a file named like it in a
    // later pull (the URL unchanged) turns it local, and is refused.
    with_url("git@example.com:org/x.git", "", true);
    let pulled = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(pulled["outcome"], "merged", "{pulled}");
    f.agent(
        &id,
        &format!("ln -s '{host}' git@example.com:org && git add -A && {AGENT_COMMIT} -m link"),
    );
    refused("git@example.com:org/x.git");
}

/// Issue 35 W4: `--max-bundle` bounds what crosses, not what a checkout writes (1 GiB of zeros
/// is a pack of about 1 MiB). A pull refuses, before it writes anything, a change whose
/// largest file is past `--max-checkout-file` (100 MiB by default) or whose new and changed
/// files add up past `--max-checkout-size` — into the checked-out branch or another.
#[test]
fn pull_bounds_what_the_change_writes_into_the_checkout() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    let zeros = f.repo.path().join("zeros");
    // A sparse file: no disk in the session; git stores it compressed.
    f.agent(
        &id,
        &format!("truncate -s 1G zeros && git add zeros && {AGENT_COMMIT} -m zeros"),
    );
    let refused = |args: &[&str], message: &str| {
        let before = f.host_snapshot();
        let out = f.cordon(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("nothing was written"),
            "{}",
            stderr(&out)
        );
        assert_eq!(f.host_snapshot(), before, "{args:?}");
        let refs = git(f.repo.path(), &["for-each-ref", "refs/cordon"]);
        assert_eq!(refs, "", "{args:?}: the session's ref is deleted again");
    };
    refused(
        &["session", "pull", &id, "--max-bundle", "16MiB"],
        "the change writes \"zeros\" of 1073741824 bytes into the checkout, more than the \
         limit of 104857600 bytes per file",
    );
    assert!(!zeros.exists(), "the 1 GiB file was checked out");
    // Into a branch that is not checked out: the same bound.
    git(f.repo.path(), &["branch", "side"]);
    refused(
        &["session", "pull", &id, "--into", "side"],
        "more than the limit of 104857600 bytes per file",
    );
    // Files each under the per-file limit, too much together.
    f.agent(
        &id,
        &format!(
            "git reset -q --hard HEAD~1 && for i in 1 2 3; do head -c 700000 /dev/zero > f$i; done \
             && git add -A && {AGENT_COMMIT} -m three"
        ),
    );
    refused(
        &[
            "session",
            "pull",
            &id,
            "--max-checkout-file",
            "1MiB",
            "--max-checkout-size",
            "2MiB",
        ],
        "the change writes 2100000 bytes of files into the checkout, more than the limit of \
         2097152 bytes (--max-checkout-size)",
    );
    // Within the bounds, it comes through.
    let pulled = f.json(&[
        "session",
        "pull",
        &id,
        "--max-checkout-file",
        "1MiB",
        "--max-checkout-size",
        "3MiB",
        "--json",
    ]);
    assert_eq!(pulled["outcome"], "merged", "{pulled}");
    assert_eq!(
        std::fs::metadata(f.repo.path().join("f3")).unwrap().len(),
        700_000
    );
}

/// Issue 35 (the mount table): an overlay session's tree was mounted with its layers named by
/// their host paths, and overlayfs shows its options as given: `/proc/self/mountinfo` inside
/// showed `upperdir=<CORDON_HOME>/sessions/ID/layer/upper`. The layers are named by
/// descriptor now. What still names cordon's state is a bind's root, which the kernel
/// records as the source's path on its filesystem however the bind is made: here only the
/// `/etc` snapshot, as docs/security.md says.
#[test]
fn a_sessions_mount_table_names_its_layers_by_descriptor_not_by_host_path() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    assert!(
        f.show(&id)["tree_base"].is_string(),
        "not an overlay session here: {}",
        f.show(&id)
    );
    let out = f.agent(&id, "cat /proc/self/mountinfo");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let home = f.home.path().canonicalize().unwrap().display().to_string();
    let overlay = table
        .lines()
        .find(|l| l.contains(" - overlay "))
        .unwrap_or_else(|| panic!("no overlay in {table}"));
    assert!(
        overlay.contains("lowerdir=/.oldroot/proc/self/fd/")
            && overlay.contains("upperdir=/.oldroot/proc/self/fd/"),
        "{overlay}"
    );
    for line in table.lines().filter(|l| l.contains(&home)) {
        let fields: Vec<&str> = line.split(' ').collect();
        assert!(
            fields[3].starts_with(&format!("{home}/cache/etc-"))
                && fields[4] == "/etc"
                && !fields[5..].join(" ").contains(&home),
            "cordon's state named outside the /etc snapshot's root field: {line}"
        );
    }
}

#[test]
fn only_the_session_branch_crosses_and_the_agents_git_config_never_runs_on_the_host() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    let marker = f.home.path().join("pwned");
    // Inside the sandbox the hook may run (the agent's own business): its marker lands in
    // the sandbox's private /tmp, never on the host.
    let hook = format!(
        "#!/bin/sh\nmkdir -p '{}' 2>/dev/null; touch '{}'\n",
        f.home.path().display(),
        marker.display()
    );
    let script = format!(
        "for h in pre-commit post-commit reference-transaction pre-push post-checkout post-merge; do \
           printf '%s' \"$HOOK\" > .git/hooks/$h; chmod +x .git/hooks/$h; done; \
         git config core.fsmonitor .git/hooks/post-commit; \
         git config core.hooksPath .git/hooks; \
         echo s > s.txt && git add s.txt && {AGENT_COMMIT} --no-verify -m work && \
         git tag v666 && git branch other && git update-ref refs/notes/evil HEAD"
    );
    f.ok(&[
        "session",
        "exec",
        &id,
        "--env",
        &format!("HOOK={hook}"),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let pulled = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(pulled["outcome"], "merged");
    assert!(!marker.exists(), "a hook of the session ran on the host");
    let refs = git(f.repo.path(), &["for-each-ref", "--format=%(refname)"]);
    assert_eq!(
        refs,
        format!("refs/cordon/sessions/{id}\nrefs/heads/main\n"),
        "no tag, no other branch, no notes"
    );
}

#[test]
fn push_into_an_existing_session_fast_forwards_it() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    f.repo.write("h.txt", "host\n");
    git(f.repo.path(), &["add", "h.txt"]);
    git(f.repo.path(), &["commit", "-qm", "host-2"]);
    let report = f.json(&["session", "push", "--session", &id, "--json"]);
    assert_eq!(report["created"], false);
    assert!(report["bundle_bytes"].as_u64().unwrap() > 0);
    assert_eq!(report["session"]["base_commit"], f.head("main").as_str());
    let out = f.agent(&id, "git log --format=%s && cat h.txt");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "host-2\ninit\nhost\n");
    // A history rewrite on the host is not pushed.
    git(f.repo.path(), &["reset", "-q", "--hard", "HEAD~1"]);
    git(
        f.repo.path(),
        &["commit", "-q", "--allow-empty", "-m", "rewritten"],
    );
    let out = f.cordon(&["session", "push", "--session", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("history rewrite"), "{}", stderr(&out));
}

#[test]
fn a_shallow_session_pushes_and_pulls() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    for i in 0..5 {
        f.repo.write("n.txt", &format!("{i}\n"));
        git(f.repo.path(), &["add", "n.txt"]);
        git(f.repo.path(), &["commit", "-qm", &format!("c{i}")]);
    }
    let report = f.json(&["session", "push", "--depth", "2", "--json"]);
    let id = report["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(report["session"]["shallow"], true);
    let out = f.agent(&id, &format!("git log --format=%s | wc -l && echo z > z.txt && git add z.txt && {AGENT_COMMIT} -m deep"));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2");
    let pulled = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(pulled["outcome"], "merged");
    assert_eq!(pulled["commits"], 1);
    assert_eq!(git(f.repo.path(), &["log", "-1", "--format=%s"]), "deep\n");
}

#[test]
fn remove_stops_what_runs_deletes_the_tree_and_keeps_the_runs() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    let tree = f.tree(&id);
    let (writer, input) = spawn_until_ready(f.command(&[
        "session",
        "exec",
        &id,
        "--",
        "sh",
        "-c",
        "echo ready && read line",
    ]));
    let removed = f.json(&["session", "remove", &id, "--json"]);
    assert_eq!(removed["state"], "ended");
    assert_eq!(removed["end_reason"], "removed");
    let writer = writer.wait_with_output().unwrap();
    drop(input);
    assert_eq!(writer.status.code(), Some(143), "{}", stderr(&writer));
    assert!(!tree.exists());
    let rec = f.show(&id);
    let run_id = rec["runs"][0]["run_id"].as_str().unwrap();
    let shown = f.json(&["runs", "show", run_id, "--json"]);
    assert_eq!(shown["run"]["status"], "cancelled");
    let out = f.cordon(&["session", "exec", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the session has ended"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn concurrent_readers_never_lose_an_update_of_the_state() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    let readers: Vec<Child> = (0..8)
        .map(|i| {
            f.command(&[
                "session",
                "exec",
                &id,
                "--read-only",
                "--",
                "sh",
                "-c",
                &format!("git log -1 >/dev/null; exit {i}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for (i, reader) in readers.into_iter().enumerate() {
        let out = reader.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(i as i32), "{}", stderr(&out));
    }
    let rec = f.show(&id);
    let mut codes: Vec<u64> = rec["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["read_only"], true);
            r["exit_code"].as_u64().unwrap()
        })
        .collect();
    codes.sort_unstable();
    assert_eq!(codes, (0..8).collect::<Vec<u64>>());
    assert_eq!(rec["writer"], serde_json::Value::Null);
}

#[test]
fn tty_gives_the_program_a_terminal_of_cordons_own_never_the_users() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    // Under `script` (a real terminal for cordon), the program gets a terminal on all three
    // descriptors — another one than the user's, so nothing it does reaches the user's.
    let inner = "for f in 0 1 2; do test -t \\$f || echo not-a-tty-\\$f; done; \
                 stat -L -c inner=%t:%T /proc/self/fd/0; echo err-line >&2";
    let outer = format!(
        "stat -L -c outer=%t:%T /proc/self/fd/0; CORDON_HOME='{}' exec '{}' session exec {id} --tty -- sh -c \"{inner}\"",
        f.home.path().display(),
        env!("CARGO_BIN_EXE_cordon"),
    );
    let out = Command::new("script")
        .args(["-qec", &format!("sh -c '{outer}'"), "/dev/null"])
        .current_dir(f.repo.path())
        .stdin(Stdio::null())
        .output()
        .expect("`script` (util-linux) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("not-a-tty"), "{text}");
    assert!(
        text.contains("err-line"),
        "errors come through the terminal too: {text}"
    );
    let device = |tag: &str| {
        text.lines()
            .find_map(|l| {
                l.trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
                    .strip_prefix(tag)
            })
            .map(|d| d.trim().to_owned())
            .unwrap_or_else(|| panic!("no {tag} in {text}"))
    };
    assert_ne!(device("outer="), device("inner="), "{text}");
    // Input is forwarded into the program's terminal; the run is recorded as usual.
    let out = f
        .command(&[
            "session",
            "exec",
            &id,
            "--tty",
            "--",
            "sh",
            "-c",
            "read x; echo got-$x",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"typed\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("got-typed"));
    assert_eq!(f.show(&id)["runs"][1]["exit_code"], 0);
}

#[test]
fn kill_9_of_create_mid_way_leaves_a_readable_record_that_gc_collects() {
    let f = Fixture::new();
    // Enough files that the import takes a moment.
    for d in 0..20 {
        let dir = f.repo.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for i in 0..100 {
            std::fs::write(dir.join(format!("f{i}")), format!("{d} {i}\n").repeat(20)).unwrap();
        }
    }
    git(f.repo.path(), &["add", "-A"]);
    git(f.repo.path(), &["commit", "-qm", "many"]);
    let sessions = f.home.path().join("sessions");
    let mut child = f
        .command(&["session", "create"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed the moment its record exists: whatever it had done by then.
    let mut state = None;
    support::wait_until("the record appears", Duration::from_secs(60), || {
        state = std::fs::read_dir(&sessions)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path().join("state.json"))
            .filter(|p| p.exists());
        state.is_some() || child.try_wait().unwrap().is_some()
    });
    support::signal(child.id() as i32, libc::SIGKILL);
    child.wait().unwrap();
    let state = state.expect("the create wrote its record before it ended");
    let id = state
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // Never a half-written record: show reads it. (Every session command first ends what a
    // dead creator left half made, so `show` already finds such a session ended.)
    let rec = f.show(&id);
    match rec["state"].as_str().unwrap() {
        "ended" => {
            assert_eq!(rec["end_reason"], "creation_abandoned", "{rec}");
            assert!(!f.home.path().join(format!("sessions/{id}/tree")).exists());
        }
        "active" => {}
        other => panic!("state {other}: {rec}"),
    }
    let report = f.json(&["gc", "--json"]);
    assert_eq!(
        report["sessions"]["failures"],
        serde_json::json!([]),
        "{report}"
    );
    // Nothing of the host changed.
    assert_eq!(git(f.repo.path(), &["status", "--porcelain"]), "");
    assert_eq!(
        git(f.repo.path(), &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main\n"
    );
}

#[test]
fn the_bundle_size_limit_and_unsandboxed_execs_are_refused() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    f.agent(
        &id,
        &format!("head -c 100000 /dev/urandom > big && git add big && {AGENT_COMMIT} -m big"),
    );
    let before = f.host_snapshot();
    let out = f.cordon(&["session", "pull", &id, "--max-bundle", "10KiB"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("--max-bundle"), "{}", stderr(&out));
    assert_eq!(f.host_snapshot(), before);
    let out = f.cordon(&["session", "create", "--max-bundle", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let list = f.json(&["session", "list", "--json"]);
    assert_eq!(
        list["sessions"].as_array().unwrap().len(),
        1,
        "a refused create leaves nothing"
    );
    // A session runs only sandboxed, and is its own workspace.
    let out = f.cordon(&["session", "exec", &id, "--no-sandbox", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("a session runs only sandboxed"),
        "{}",
        stderr(&out)
    );
    let out = f.cordon(&[
        "session",
        "exec",
        &id,
        "--workspace",
        "abcd2345",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // The limit allows what fits.
    let pulled = f.json(&["session", "pull", &id, "--json"]);
    assert_eq!(pulled["outcome"], "merged");
}

/// An overlay session holds its commit's base tree: gc keeps the base while the session
/// lives (even with no workspace left), and removes it once the session is gone.
#[test]
fn gc_keeps_the_base_tree_a_live_session_holds_and_removes_it_after() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create(&[]);
    let shown = f.show(&id);
    let Some(commit) = shown["tree_base"].as_str().map(str::to_owned) else {
        support::missing_capability(&format!("overlay sessions: {shown}"));
        return;
    };
    let base = f.home.path().join("bases").join(&commit);
    assert!(base.join("tree/a.txt").is_file());
    // The session's tree exists only inside the sandbox, with its own git data.
    let tree = std::path::PathBuf::from(shown["path"].as_str().unwrap());
    assert_eq!(std::fs::read_dir(&tree).unwrap().count(), 0);
    f.agent(
        &id,
        "git status --porcelain | (! grep .) && echo delta > d.txt && git add d.txt && git -c user.name=a -c user.email=a@a commit -qm d",
    );
    let gc = f.json(&["gc", "--json"]);
    assert_eq!(
        gc["workspaces"]["bases_removed"],
        serde_json::json!([]),
        "{gc:#}"
    );
    assert!(base.is_dir(), "a live session's base is kept");
    f.ok(&["session", "remove", &id]);
    let gc = f.json(&["gc", "--json"]);
    let removed = gc["workspaces"]["bases_removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{gc:#}");
    assert_eq!(removed[0]["commit"], commit.as_str());
    assert!(!base.exists());
}

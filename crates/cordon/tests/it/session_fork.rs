//! `cordon session fork` through the real binary: real git repositories in temp dirs, the
//! real kernel sandbox, real overlays. A fork must show exactly its source's state (history,
//! branch, index, uncommitted and untracked files, deletions), keep every write to itself,
//! and outlive its source.

use std::process::{Command, Output};

use pretty_assertions::assert_eq;

use crate::support;
use crate::support::{TestDir, cordon, git};

/// A host repository (branch `main`) and a `CORDON_HOME` of the test's own.
pub(crate) struct Fixture {
    pub(crate) repo: TestDir,
    pub(crate) home: TestDir,
}

/// A commit inside a session, by the agent.
pub(crate) const AGENT_COMMIT: &str = "git -c user.name=agent -c user.email=a@a commit -q";

/// Everything a program in a session can tell about its state: history, branch, index and
/// status, every name of the tree and every file's content.
const FINGERPRINT: &str = "set -e
git log --format='%H %s'
git rev-parse --abbrev-ref HEAD
git status --porcelain=v1 -uall
git diff --cached --stat
find . -path ./.git -prune -o -print | LC_ALL=C sort
find . -path ./.git -prune -o -type f -print | LC_ALL=C sort | xargs sha256sum";

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let f = Fixture {
            repo: TestDir::new(),
            home: TestDir::new(),
        };
        git(f.repo.path(), &["init", "-q", "-b", "main"]);
        f.repo.write("a.txt", "alpha\n");
        f.repo.write("gone.txt", "to be deleted in a commit\n");
        std::fs::create_dir(f.repo.path().join("dir")).unwrap();
        f.repo.write("dir/b.txt", "beta\n");
        f.repo.write("dir/c.txt", "gamma\n");
        git(f.repo.path(), &["add", "-A"]);
        git(f.repo.path(), &["commit", "-qm", "init"]);
        f
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = cordon();
        command
            .env("CORDON_HOME", self.home.path())
            .current_dir(self.repo.path())
            .args(args);
        command
    }

    pub(crate) fn ok(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?} exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub(crate) fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// A session of `main`, over a base tree (an overlay session: the only kind that forks).
    pub(crate) fn create(&self) -> String {
        let rec = self.json(&["session", "create", "--json"]);
        assert_eq!(rec["state"], "active");
        assert!(
            rec["tree_base"].is_string(),
            "not an overlay session here (`cordon doctor` says why): {rec}"
        );
        rec["id"].as_str().unwrap().to_owned()
    }

    /// Runs a shell script in the session as a writer; its stdout.
    pub(crate) fn sh(&self, id: &str, script: &str) -> String {
        let out = self.ok(&["session", "exec", id, "--", "sh", "-c", script]);
        String::from_utf8(out.stdout).unwrap()
    }

    /// The session's state as its programs see it (read-only, as a reviewer).
    pub(crate) fn fingerprint(&self, id: &str) -> String {
        let out = self.ok(&[
            "session",
            "exec",
            id,
            "--read-only",
            "--",
            "sh",
            "-c",
            FINGERPRINT,
        ]);
        String::from_utf8(out.stdout).unwrap()
    }

    /// Forks `id` into `count` sessions; the report.
    pub(crate) fn fork(&self, id: &str, count: u32) -> serde_json::Value {
        let report = self.json(&[
            "session",
            "fork",
            id,
            "--count",
            &count.to_string(),
            "--json",
        ]);
        assert_eq!(report["schema"], "cordon.session-fork/v1");
        assert_eq!(report["source"], id);
        report
    }

    /// A session with 3 commits of its own, staged, unstaged and untracked changes and
    /// deletions (committed and not).
    pub(crate) fn busy_session(&self) -> String {
        let id = self.create();
        self.sh(
            &id,
            &format!(
                "set -e
echo one >> a.txt && git add a.txt && {AGENT_COMMIT} -m one
git rm -q gone.txt && {AGENT_COMMIT} -m two
mkdir -p new/deep && echo three > new/deep/t.txt && git add new && {AGENT_COMMIT} -m three
echo staged > staged.txt && git add staged.txt
echo unstaged >> dir/b.txt
rm dir/c.txt
echo untracked > untracked.txt
mkdir -p scratch && echo s > scratch/s.txt"
            ),
        );
        id
    }
}

pub(crate) fn ids(report: &serde_json::Value) -> Vec<String> {
    report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The case: a session with uncommitted and untracked changes and 3 commits, forked
/// into 8. Each fork sees exactly the source's state; a write in one fork reaches neither
/// the source nor its siblings; the source keeps working; removing the source breaks no
/// fork; each fork records its parent; a fork's commits pull as a fast-forward.
#[test]
fn eight_forks_see_the_source_state_write_apart_and_outlive_it() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let source = f.busy_session();
    let before = f.fingerprint(&source);
    for expected in ["one", "two", "three", "?? untracked.txt", "A  staged.txt"] {
        assert!(before.contains(expected), "{expected}: {before}");
    }
    assert!(before.contains(" D dir/c.txt"), "{before}");
    assert!(!before.contains("gone.txt"), "{before}");

    let report = f.fork(&source, 8);
    let forks = ids(&report);
    assert_eq!(forks.len(), 8);
    assert_eq!(report["depth"], 1, "{report}");
    assert!(report["frozen_layer"].is_string(), "{report}");
    for fork in &forks {
        let shown = f.json(&["session", "show", fork, "--json"]);
        assert_eq!(shown["parent"], source.as_str());
        assert_eq!(shown["state"], "active");
        assert_eq!(shown["branch"], "main");
        assert_eq!(f.fingerprint(fork), before, "fork {fork}");
    }
    assert_eq!(f.fingerprint(&source), before, "the source after the fork");

    // A write in one fork (a commit, a change, a deletion) stays in it.
    f.sh(
        &forks[0],
        &format!(
            "set -e; echo fork0 > a.txt; rm untracked.txt; git add -A; {AGENT_COMMIT} -m fork0"
        ),
    );
    let changed = f.fingerprint(&forks[0]);
    assert_ne!(changed, before);
    assert!(changed.contains(" fork0\n"), "{changed}");
    assert_eq!(
        f.fingerprint(&source),
        before,
        "the source after a fork wrote"
    );
    assert_eq!(
        f.fingerprint(&forks[1]),
        before,
        "a sibling after a fork wrote"
    );

    // The source keeps working, and its writes stay in it.
    f.sh(
        &source,
        &format!("set -e; echo src > src.txt; git add src.txt; {AGENT_COMMIT} -m source-after"),
    );
    let source_after = f.fingerprint(&source);
    assert!(source_after.contains("source-after"), "{source_after}");
    assert_eq!(
        f.fingerprint(&forks[2]),
        before,
        "a fork after the source wrote"
    );

    // Removing the source breaks none of its forks.
    f.ok(&["session", "remove", &source]);
    for fork in &forks[1..] {
        assert_eq!(
            f.fingerprint(fork),
            before,
            "fork {fork} after the source's removal"
        );
    }
    f.sh(
        &forks[3],
        &format!("set -e; echo more >> a.txt; git add -A; {AGENT_COMMIT} -m fork3"),
    );
    assert!(f.fingerprint(&forks[3]).contains(" fork3\n"));

    // The winner's commits come back as a fast-forward of the host branch.
    let pulled = f.json(&["session", "pull", &forks[0], "--json"]);
    assert_eq!(pulled["outcome"], "merged", "{pulled}");
    assert_eq!(pulled["commits"], 4, "{pulled}");
    let log = git(f.repo.path(), &["log", "--format=%s", "main"]);
    assert_eq!(log, "fork0\nthree\ntwo\none\ninit\n");
    assert_eq!(
        std::fs::read_to_string(f.repo.path().join("a.txt")).unwrap(),
        "fork0\n"
    );
}

/// A fork of a fork stacks one more layer; forking again before writing adds none; once
/// every session over them is removed, `cordon gc` deletes the frozen layers.
#[test]
fn forks_of_forks_stack_only_what_was_written_and_gc_collects_their_layers() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let source = f.create();
    f.sh(&source, "echo s > s.txt");
    let first = ids(&f.fork(&source, 1)).remove(0);
    // Nothing written since: the same layers, nothing frozen.
    let again = f.fork(&source, 2);
    assert_eq!(again["depth"], 1, "{again}");
    assert_eq!(again["frozen_layer"], serde_json::Value::Null, "{again}");
    f.sh(&first, "echo f > f.txt");
    let nested = f.fork(&first, 1);
    assert_eq!(nested["depth"], 2, "{nested}");
    let grandchild = ids(&nested).remove(0);
    let seen = f.sh(&grandchild, "cat s.txt f.txt; git status --porcelain -uall");
    assert_eq!(seen, "s\nf\n?? f.txt\n?? s.txt\n");

    let layers = f.home.path().join("layers");
    let count = || {
        std::fs::read_dir(&layers)
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().contains('.'))
            .count()
    };
    assert_eq!(count(), 2);
    let mut all = vec![source, first, grandchild];
    all.extend(ids(&again));
    for id in &all[..all.len() - 1] {
        f.ok(&["session", "remove", "--discard", id]);
    }
    f.ok(&["gc"]);
    assert_eq!(
        count(),
        1,
        "the last fork of the source still holds its layer"
    );
    f.ok(&["session", "remove", "--discard", all.last().unwrap()]);
    f.ok(&["gc"]);
    assert_eq!(count(), 0, "no session holds them any more");
}

/// What cannot be forked is refused with the usage exit code and a cordon.error/v1.
#[test]
fn a_fork_of_no_sessions_or_of_an_ended_one_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let source = f.create();
    let out = f
        .command(&["session", "fork", &source, "--count", "0", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let error: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["schema"], "cordon.error/v1");
    f.ok(&["session", "remove", &source]);
    let out = f.command(&["session", "fork", &source]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Forks of forks twelve deep: more layers than one `lowerdir` option holds (255 bytes), so
/// the sandbox gives them one at a time; a writer and a reader both see every layer.
#[test]
fn a_stack_deeper_than_one_mount_option_holds_still_mounts_whole() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut id = f.create();
    for i in 0..12 {
        f.sh(&id, &format!("echo {i} > f{i}.txt"));
        // Flattening off: this stack is deeper than forks make it.
        let out = f
            .command(&["session", "fork", &id])
            .env("CORDON_FLATTEN_DEPTH", "1000")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    }
    assert_eq!(
        f.json(&["session", "show", &id, "--json"])["layers"]
            .as_array()
            .unwrap()
            .len(),
        12
    );
    let expected: String = (0..12).map(|i| format!("{i}\n")).collect();
    let cat =
        "cat f0.txt f1.txt f2.txt f3.txt f4.txt f5.txt f6.txt f7.txt f8.txt f9.txt f10.txt f11.txt";
    assert_eq!(f.sh(&id, cat), expected);
    let out = f.ok(&["session", "exec", &id, "--read-only", "--", "sh", "-c", cat]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
}

/// A fork that died between recording the freeze and making it (the source's record names a
/// frozen layer that is not there yet; its upper layer still where it was): the next command
/// that mounts the source finishes the rename, and nothing is lost.
#[test]
fn an_interrupted_freeze_is_finished_by_the_next_mount() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let source = f.create();
    f.sh(&source, "echo kept > kept.txt");
    let before = f.fingerprint(&source);
    let report = f.fork(&source, 1);
    let layer = report["frozen_layer"].as_str().unwrap().to_owned();
    // Back to the moment between the record and the rename.
    let frozen = f.home.path().join("layers").join(&layer);
    let upper = f
        .home
        .path()
        .join("sessions")
        .join(&source)
        .join("layer/upper");
    std::fs::rename(&frozen, &upper).unwrap();
    assert_eq!(f.fingerprint(&source), before);
    assert!(frozen.is_dir() && !upper.exists());
    assert_eq!(f.fingerprint(&ids(&report)[0]), before);
}

/// The source's state must hold still: a fork while a writer runs in it is refused (exit 1,
/// nothing made), or waits for it with --wait; a session without layers (a full checkout,
/// the git-worktree strategy) cannot fork (exit 2).
#[test]
fn a_fork_waits_for_the_writer_or_is_refused_and_a_full_checkout_cannot_fork() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let source = f.create();
    let mut writer = f
        .command(&[
            "session",
            "exec",
            &source,
            "--",
            "sh",
            "-c",
            "sleep 2; echo late > late.txt",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while f.json(&["session", "show", &source, "--json"])["writer"].is_null() {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let refused = f.command(&["session", "fork", &source]).output().unwrap();
    assert_eq!(
        refused.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("another writer"));
    let listed = f.json(&["session", "list", "--json"]);
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
    let waited = f.json(&["session", "fork", &source, "--wait", "30s", "--json"]);
    assert!(writer.wait().unwrap().success());
    let fork = waited["sessions"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(f.sh(&fork, "cat late.txt"), "late\n");

    let full = f
        .command(&["session", "create", "--json"])
        .env("CORDON_WORKSPACE_STRATEGY", "git-worktree")
        .output()
        .unwrap();
    assert!(full.status.success());
    let full: serde_json::Value = serde_json::from_slice(&full.stdout).unwrap();
    assert!(full["tree_base"].is_null(), "{full}");
    let out = f
        .command(&["session", "fork", full["id"].as_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an overlay session"));
}

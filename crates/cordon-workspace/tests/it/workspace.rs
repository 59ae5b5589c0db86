//! cordon-workspace against real repositories and the real `git`, in temporary directories.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use cordon_test_support::{git, git_bytes, repo_with};
use cordon_workspace::{
    CreateRequest, GcReason, Liveness, Strategy, WorkspaceEndReason, WorkspaceErrorKind,
    WorkspaceId, WorkspaceRecord, WorkspaceState, Workspaces,
};
use pretty_assertions::assert_eq;

struct Fixture {
    dir: tempfile::TempDir,
    workspaces: Workspaces,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "one\n"), ("b.txt", "bee\n")]);
        git(&repo, &["branch", "feature"]);
        let workspaces = Workspaces::new(dir.path().join("home"));
        Fixture { dir, workspaces }
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn create(&self, persistent: bool) -> WorkspaceRecord {
        self.workspaces
            .create(
                &CreateRequest::new(self.repo(), "HEAD", persistent)
                    .with_strategy(Strategy::GitWorktree),
            )
            .unwrap()
    }

    fn record_path(&self, id: &WorkspaceId) -> PathBuf {
        self.workspaces
            .home()
            .join("workspaces")
            .join(format!("{id}.json"))
    }

    fn rewrite(&self, record: &WorkspaceRecord) {
        std::fs::write(
            self.record_path(&record.id),
            serde_json::to_vec(record).unwrap(),
        )
        .unwrap();
    }

    /// `git worktree list` as the user sees it, without cordon's own entries.
    fn user_worktrees(&self) -> Vec<String> {
        let home = self.workspaces.home().to_string_lossy().into_owned();
        String::from_utf8(git_bytes(
            &self.repo(),
            &["worktree", "list", "--porcelain"],
        ))
        .unwrap()
        .split("\n\n")
        .filter(|entry| !entry.is_empty() && !entry.contains(&home))
        .map(str::to_owned)
        .collect()
    }

    fn our_worktrees(&self) -> usize {
        let home = self.workspaces.home().to_string_lossy().into_owned();
        String::from_utf8(git_bytes(
            &self.repo(),
            &["worktree", "list", "--porcelain"],
        ))
        .unwrap()
        .matches(&home)
        .count()
    }
}

/// Everything of the live checkout a user could notice.
#[derive(Debug, PartialEq)]
struct LiveState {
    files: BTreeMap<PathBuf, (Vec<u8>, SystemTime)>,
    index: (Vec<u8>, SystemTime),
    head: Vec<u8>,
    status: Vec<u8>,
    branches: Vec<u8>,
    stash: Vec<u8>,
    worktrees: Vec<String>,
}

fn live_state(fx: &Fixture) -> LiveState {
    let repo = fx.repo();
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&repo).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != ".git" {
            let meta = std::fs::metadata(&path).unwrap();
            files.insert(
                path.clone(),
                (std::fs::read(&path).unwrap(), meta.modified().unwrap()),
            );
        }
    }
    let index_path = repo.join(".git/index");
    LiveState {
        files,
        index: (
            std::fs::read(&index_path).unwrap(),
            std::fs::metadata(&index_path).unwrap().modified().unwrap(),
        ),
        head: std::fs::read(repo.join(".git/HEAD")).unwrap(),
        status: git_bytes(
            &repo,
            &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
        ),
        branches: git_bytes(
            &repo,
            &["for-each-ref", "--format=%(refname) %(objectname)"],
        ),
        stash: git_bytes(&repo, &["stash", "list"]),
        worktrees: fx.user_worktrees(),
    }
}

#[test]
fn workspace_life_cycle_leaves_the_live_checkout_untouched() {
    let fx = Fixture::new();
    let repo = fx.repo();
    // A stash, a staged change, an unstaged change and an untracked file in the checkout.
    std::fs::write(repo.join("a.txt"), "stashed\n").unwrap();
    git(&repo, &["stash", "-q"]);
    std::fs::write(repo.join("b.txt"), "staged\n").unwrap();
    git(&repo, &["add", "b.txt"]);
    std::fs::write(repo.join("a.txt"), "uncommitted\n").unwrap();
    std::fs::write(repo.join("untracked.txt"), "untracked\n").unwrap();
    let before = live_state(&fx);

    let record = fx.create(false);
    assert_eq!(record.state, WorkspaceState::Ready);
    assert_eq!(
        std::fs::read_to_string(record.path.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(record.path.join("b.txt")).unwrap(),
        "bee\n"
    );
    assert!(!record.path.join("untracked.txt").exists());

    let patch = b"diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\ndiff --git a/c.txt b/c.txt\nnew file mode 100644\n--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+sea\n";
    let applied = fx.workspaces.apply(&record.id, patch).unwrap();
    assert_eq!(applied.files.len(), 2);
    let diff = fx.workspaces.diff(&record.id, true).unwrap();
    let names: Vec<String> = diff.files.iter().map(|f| f.path.to_string()).collect();
    assert_eq!(names, vec!["a.txt", "c.txt"]);
    assert_eq!(diff.patch, None);
    let full = fx.workspaces.diff(&record.id, false).unwrap();
    assert!(
        String::from_utf8(full.patch.unwrap())
            .unwrap()
            .contains("+sea")
    );

    let listed = fx.workspaces.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].record, record);
    assert!(listed[0].size_bytes > 0 && listed[0].path_exists);
    assert_eq!(listed[0].owner, Liveness::Alive);
    assert_eq!(fx.workspaces.show(&record.id).unwrap().record, record);
    assert_eq!(live_state(&fx), before);

    assert_eq!(fx.workspaces.remove(&record.id).unwrap().id, record.id);
    assert!(!record.path.exists());
    assert_eq!(fx.our_worktrees(), 0);
    assert!(fx.workspaces.list().unwrap().is_empty());
    assert_eq!(live_state(&fx), before);
    // Nothing is left but the memory of how it ended, which errors about it tell.
    let left: Vec<_> = std::fs::read_dir(fx.workspaces.home().join("workspaces"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [".ended"], "{left:?}");
    let gone = fx.workspaces.show(&record.id).unwrap_err();
    assert!(gone.is_not_found());
    assert!(
        matches!(&gone.kind, WorkspaceErrorKind::Ended(end) if end.reason == WorkspaceEndReason::Removed),
        "{gone}"
    );
}

#[test]
fn record_json_shape() {
    let fx = Fixture::new();
    let record = fx
        .workspaces
        .create(
            &CreateRequest::new(fx.repo(), "feature", true).with_strategy(Strategy::GitWorktree),
        )
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.record_path(&record.id)).unwrap()).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "commit",
            "created_at",
            "git_common_dir",
            "git_dir",
            "id",
            "owner_pid",
            "owner_start_time",
            "path",
            "persistent",
            "ref",
            "repo",
            "schema",
            "state",
            "strategy"
        ]
    );
    assert_eq!(json["schema"], "cordon.workspace/v1");
    assert_eq!(json["strategy"], "git-worktree");
    assert_eq!(json["state"], "ready");
    assert_eq!(json["ref"], "feature");
    assert_eq!(json["persistent"], true);
    assert_eq!(json["owner_pid"], std::process::id());
    assert_eq!(
        json["repo"],
        std::fs::canonicalize(fx.repo()).unwrap().to_str().unwrap()
    );
    let created = humantime::parse_rfc3339(json["created_at"].as_str().unwrap()).unwrap();
    assert!(SystemTime::now().duration_since(created).unwrap() < Duration::from_secs(60));
    assert!(json["created_at"].as_str().unwrap().ends_with('Z'));
    let id = json["id"].as_str().unwrap();
    assert!(
        id.len() == 8
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
    );
}

#[test]
fn unknown_and_invalid_ids_and_bad_refs() {
    let fx = Fixture::new();
    let id: WorkspaceId = "abcdefgh".parse().unwrap();
    for err in [
        fx.workspaces.show(&id).unwrap_err(),
        fx.workspaces.remove(&id).unwrap_err(),
        fx.workspaces.apply(&id, b"").unwrap_err(),
        fx.workspaces.diff(&id, true).unwrap_err(),
    ] {
        assert!(err.is_not_found(), "{err}");
        assert_eq!(err.id.as_ref(), Some(&id));
    }
    assert!(matches!(
        "../../etc".parse::<WorkspaceId>().unwrap_err().kind,
        WorkspaceErrorKind::InvalidId(_)
    ));
    let err = fx
        .workspaces
        .create(
            &CreateRequest::new(fx.repo(), "no-such-ref", false)
                .with_strategy(Strategy::GitWorktree),
        )
        .unwrap_err();
    assert!(matches!(err.kind, WorkspaceErrorKind::Git(_)), "{err}");
    assert_eq!(err.repo, Some(fx.repo()));
    let err = fx
        .workspaces
        .create(
            &CreateRequest::new(fx.dir.path().join("nope"), "HEAD", false)
                .with_strategy(Strategy::GitWorktree),
        )
        .unwrap_err();
    assert!(matches!(err.kind, WorkspaceErrorKind::Git(_)), "{err}");
    assert!(fx.workspaces.list().unwrap().is_empty());
    assert_eq!(fx.our_worktrees(), 0);
}

#[test]
fn refused_patches_change_nothing() {
    let fx = Fixture::new();
    let record = fx.create(false);
    let before = std::fs::read(record.path.join("a.txt")).unwrap();
    for patch in [
        &b"diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n"[..],
        b"diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n",
        b"not a patch",
    ] {
        let err = fx.workspaces.apply(&record.id, patch).unwrap_err();
        assert!(matches!(err.kind, WorkspaceErrorKind::Git(_)), "{err}");
    }
    assert_eq!(std::fs::read(record.path.join("a.txt")).unwrap(), before);
    assert!(
        fx.workspaces
            .diff(&record.id, false)
            .unwrap()
            .files
            .is_empty()
    );
    assert!(!fx.dir.path().join("home/workspaces/x").exists());
}

#[test]
fn transient_guard_removes_on_drop() {
    let fx = Fixture::new();
    let path = {
        // A worktree: its files are on the host (an overlay's exist only inside a sandbox).
        let request =
            CreateRequest::new(fx.repo(), "HEAD", false).with_strategy(Strategy::GitWorktree);
        let guard = fx.workspaces.create_transient_from(&request).unwrap();
        assert!(guard.path().join("a.txt").exists());
        guard.path().to_owned()
    };
    assert!(!path.exists());
    assert!(fx.workspaces.list().unwrap().is_empty());
    assert_eq!(fx.our_worktrees(), 0);
}

fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn gc_collects_crashed_workspaces_and_keeps_live_and_persistent_ones() {
    let fx = Fixture::new();
    let dead = dead_pid();
    let mut crashed = fx.create(false);
    crashed.owner_pid = dead;
    fx.rewrite(&crashed);
    let mut reused_pid = fx.create(false);
    reused_pid.owner_start_time = reused_pid.owner_start_time.map(|t| t + 1);
    fx.rewrite(&reused_pid);
    let mut creating = fx.create(false);
    creating.owner_pid = dead;
    creating.state = WorkspaceState::Creating;
    fx.rewrite(&creating);
    let live = fx.create(false);
    let mut persistent = fx.create(true);
    persistent.owner_pid = dead;
    fx.rewrite(&persistent);
    let no_dir = fx.create(true);
    std::fs::remove_dir_all(&no_dir.path).unwrap();
    let orphan = fx.create(true);
    std::fs::remove_file(fx.record_path(&orphan.id)).unwrap();
    assert_eq!(fx.our_worktrees(), 7);

    // The cheap check at start only looks at records.
    let report = fx.workspaces.reconcile_on_start().unwrap();
    let mut removed: Vec<(WorkspaceId, GcReason)> = report
        .removed
        .iter()
        .map(|r| (r.id.clone(), r.reason))
        .collect();
    removed.sort();
    let mut expected = vec![
        (crashed.id.clone(), GcReason::OwnerGone),
        (reused_pid.id.clone(), GcReason::OwnerGone),
        (creating.id.clone(), GcReason::CreationAbandoned),
        (no_dir.id.clone(), GcReason::MissingDirectory),
    ];
    expected.sort();
    assert_eq!(removed, expected);
    assert_eq!(report.failures, vec![]);
    assert!(orphan.path.exists());

    let report = fx.workspaces.gc(None).unwrap();
    let removed: Vec<(WorkspaceId, GcReason)> = report
        .removed
        .iter()
        .map(|r| (r.id.clone(), r.reason))
        .collect();
    assert_eq!(
        removed,
        vec![(orphan.id.clone(), GcReason::OrphanDirectory)]
    );
    assert_eq!(report.kept, 2);
    assert_eq!(
        report.pruned_repos,
        vec![std::fs::canonicalize(fx.repo().join(".git")).unwrap()]
    );
    let mut left: Vec<WorkspaceId> = fx
        .workspaces
        .list()
        .unwrap()
        .into_iter()
        .map(|i| i.record.id)
        .collect();
    left.sort();
    let mut kept = vec![live.id.clone(), persistent.id.clone()];
    kept.sort();
    assert_eq!(left, kept);
    assert_eq!(fx.our_worktrees(), 2);

    // Idle (the record untouched for an hour): persistent ones go too, a transient one whose
    // owner runs stays.
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for id in [&persistent.id, &live.id] {
        std::fs::File::options()
            .append(true)
            .open(fx.record_path(id))
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
    }
    let report = fx.workspaces.gc(Some(Duration::from_secs(1800))).unwrap();
    let removed: Vec<(WorkspaceId, GcReason)> = report
        .removed
        .iter()
        .map(|r| (r.id.clone(), r.reason))
        .collect();
    assert_eq!(removed, vec![(persistent.id.clone(), GcReason::Idle)]);
    assert_eq!(fx.workspaces.list().unwrap().len(), 1);
    assert!(live.path.join("a.txt").exists());
    assert_eq!(fx.our_worktrees(), 1);
    assert_eq!(
        fx.workspaces
            .gc(Some(Duration::from_secs(1800)))
            .unwrap()
            .removed,
        vec![]
    );
}

#[test]
fn gc_skips_a_workspace_whose_lock_is_held() {
    let fx = Fixture::new();
    let mut record = fx.create(false);
    record.owner_pid = dead_pid();
    fx.rewrite(&record);
    let lock_path = fx
        .workspaces
        .home()
        .join("workspaces")
        .join(format!("{}.lock", record.id));
    let file = std::fs::File::open(&lock_path).unwrap();
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let report = fx.workspaces.gc(None).unwrap();
    assert_eq!(report.removed, vec![]);
    assert!(record.path.exists());
    drop(file);
    assert_eq!(fx.workspaces.gc(None).unwrap().removed.len(), 1);
    assert!(!record.path.exists());
}

/// Creates and removes workspaces of one repository in a loop, checking each.
fn churn(workspaces: &Workspaces, repo: &Path, rounds: usize) {
    for _ in 0..rounds {
        let record = workspaces
            .create(&CreateRequest::new(repo, "HEAD", false).with_strategy(Strategy::GitWorktree))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(record.path.join("a.txt")).unwrap(),
            "one\n"
        );
        workspaces.remove(&record.id).unwrap();
    }
}

#[test]
fn concurrent_creates_and_removes_from_threads_and_processes() {
    if let Some(spec) = std::env::var_os("CORDON_WORKSPACE_TEST_CHURN") {
        let spec = PathBuf::from(spec);
        churn(&Workspaces::new(spec.join("home")), &spec.join("repo"), 4);
        return;
    }
    let fx = Fixture::new();
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "workspace::concurrent_creates_and_removes_from_threads_and_processes",
                    "--test-threads=1",
                ])
                .env("CORDON_WORKSPACE_TEST_CHURN", fx.dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| churn(&fx.workspaces, &fx.repo(), 4));
        }
        // gc running at the same time must not take anything being created.
        scope.spawn(|| {
            for _ in 0..10 {
                let report = fx.workspaces.gc(None).unwrap();
                assert_eq!(report.removed, vec![]);
                assert_eq!(report.failures, vec![]);
            }
        });
    });
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    assert!(fx.workspaces.list().unwrap().is_empty());
    assert_eq!(fx.our_worktrees(), 0);
    assert_eq!(
        git_bytes(&fx.repo(), &["branch", "--list"]),
        b"  feature\n* main\n"
    );
}

#[test]
fn gc_collects_cut_short_records_but_leaves_other_versions_alone() {
    let fx = Fixture::new();
    let cut = fx.create(true);
    let foreign = fx.create(true);
    let young = fx.create(true);
    let old = SystemTime::now() - Duration::from_secs(3600);
    let write_aged = |path: PathBuf, bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        std::fs::File::options()
            .append(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    };
    write_aged(
        fx.record_path(&cut.id),
        b"{\"schema\": \"cordon.workspace/v1\", \"id\"",
    );
    write_aged(
        fx.record_path(&foreign.id),
        b"{\"schema\": \"cordon.workspace/v2\"}",
    );
    std::fs::write(fx.record_path(&young.id), b"").unwrap();

    let report = fx.workspaces.gc(None).unwrap();
    let removed: Vec<(WorkspaceId, GcReason)> = report
        .removed
        .iter()
        .map(|r| (r.id.clone(), r.reason))
        .collect();
    assert_eq!(removed, vec![(cut.id.clone(), GcReason::UnreadableRecord)]);
    assert_eq!(
        report
            .failures
            .iter()
            .map(|f| f.id.clone())
            .collect::<Vec<_>>(),
        vec![foreign.id.clone()]
    );
    assert!(!cut.path.exists() && !fx.record_path(&cut.id).exists());
    assert!(foreign.path.exists() && young.path.exists());
    assert_eq!(fx.our_worktrees(), 2);
}

#[test]
fn json_schemas_of_every_document_generate() {
    for schema in [
        serde_json::to_value(schemars::schema_for!(WorkspaceRecord)).unwrap(),
        serde_json::to_value(schemars::schema_for!(cordon_workspace::WorkspaceInfo)).unwrap(),
        serde_json::to_value(schemars::schema_for!(cordon_workspace::ApplyReport)).unwrap(),
        serde_json::to_value(schemars::schema_for!(cordon_workspace::WorkspaceDiff)).unwrap(),
        serde_json::to_value(schemars::schema_for!(cordon_workspace::GcReport)).unwrap(),
    ] {
        let properties = schema["properties"].as_object().unwrap();
        assert!(properties.contains_key("schema"), "{schema}");
        assert!(
            properties
                .keys()
                .all(|k| k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')),
            "{schema}"
        );
    }
}

/// Regression: gc pruned every worktree entry whose directory looked gone, the user's own
/// (on an unmounted disk) included. It forgets only the workspaces it removes.
#[test]
fn gc_leaves_the_users_own_worktree_entries_alone() {
    let fx = Fixture::new();
    let user_tree = fx.dir.path().join("user-tree");
    git(
        &fx.repo(),
        &["worktree", "add", "-q", user_tree.to_str().unwrap()],
    );
    std::fs::rename(&user_tree, fx.dir.path().join("unmounted")).unwrap();
    let gone = fx.create(true);
    std::fs::remove_dir_all(&gone.path).unwrap();
    let report = fx.workspaces.gc(None).unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    let entries: Vec<String> = std::fs::read_dir(fx.repo().join(".git/worktrees"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["user-tree"]);
}

//! cordon-git against real repositories in temporary directories, with the real `git`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use cordon_git::{ChangeStatus, GitErrorKind, RefusalReason, Repo, RepoPath};
use cordon_test_support::{git, git_bytes, git_command, repo_with};
use pretty_assertions::assert_eq;

/// Plain git (in cordon-test-support's environment, no host configuration), its failure left
/// to the caller: what git does without cordon-git's hardening.
fn git_unchecked(dir: &Path, args: &[&str]) -> std::process::Output {
    git_command(dir).args(args).output().unwrap()
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    /// A repository with a few committed files, a branch and a tag.
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        repo_with(
            dir.path(),
            &[
                ("a.txt", "one\ntwo\nthree\n"),
                ("src/lib.rs", "fn main() {}\n"),
                ("gone.txt", "delete me\n"),
                ("run.sh", "#!/bin/sh\n"),
            ],
        );
        Fixture { dir }
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn wt(&self, name: &str) -> PathBuf {
        self.dir.path().join("wts").join(name)
    }

    fn commit_all(&self, message: &str) {
        git(&self.repo(), &["add", "-A"]);
        git(&self.repo(), &["commit", "-q", "-m", message]);
    }
}

/// Every entry under `root`: type, mode and content (or link target).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let content = if meta.file_type().is_symlink() {
                std::fs::read_link(&path)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else if meta.is_dir() {
                stack.push(path.clone());
                Vec::new()
            } else {
                std::fs::read(&path).unwrap()
            };
            out.insert(
                path.strip_prefix(root).unwrap().to_owned(),
                (meta.permissions().mode(), content),
            );
        }
    }
    out
}

#[test]
fn worktree_has_the_committed_content_and_leaves_the_checkout_alone() {
    let fx = Fixture::new();
    let repo_dir = fx.repo();
    std::fs::write(repo_dir.join("a.txt"), "live edit\n").unwrap();
    std::fs::write(repo_dir.join("untracked.txt"), "live\n").unwrap();
    git(&repo_dir, &["add", "untracked.txt"]);
    let status = git_bytes(&repo_dir, &["status", "--porcelain=v1", "-z"]);
    let index = std::fs::read(repo_dir.join(".git/index")).unwrap();
    let index_mtime = std::fs::metadata(repo_dir.join(".git/index"))
        .unwrap()
        .modified()
        .unwrap();
    let before = snapshot(&repo_dir.join("src"));

    let repo = Repo::open(&repo_dir).unwrap();
    assert_eq!(
        repo.toplevel(),
        Some(std::fs::canonicalize(&repo_dir).unwrap().as_path())
    );
    let head = repo.resolve_commit("HEAD").unwrap();
    let wt = repo.add_worktree(&fx.wt("one"), &head).unwrap();
    assert_eq!(
        std::fs::read_to_string(wt.path().join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert!(!wt.path().join("untracked.txt").exists());
    assert!(wt.diff(&head, false).unwrap().files.is_empty());
    let listed = repo.list_worktrees().unwrap();
    assert!(
        listed.iter().any(|w| w.path == wt.path() && w.detached),
        "{listed:?}"
    );
    repo.remove_worktree(wt.path()).unwrap();
    assert!(!wt.path().exists());

    assert_eq!(
        git_bytes(&repo_dir, &["status", "--porcelain=v1", "-z"]),
        status
    );
    assert_eq!(std::fs::read(repo_dir.join(".git/index")).unwrap(), index);
    assert_eq!(
        std::fs::metadata(repo_dir.join(".git/index"))
            .unwrap()
            .modified()
            .unwrap(),
        index_mtime
    );
    assert_eq!(
        String::from_utf8(git_bytes(&repo_dir, &["symbolic-ref", "HEAD"])).unwrap(),
        "refs/heads/main\n"
    );
    assert_eq!(git_bytes(&repo_dir, &["branch", "--list"]), b"* main\n");
    assert_eq!(
        git_bytes(&repo_dir, &["worktree", "list", "--porcelain"])
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        4
    );
    assert_eq!(snapshot(&repo_dir.join("src")), before);
}

#[test]
fn refs_resolve_to_commits_and_options_are_not_refs() {
    let fx = Fixture::new();
    let repo = Repo::open(&fx.repo().join("src")).unwrap();
    let head = repo.resolve_commit("main").unwrap();
    assert_eq!(repo.resolve_commit("HEAD").unwrap(), head);
    assert_eq!(repo.merge_base(&head, &head).unwrap(), Some(head.clone()));
    for bad in ["no-such-branch", "--output=/tmp/x", "HEAD^{tree}", ""] {
        let err = repo.resolve_commit(bad).unwrap_err();
        assert!(
            matches!(
                err.kind,
                GitErrorKind::Failed { .. } | GitErrorKind::UnknownRevision { .. }
            ),
            "{bad}: {err}"
        );
    }
    // A revision that names nothing says so (git's `--quiet` said nothing at all).
    let err = repo.resolve_commit("no-such-branch").unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"no-such-branch\" names no commit of the repository"
    );

    // Opening and resolving in one go agrees with doing both, and refuses what they refuse.
    let (at, commit) = Repo::open_at(&fx.repo().join("src"), "main").unwrap();
    assert_eq!(commit, head);
    assert_eq!(at.common_dir(), repo.common_dir());
    assert_eq!(at.toplevel(), repo.toplevel());
    for bad in ["no-such-branch", "--output=/tmp/x", "HEAD^{tree}", ""] {
        let err = Repo::open_at(&fx.repo(), bad).unwrap_err();
        assert!(
            matches!(
                err.kind,
                GitErrorKind::Failed { .. } | GitErrorKind::UnknownRevision { .. }
            ),
            "{bad}: {err}"
        );
    }
    // A revision that names nothing says so (git's `--quiet` said nothing at all).
    let err = repo.resolve_commit("no-such-branch").unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"no-such-branch\" names no commit of the repository"
    );

    // A bare repository has no top level; worktrees of it work the same.
    let bare = fx.dir.path().join("bare.git");
    git(
        fx.dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            fx.repo().to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let repo = Repo::open(&bare).unwrap();
    assert_eq!(repo.toplevel(), None);
    let (at, _) = Repo::open_at(&bare, "main").unwrap();
    assert_eq!(at, repo);
    let wt = repo
        .add_worktree(&fx.wt("from-bare"), &repo.resolve_commit("main").unwrap())
        .unwrap();
    assert!(wt.path().join("a.txt").exists());
    repo.remove_worktree(wt.path()).unwrap();
}

/// A repository whose configuration tries every way to run a program.
fn hostile_fixture(marker_dir: &Path) -> Fixture {
    let fx = Fixture::new();
    let repo = fx.repo();
    let m = |name: &str| marker_dir.join(name).display().to_string();
    let hook = format!("#!/bin/sh\ntouch {}\ncat >/dev/null\n", m("hook"));
    let fsmonitor = repo.join(".git/fsmonitor.sh");
    std::fs::write(&fsmonitor, format!("#!/bin/sh\ntouch {}\n", m("fsmonitor"))).unwrap();
    std::fs::set_permissions(&fsmonitor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let included = repo.join(".git/included.cfg");
    std::fs::write(
        &included,
        format!(
            "[filter \"y\"]\n\tsmudge = touch {} && cat\n\tclean = touch {} && cat\n",
            m("include-smudge"),
            m("include-clean")
        ),
    )
    .unwrap();
    let config = format!(
        "[core]\n\tfsmonitor = {fsmonitor}\n\tpager = touch {pager}\n\
[filter \"x\"]\n\tsmudge = touch {smudge} && cat\n\tclean = touch {clean} && cat\n\trequired = true\n\
[filter \"p\"]\n\tprocess = touch {process}\n\
[diff \"x\"]\n\ttextconv = touch {textconv} && cat\n\tcommand = touch {diffcmd}\n\
[diff]\n\texternal = touch {external}\n\
[merge \"x\"]\n\tdriver = touch {merge}\n\
[includeIf \"gitdir:**/worktrees/**\"]\n\tpath = {included}\n",
        fsmonitor = fsmonitor.display(),
        pager = m("pager"),
        smudge = m("smudge"),
        clean = m("clean"),
        process = m("process"),
        textconv = m("textconv"),
        diffcmd = m("diff-command"),
        external = m("external"),
        merge = m("merge"),
        included = included.display(),
    );
    let mut text = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    text.push_str(&config);
    std::fs::write(
        repo.join(".gitattributes"),
        "*.txt filter=x diff=x merge=x\n*.rs filter=p\n*.sh filter=y\n",
    )
    .unwrap();
    // Commit the attributes before the hostile configuration exists.
    fx.commit_all("attributes");
    std::fs::write(repo.join(".git/config"), text).unwrap();
    let hooks = repo.join(".git/hooks");
    for name in [
        "post-checkout",
        "pre-commit",
        "post-index-change",
        "reference-transaction",
    ] {
        std::fs::write(hooks.join(name), &hook).unwrap();
        std::fs::set_permissions(hooks.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    fx
}

fn markers(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn hostile_configuration_is_effective_with_plain_git() {
    // The control experiment: the same fixture does run programs under plain git, so the
    // test below would notice if cordon's hardening stopped working.
    let markers_dir = tempfile::tempdir().unwrap();
    let fx = hostile_fixture(markers_dir.path());
    // The process filter fails the whole checkout under plain git: it is shown on its own.
    let plain = fx.wt("plain");
    git(
        &fx.repo(),
        &[
            "-c",
            "filter.p.process=",
            "worktree",
            "add",
            "-q",
            "--detach",
            plain.to_str().unwrap(),
            "HEAD",
        ],
    );
    std::fs::write(plain.join("a.txt"), "changed\n").unwrap();
    std::fs::write(plain.join("run.sh"), "changed\n").unwrap();
    git_unchecked(&plain, &["-c", "filter.p.process=", "diff", "HEAD"]);
    git_unchecked(
        &plain,
        &[
            "-c",
            "filter.p.process=",
            "diff",
            "--no-ext-diff",
            "HEAD",
            "--",
            "a.txt",
        ],
    );
    git_unchecked(&fx.repo(), &["cat-file", "--filters", "HEAD:src/lib.rs"]);
    let found = markers(markers_dir.path());
    for expected in [
        "hook",
        "smudge",
        "clean",
        "process",
        "include-smudge",
        "external",
        "fsmonitor",
        "diff-command",
        "textconv",
    ] {
        assert!(
            found.contains(&expected.to_owned()),
            "{expected} missing from {found:?}"
        );
    }
}

#[test]
fn hostile_configuration_never_runs_through_cordon() {
    let markers_dir = tempfile::tempdir().unwrap();
    let fx = hostile_fixture(markers_dir.path());
    let repo = Repo::open(&fx.repo()).unwrap();
    let head = repo.resolve_commit("HEAD").unwrap();
    let wt = repo.add_worktree(&fx.wt("w"), &head).unwrap();
    assert_eq!(
        std::fs::read_to_string(wt.path().join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    std::fs::write(wt.path().join("a.txt"), "changed\n").unwrap();
    std::fs::write(wt.path().join("run.sh"), "#!/bin/sh\necho\n").unwrap();
    std::fs::write(wt.path().join("new.txt"), "new\n").unwrap();
    let diff = wt.diff(&head, true).unwrap();
    assert_eq!(diff.files.len(), 3, "{:?}", diff.files);
    let patch = diff.patch.unwrap();
    let wt2 = repo.add_worktree(&fx.wt("w2"), &head).unwrap();
    wt2.apply_patch(&patch).unwrap();
    assert_eq!(
        std::fs::read_to_string(wt2.path().join("a.txt")).unwrap(),
        "changed\n"
    );
    repo.merge_base(&head, &head).unwrap();
    repo.list_worktrees().unwrap();
    repo.remove_worktree(wt.path()).unwrap();
    repo.remove_worktree(wt2.path()).unwrap();

    assert_eq!(markers(markers_dir.path()), Vec::<String>::new());
}

#[test]
fn changes_round_trip_through_a_patch() {
    let fx = Fixture::new();
    std::fs::write(
        fx.repo().join("big.txt"),
        (0..200).map(|i| format!("line {i}\n")).collect::<String>(),
    )
    .unwrap();
    fx.commit_all("big");
    let repo = Repo::open(&fx.repo()).unwrap();
    let head = repo.resolve_commit("HEAD").unwrap();
    let a = repo.add_worktree(&fx.wt("a"), &head).unwrap();
    let p = a.path();
    std::fs::write(p.join("new file.txt"), "added\n").unwrap();
    std::fs::write(p.join("line\nbreak"), "odd\n").unwrap();
    std::fs::write(p.join(OsStr::from_bytes(b"bytes-\xff\xfe")), "non-utf8\n").unwrap();
    std::fs::write(p.join("a.txt"), "one\n2\nthree\n").unwrap();
    std::fs::remove_file(p.join("gone.txt")).unwrap();
    std::fs::rename(p.join("big.txt"), p.join("moved.txt")).unwrap();
    std::fs::set_permissions(p.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(p.join("blob.bin"), [0u8, 159, 146, 150, 0, 1, 2, 255]).unwrap();
    std::os::unix::fs::symlink("a.txt", p.join("link")).unwrap();

    let diff = a.diff(&head, true).unwrap();
    let mut summary: Vec<(String, ChangeStatus)> = diff
        .files
        .iter()
        .map(|f| (f.path.to_string(), f.status))
        .collect();
    summary.sort();
    let mut expected = vec![
        ("a.txt".to_owned(), ChangeStatus::Modified),
        ("blob.bin".to_owned(), ChangeStatus::Added),
        ("bytes-\u{fffd}\u{fffd}".to_owned(), ChangeStatus::Added),
        ("gone.txt".to_owned(), ChangeStatus::Deleted),
        ("line\nbreak".to_owned(), ChangeStatus::Added),
        ("link".to_owned(), ChangeStatus::Added),
        ("moved.txt".to_owned(), ChangeStatus::Renamed),
        ("new file.txt".to_owned(), ChangeStatus::Added),
        ("run.sh".to_owned(), ChangeStatus::ModeChanged),
    ];
    expected.sort();
    assert_eq!(summary, expected);
    let odd = diff
        .files
        .iter()
        .find(|f| f.path.as_bytes().starts_with(b"bytes-"))
        .unwrap();
    assert_eq!(odd.path, RepoPath::from_bytes(&b"bytes-\xff\xfe"[..]));
    let renamed = diff
        .files
        .iter()
        .find(|f| f.status == ChangeStatus::Renamed)
        .unwrap();
    assert_eq!(renamed.old_path, Some(RepoPath::from_bytes("big.txt")));
    let name_only = a.diff(&head, false).unwrap();
    assert_eq!(name_only.files, diff.files);
    assert_eq!(name_only.patch, None);

    let b = repo.add_worktree(&fx.wt("b"), &head).unwrap();
    let applied = b.apply_patch(diff.patch.as_ref().unwrap()).unwrap();
    assert_eq!(applied.len(), 9, "{applied:?}");
    let strip = |mut s: BTreeMap<PathBuf, (u32, Vec<u8>)>| {
        s.remove(Path::new(".git"));
        s
    };
    assert_eq!(strip(snapshot(b.path())), strip(snapshot(a.path())));
    assert_eq!(b.diff(&head, false).unwrap().files, diff.files);
}

fn refused(patch: &[u8], setup: impl FnOnce(&Path)) -> GitErrorKind {
    let fx = Fixture::new();
    let repo = Repo::open(&fx.repo()).unwrap();
    let head = repo.resolve_commit("HEAD").unwrap();
    let wt = repo.add_worktree(&fx.wt("w"), &head).unwrap();
    setup(wt.path());
    let before_tree = snapshot(wt.path());
    let before_git = snapshot(&fx.repo().join(".git"));
    let err = wt.apply_patch(patch).unwrap_err();
    assert_eq!(snapshot(wt.path()), before_tree, "the workspace changed");
    assert_eq!(
        snapshot(&fx.repo().join(".git")),
        before_git,
        "the repository changed"
    );
    assert!(!fx.dir.path().join("x").exists() && !fx.dir.path().join("wts/x").exists());
    err.kind
}

fn new_file_patch(path: &str) -> Vec<u8> {
    format!("diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n")
        .into_bytes()
}

fn reason(kind: GitErrorKind) -> RefusalReason {
    match kind {
        GitErrorKind::PatchRefused { reason, .. } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn hostile_patches_are_refused_with_nothing_changed() {
    let malformed = |kind| assert!(matches!(kind, GitErrorKind::PatchMalformed(_)), "{kind:?}");
    assert_eq!(
        reason(refused(&new_file_patch("../x"), |_| ())),
        RefusalReason::ParentComponent
    );
    assert_eq!(
        reason(refused(&new_file_patch("a/../../x"), |_| ())),
        RefusalReason::ParentComponent
    );
    // git reads `b//etc/passwd` as `/etc/passwd`; cordon reads it as `/etc/passwd` too.
    assert_eq!(
        reason(refused(&new_file_patch("/etc/passwd"), |_| ())),
        RefusalReason::Absolute
    );
    let rename_out = b"diff --git a/a.txt b/a.txt\nrename from ../a.txt\nrename to a.txt\n";
    assert!(matches!(
        refused(rename_out, |_| ()),
        GitErrorKind::PatchRefused { .. } | GitErrorKind::PatchMalformed(_)
    ));
    let rename_git = b"diff --git a/a.txt b/.git/a\nsimilarity index 100%\nrename from a.txt\nrename to .git/a\n";
    assert_eq!(
        reason(refused(rename_git, |_| ())),
        RefusalReason::GitDirectory
    );
    assert_eq!(
        reason(refused(&new_file_patch(".git/hooks/pre-commit"), |_| ())),
        RefusalReason::GitDirectory
    );
    assert_eq!(
        reason(refused(&new_file_patch(".GIT/config"), |_| ())),
        RefusalReason::GitDirectory
    );
    assert_eq!(
        reason(refused(&new_file_patch("sub/.git/config"), |_| ())),
        RefusalReason::GitDirectory
    );
    assert_eq!(
        reason(refused(&new_file_patch(".gitmodules"), |_| ())),
        RefusalReason::Gitmodules
    );
    let good_then_bad = [new_file_patch("fine.txt"), new_file_patch(".git/x")].concat();
    assert_eq!(
        reason(refused(&good_then_bad, |_| ())),
        RefusalReason::GitDirectory
    );

    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().to_owned();
    assert_eq!(
        reason(refused(&new_file_patch("out/evil.txt"), |tree| {
            std::os::unix::fs::symlink(&target, tree.join("out")).unwrap()
        })),
        RefusalReason::ThroughSymlink
    );
    assert!(!outside.path().join("evil.txt").exists());
    let via_new_link = format!(
        "diff --git a/out b/out\nnew file mode 120000\n--- /dev/null\n+++ b/out\n@@ -0,0 +1 @@\n+{}\n\\ No newline at end of file\n{}",
        target.display(),
        String::from_utf8(new_file_patch("out/evil.txt")).unwrap()
    );
    assert_eq!(
        reason(refused(via_new_link.as_bytes(), |_| ())),
        RefusalReason::ThroughNewSymlink
    );
    assert!(!outside.path().join("evil.txt").exists());

    // A symlink committed in the repository, leading out of it.
    let committed = tempfile::tempdir().unwrap();
    let fx = Fixture::new();
    std::os::unix::fs::symlink(committed.path(), fx.repo().join("escape")).unwrap();
    fx.commit_all("escape hatch");
    let repo = Repo::open(&fx.repo()).unwrap();
    let wt = repo
        .add_worktree(&fx.wt("c"), &repo.resolve_commit("HEAD").unwrap())
        .unwrap();
    assert!(
        std::fs::symlink_metadata(wt.path().join("escape"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let err = wt
        .apply_patch(&new_file_patch("escape/evil.txt"))
        .unwrap_err();
    assert_eq!(reason(err.kind), RefusalReason::ThroughSymlink);
    assert_eq!(std::fs::read_dir(committed.path()).unwrap().count(), 0);

    malformed(refused(b"this is not a patch\n", |_| ()));
    malformed(refused(
        b"diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n",
        |_| (),
    ));
    let stale = b"diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-zwei\n+2\n three\n";
    assert!(matches!(
        refused(stale, |_| ()),
        GitErrorKind::PatchDoesNotApply { .. }
    ));
    // A good hunk followed by a failing one: git apply writes neither.
    let half = [new_file_patch("fine.txt"), stale.to_vec()].concat();
    assert!(matches!(
        refused(&half, |_| ()),
        GitErrorKind::PatchDoesNotApply { .. }
    ));
    let huge = vec![b'x'; cordon_git::MAX_PATCH_BYTES as usize + 1];
    assert!(matches!(
        refused(&huge, |_| ()),
        GitErrorKind::PatchTooLarge { .. }
    ));
}

#[test]
fn worktrees_with_nested_repositories_or_a_rewritten_dot_git_are_removed() {
    let fx = Fixture::new();
    let repo = Repo::open(&fx.repo()).unwrap();
    let head = repo.resolve_commit("HEAD").unwrap();
    let nested = repo.add_worktree(&fx.wt("nested"), &head).unwrap();
    std::fs::create_dir(nested.path().join("sub")).unwrap();
    git(&nested.path().join("sub"), &["init", "-q"]);
    std::fs::write(nested.path().join("sub/f"), "f\n").unwrap();
    std::fs::create_dir_all(nested.path().join("deep/er")).unwrap();
    git(&nested.path().join("deep/er"), &["init", "-q"]);
    std::fs::write(nested.path().join("deep/file"), "f\n").unwrap();
    let diff = nested.diff(&head, true).unwrap();
    assert_eq!(
        diff.files
            .iter()
            .map(|f| f.path.to_string())
            .collect::<Vec<_>>(),
        vec!["deep/file"]
    );
    let mut nested_repos: Vec<String> = diff
        .nested_repositories
        .iter()
        .map(|p| p.to_string())
        .collect();
    nested_repos.sort();
    assert_eq!(nested_repos, vec!["deep/er", "sub"]);
    let rewritten = repo.add_worktree(&fx.wt("rewritten"), &head).unwrap();
    let decoy = tempfile::tempdir().unwrap();
    std::fs::write(decoy.path().join("keep"), "x").unwrap();
    std::fs::write(
        rewritten.path().join(".git"),
        format!("gitdir: {}\n", decoy.path().display()),
    )
    .unwrap();
    // Diffs use the recorded git directory, not the rewritten `.git` file.
    assert_eq!(rewritten.diff(&head, false).unwrap().files, vec![]);
    repo.remove_worktree(nested.path()).unwrap();
    repo.remove_worktree(rewritten.path()).unwrap();
    assert!(!nested.path().exists() && !rewritten.path().exists());
    assert!(decoy.path().join("keep").exists());
    let listed = repo.list_worktrees().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
}

#[test]
fn inherited_git_variables_cannot_redirect_git() {
    if std::env::var_os("CORDON_GIT_TEST_CHILD").is_some() {
        let fx = Fixture::new();
        let repo = Repo::open(&fx.repo()).unwrap();
        let head = repo.resolve_commit("HEAD").unwrap();
        let wt = repo.add_worktree(&fx.wt("w"), &head).unwrap();
        std::fs::write(wt.path().join("n.txt"), "n\n").unwrap();
        assert_eq!(wt.diff(&head, false).unwrap().files.len(), 1);
        repo.remove_worktree(wt.path()).unwrap();
        return;
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let e = |name: &str| elsewhere.path().join(name);
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "git::inherited_git_variables_cannot_redirect_git",
            "--test-threads=1",
        ])
        .env("CORDON_GIT_TEST_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .env("GIT_DIR", e("gitdir"))
        .env("GIT_WORK_TREE", e("worktree"))
        .env("GIT_INDEX_FILE", e("index"))
        .env("GIT_OBJECT_DIRECTORY", e("objects"))
        .env(
            "GIT_CONFIG_PARAMETERS",
            format!("'core.hooksPath'='{}'", e("hooks").display()),
        )
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "core.bare")
        .env("GIT_CONFIG_VALUE_0", "true")
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

/// Regression: removing a cordon worktree whose directory is already gone fell back to
/// `git worktree prune`, which also deleted the entry of the user's own worktree that lived on
/// an unmounted disk (its directory looked gone too).
#[test]
fn removing_a_gone_worktree_forgets_only_that_one() {
    let fx = Fixture::new();
    let user_tree = fx.wt("user");
    git(
        &fx.repo(),
        &["worktree", "add", "-q", user_tree.to_str().unwrap()],
    );
    // The user's disk is unmounted: the directory is not there right now.
    let away = fx.wt("away");
    std::fs::rename(&user_tree, &away).unwrap();
    let repo = Repo::open(&fx.repo()).unwrap();
    let head = repo.resolve_commit("HEAD").unwrap();
    let ours = repo.add_worktree(&fx.wt("ours"), &head).unwrap();
    std::fs::remove_dir_all(ours.path()).unwrap();
    repo.remove_worktree(ours.path()).unwrap();
    let entries: Vec<String> = std::fs::read_dir(fx.repo().join(".git/worktrees"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["user"], "the user's entry stays, ours is gone");
    // Back from the unmounted disk, the user's worktree still works.
    std::fs::rename(&away, &user_tree).unwrap();
    git(&user_tree, &["status", "--short"]);
    assert!(
        !repo.forget_worktree(ours.path()).unwrap(),
        "nothing left to forget"
    );
}

/// What a checkout of one commit over another writes: added and changed files (their new
/// sizes), symlinks; not deleted files or submodules.
#[test]
fn checkout_size_counts_what_a_checkout_writes() {
    let f = Fixture::new();
    let repo_dir = f.repo();
    let repo = Repo::open(&repo_dir).unwrap();
    let from = repo.resolve_commit("HEAD").unwrap();
    std::fs::write(repo_dir.join("a.txt"), "x".repeat(1000)).unwrap();
    std::fs::write(repo_dir.join("new.bin"), vec![0u8; 5000]).unwrap();
    std::fs::remove_file(repo_dir.join("gone.txt")).unwrap();
    std::os::unix::fs::symlink("a.txt", repo_dir.join("link")).unwrap();
    git(&repo_dir, &["add", "-A"]);
    let sub = git(&repo_dir, &["rev-parse", "HEAD"]);
    git(
        &repo_dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},vendored", sub.trim()),
        ],
    );
    git(&repo_dir, &["commit", "-qm", "sizes"]);
    let to = repo.resolve_commit("HEAD").unwrap();
    let size = repo.checkout_size(Some(&from), &to).unwrap();
    assert_eq!(
        size,
        cordon_git::CheckoutSize {
            files: 3,
            total_bytes: 1000 + 5000 + 5,
            largest: Some(("new.bin".to_owned(), 5000)),
        }
    );
    let whole = repo.checkout_size(None, &to).unwrap();
    assert_eq!(whole.files, 5, "{whole:?}");
    assert_eq!(
        repo.checkout_size(Some(&to), &to).unwrap(),
        Default::default()
    );
}

#[test]
fn a_checkouts_changes_are_snapshotted_without_touching_its_files_index_or_stash() {
    let fx = Fixture::new();
    let repo = fx.repo();
    std::fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    fx.commit_all("ignore logs");
    // Unstaged, staged, deleted, untracked, ignored; and a stash entry of the user's own.
    std::fs::write(repo.join("a.txt"), "stashed\n").unwrap();
    git(&repo, &["stash", "-q"]);
    std::fs::write(repo.join("a.txt"), "one\nTWO\nthree\n").unwrap();
    std::fs::write(repo.join("staged.txt"), "staged\n").unwrap();
    git(&repo, &["add", "staged.txt"]);
    std::fs::remove_file(repo.join("gone.txt")).unwrap();
    std::fs::create_dir_all(repo.join("src/new")).unwrap();
    std::fs::write(repo.join("src/new/mod.rs"), "// new\n").unwrap();
    std::fs::write(repo.join("debug.log"), "ignored\n").unwrap();
    let index = std::fs::read(repo.join(".git/index")).unwrap();
    let index_mtime = std::fs::metadata(repo.join(".git/index"))
        .unwrap()
        .modified()
        .unwrap();
    let files_before = snapshot(&repo);
    let stash_before = git(&repo, &["stash", "list"]);

    let head = Repo::open(&repo).unwrap().resolve_commit("HEAD").unwrap();
    // From a subdirectory, as `cordon verify` would be run.
    let checkout = cordon_git::Checkout::open(&repo.join("src"))
        .unwrap()
        .expect("a checkout");
    assert_eq!(checkout.top(), repo.canonicalize().unwrap());
    let scratch = tempfile::tempdir().unwrap();
    let diff = checkout.changes(&head, scratch.path()).unwrap();
    let mut changed: Vec<(String, ChangeStatus)> = diff
        .files
        .iter()
        .map(|f| (f.path.to_string(), f.status))
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            ("a.txt".to_owned(), ChangeStatus::Modified),
            ("gone.txt".to_owned(), ChangeStatus::Deleted),
            ("src/new/mod.rs".to_owned(), ChangeStatus::Added),
            ("staged.txt".to_owned(), ChangeStatus::Added),
        ]
    );
    assert_eq!(
        diff.untracked,
        [RepoPath::from_bytes(b"src/new/mod.rs".to_vec())]
    );

    // Nothing of the checkout changed: files, index (not even its stat data), stash.
    assert_eq!(snapshot(&repo), files_before);
    assert_eq!(std::fs::read(repo.join(".git/index")).unwrap(), index);
    assert_eq!(
        std::fs::metadata(repo.join(".git/index"))
            .unwrap()
            .modified()
            .unwrap(),
        index_mtime
    );
    assert_eq!(git(&repo, &["stash", "list"]), stash_before);
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);

    // The patch turns HEAD's files into the checkout's (the ignored log left out).
    let clone = fx.dir.path().join("clone");
    git(
        fx.dir.path(),
        &["clone", "-q", repo.to_str().unwrap(), "clone"],
    );
    let patch = fx.dir.path().join("snapshot.diff");
    std::fs::write(&patch, diff.patch.unwrap()).unwrap();
    git(&clone, &["apply", patch.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(clone.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert!(clone.join("src/new/mod.rs").is_file());
    assert!(clone.join("staged.txt").is_file());
    assert!(!clone.join("gone.txt").exists());
    assert!(!clone.join("debug.log").exists());

    // A clean checkout: nothing, and an empty patch.
    let clean = cordon_git::Checkout::open(&clone).unwrap().unwrap();
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "-q", "-m", "same"]);
    let clone_head = Repo::open(&clone).unwrap().resolve_commit("HEAD").unwrap();
    let none = clean.changes(&clone_head, scratch.path()).unwrap();
    assert!(none.files.is_empty() && none.untracked.is_empty());
    assert_eq!(none.patch.as_deref(), Some(&b""[..]));
    // A bare repository has no checkout.
    let bare = fx.dir.path().join("bare.git");
    git(
        fx.dir.path(),
        &["clone", "-q", "--bare", repo.to_str().unwrap(), "bare.git"],
    );
    assert_eq!(cordon_git::Checkout::open(&bare).unwrap(), None);
}

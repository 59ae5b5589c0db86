//! `cordon workspace`, `cordon gc` and `cordon run --workspace` through the real binary.

use std::path::Path;
use std::process::{Command, Output};

use pretty_assertions::assert_eq;

use crate::support;
use crate::support::{TestDir, cordon, git};

struct Fixture {
    repo: TestDir,
    home: TestDir,
    /// `overlay` or `git-worktree`: every workspace of the fixture is of it.
    strategy: &'static str,
}

impl Fixture {
    fn new(strategy: &'static str) -> Fixture {
        let f = Fixture {
            repo: TestDir::new(),
            home: TestDir::new(),
            strategy,
        };
        git(f.repo.path(), &["init", "-q", "-b", "main"]);
        f.repo.write("a.txt", "alpha\n");
        git(f.repo.path(), &["add", "-A"]);
        git(f.repo.path(), &["commit", "-qm", "init"]);
        f
    }

    fn cordon(&self, args: &[&str]) -> Output {
        cordon()
            .env("CORDON_HOME", self.home.path())
            .args(args)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.cordon(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn create(&self, extra: &[&str]) -> (String, String) {
        let repo = self.repo.path().to_str().unwrap().to_owned();
        let mut args = vec!["workspace", "create", "--json", "--repo", &repo];
        args.extend_from_slice(&["--strategy", self.strategy]);
        args.extend_from_slice(extra);
        let record = self.json(&args);
        assert_eq!(record["strategy"], self.strategy, "{record:#}");
        let id = record["id"].as_str().unwrap().to_owned();
        (id.clone(), self.tree_of(&record))
    }

    /// Where cordon keeps a workspace's tree: a git worktree's checkout (the record's
    /// `path`), an overlay's mount point (no `path`: empty on the host).
    fn tree_of(&self, record: &serde_json::Value) -> String {
        let tree = self
            .home
            .path()
            .join("workspaces")
            .join(record["id"].as_str().unwrap())
            .join("tree");
        match record["path"].as_str() {
            Some(path) => {
                assert!(!self.overlay(), "an overlay names no host path: {record:#}");
                path.to_owned()
            }
            None => {
                assert!(
                    self.overlay(),
                    "a git worktree names its checkout: {record:#}"
                );
                tree.to_str().unwrap().to_owned()
            }
        }
    }

    fn overlay(&self) -> bool {
        self.strategy == "overlay"
    }

    /// Runs `sh -c script` in the workspace, sandboxed; its standard output.
    fn sh(&self, id: &str, script: &str) -> String {
        let out = self.cordon(&["run", "--json", "--workspace", id, "--", "sh", "-c", script]);
        let result: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{script}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(result["exit_code"], 0, "{script}: {result:#}");
        result["stdout"]["head"].as_str().unwrap().to_owned()
    }

    /// A file of the workspace as its programs see it.
    fn read(&self, id: &str, path: &str, rel: &str) -> Option<String> {
        if self.overlay() {
            let text = self.sh(id, &format!("cat '{rel}' 2>/dev/null || echo MISSING"));
            (text != "MISSING\n").then_some(text)
        } else {
            std::fs::read_to_string(Path::new(path).join(rel)).ok()
        }
    }
}

#[test]
fn life_cycle_through_the_cli() {
    life_cycle(Fixture::new("git-worktree"));
}

#[test]
fn life_cycle_of_an_overlay_through_the_cli() {
    if support::overlay_available() {
        life_cycle(Fixture::new("overlay"));
    }
}

fn life_cycle(f: Fixture) {
    let status_before = git(f.repo.path(), &["status", "--porcelain"]);
    let (id, path) = f.create(&["--persistent"]);
    assert_eq!(id.len(), 8);
    assert_eq!(f.read(&id, &path, "a.txt").as_deref(), Some("alpha\n"));
    let list = f.json(&["workspace", "list", "--json"]);
    let listed = &list["workspaces"][0];
    assert_eq!(listed["record"]["id"], id.as_str());
    assert!(listed["size_bytes"].as_u64().unwrap() > 0);
    let shown = f.json(&["workspace", "show", &id, "--json"]);
    assert_eq!(shown["record"]["persistent"], true);

    // A good patch, then a hostile one (refused, nothing changed, exit 2).
    let patch = f.home.write(
        "good.diff",
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-alpha\n+beta\n",
    );
    let applied = f.json(&["workspace", "apply", &id, patch.to_str().unwrap(), "--json"]);
    assert_eq!(applied["files"][0]["path"], "a.txt");
    let evil = f.home.write(
        "evil.diff",
        "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+touch /tmp/pwned\n",
    );
    let out = f.cordon(&["workspace", "apply", &id, evil.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Odd file names survive diff --name-only -z.
    if f.overlay() {
        f.sh(
            &id,
            "printf x > 'new
line name.txt'",
        );
        assert_eq!(
            std::fs::read_dir(&path).unwrap().count(),
            0,
            "an overlay's files are never on the host"
        );
    } else {
        std::fs::write(Path::new(&path).join("new\nline name.txt"), "x").unwrap();
    }
    let out = f.cordon(&["workspace", "diff", &id, "--name-only", "-z"]);
    assert!(out.status.success());
    let mut names: Vec<&[u8]> = out
        .stdout
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .collect();
    names.sort();
    assert_eq!(names, vec![&b"a.txt"[..], &b"new\nline name.txt"[..]]);
    let out = f.cordon(&["workspace", "diff", &id]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("+beta"));

    let out = f.cordon(&["workspace", "remove", &id]);
    assert!(out.status.success());
    assert!(!Path::new(&path).exists());
    assert_eq!(
        git(f.repo.path(), &["status", "--porcelain"]),
        status_before
    );
    assert_eq!(
        std::fs::read_to_string(f.repo.path().join("a.txt")).unwrap(),
        "alpha\n"
    );

    for args in [
        ["workspace", "show", "aaaaaaaa"],
        ["workspace", "remove", "bogus-id"],
    ] {
        let out = f.cordon(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("error:"));
    }
}

#[test]
fn transient_workspaces_live_as_long_as_the_process_that_asked() {
    transient_workspaces(Fixture::new("git-worktree"));
}

#[test]
fn transient_overlays_live_as_long_as_the_process_that_asked() {
    if support::overlay_available() {
        transient_workspaces(Fixture::new("overlay"));
    }
}

fn transient_workspaces(f: Fixture) {
    // Created from this test process: it is alive, so gc keeps the workspace.
    let (kept, kept_path) = f.create(&["--transient"]);
    // Created from a shell that exits right away: gc collects it.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} workspace create --transient --json --strategy {} --repo {}",
            env!("CARGO_BIN_EXE_cordon"),
            f.strategy,
            f.repo.path().display()
        ))
        .env("CORDON_HOME", f.home.path())
        .output()
        .unwrap();
    let gone: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gone_path = f.tree_of(&gone);
    assert!(Path::new(&gone_path).exists());
    let report = f.json(&["gc", "--json"]);
    let removed: Vec<&str> = report["workspaces"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(removed, vec![gone["id"].as_str().unwrap()]);
    assert!(!Path::new(&gone_path).exists());
    assert!(
        Path::new(&kept_path).exists(),
        "{kept} belongs to a live process"
    );
    let worktrees = git(f.repo.path(), &["worktree", "list", "--porcelain"]);
    assert!(
        !worktrees.contains(&gone_path),
        "worktree metadata pruned: {worktrees}"
    );
}

#[test]
fn inside_a_workspace_git_data_is_read_only_to_the_program() {
    if support::sandbox_available() {
        git_data_is_read_only(Fixture::new("git-worktree"));
    }
}

#[test]
fn inside_an_overlay_git_data_is_read_only_to_the_program() {
    if support::overlay_available() {
        git_data_is_read_only(Fixture::new("overlay"));
    }
}

fn git_data_is_read_only(f: Fixture) {
    let (id, path) = f.create(&[]);
    let common = f.repo.path().join(".git");
    let script = r#"
git log --oneline | grep -q init && echo LOG_OK
echo data > made-inside.txt && echo WRITE_OK
c=$(git rev-parse --git-common-dir)
echo 'touch /tmp/cordon-pwned' > "$c/hooks/post-checkout" 2>/dev/null && echo PLANTED_HOOK
git config core.fsmonitor 'touch /tmp/cordon-pwned' 2>/dev/null && echo PLANTED_CONFIG
git update-ref refs/heads/evil HEAD 2>/dev/null && echo PLANTED_REF
echo junk > "$c/objects/junk" 2>/dev/null && echo PLANTED_OBJECT
git add made-inside.txt 2>/dev/null && git -c user.name=x -c user.email=x@x commit -qm evil 2>/dev/null && echo COMMITTED
true
"#;
    let out = f.cordon(&[
        "run",
        "--json",
        "--workspace",
        &id,
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let printed = result["stdout"]["head"].as_str().unwrap();
    assert_eq!(printed, "LOG_OK\nWRITE_OK\n", "{result:#}");
    assert_eq!(
        f.read(&id, &path, "made-inside.txt").as_deref(),
        Some("data\n")
    );
    // The workspace's own git data (`.git` file, index, HEAD) is read-only too.
    let planted = f.sh(
        &id,
        "echo 'gitdir: /tmp' > .git 2>/dev/null && echo PLANTED_DOT_GIT; \
         cp \"$(git rev-parse --git-dir)/HEAD\" /dev/null && echo > \"$(git rev-parse --git-dir)/HEAD\" 2>/dev/null && echo PLANTED_HEAD; \
         git status --porcelain",
    );
    assert_eq!(planted, "?? made-inside.txt\n");
    assert!(!common.join("hooks/post-checkout").exists());
    assert!(!common.join("refs/heads/evil").exists());
    assert!(!git(f.repo.path(), &["config", "--list"]).contains("fsmonitor"));

    // Running from a directory inside the workspace finds it too.
    let out = cordon()
        .env("CORDON_HOME", f.home.path())
        .current_dir(&path)
        .args([
            "run",
            "--json",
            "--",
            "sh",
            "-c",
            "echo x > \"$(git rev-parse --git-common-dir)/hooks/pre-push\" || echo REFUSED",
        ])
        .output()
        .unwrap();
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["stdout"]["head"], "REFUSED\n", "{result:#}");
    assert!(!common.join("hooks/pre-push").exists());
}

#[test]
fn a_forged_record_cannot_steer_deletion_or_patches_outside_the_workspace() {
    forged_record(Fixture::new("git-worktree"));
}

#[test]
fn a_forged_overlay_record_cannot_steer_deletion_or_patches_outside_the_workspace() {
    if support::overlay_available() {
        forged_record(Fixture::new("overlay"));
    }
}

fn forged_record(f: Fixture) {
    let (id, _path) = f.create(&["--persistent"]);
    let victim = TestDir::new();
    victim.write("precious.txt", "keep me\n");
    // A program that could write cordon's state rewrites the record to point elsewhere.
    let record_file = f.home.path().join("workspaces").join(format!("{id}.json"));
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record_file).unwrap()).unwrap();
    record["path"] = victim.path().to_str().unwrap().into();
    std::fs::write(&record_file, serde_json::to_string(&record).unwrap()).unwrap();

    let patch = f.home.write(
        "p.diff",
        "--- /dev/null\n+++ b/planted.txt\n@@ -0,0 +1 @@\n+x\n",
    );
    let out = f.cordon(&["workspace", "apply", &id, patch.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tampered"));
    assert!(!victim.path().join("planted.txt").exists());

    let out = f.cordon(&["workspace", "remove", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(victim.path().join("precious.txt")).unwrap(),
        "keep me\n"
    );
    assert!(!record_file.exists());
}

#[test]
fn where_overlays_are_refused_workspaces_are_git_worktrees_and_say_why() {
    if !support::overlay_available() {
        return;
    }
    // Inside cordon's own sandbox the kernel refuses new namespaces (seccomp): a real
    // refusal, as on a host without unprivileged overlayfs. A cordon run there falls back.
    let f = Fixture::new("overlay");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_cordon")).parent().unwrap();
    let cwd = f.repo.path().to_str().unwrap().to_owned();
    let inner = |args: &str| -> serde_json::Value {
        let out = f.cordon(&[
            "run",
            "--json",
            "--cwd",
            &cwd,
            "--ro",
            bin_dir.to_str().unwrap(),
            // The inner git worktree registers itself in the repository's git data.
            "--rw",
            &format!("{cwd}/.git"),
            "--env",
            &format!("CORDON_HOME={cwd}/.inner-home"),
            "--",
            "sh",
            "-c",
            &format!("{} {args} 2>&1", env!("CARGO_BIN_EXE_cordon")),
        ]);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))
    };
    let created = inner("workspace create --json --persistent");
    assert_eq!(created["exit_code"], 0, "{created:#}");
    let record: serde_json::Value =
        serde_json::from_str(created["stdout"]["head"].as_str().unwrap()).unwrap();
    assert_eq!(record["strategy"], "git-worktree", "{record:#}");
    let note = record["strategy_note"].as_str().unwrap();
    assert!(
        note.contains("overlay workspaces are unavailable here"),
        "{note}"
    );
    // Asked for explicitly, an overlay is refused, never replaced.
    let refused = inner("workspace create --strategy overlay");
    assert_ne!(refused["exit_code"], 0, "{refused:#}");
    assert!(
        refused["stdout"]["head"]
            .as_str()
            .unwrap()
            .contains("overlay workspaces are unavailable here"),
        "{refused:#}"
    );
    // `cordon doctor` there says which strategy workspaces get, and why.
    let doctor = inner("doctor --json");
    let report: serde_json::Value =
        serde_json::from_str(doctor["stdout"]["head"].as_str().unwrap()).unwrap();
    assert_eq!(
        report["workspaces"]["strategy"], "git-worktree",
        "{report:#}"
    );
    assert_eq!(report["workspaces"]["overlay"]["ok"], false);
}

//! Hidden means absent or empty, never unreadable: the masks over a checkout's reflogs and
//! stash (and every other masked path) read as an empty directory or an empty file, so
//! programs that walk the tree pass over them.

use super::{Fixture, text};
use crate::support::{self, git};

/// A repository with what cordon masks in a visible `.git`: reflogs (a directory) and a
/// stash (a file, `refs/stash`), and a test for node's test runner.
fn fixture() -> Fixture {
    let f = Fixture::with_files(&[
        (
            "test/a.test.js",
            "const test = require('node:test');\ntest('adds', () => {});\n",
        ),
        ("a.txt", "alpha\n"),
    ]);
    std::fs::write(f.repo_path().join("a.txt"), "changed\n").unwrap();
    git(f.repo_path(), &["stash", "-q"]);
    assert!(f.repo_path().join(".git/logs").is_dir());
    assert!(f.repo_path().join(".git/refs/stash").is_file());
    f
}

/// Runs `program` sandboxed (in the live checkout, or in workspace `id`) and asserts that it
/// exits 0 without a word about permissions.
#[track_caller]
fn walks_cleanly(f: &Fixture, workspace: Option<&str>, program: &[&str]) -> String {
    let mut args = vec!["run", "--no-record"];
    if let Some(id) = workspace {
        args.extend(["--workspace", id]);
    }
    args.push("--");
    args.extend(program);
    let out = f.cordon(&args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "{program:?} in {workspace:?} exited {:?}:\n{stdout}\n{stderr}",
        out.status.code()
    );
    for said in [&stdout, &stderr] {
        assert!(
            !said.contains("ermission denied") && !said.contains("EACCES"),
            "{program:?} in {workspace:?}:\n{stdout}\n{stderr}"
        );
    }
    stdout
}

fn tools_walk_cleanly(f: &Fixture, workspace: Option<&str>) {
    assert!(
        std::process::Command::new("rg")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "ripgrep (rg) is not installed: scripts/test installs it"
    );
    walks_cleanly(f, workspace, &["node", "--test"]);
    walks_cleanly(f, workspace, &["find", ".", "-type", "f"]);
    walks_cleanly(f, workspace, &["rg", "--files", "--hidden", "--no-ignore"]);
    walks_cleanly(f, workspace, &["rg", "--files"]);
    // What is masked reads as empty: the reflog directory lists nothing, the stash is an
    // empty regular file.
    let seen = walks_cleanly(
        f,
        workspace,
        &[
            "sh",
            "-c",
            "ls -A \"$(git rev-parse --git-common-dir)/logs\" | wc -l; \
             stash=\"$(git rev-parse --git-common-dir)/refs/stash\"; \
             test -f \"$stash\" && wc -c < \"$stash\"",
        ],
    );
    assert_eq!(seen.split_whitespace().collect::<Vec<_>>(), ["0", "0"]);
}

#[test]
fn masked_reflogs_and_stash_read_as_empty_in_a_live_checkout() {
    if !support::sandbox_available() {
        return;
    }
    tools_walk_cleanly(&fixture(), None);
}

#[test]
fn masked_reflogs_and_stash_read_as_empty_in_a_workspace() {
    if !support::sandbox_available() {
        return;
    }
    let f = fixture();
    let id = text(&f.ok(&["workspace", "create", "--ref", "main"]).stdout)
        .trim()
        .to_owned();
    tools_walk_cleanly(&f, Some(&id));
    f.ok(&["workspace", "remove", &id]);
}

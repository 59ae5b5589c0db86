//! Workspaces that stay: from the CLI a workspace lives until removed or unused for its idle
//! timeout, whatever process created it; `--transient` ties it to its creator; an error about
//! a missing one says what became of it; overlay workspaces can be looked at from the host
//! (`shell`, `export`), and their JSON names no empty host directory.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use super::{Fixture, text};
use crate::support::{self, error_document::error_document};

/// `cordon workspace create ARGS` run by a shell that exits at once, as `id=$(…)` in a
/// script does: the id it printed.
fn create_in_a_subshell(f: &Fixture, args: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} workspace create {args}",
            env!("CARGO_BIN_EXE_cordon")
        ))
        .env("CORDON_HOME", f.home.path())
        .current_dir(f.repo_path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).trim().to_owned()
}

/// The error `cordon workspace show ID --json` prints: exit 2, a `not_found` document, and
/// the message on stderr.
fn missing(f: &Fixture, id: &str) -> String {
    let out = f.cordon(&["workspace", "show", id, "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let document = error_document(&out);
    assert_eq!(document["kind"], "not_found", "{document}");
    text(&out.stderr)
}

#[test]
fn a_workspace_made_in_one_shell_is_there_in_the_next() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = create_in_a_subshell(&f, "--ref main");
    // Every later command is another process, as in an agent harness.
    let patch = f.home.write(
        "p.diff",
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-alpha\n+beta\n",
    );
    f.ok(&["workspace", "apply", &id, patch.to_str().unwrap()]);
    let out = f.ok(&[
        "run",
        "--no-record",
        "--workspace",
        &id,
        "--",
        "cat",
        "a.txt",
    ]);
    assert_eq!(text(&out.stdout), "beta\n");
    f.ok(&["gc"]);
    let shown = f.json(&["workspace", "show", &id, "--json"]);
    assert_eq!(shown["record"]["persistent"], true, "{shown:#}");
    assert_eq!(shown["record"]["idle_timeout_s"], 24 * 3600, "{shown:#}");
    f.ok(&["workspace", "remove", &id]);
}

#[test]
fn a_transient_workspace_goes_with_its_creator_and_the_error_says_so() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = create_in_a_subshell(&f, "--transient");
    let said = missing(&f, &id);
    assert!(said.contains("no such workspace any more"), "{said}");
    assert!(
        said.contains("it was transient") && said.contains("had ended"),
        "{said}"
    );
    assert!(said.contains("hint: without --transient"), "{said}");
}

#[test]
fn an_idle_workspace_expires_and_the_error_says_so() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = create_in_a_subshell(&f, "--idle-timeout 1h");
    // Last used two hours ago (the record's modification time is its last use).
    let record = f.home.path().join(format!("workspaces/{id}.json"));
    std::fs::File::options()
        .append(true)
        .open(&record)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(2 * 3600))
        .unwrap();
    let said = missing(&f, &id);
    assert!(
        said.contains("it expired: unused for longer than its idle timeout (1h)"),
        "{said}"
    );
    assert!(
        said.contains("hint: `cordon workspace create` makes another"),
        "{said}"
    );
}

#[test]
fn a_removed_and_an_unknown_workspace_are_told_apart() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = create_in_a_subshell(&f, "");
    f.ok(&["workspace", "remove", &id]);
    let said = missing(&f, &id);
    assert!(
        said.contains(&format!(
            "workspace {id}: no such workspace any more: it was removed at"
        )),
        "{said}"
    );
    let out = f.cordon(&["workspace", "apply", &id, "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("it was removed at"));
    let said = missing(&f, "abcd2345");
    assert!(
        said.contains("workspace abcd2345: no such workspace: it never existed here"),
        "{said}"
    );
}

#[test]
fn an_overlay_workspace_can_be_entered_and_exported() {
    if !support::overlay_available() {
        return;
    }
    let f = Fixture::new();
    let record = f.json(&["workspace", "create", "--json", "--strategy", "overlay"]);
    // No empty host directory is offered as the workspace's place.
    assert!(record.get("path").is_none(), "{record:#}");
    let id = record["id"].as_str().unwrap().to_owned();
    let listed = text(&f.ok(&["workspace", "list"]).stdout);
    assert!(
        listed.contains(&format!("`cordon workspace shell {id}`")),
        "{listed}"
    );

    // A shell in it (its input a pipe here: no terminal), exiting with the shell's status.
    let mut shell = f
        .command(&["workspace", "shell", &id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    shell
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"cat a.txt; echo made > made.txt; mkdir -p d; echo deep > d/x; \
              ln -s /etc/passwd link; rm a.txt; exit 3\n",
        )
        .unwrap();
    let out = shell.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "alpha\n");

    // Its files, copied as its programs see them: the deletion too, links as links, no .git.
    let dest = support::TestDir::new();
    let copy = dest.path().join("copy");
    f.ok(&["workspace", "export", &id, copy.to_str().unwrap()]);
    let mut names: Vec<String> = walk(&copy);
    names.sort();
    assert_eq!(names, ["d/", "d/x", "link", "made.txt"]);
    assert_eq!(std::fs::read_to_string(copy.join("d/x")).unwrap(), "deep\n");
    assert_eq!(
        std::fs::read_link(copy.join("link")).unwrap(),
        std::path::Path::new("/etc/passwd")
    );
    // A directory that holds something is refused, untouched.
    let out = f.cordon(&["workspace", "export", &id, copy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is not empty"));
    f.ok(&["workspace", "remove", &id]);
}

/// The names under `dir`, relative (directories with a trailing `/`), links not followed.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            names.push(format!("{name}/"));
            names.extend(
                walk(&entry.path())
                    .into_iter()
                    .map(|n| format!("{name}/{n}")),
            );
        } else {
            names.push(name);
        }
    }
    names
}

#[test]
fn workspace_help_describes_workspaces_as_they_are() {
    let f = Fixture::new();
    for args in [
        &["workspace", "--help"][..],
        &["--help"],
        &["workspace", "create", "--help"],
    ] {
        let help = text(&f.ok(args).stdout);
        assert!(!help.contains("(git worktrees)"), "{args:?}:\n{help}");
    }
    let help = text(&f.ok(&["workspace", "--help"]).stdout);
    for command in ["shell", "export"] {
        assert!(help.contains(command), "{help}");
    }
    let create = text(&f.ok(&["workspace", "create", "--help"]).stdout);
    assert!(
        create.contains("--idle-timeout") && create.contains("--transient"),
        "{create}"
    );
}

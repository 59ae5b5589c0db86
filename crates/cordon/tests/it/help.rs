//! `--help` is snapshot-tested, so that a changed flag or text shows up in review: `cordon
//! --help` and every subcommand's, found by walking the `Commands:` lists, each compared with
//! its committed file under `tests/it/snapshots/help/` (`cordon-session-watch.txt` for
//! `cordon session watch --help`). Regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo nextest run -p cordon -E 'test(/^help::/)'`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::cordon;

/// The width help is rendered at (clap wraps to the terminal, which a test has none of).
const COLUMNS: &str = "100";

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots/help")
}

/// `cordon ARGS --help`, as a user sees it.
fn help(args: &[String]) -> String {
    let out = cordon()
        .args(args)
        .arg("--help")
        .env("COLUMNS", COLUMNS)
        .env_remove("CORDON_STORE")
        // clap shows an environment variable's value in the help of the flag it sets.
        .env_remove("CORDON_ISOLATION")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "`cordon {} --help` exited {:?}: {}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_list = false;
    for line in help.lines() {
        if line == "Commands:" {
            in_list = true;
            continue;
        }
        if !in_list {
            continue;
        }
        // Entries are indented by two spaces; a wrapped description by more.
        match line.strip_prefix("  ") {
            Some(entry) if !entry.starts_with(' ') => {
                let name = entry.split_whitespace().next().unwrap_or_default();
                if name != "help" {
                    found.push(name.to_owned());
                }
            }
            Some(_) => {}
            None => break,
        }
    }
    found
}

/// Every help text: file name → text.
fn all_help() -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(args) = queue.pop() {
        let text = help(&args);
        for sub in subcommands(&text) {
            let mut next = args.clone();
            next.push(sub);
            queue.push(next);
        }
        let mut name = vec!["cordon".to_owned()];
        name.extend(args);
        found.insert(format!("{}.txt", name.join("-")), text);
    }
    found
}

#[test]
fn help_texts_match_their_snapshots() {
    let dir = snapshot_dir();
    let rendered = all_help();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &rendered {
            std::fs::write(dir.join(name), text).unwrap();
        }
        return;
    }
    let regenerate = "regenerate with `UPDATE_SNAPSHOTS=1 cargo nextest run -p cordon -E \
                      'test(/^help::/)'` and review the diff";
    let mut committed = BTreeMap::new();
    for entry in
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}; {regenerate}", dir.display()))
    {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        committed.insert(name, std::fs::read_to_string(entry.path()).unwrap());
    }
    let mut problems = Vec::new();
    for (name, text) in &rendered {
        match committed.get(name) {
            None => problems.push(format!("{name}: no snapshot committed")),
            Some(old) if old != text => {
                problems.push(format!(
                    "{name} changed:\n--- committed ---\n{old}--- now ---\n{text}"
                ));
            }
            Some(_) => {}
        }
    }
    for name in committed.keys() {
        if !rendered.contains_key(name) {
            problems.push(format!(
                "{name}: a snapshot of a command that no longer exists"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "--help differs from tests/it/snapshots/help ({regenerate}):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_walk_reaches_nested_subcommands() {
    let rendered = all_help();
    for name in [
        "cordon.txt",
        "cordon-run.txt",
        "cordon-verify.txt",
        "cordon-session-watch.txt",
        "cordon-workspace-create.txt",
        "cordon-runs-logs.txt",
    ] {
        assert!(
            rendered.contains_key(name),
            "{name} not reached: {:?}",
            rendered.keys()
        );
    }
}

#[test]
fn subcommands_are_read_from_the_commands_list() {
    let text = "Usage: x\n\nCommands:\n  run     Runs\n          more\n  verify  Checks\n  help    Print\n\nOptions:\n  -h\n";
    assert_eq!(subcommands(text), ["run", "verify"]);
}

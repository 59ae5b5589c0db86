//! README examples that run: every code block of README.md marked ```` ```sh runnable ````
//! runs here, in a fresh temporary repository, with the `cordon` just built on `PATH`; a block
//! followed by a ```` ```text output ```` block must print exactly that. An example that
//! drifts from what cordon does fails the suite.

use std::path::Path;
use std::process::{Command, Stdio};

use super::text;
use crate::support::{self, TestDir, git};

/// One fenced block of the README.
struct Block {
    /// Its info string (`sh runnable`, `text output`, ...).
    info: String,
    /// Its text.
    body: String,
    /// The line its fence opens on (1-based), for messages.
    line: usize,
    /// Whether only blank lines separate it from the block before.
    follows_block: bool,
}

/// The fenced blocks of `markdown`, in order.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<Block> = None;
    let mut since_last = String::new();
    for (n, line) in markdown.lines().enumerate() {
        match open.as_mut() {
            Some(_) if line.trim_end() == "```" => {
                found.extend(open.take());
                since_last.clear();
            }
            Some(block) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            None => match line.strip_prefix("```") {
                Some(info) => {
                    open = Some(Block {
                        info: info.trim().to_owned(),
                        body: String::new(),
                        line: n + 1,
                        follows_block: !found.is_empty() && since_last.trim().is_empty(),
                    });
                }
                None => {
                    since_last.push_str(line);
                    since_last.push('\n');
                }
            },
        }
    }
    assert!(open.is_none(), "README.md: a code block is never closed");
    found
}

/// The repository every example runs in: a small Cargo crate on `main` (checked out), a
/// `feature` branch, an agent that commits, a reviewer, and a patch for `feature`.
fn example_repository(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    let write = |path: &str, text: &str| {
        let path = repo.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 2), 4);\n}\n",
    );
    write(".gitignore", "/target\nCargo.lock\nagent.diff\n");
    write(
        "agent.sh",
        "#!/bin/sh\n# An agent: makes a change for the task in $1 and commits it.\nset -e\n\
         echo \"// $1\" >> src/lib.rs\ngit add src/lib.rs\n\
         git -c user.name=agent -c user.email=agent@example.com commit -qm \"$1\"\n\
         echo \"agent: done with $1\"\n",
    );
    write(
        "review.sh",
        "#!/bin/sh\n# A reviewer: reads, never writes.\ngit log --oneline -3\n",
    );
    git(&repo, &["init", "-q", "-b", "main"]);
    for script in ["agent.sh", "review.sh"] {
        let path = repo.join(script);
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "a small crate"]);
    git(&repo, &["checkout", "-q", "-b", "feature"]);
    write("src/feature.rs", "pub const FEATURE: bool = true;\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "a feature"]);
    git(&repo, &["checkout", "-q", "main"]);
    write(
        "agent.diff",
        "--- a/src/feature.rs\n+++ b/src/feature.rs\n@@ -1 +1 @@\n-pub const FEATURE: bool = true;\n+pub const FEATURE: bool = false;\n",
    );
    repo
}

/// Runs one example in a fresh repository; its stdout.
fn run_example(block: &Block) -> String {
    let dir = TestDir::new();
    let home = TestDir::new();
    let repo = example_repository(dir.path());
    let bin = Path::new(env!("CARGO_BIN_EXE_cordon")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c", &block.body])
        .current_dir(&repo)
        .env("PATH", path)
        .env("CORDON_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README.md:{}: the example exited {:?}\n--- example ---\n{}--- stdout ---\n{}--- stderr ---\n{}",
        block.line,
        out.status.code(),
        block.body,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn readme_examples_marked_runnable_run() {
    if !support::sandbox_available() {
        return;
    }
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let all = blocks(&readme);
    let mut ran = 0;
    for (i, block) in all.iter().enumerate() {
        if block.info != "sh runnable" {
            continue;
        }
        let stdout = run_example(block);
        ran += 1;
        if let Some(expected) = all
            .get(i + 1)
            .filter(|next| next.info == "text output" && next.follows_block)
        {
            assert_eq!(
                stdout, expected.body,
                "README.md:{}: the example printed otherwise than README.md:{} shows",
                block.line, expected.line
            );
        }
    }
    // The workspace and session walk-throughs at least: a lost marker must not pass quietly.
    assert!(ran >= 2, "only {ran} runnable example(s) in README.md");
}

#[test]
fn the_readme_parser_finds_blocks_and_their_outputs() {
    let found = blocks(
        "text\n```sh runnable\necho hi\n```\n\n```text output\nhi\n```\nmore\n```toml\nx = 1\n```\n",
    );
    let seen: Vec<(&str, &str, bool)> = found
        .iter()
        .map(|b| (b.info.as_str(), b.body.as_str(), b.follows_block))
        .collect();
    assert_eq!(
        seen,
        [
            ("sh runnable", "echo hi\n", false),
            ("text output", "hi\n", true),
            ("toml", "x = 1\n", false),
        ]
    );
}

//! Documentation examples that run: every shell block of README.md, ARCHITECTURE.md,
//! BENCHMARKS.md and the guide under docs/ is marked either ```` ```sh runnable ```` or
//! ```` ```sh illustrative ````, and an unmarked one fails the suite. A runnable block runs
//! here in a fresh temporary repository (see [`example_repository`]) with the `cordon` just
//! built on `PATH`. When a ```` ```text output ```` block follows it, the block's stdout must
//! match it; a ```` ```text terminal ```` block is matched against stdout and stderr together,
//! as a terminal shows them. In expected text, `[..]` matches any text within a line and a line
//! of `...` matches any number of lines (snapbox's notation). An example that drifts from what
//! cordon does fails the suite, naming the file and line. Every relative link of those files
//! must lead to a file of the repository, and its anchor to one of that file's headings.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::text;
use crate::support::{self, TestDir, git};

/// One fenced block of a Markdown file.
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

/// The languages whose blocks are shell commands and must be marked.
const SHELLS: [&str; 6] = ["sh", "bash", "shell", "console", "zsh", "fish"];

/// The fenced blocks of `markdown`, in order; an error for a block never closed.
fn blocks(markdown: &str) -> Result<Vec<Block>, String> {
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
    match open {
        Some(block) => Err(format!(
            "the block opened on line {} is never closed",
            block.line
        )),
        None => Ok(found),
    }
}

/// What a block's info string says about it, or why it is not allowed.
#[derive(Debug, PartialEq)]
enum Marking {
    /// `sh runnable`: run by the tests.
    Runnable,
    /// `sh illustrative` (or another shell's), or a block in another language.
    NotRun,
}

fn marking(info: &str) -> Result<Marking, String> {
    let mut words = info.split_whitespace();
    let Some(language) = words.next() else {
        return Err("a block without a language: name one (`text` for plain text)".to_owned());
    };
    if !SHELLS.contains(&language) {
        return Ok(Marking::NotRun);
    }
    match (words.next(), words.next()) {
        (Some("runnable"), None) if language == "sh" => Ok(Marking::Runnable),
        (Some("illustrative"), None) => Ok(Marking::NotRun),
        _ => Err(format!(
            "a shell block marked `{info}`: mark it ```sh runnable (run by the tests) \
             or ```{language} illustrative"
        )),
    }
}

/// Whether `actual` matches `expected`, where `[..]` in an expected line matches any text
/// within the line and an expected line of `...` any number of lines.
fn matches(expected: &str, actual: &str) -> bool {
    let expected: Vec<&str> = expected.lines().collect();
    let actual: Vec<&str> = actual.lines().collect();
    lines_match(&expected, &actual)
}

fn lines_match(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, more)| line_matches(first, line) && lines_match(rest, more)),
    }
}

fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The repository every example runs in, its `main` checked out:
/// - a small Cargo crate (`demo`: `src/lib.rs` with one passing test) committed on `main`;
/// - a `feature` branch that adds `src/feature.rs`;
/// - `agent.sh`, an "agent" that appends a line to `src/lib.rs` and commits it;
/// - `review.sh`, a "reviewer" that prints `git log --oneline -3`;
/// - `agent.diff`, a patch for the `feature` branch, and `fix.diff`, one for `main`
///   (both untracked and ignored, as a patch an agent hands over is).
fn example_repository(dir: &Path) -> PathBuf {
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
    write(".gitignore", "/target\nCargo.lock\n*.diff\n");
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
    write(
        "fix.diff",
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,4 @@\n+/// Adds two numbers.\n pub fn add(a: u32, b: u32) -> u32 {\n     a + b\n }\n",
    );
    repo
}

/// Runs one example of `file` in a fresh repository; its stdout, or with `terminal` its
/// stdout and stderr together, as a terminal shows them.
fn run_example(file: &str, block: &Block, terminal: bool) -> String {
    let dir = TestDir::new();
    let home = TestDir::new();
    let repo = example_repository(dir.path());
    let bin = Path::new(env!("CARGO_BIN_EXE_cordon")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The terminal view: stderr joins stdout in one pipe, in the order it was written.
    let script = if terminal {
        format!("exec 2>&1\n{}", block.body)
    } else {
        block.body.clone()
    };
    let out = Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c", &script])
        .current_dir(&repo)
        .env("PATH", path)
        .env("CORDON_HOME", home.path())
        .env_remove("CORDON_STORE")
        .env_remove("CORDON_TOKEN")
        .env_remove("CORDON_SERVER")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{file}:{}: the example exited {:?}\n--- example ---\n{}--- stdout ---\n{}--- stderr ---\n{}",
        block.line,
        out.status.code(),
        block.body,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The Markdown files whose shell blocks must be marked, relative to the repository.
fn documents() -> Vec<String> {
    let root = repository_root();
    let mut found = vec![
        "README.md".to_owned(),
        "ARCHITECTURE.md".to_owned(),
        "BENCHMARKS.md".to_owned(),
    ];
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    found.extend(pages);
    found
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the runnable examples of `file` and compares what they print; how many ran.
fn check_examples(file: &str) -> usize {
    let markdown = std::fs::read_to_string(repository_root().join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let all = blocks(&markdown).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut ran = 0;
    for (i, block) in all.iter().enumerate() {
        if marking(&block.info) != Ok(Marking::Runnable) {
            continue;
        }
        let expected = all
            .get(i + 1)
            .filter(|next| next.follows_block && next.info.starts_with("text "));
        let terminal = expected.is_some_and(|next| next.info == "text terminal");
        let printed = run_example(file, block, terminal);
        ran += 1;
        let Some(expected) = expected else {
            continue;
        };
        assert!(
            matches(&expected.body, &printed),
            "{file}:{}: the example printed otherwise than {file}:{} shows\n\
             --- expected ---\n{}--- printed ---\n{printed}",
            block.line,
            expected.line,
            expected.body
        );
    }
    ran
}

/// One test per page, so that the pages run side by side and each stays within the suite's
/// per-test time; each page has at least one runnable example, and `every_page_has_its_test`
/// keeps this list complete.
macro_rules! page_tests {
    ($($name:ident => $file:literal;)*) => {
        $(
            #[test]
            fn $name() {
                if !support::sandbox_available() {
                    return;
                }
                let ran = check_examples($file);
                // Every page shows its commands working; a lost marker must not pass quietly.
                assert!(ran > 0, "{}: no runnable example", $file);
            }
        )*

        const PAGES: &[&str] = &[$($file),*];
    };
}

page_tests! {
    readme => "README.md";
    docs_index => "docs/README.md";
    docs_verify => "docs/verify.md";
    docs_configuration => "docs/configuration.md";
    docs_run => "docs/run.md";
    docs_workspaces => "docs/workspaces.md";
    docs_sessions => "docs/sessions.md";
    docs_review_rounds => "docs/review-rounds.md";
    docs_history => "docs/history.md";
    docs_job_service => "docs/job-service.md";
    docs_many_machines => "docs/many-machines.md";
    docs_operations => "docs/operations.md";
    docs_fork_and_compare => "docs/fork-and-compare.md";
    docs_agents => "docs/agents.md";
    docs_network => "docs/network.md";
    docs_security => "docs/security.md";
    docs_troubleshooting => "docs/troubleshooting.md";
    docs_development => "docs/development.md";
}

#[test]
fn every_page_has_its_test() {
    let mut listed: Vec<&str> = PAGES.to_vec();
    listed.extend(["ARCHITECTURE.md", "BENCHMARKS.md"]);
    listed.sort_unstable();
    let mut found = documents();
    found.sort();
    let missing: Vec<&String> = found
        .iter()
        .filter(|page| !listed.contains(&page.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "pages without a test of their examples: {missing:?}: add each to `page_tests!` in {}",
        file!()
    );
}

#[test]
fn every_shell_block_is_marked() {
    let mut problems = Vec::new();
    for file in documents() {
        let markdown = std::fs::read_to_string(repository_root().join(&file)).unwrap();
        match blocks(&markdown) {
            Err(e) => problems.push(format!("{file}: {e}")),
            Ok(all) => {
                for block in all {
                    if let Err(e) = marking(&block.info) {
                        problems.push(format!("{file}:{}: {e}", block.line));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_parser_finds_blocks_and_their_outputs() {
    let found = blocks(
        "text\n```sh runnable\necho hi\n```\n\n```text output\nhi\n```\nmore\n```toml\nx = 1\n```\n",
    )
    .unwrap();
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
    assert_eq!(
        blocks("```sh\nopen\n").err().as_deref(),
        Some("the block opened on line 1 is never closed")
    );
}

#[test]
fn shell_blocks_must_say_whether_they_run() {
    assert_eq!(marking("sh runnable"), Ok(Marking::Runnable));
    assert_eq!(marking("sh illustrative"), Ok(Marking::NotRun));
    assert_eq!(marking("bash illustrative"), Ok(Marking::NotRun));
    assert_eq!(marking("toml"), Ok(Marking::NotRun));
    assert_eq!(marking("text output"), Ok(Marking::NotRun));
    assert!(marking("sh").is_err());
    assert!(marking("bash runnable").is_err(), "only sh runs");
    assert!(marking("console").is_err());
    assert!(marking("").is_err());
}

#[test]
fn expected_output_may_elide() {
    assert!(matches("a\nb\n", "a\nb\n"));
    assert!(!matches("a\nb\n", "a\nc\n"));
    assert!(!matches("a\n", "a\nb\n"));
    assert!(matches("id: [..]\n", "id: s-k3j5x2\n"));
    assert!(matches(
        "[..] took [..]s ([..])\n",
        "verify took 0.8s (run r-1)\n"
    ));
    assert!(!matches("[..] took [..]s\n", "verify took 0.8s!\n"));
    assert!(matches("first\n...\nlast\n", "first\nx\ny\nlast\n"));
    assert!(matches("first\n...\nlast\n", "first\nlast\n"));
    assert!(!matches("first\n...\nlast\n", "first\nx\n"));
}

/// The relative links of `markdown` (`[text](target)`), without web addresses.
fn relative_links(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else {
                break;
            };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                found.push(target.to_owned());
            }
            rest = &rest[end..];
        }
    }
    found
}

/// The anchors a code host makes of `markdown`'s headings: lowercase, spaces as `-`, other
/// punctuation dropped.
fn anchors(markdown: &str) -> Vec<String> {
    let mut in_block = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim().to_lowercase();
        found.push(
            heading
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect(),
        );
    }
    found
}

#[test]
fn every_link_resolves_inside_the_repository() {
    let root = repository_root();
    let mut problems = Vec::new();
    for file in documents() {
        let markdown = std::fs::read_to_string(root.join(&file)).unwrap();
        let dir = root.join(&file).parent().unwrap().to_owned();
        for link in relative_links(&markdown) {
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                root.join(&file)
            } else {
                dir.join(path)
            };
            let Ok(resolved) = target.canonicalize() else {
                problems.push(format!("{file}: `{link}`: no such file"));
                continue;
            };
            if !resolved.starts_with(root.canonicalize().unwrap()) {
                problems.push(format!("{file}: `{link}`: outside the repository"));
                continue;
            }
            if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&resolved).unwrap();
                if !anchors(&text).iter().any(|a| a == anchor) {
                    problems.push(format!("{file}: `{link}`: no heading makes #{anchor}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn links_and_anchors_are_read_as_a_code_host_does() {
    assert_eq!(
        relative_links("see [a](docs/a.md#x) and [b](https://e.org)\n```\n[c](no)\n```\n"),
        ["docs/a.md#x"]
    );
    assert_eq!(
        anchors("# Title\n## `cordon gc`: clean up\n```\n# not\n```\n"),
        ["title", "cordon-gc-clean-up"]
    );
}

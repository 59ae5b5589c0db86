//! `cordon session compare` through the real binary: four forks of one session of a real Rust
//! project, each verified by the real `cordon verify` pipeline (real cargo, the real
//! sandbox), ranked with their reasons; the winner pulled as a fast-forward.

use pretty_assertions::assert_eq;

use crate::session_fork::Fixture;
use crate::support;
use crate::support::git;

const CARGO_TOML: &str =
    "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";

const LIB_RS: &str = "pub fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(2, 3), 5);
    }

    #[test]
    fn adds_zero() {
        assert_eq!(super::add(2, 0), 2);
    }
}
";

/// Tests gate; so do lints (a new clippy warning is an error), after the tests.
const CORDON_TOML: &str = r#"
[[stage]]
name = "test"
category = "test"
run = ["cargo", "test", "--offline"]

[[stage]]
name = "clippy"
category = "lint"
run = ["cargo", "clippy", "--offline", "--", "-D", "warnings"]
"#;

/// Each candidate's one-line change of `a + b`.
const CANDIDATES: [(&str, &str); 4] = [
    ("passes", "b + a"),
    ("fails-a-test", "a + b + u32::from(b == 0)"),
    ("does-not-compile", "a + b + \"one\""),
    ("new-lint", "return a + b;"),
];

/// The issue's case: one passing fork, one failing a test, one failing to compile, one
/// passing its tests with a new lint finding, ranked in that order with their reasons; the
/// winner's pull fast-forwards the host branch.
#[test]
fn compare_ranks_four_forks_with_reasons_and_the_winner_pulls() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    std::fs::create_dir(f.repo.path().join("src")).unwrap();
    f.repo.write("Cargo.toml", CARGO_TOML);
    f.repo.write("src/lib.rs", LIB_RS);
    f.repo.write("cordon.toml", CORDON_TOML);
    f.repo.write(".gitignore", "/target\nCargo.lock\n");
    git(f.repo.path(), &["add", "-A"]);
    git(f.repo.path(), &["commit", "-qm", "demo"]);
    let source = f.create();
    let report = f.fork(&source, 4);
    let forks: Vec<String> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    let mut names = std::collections::HashMap::new();
    for (fork, (name, body)) in forks.iter().zip(CANDIDATES) {
        f.sh(
            fork,
            &format!(
                "set -e; sed -i 's/^    a + b$/    {body}/' src/lib.rs; grep -qF '{body}' src/lib.rs
git add -A; git -c user.name=agent -c user.email=a@a commit -qm '{name}'"
            ),
        );
        names.insert(fork.clone(), name);
    }
    // Listed in another order than the ranking's.
    let mut args = vec!["session", "compare", "--json"];
    args.extend(forks.iter().rev().map(String::as_str));
    let out = f.command(&args).output().unwrap();
    let table = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{table}");
    let compared: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(compared["schema"], "cordon.session-compare/v1");
    let rows = compared["candidates"].as_array().unwrap();
    let order: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                names[r["id"].as_str().unwrap()],
                r["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        vec![
            ("passes", "passed"),
            ("fails-a-test", "blocked"),
            ("does-not-compile", "blocked"),
            ("new-lint", "blocked"),
        ],
        "{table}"
    );
    let keys: Vec<(u64, u64, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["blocking_findings"].as_u64().unwrap(),
                r["new_lint_findings"].as_u64().unwrap(),
                r["tests_passed"].as_u64().unwrap(),
                r["diff_lines"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        vec![(0, 0, 2, 2), (1, 0, 1, 2), (1, 0, 0, 2), (1, 1, 2, 2)],
        "{table}{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let reasons: Vec<&str> = rows.iter().map(|r| r["reason"].as_str().unwrap()).collect();
    assert!(reasons[0].starts_with("gate passed;"), "{table}");
    assert!(
        reasons[1].starts_with("blocked by test, clippy: test `tests::adds_zero` failed"),
        "{table}"
    );
    assert!(
        reasons[2].starts_with("blocked by test, clippy: compile error E0277"),
        "{table}"
    );
    assert!(
        reasons[3].starts_with("blocked by clippy: lint warning clippy::needless_return"),
        "{table}"
    );
    for row in rows {
        assert_eq!(row["report"]["schema"], "cordon.run-report/v1");
    }
    let winner = compared["winner"].as_str().unwrap();
    assert_eq!(names[winner], "passes");

    let pulled = f.json(&["session", "pull", winner, "--json"]);
    assert_eq!(pulled["outcome"], "merged", "{pulled}");
    assert_eq!(
        git(f.repo.path(), &["log", "-1", "--format=%s", "main"]),
        "passes\n"
    );
    assert!(
        std::fs::read_to_string(f.repo.path().join("src/lib.rs"))
            .unwrap()
            .contains("    b + a\n")
    );
}

/// A candidate whose change is larger than a comparison takes is not verified: it is ranked
/// last, saying why in words, and the other candidate is verified as usual.
#[test]
fn a_change_too_large_to_compare_is_ranked_last_with_its_size() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.repo.write(
        "cordon.toml",
        "[[stage]]\nname = \"check\"\ncategory = \"test\"\nrun = [\"true\"]\n",
    );
    git(f.repo.path(), &["add", "-A"]);
    git(f.repo.path(), &["commit", "-qm", "a stage"]);
    let source = f.create();
    let report = f.fork(&source, 2);
    let forks: Vec<String> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    f.sh(&forks[0], "echo small > small.txt");
    // 300,000 bytes of text lines: more than the 192 KiB a comparison reads of a change.
    f.sh(
        &forks[1],
        "yes 0123456789012345678901234567890123456789 | head -n 7300 > big.txt",
    );
    let out = f
        .command(&["session", "compare", "--json", &forks[1], &forks[0]])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stderr).into_owned();
    let compared: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = compared["candidates"].as_array().unwrap();
    assert_eq!(rows[0]["id"], forks[0].as_str(), "{table}");
    assert_eq!(rows[0]["verdict"], "passed", "{table}");
    assert_eq!(rows[1]["id"], forks[1].as_str(), "{table}");
    assert_eq!(rows[1]["verdict"], "error", "{table}");
    let reason = rows[1]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("not verified: its change is ")
            && reason.ends_with("bytes, more than the 196608 bytes compare takes"),
        "{reason}"
    );
    assert!(
        table.contains("more than the 196608 bytes compare takes"),
        "{table}"
    );
    assert_eq!(compared["winner"], forks[0].as_str(), "{table}");
}

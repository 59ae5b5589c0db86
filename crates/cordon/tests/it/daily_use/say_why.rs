//! Failures that say why: a reviewer, fixer or source that fails prints its exit code and the
//! last lines of its standard error (redacted) where it happened; a missing `--secret` or
//! `--agent-secret` variable is refused at the start (exit 2); a fixer that fails the same way
//! at once on every try is a configuration error, not retried to the limit.

use super::{Fixture, text};
use crate::support;

/// A new session of `main`.
fn session(f: &Fixture) -> String {
    text(&f.ok(&["session", "create"]).stdout).trim().to_owned()
}

/// `cordon session watch ID ARGS` to its end (with `REVIEW_KEY` set to a secret): exit
/// code, stdout (events), stderr.
fn watch(f: &Fixture, id: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["session", "watch", id];
    all.extend_from_slice(args);
    let out = f
        .command(&all)
        .env("REVIEW_KEY", "k3y-value-1234")
        .output()
        .unwrap();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_fixer_that_fails_the_same_way_at_once_is_a_configuration_error() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session(&f);
    f.ok(&["session", "poke", &id, "--comment", "rename the flag"]);
    let (code, _, said) = watch(
        &f,
        &id,
        &["--source", "true", "--fixer", "./no-such-fixer.sh"],
    );
    assert_eq!(code, Some(2), "{said}");
    // Each failed round says the exit code and what the shell said, where it happened.
    assert!(said.contains("the fixer exited 127"), "{said}");
    assert!(
        said.contains("  | ") && said.contains("no-such-fixer.sh: not found"),
        "{said}"
    );
    assert!(
        said.contains("a configuration error, not retried"),
        "{said}"
    );
    // Two tries, not three: the item waits for a fixed fixer.
    assert!(said.contains("round 2 finished"), "{said}");
    assert!(!said.contains("round 3"), "{said}");
    let shown = f.json(&["session", "show", &id, "--json"]);
    assert_eq!(shown["review"]["pending"][0]["body"], "rename the flag");
    assert_eq!(shown["state"], "active");
}

#[test]
fn a_failing_reviewer_and_source_say_their_exit_code_and_stderr_redacted() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session(&f);
    let (code, _, said) = watch(
        &f,
        &id,
        &[
            "--source",
            "echo 'the code host said no' >&2; exit 4",
            "--reviewer",
            "echo \"model key $REVIEW_KEY refused\" >&2; exit 3",
            "--agent-secret",
            "REVIEW_KEY",
            "--fixer",
            "true",
            "--idle-timeout",
            "10ms",
            "--backoff-min",
            "10ms",
        ],
    );
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("failed (exit 3)"), "{said}");
    assert!(said.contains("  | model key [REDACTED"), "{said}");
    assert!(!said.contains("k3y-value-1234"), "{said}");
    assert!(said.contains("polled the source: exit 4"), "{said}");
    assert!(said.contains("  | the code host said no"), "{said}");

    // The same in the events: the failure's last lines, redacted.
    let id = session(&f);
    let (_, events, _) = watch(
        &f,
        &id,
        &[
            "--source",
            "true",
            "--reviewer",
            "echo \"key $REVIEW_KEY\" >&2; exit 3",
            "--agent-secret",
            "REVIEW_KEY",
            "--fixer",
            "true",
            "--idle-timeout",
            "10ms",
            "--backoff-min",
            "10ms",
            "--json-events",
        ],
    );
    let reviewer: serde_json::Value = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["event"]["kind"] == "reviewer")
        .unwrap_or_else(|| panic!("no reviewer event:\n{events}"));
    assert_eq!(reviewer["event"]["completion"], "crashed");
    let tail = reviewer["event"]["stderr_tail"][0].as_str().unwrap();
    assert!(tail.starts_with("key [REDACTED"), "{reviewer}");
}

#[test]
fn a_missing_secret_variable_is_refused_at_the_start() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session(&f);
    for option in ["--secret", "--agent-secret"] {
        let out = f
            .command(&[
                "session",
                "watch",
                &id,
                "--source",
                "true",
                "--fixer",
                "true",
                option,
                "CORDON_TEST_UNSET_TOKEN",
            ])
            .env_remove("CORDON_TEST_UNSET_TOKEN")
            .output()
            .unwrap();
        let said = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{option}: {said}");
        assert!(
            said.contains(&format!(
                "{option} CORDON_TEST_UNSET_TOKEN: the variable CORDON_TEST_UNSET_TOKEN is not set"
            )),
            "{said}"
        );
        assert!(!said.contains("polled"), "{said}");
    }
}

//! Never lose commits: whatever ends a session (its review merged or closed, the watcher's
//! idle timeout, `session remove`, gc's idle collection), the commits the host branch lacks
//! are kept in the host repository first (`refs/cordon/sessions/<id>`), the ending says so
//! with the command that gets them, and `session pull` of the ended session brings them.

use super::{Fixture, text};
use crate::support::{self, git};

/// A session of `main` in which an agent made `n` commits.
fn session_with_commits(f: &Fixture, n: usize) -> String {
    let id = text(&f.ok(&["session", "create"]).stdout).trim().to_owned();
    let script = (1..=n)
        .map(|i| {
            format!(
                "echo {i} > fix{i}.txt && git add fix{i}.txt && \
                 git -c user.name=agent -c user.email=a@a commit -qm 'fix {i}'"
            )
        })
        .collect::<Vec<_>>()
        .join(" && ");
    f.ok(&["session", "exec", &id, "--", "sh", "-c", &script]);
    id
}

/// The ending printed `said`; the kept ref holds the agent's last commit, and `session
/// pull` of the ended session fast-forwards `main` by `n` commits.
#[track_caller]
fn kept_and_pulled(f: &Fixture, id: &str, said: &str, n: usize) {
    let session_ref = format!("refs/cordon/sessions/{id}");
    assert!(
        said.contains(&format!(
            "its {n} unpulled commit(s) are kept in {session_ref}"
        )) && said.contains(&format!("`cordon session pull {id}`")),
        "{said}"
    );
    let shown = f.json(&["session", "show", id, "--json"]);
    assert_eq!(shown["state"], "ended", "{shown:#}");
    assert_eq!(shown["kept"]["commits"], n as u64, "{shown:#}");
    let kept = git(f.repo_path(), &["rev-parse", &session_ref]);
    assert_eq!(shown["kept"]["commit"], kept.trim());

    let pulled = f.json(&["session", "pull", id, "--json"]);
    assert_eq!(pulled["outcome"], "merged", "{pulled:#}");
    assert_eq!(pulled["commits"], n as u64);
    assert_eq!(git(f.repo_path(), &["rev-parse", "main"]), kept);
    let log = git(f.repo_path(), &["log", "--format=%s", "main"]);
    assert!(log.starts_with(&format!("fix {n}\n")), "{log}");
    // Pulled once, pulled again: up to date.
    let again = f.json(&["session", "pull", id, "--json"]);
    assert_eq!(again["outcome"], "up_to_date", "{again:#}");
}

/// `cordon session watch ID --source SOURCE --fixer true ARGS`, to its end: its exit code
/// and what it said.
fn watch(f: &Fixture, id: &str, source: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec![
        "session", "watch", id, "--source", source, "--fixer", "true",
    ];
    all.extend_from_slice(args);
    let out = f.cordon(&all);
    (out.status.code(), text(&out.stderr))
}

#[test]
fn a_merged_review_keeps_the_fixers_unpulled_commits() {
    if !support::sandbox_available() {
        return;
    }
    for (state, words) in [
        ("merged", "the change was merged"),
        ("closed", "the change was closed"),
    ] {
        let f = Fixture::new();
        let id = session_with_commits(&f, 3);
        let source = format!("echo '{{\"state\":\"{state}\"}}'");
        let (code, said) = watch(&f, &id, &source, &[]);
        assert_eq!(code, Some(0), "{said}");
        assert!(said.contains(words), "{said}");
        kept_and_pulled(&f, &id, &said, 3);
    }
}

#[test]
fn the_watchers_idle_timeout_keeps_the_unpulled_commits() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session_with_commits(&f, 2);
    // The watcher's own clock ends it: nothing is pending, no item comes.
    let (code, said) = watch(
        &f,
        &id,
        "true",
        &["--idle-timeout", "10ms", "--backoff-min", "10ms"],
    );
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("nothing happened for --idle-timeout"),
        "{said}"
    );
    kept_and_pulled(&f, &id, &said, 2);
}

#[test]
fn remove_keeps_the_unpulled_commits_and_says_how_to_get_them() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session_with_commits(&f, 1);
    let out = f.ok(&["session", "remove", &id]);
    kept_and_pulled(&f, &id, &text(&out.stderr), 1);
    // An ended session is not listed unless asked for.
    let listed = text(&f.ok(&["session", "list"]).stdout);
    assert!(!listed.contains(&id), "{listed}");
    let listed = text(&f.ok(&["session", "list", "--all"]).stdout);
    assert!(listed.contains(&id) && listed.contains("ended"), "{listed}");
}

#[test]
fn gc_ending_an_idle_session_keeps_its_unpulled_commits() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session_with_commits(&f, 2);
    // Its last activity two days ago, past its 24h idle timeout.
    let state = f.home.path().join(format!("sessions/{id}/state.json"));
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    record["last_activity"] = "2000-01-01T00:00:00.000Z".into();
    std::fs::write(&state, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
    let out = f.ok(&["gc"]);
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!("ended session {id} (idle past its idle timeout)")),
        "{said}"
    );
    kept_and_pulled(&f, &id, &said, 2);
}

#[test]
fn an_ended_session_with_nothing_unpulled_says_so() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session_with_commits(&f, 1);
    f.ok(&["session", "pull", &id]);
    let out = f.ok(&["session", "remove", &id]);
    assert!(
        text(&out.stderr).contains("nothing unpulled"),
        "{}",
        text(&out.stderr)
    );
    let out = f.cordon(&["session", "pull", &id]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(said.contains("the session has ended"), "{said}");
    assert!(said.contains("hint: `cordon session list --all`"), "{said}");
}

#[test]
fn a_session_whose_commits_cannot_be_bundled_is_not_ended_unless_discarded() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = session_with_commits(&f, 1);
    // The agent deleted the session's branch: there is nothing cordon can bundle.
    f.ok(&[
        "session",
        "exec",
        &id,
        "--",
        "sh",
        "-c",
        "git checkout -q --detach && git branch -q -D main",
    ]);
    let out = f.cordon(&["session", "remove", &id]);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(said.contains("could not be kept"), "{said}");
    assert!(said.contains("--discard"), "{said}");
    assert_eq!(
        f.json(&["session", "show", &id, "--json"])["state"],
        "active"
    );
    f.ok(&["session", "remove", "--discard", &id]);
    assert_eq!(
        f.json(&["session", "show", &id, "--json"])["state"],
        "ended"
    );
}

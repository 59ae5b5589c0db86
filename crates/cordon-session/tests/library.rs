//! The library API (`cordon_session::{Sessions, Session}`) with a real repository and the
//! real sandbox: create, exec as a writer and as a reader, pull. Fails (never skips) on a
//! host that cannot sandbox.
//!
//! The library takes its home from this process's `CORDON_HOME` (the sandbox masks that
//! directory from the programs it runs), which may only be set while no other thread runs: so
//! this binary has its own `main`, which sets it first, and offers the small libtest surface
//! `cargo test` and `cargo nextest` use.

use std::time::Duration;

use cordon_runner::{Hooks, RunRequest};
use cordon_session::{
    Access, CreateRequest, PullOutcome, PullRequest, ReviewPhase, SessionErrorKind, SessionStatus,
    Sessions,
};
use cordon_test_support::git;
use pretty_assertions::assert_eq;

const NAME: &str = "create_exec_review_pull_through_the_library";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            println!("{NAME}: test");
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| NAME.contains(f.as_str())) {
        return;
    }
    // The sandbox helper, built beside cordon: its absence fails here, saying how to build it.
    cordon_test_support::sandbox_helper();
    let home = tempfile::tempdir().unwrap();
    // The sandbox masks this process's CORDON_HOME: the sessions' home must be it.
    // SAFETY: no other thread exists yet.
    unsafe { std::env::set_var("CORDON_HOME", home.path()) };
    create_exec_review_pull_through_the_library();
    println!("test {NAME} ... ok");
}

fn create_exec_review_pull_through_the_library() {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("a"), "a\n").unwrap();
    git(repo.path(), &["add", "a"]);
    git(repo.path(), &["commit", "-qm", "init"]);

    let sessions = Sessions::from_env().unwrap();
    let record = sessions.create(&CreateRequest::new(repo.path())).unwrap();
    assert_eq!(record.state, SessionStatus::Active);
    assert_eq!(record.branch, "main");
    let session = sessions.open(&record.id).unwrap();

    let agent = RunRequest::new(
        [
            "sh",
            "-c",
            "echo b > b && git add b && git -c user.name=x -c user.email=x@x commit -qm lib",
        ],
        "",
    );
    let ran = session
        .exec(agent, Access::Write, Duration::ZERO, Hooks::default())
        .unwrap();
    assert_eq!(ran.exit_code, 0, "{:?}", ran.result.stderr);
    let reviewer = RunRequest::new(["sh", "-c", "echo x > c"], "");
    let ran = session
        .exec(reviewer, Access::ReadOnly, Duration::ZERO, Hooks::default())
        .unwrap();
    assert_ne!(ran.exit_code, 0);
    assert!(
        ran.result.stderr.head.contains("Read-only file system"),
        "{:?}",
        ran.result.stderr
    );

    // A writer holding the lease keeps a second one out.
    let lease = session.begin_exec(Access::Write, Duration::ZERO).unwrap();
    let err = session
        .begin_exec(Access::Write, Duration::ZERO)
        .unwrap_err();
    assert!(
        matches!(err.kind, SessionErrorKind::WriterBusy { .. }),
        "{err}"
    );
    let err = session
        .pull(&PullRequest {
            wait: Duration::from_millis(50),
            ..PullRequest::default()
        })
        .unwrap_err();
    assert!(
        matches!(err.kind, SessionErrorKind::WaitTimedOut { .. }),
        "{err}"
    );
    lease.finish(None, vec!["held".into()], Some(0)).unwrap();

    let report = session.pull(&PullRequest::default()).unwrap();
    assert_eq!(report.outcome, PullOutcome::Merged);
    assert_eq!(report.commits, 1);
    assert_eq!(git(repo.path(), &["log", "-1", "--format=%s"]), "lib\n");
    let runs = session.record().unwrap().runs;
    assert_eq!(runs.len(), 3);
    assert_eq!(
        runs.iter().map(|r| r.read_only).collect::<Vec<_>>(),
        [false, true, false]
    );

    // The review watcher's state survives in the record.
    session
        .update_review(|review, rounds| {
            review.phase = ReviewPhase::Round;
            review.handled = vec!["c-1".into(), "c-2".into()];
            *rounds += 1;
        })
        .unwrap();
    let rec = session.record().unwrap();
    assert_eq!((rec.review.phase, rec.rounds), (ReviewPhase::Round, 1));
    assert_eq!(rec.review.handled, ["c-1", "c-2"]);

    let ended = session.remove(Duration::from_secs(5)).unwrap();
    assert_eq!(ended.state, SessionStatus::Ended);
    assert!(!ended.path.exists());
    assert_eq!(sessions.list().unwrap().len(), 1);
}

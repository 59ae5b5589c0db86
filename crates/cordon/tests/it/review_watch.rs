//! `cordon session watch|resume|poke` through the real binary: real sessions, the real kernel
//! sandbox, real processes. Sources, reviewers and fixers are small shell scripts written by
//! the tests; the tests follow the watcher through its `--json-events` lines (and files the
//! scripts write), never through sleeps. Time-based behaviour (backoff, idle timeout) uses
//! short durations and generous "does not hang" bounds only.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support;
use crate::support::{TestDir, cordon, git};

/// Only a hang reaches this.
const HANG: Duration = Duration::from_secs(90);

/// A host repository, a `CORDON_HOME` and a directory for the scripts and their files.
struct Fixture {
    repo: TestDir,
    home: TestDir,
    dir: TestDir,
}

impl Fixture {
    fn new() -> Fixture {
        let f = Fixture {
            repo: TestDir::new(),
            home: TestDir::new(),
            dir: TestDir::new(),
        };
        git(f.repo.path(), &["init", "-q", "-b", "main"]);
        f.repo.write("a.txt", "alpha\n");
        git(f.repo.path(), &["add", "-A"]);
        git(f.repo.path(), &["commit", "-qm", "init"]);
        f
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = cordon();
        command
            .env("CORDON_HOME", self.home.path())
            .current_dir(self.repo.path())
            .args(args);
        command
    }

    fn cordon(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.cordon(args);
        assert!(
            out.status.success(),
            "{args:?} exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn create(&self) -> String {
        let out = self.ok(&["session", "create", "--json"]);
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        rec["id"].as_str().unwrap().to_owned()
    }

    fn show(&self, id: &str) -> Value {
        serde_json::from_slice(&self.ok(&["session", "show", id, "--json"]).stdout).unwrap()
    }

    /// Where the files the session's programs wrote are on the host: an overlay session's
    /// upper layer, or its tree.
    fn tree(&self, id: &str) -> PathBuf {
        let dir = self.home.path().join("sessions").join(id);
        let upper = dir.join("layer/upper");
        if upper.is_dir() {
            upper
        } else {
            dir.join("tree")
        }
    }

    /// A path in the scripts' directory.
    fn at(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A source printing the lines of `items.jsonl`, then `{"state":"merged"}` once the file
    /// `merge` exists. It appends to `polls.log` each time.
    fn source(&self) -> String {
        let d = self.dir.path().display();
        format!(
            "echo poll >> {d}/polls.log; cat {d}/items.jsonl 2>/dev/null; \
             if [ -f {d}/merge ]; then echo '{{\"state\":\"merged\"}}'; fi"
        )
    }

    /// A fixer that checks its stdin equals `$CORDON_REVIEW_ITEMS`, appends the item ids to
    /// `fixed.log` in the session's tree and commits.
    fn fixer(&self) -> String {
        "cat > /tmp/stdin.json && cmp -s /tmp/stdin.json \"$CORDON_REVIEW_ITEMS\" || exit 9; \
         jq -r '.[].id' \"$CORDON_REVIEW_ITEMS\" >> fixed.log && git add -A && \
         git -c user.name=fixer -c user.email=f@f commit -qm \"round $CORDON_REVIEW_ROUND\""
            .to_owned()
    }

    fn add_items(&self, lines: &[String]) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.at("items.jsonl"))
            .unwrap();
        for line in lines {
            writeln!(file, "{line}").unwrap();
        }
    }

    /// Starts `session watch ID ARGS --json-events`, following its events.
    fn watch(&self, id: &str, args: &[&str]) -> Watcher {
        let mut all = vec!["session", "watch", id];
        all.extend_from_slice(args);
        all.push("--json-events");
        self.spawn(&all)
    }

    fn spawn(&self, args: &[&str]) -> Watcher {
        self.spawn_in(self.repo.path(), args)
    }

    /// Starts `cordon ARGS` in `dir`, following its events.
    fn spawn_in(&self, dir: &Path, args: &[&str]) -> Watcher {
        let mut command = self.command(args);
        command.current_dir(dir);
        follow(command)
    }
}

/// Starts `command`, following the events it prints.
fn follow(mut command: Command) -> Watcher {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let event: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not an event ({e}): {line}"));
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    Watcher {
        child,
        events: rx,
        seen: Vec::new(),
    }
}

fn item(id: &str, body: &str) -> String {
    serde_json::json!({"id": id, "body": body, "author": "rev", "url": format!("https://example.com/{id}")})
        .to_string()
}

/// A running watcher and the events it printed.
struct Watcher {
    child: Child,
    events: Receiver<Value>,
    seen: Vec<Value>,
}

impl Watcher {
    /// Waits for the next event of `kind` (every event on the way is kept in `seen`).
    #[track_caller]
    fn next(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + HANG;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(event) => {
                    assert_eq!(event["schema"], "cordon.review-event/v1");
                    self.seen.push(event.clone());
                    if event["event"]["kind"] == kind {
                        return event;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {kind} event after {HANG:?}; seen: {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let out = self.child.wait_with_output_now();
                    panic!(
                        "the watcher ended before a {kind} event: {out}\nseen: {:#?}",
                        self.seen
                    )
                }
            }
        }
    }

    /// Waits for the watcher's end: its exit code (all its events read into `seen`).
    fn finish(&mut self) -> i32 {
        let deadline = Instant::now() + HANG;
        while let Ok(event) = self
            .events
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(event);
        }
        let status = self.child.wait().unwrap();
        status.code().expect("the watcher exited normally")
    }

    fn kinds(&self, kind: &str) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|e| e["event"]["kind"] == kind)
            .map(|e| &e["event"])
            .collect()
    }

    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

trait NowOutput {
    fn wait_with_output_now(&mut self) -> String;
}

impl NowOutput for Child {
    fn wait_with_output_now(&mut self) -> String {
        let status = self.wait().map(|s| s.code());
        let mut err = String::new();
        if let Some(mut stderr) = self.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
        }
        format!("exit {status:?}, stderr: {err}")
    }
}

fn ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn counts(lines: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in lines {
        *counts.entry(line.clone()).or_default() += 1;
    }
    counts
}

/// Reviewers feed the pending queue without a poll; hostile source lines (malformed JSON,
/// duplicates, a huge body) are refused or bounded; every item reaches the fixer exactly
/// once; `merged` removes the session and exits 0.
#[test]
fn watch_items_flow_to_the_fixer_exactly_once_until_merged() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    let big = "x".repeat(400 << 10);
    f.add_items(&[
        item("a1", "rename foo"),
        item("a2", "add a test"),
        item("a1", "a duplicate id"),
        "{not json".to_owned(),
        r#"{"id": "", "body": "empty id"}"#.to_owned(),
        item("big", &big),
        r#"{"state": "open"}"#.to_owned(),
    ]);
    let reviewer = r#"echo '{"id":"r1","body":"nit: spacing"}'; echo '{"id":"r1","body":"again"}'; echo '{"id":"end","body":"[REVIEW COMPLETE]"}'; exec sleep 1000"#;
    let source = f.source();
    let fixer = f.fixer();
    let mut w = f.watch(
        &id,
        &[
            "--source",
            &source,
            "--fixer",
            &fixer,
            "--reviewer",
            reviewer,
            "--backoff-min",
            "50ms",
            "--backoff-max",
            "200ms",
            "--ro",
            f.dir.path().to_str().unwrap(),
        ],
    );
    // The reviewer's item starts round 1 before the source was ever polled.
    let started = w.next("round_started");
    assert_eq!(ids(&started["event"]["items"]), ["reviewer-1:r1"]);
    assert!(w.kinds("poll").is_empty(), "{:#?}", w.seen);
    let reviewer_done = &w.kinds("reviewer")[0].clone();
    assert_eq!(reviewer_done["completion"], "marker", "{reviewer_done}");
    w.next("round_finished");
    let round2 = w.next("round_started");
    assert_eq!(ids(&round2["event"]["items"]), ["a1", "a2", "big"]);
    let finished = w.next("round_finished");
    assert_eq!(finished["event"]["exit_code"], 0, "{finished}");
    assert_eq!(ids(&finished["event"]["handled"]), ["a1", "a2", "big"]);
    // Polls go on with nothing new; the fixer saw each item once.
    w.next("backoff");
    let fixed = lines_of(&f.tree(&id).join("fixed.log"));
    assert_eq!(fixed, ["reviewer-1:r1", "a1", "a2", "big"]);
    let warnings: Vec<String> = w
        .kinds("warning")
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        warnings.iter().any(|m| m.contains("not a JSON object")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|m| m.contains("the id must be")),
        "{warnings:?}"
    );
    let rec = f.show(&id);
    let big_body = rec["review"]["handled"].clone();
    assert_eq!(ids(&big_body), ["reviewer-1:r1", "a1", "a2", "big"]);
    assert_eq!(rec["rounds"], 2);
    // The human listing names the rounds.
    let text = String::from_utf8(f.ok(&["session", "show", &id]).stdout).unwrap();
    assert!(
        text.contains("round 2") && text.contains("a1,a2,big"),
        "{text}"
    );
    std::fs::write(f.at("merge"), "").unwrap();
    let ended = w.next("ended");
    assert_eq!(ended["event"]["reason"], "merged");
    assert_eq!(w.finish(), 0);
    let rec = f.show(&id);
    assert_eq!(rec["state"], "ended");
    assert!(!f.tree(&id).exists());
    // Every run was recorded, linked to the session's runs.
    let runs = rec["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["run_id"].is_string()), "{runs:#?}");
    assert!(runs.iter().any(|r| r["read_only"] == true));
    // Each round names its reviewers' and its fixer's runs; polls name theirs in the events.
    let first = &rec["review"]["history"][0];
    let reviewer_runs = ids(&first["reviewer_run_ids"]);
    assert_eq!(reviewer_runs.len(), 1, "{first}");
    let logs = |run: &str| String::from_utf8(f.ok(&["runs", "logs", run]).stdout).unwrap();
    assert!(logs(&reviewer_runs[0]).contains("nit: spacing"));
    let fixer_run = first["fixer_run_id"].as_str().unwrap();
    assert!(
        f.ok(&["runs", "show", fixer_run, "--json"])
            .status
            .success()
    );
    let poll = w.kinds("poll")[0]["run_id"].as_str().unwrap().to_owned();
    assert!(logs(&poll).contains("rename foo"));
}

/// `kill -9` of the watcher in the middle of a round and in the middle of a poll; the same
/// watch resumed continues: the interrupted round runs again with the same items, no item is
/// handled twice, none is lost. A second watcher is refused with the first one's pid.
#[test]
fn watch_a_watcher_killed_mid_round_and_mid_poll_resumes_without_loss_or_repeat() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    f.add_items(&[item("a1", "one"), item("a2", "two")]);
    let d = f.dir.path().display();
    // The first fixer run hangs (until killed with its watcher); later ones work.
    let fixer = format!(
        "if [ ! -f .hung ]; then touch .hung; echo started > .started; exec sleep 1000; fi; {}",
        f.fixer()
    );
    // The source blocks while `block` exists, saying so in `blocked`. It is named relative
    // to where the watch starts (resume goes back there).
    f.repo.write(
        "poll.sh",
        &format!(
            "if [ -f {d}/block ]; then echo $$ > {d}/blocked.tmp; mv {d}/blocked.tmp {d}/blocked; exec sleep 1000; fi; {}",
            f.source()
        ),
    );
    let source = "sh ./poll.sh".to_owned();
    let args = [
        "--source",
        &source,
        "--fixer",
        &fixer,
        "--backoff-min",
        "50ms",
        "--backoff-max",
        "100ms",
    ];
    let mut w = f.watch(&id, &args);
    let started = w.next("round_started");
    assert_eq!(ids(&started["event"]["items"]), ["a1", "a2"]);
    support::wait_until("the fixer started", HANG, || {
        f.tree(&id).join(".started").exists()
    });
    // A second watcher is refused, naming the first.
    let second = f.cordon(&[
        "session", "watch", &id, "--source", "true", "--fixer", "true",
    ]);
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains(&format!("pid {}", w.child.id())), "{err}");
    w.kill9();
    let rec = f.show(&id);
    assert_eq!(rec["review"]["phase"], "round");
    assert_eq!(ids(&rec["review"]["current_round"]["items"]), ["a1", "a2"]);
    // Resumed: the same round, the same items.
    let mut w = f.spawn(&["session", "resume", &id, "--json-events"]);
    let again = w.next("round_started");
    assert_eq!(again["event"]["resumed"], true);
    assert_eq!(again["event"]["round"], 1);
    assert_eq!(ids(&again["event"]["items"]), ["a1", "a2"]);
    let finished = w.next("round_finished");
    assert_eq!(ids(&finished["event"]["handled"]), ["a1", "a2"]);
    w.next("backoff");
    // Now kill it in the middle of a poll that brings a new item.
    std::fs::write(f.at("block"), "").unwrap();
    support::wait_until("the source blocked", HANG, || f.at("blocked").exists());
    w.kill9();
    let blocked: i32 = std::fs::read_to_string(f.at("blocked"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    support::signal(blocked, libc::SIGKILL);
    std::fs::remove_file(f.at("block")).unwrap();
    f.add_items(&[item("a3", "three")]);
    let mut w = f.spawn_in(Path::new("/"), &["session", "resume", &id, "--json-events"]);
    let round = w.next("round_started");
    assert_eq!(ids(&round["event"]["items"]), ["a3"]);
    w.next("round_finished");
    w.next("backoff");
    let fixed = lines_of(&f.tree(&id).join("fixed.log"));
    assert_eq!(
        counts(&fixed),
        BTreeMap::from([("a1".into(), 1), ("a2".into(), 1), ("a3".into(), 1)])
    );
    let rec = f.show(&id);
    let mut handled = ids(&rec["review"]["handled"]);
    handled.sort();
    assert_eq!(handled, ["a1", "a2", "a3"]);
    assert_eq!(rec["rounds"], 2);
    std::fs::write(f.at("merge"), "").unwrap();
    assert_eq!(w.finish(), 0);
}

/// Backoff intervals double from the minimum to the maximum (checked on the events' own
/// timestamps), a poke with a comment wakes the watcher at once, injects the comment and
/// resets the backoff; then the idle timeout runs `--on-timeout` and removes the session.
#[test]
fn watch_backoff_doubles_poke_resets_it_and_the_idle_timeout_ends_the_watch() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    let d = f.dir.path().display();
    let source = f.source();
    let fixer = f.fixer();
    let on_timeout = format!("echo \"$CORDON_REVIEW_END $CORDON_SESSION_ID\" > {d}/timed-out");
    let mut w = f.watch(
        &id,
        &[
            "--source",
            &source,
            "--fixer",
            &fixer,
            "--backoff-min",
            "50ms",
            "--backoff-max",
            "400ms",
            "--idle-timeout",
            "5s",
            "--on-timeout",
            &on_timeout,
        ],
    );
    let mut delays = Vec::new();
    for _ in 0..5 {
        let backoff = w.next("backoff");
        delays.push(backoff["event"]["delay_ms"].as_u64().unwrap());
        let poll = w.next("poll");
        let waited = poll["at_ms"].as_u64().unwrap() - backoff["at_ms"].as_u64().unwrap();
        assert!(waited >= delays[delays.len() - 1], "{backoff} -> {poll}");
    }
    assert_eq!(delays, [50, 100, 200, 400, 400]);
    // A poke (from another shell) with a comment.
    let out = f.ok(&["session", "poke", &id, "--comment", "please rename x"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "poke-1");
    w.next("poke");
    let round = w.next("round_started");
    assert_eq!(ids(&round["event"]["items"]), ["poke-1"]);
    w.next("round_finished");
    assert_eq!(lines_of(&f.tree(&id).join("fixed.log")), ["poke-1"]);
    let after = w.next("backoff");
    assert_eq!(after["event"]["delay_ms"], 50);
    let ended = w.next("ended");
    assert_eq!(ended["event"]["reason"], "idle_timeout");
    assert_eq!(w.finish(), 0);
    assert_eq!(
        std::fs::read_to_string(f.at("timed-out")).unwrap().trim(),
        format!("idle_timeout {id}")
    );
    assert_eq!(f.show(&id)["state"], "ended");
}

/// A poke without a watcher waits in the state; a reviewer that crashes and one that never
/// completes (bounded by its timeout) both let the round go on with what they posted (with
/// warnings); a fixer that hangs is bounded too and its items stay pending; the round limit
/// ends the watch with exit 1 and keeps the session.
#[test]
fn watch_failing_agents_are_bounded_and_the_round_limit_keeps_the_session() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    let out = f.ok(&["session", "poke", &id, "--comment", "early comment"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "poke-1");
    let rec = f.show(&id);
    assert_eq!(rec["review"]["pending"][0]["body"], "early comment");
    let crashing = r#"echo '{"id":"c1","body":"from a crashing reviewer"}'; exit 3"#;
    let endless = r#"echo '{"id":"s1","body":"from a slow reviewer"}'; exec sleep 1000"#;
    let source = f.source();
    let mut w = f.watch(
        &id,
        &[
            "--source",
            &source,
            "--fixer",
            "exec sleep 1000",
            "--reviewer",
            crashing,
            "--reviewer",
            endless,
            // Long enough for the slow reviewer to start in its sandbox and post before it is
            // timed out, even on a loaded machine (at 1 s, a CI run once saw it post nothing).
            "--reviewer-timeout",
            "5s",
            "--fixer-timeout",
            "1s",
            "--max-rounds",
            "1",
            "--backoff-min",
            "50ms",
        ],
    );
    let started = w.next("round_started");
    let mut items = ids(&started["event"]["items"]);
    items.sort();
    assert_eq!(
        items,
        ["poke-1", "reviewer-1:c1", "reviewer-2:s1"],
        "events: {:#?}",
        w.seen
    );
    let mut completions: Vec<String> = w
        .kinds("reviewer")
        .iter()
        .map(|r| r["completion"].as_str().unwrap().to_owned())
        .collect();
    completions.sort();
    assert_eq!(completions, ["crashed", "timed_out"]);
    let finished = w.next("round_finished");
    assert_eq!(finished["event"]["exit_code"], 124, "{finished}");
    assert_eq!(ids(&finished["event"]["handled"]), Vec::<String>::new());
    assert_eq!(finished["event"]["retry"].as_array().unwrap().len(), 3);
    let ended = w.next("ended");
    assert_eq!(ended["event"]["reason"], "max_rounds");
    assert_eq!(w.finish(), 1);
    let rec = f.show(&id);
    assert_eq!(rec["state"], "active");
    assert_eq!(rec["review"]["phase"], "done");
    let tries: Vec<u64> = rec["review"]["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["tries"].as_u64().unwrap())
        .collect();
    assert_eq!(tries, [1, 1, 1]);
}

/// An item the fixer keeps failing on is dropped after 3 tries and reported; the source
/// bringing it again does not bring it back. (Each try fails in its own words: a fixer that
/// fails the same way at once every time is a configuration error, see daily_use.)
#[test]
fn watch_an_item_is_dropped_after_three_failed_tries() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    f.add_items(&[item("bad", "impossible")]);
    let source = f.source();
    let mut w = f.watch(
        &id,
        &[
            "--source",
            &source,
            "--fixer",
            "echo \"try $CORDON_REVIEW_ROUND failed\" >&2; exit 1",
            "--backoff-min",
            "50ms",
            "--backoff-max",
            "50ms",
        ],
    );
    for round in 1..=3 {
        let finished = w.next("round_finished");
        assert_eq!(finished["event"]["round"], round);
        assert_eq!(finished["event"]["exit_code"], 1);
    }
    assert_eq!(ids(&w.kinds("round_finished")[2]["dropped"]), ["bad"]);
    // Polled again (the source still lists it): no new item, no fourth round.
    w.next("backoff");
    w.next("poll");
    w.next("backoff");
    assert_eq!(w.kinds("round_started").len(), 3);
    let rec = f.show(&id);
    assert_eq!(ids(&rec["review"]["failed"]), ["bad"]);
    assert_eq!(rec["review"]["pending"], serde_json::json!([]));
    std::fs::write(f.at("merge"), "").unwrap();
    assert_eq!(w.finish(), 0);
}

/// The example GitHub adapter (`examples/review-sources/github-pr.sh`) as a real source, with
/// a `gh` that answers from files (no network): its comments reach the fixer (the ignored
/// author's do not, a second page counts), then the pull request's `merged` ends the watch.
#[test]
fn watch_the_github_example_adapter_feeds_a_watch() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    let d = f.dir.path().display();
    let api = f.dir.path().join("api");
    std::fs::create_dir(&api).unwrap();
    let comment = |id: u64, login: &str, body: &str| {
        serde_json::json!({"id": id, "body": body, "user": {"login": login},
            "html_url": format!("https://github.com/o/r/pull/7#c{id}")})
    };
    // Two pages of inline comments (gh --paginate prints one array per page).
    std::fs::write(
        api.join("repos_o_r_pulls_7_comments"),
        format!(
            "{}{}",
            serde_json::json!([comment(1, "ann", "rename x"), comment(2, "bot", "done")]),
            serde_json::json!([comment(3, "bob", "add a test")])
        ),
    )
    .unwrap();
    std::fs::write(
        api.join("repos_o_r_issues_7_comments"),
        serde_json::json!([comment(4, "cy", "also the docs")]).to_string(),
    )
    .unwrap();
    std::fs::write(
        api.join("repos_o_r_pulls_7_reviews"),
        serde_json::json!([comment(5, "ann", ""), comment(6, "dee", "looks wrong")]).to_string(),
    )
    .unwrap();
    std::fs::write(
        api.join("repos_o_r_pulls_7"),
        serde_json::json!({"state": "open", "merged": false}).to_string(),
    )
    .unwrap();
    let bin = f.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let gh = bin.join("gh");
    std::fs::write(
        &gh,
        format!(
            "#!/bin/sh\nfor a; do case \"$a\" in repos/*) p=$a;; esac; done\n\
             exec cat {d}/api/$(printf %s \"$p\" | tr / _)\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let adapter = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/review-sources/github-pr.sh")
        .canonicalize()
        .unwrap();
    let source = format!(
        "PATH={}:$PATH IGNORE_AUTHORS=bot {} o/r 7",
        bin.display(),
        adapter.display()
    );
    let fixer = f.fixer();
    let mut w = f.watch(
        &id,
        &[
            "--source",
            &source,
            "--fixer",
            &fixer,
            "--backoff-min",
            "50ms",
        ],
    );
    let round = w.next("round_started");
    assert_eq!(
        ids(&round["event"]["items"]),
        ["rc-1", "rc-3", "ic-4", "rv-6"]
    );
    w.next("round_finished");
    assert_eq!(
        lines_of(&f.tree(&id).join("fixed.log")),
        ["rc-1", "rc-3", "ic-4", "rv-6"]
    );
    w.next("backoff");
    std::fs::write(
        api.join("repos_o_r_pulls_7"),
        serde_json::json!({"state": "closed", "merged": true}).to_string(),
    )
    .unwrap();
    let ended = w.next("ended");
    assert_eq!(ended["event"]["reason"], "merged");
    assert_eq!(w.finish(), 0);
}

/// The source's secrets (`--secret`) are redacted from what it prints before any item keeps
/// it; `resume` without a recorded watch is a usage error; `--max-rounds 0` keeps the items.
#[test]
fn watch_source_secrets_are_redacted_from_items() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    let none = f.cordon(&["session", "resume", &id]);
    assert_eq!(none.status.code(), Some(2), "{none:?}");
    assert!(String::from_utf8_lossy(&none.stderr).contains("no recorded"));
    let secret = "s3cr3t-review-token-4711";
    let source = r#"printf '{"id":"t1","body":"token is %s"}\n' "$REVIEW_TOKEN""#;
    let out = f
        .command(&[
            "session",
            "watch",
            &id,
            "--source",
            source,
            "--fixer",
            "true",
            "--secret",
            "REVIEW_TOKEN",
            "--max-rounds",
            "0",
            "--json-events",
        ])
        .env("REVIEW_TOKEN", secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let events = String::from_utf8(out.stdout).unwrap();
    assert!(events.contains("\"max_rounds\""), "{events}");
    let rec = f.show(&id);
    let body = rec["review"]["pending"][0]["body"].as_str().unwrap();
    assert!(
        body.starts_with("token is ") && !body.contains(secret),
        "{body}"
    );
    let state =
        std::fs::read_to_string(f.home.path().join("sessions").join(&id).join("state.json"))
            .unwrap();
    assert!(!state.contains(secret));
}

/// A source flooding the watcher fills the pending queue up to its bound (the rest waits for
/// a later poll, with a warning); a reviewer flooding it is cut off the same way.
#[test]
fn watch_floods_are_bounded_by_the_pending_queue() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let flood = |prefix: &str| {
        format!(
            r#"i=0; while [ $i -lt 1200 ]; do printf '{{"id":"{prefix}%d","body":"b"}}\n' $i; i=$((i+1)); done"#
        )
    };
    let watch = |id: &str, extra: &[&str]| {
        let mut args = vec![
            "session",
            "watch",
            id,
            "--fixer",
            "true",
            "--max-rounds",
            "0",
            "--json-events",
        ];
        args.extend_from_slice(extra);
        let out = f.cordon(&args);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let source = flood("f");
    let id = f.create();
    let events = watch(&id, &["--source", &source]);
    assert!(
        events.contains("the pending queue is full (1000 items): 200 new item(s)"),
        "{events}"
    );
    let pending = f.show(&id)["review"]["pending"].clone();
    assert_eq!(
        pending.as_array().unwrap().len(),
        cordon_session::MAX_PENDING
    );
    assert_eq!(pending[999]["id"], "f999");
    let reviewer = flood("r");
    let id = f.create();
    let events = watch(&id, &["--source", "true", "--reviewer", &reviewer]);
    assert!(events.contains("its further items are dropped"), "{events}");
    let pending = f.show(&id)["review"]["pending"].clone();
    assert_eq!(
        pending.as_array().unwrap().len(),
        cordon_session::MAX_PENDING
    );
    assert_eq!(pending[999]["id"], "reviewer-1:r999");
}

/// A reviewer's items reach the state while it still runs: `kill -9` of the watcher during
/// the review loses none of them, and the resumed watch (which reviews again) takes each once.
#[test]
fn watch_killed_during_a_review_keeps_what_the_reviewer_posted() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    let reviewer =
        r#"echo '{"id":"r1","body":"one"}'; echo '{"id":"r2","body":"two"}'; exec sleep 1000"#;
    let source = f.source();
    let fixer = f.fixer();
    let args = [
        "--source",
        &source,
        "--fixer",
        &fixer,
        "--reviewer",
        reviewer,
        "--reviewer-timeout",
        "2s",
        "--backoff-min",
        "50ms",
    ];
    let mut w = f.watch(&id, &args);
    // Each item is in the state as soon as an `items` event names it.
    w.next("items");
    support::wait_until("both items pending", HANG, || {
        f.show(&id)["review"]["pending"].as_array().unwrap().len() == 2
    });
    w.kill9();
    let rec = f.show(&id);
    assert_eq!(rec["review"]["phase"], "reviewing");
    assert_eq!(rec["review"]["pending"].as_array().unwrap().len(), 2);
    let mut w = f.spawn(&["session", "resume", &id, "--json-events"]);
    assert_eq!(w.next("started")["event"]["resumed"], true);
    let round = w.next("round_started");
    assert_eq!(
        ids(&round["event"]["items"]),
        ["reviewer-1:r1", "reviewer-1:r2"]
    );
    assert!(w.kinds("items").is_empty(), "taken again: {:#?}", w.seen);
    w.next("round_finished");
    assert_eq!(
        lines_of(&f.tree(&id).join("fixed.log")),
        ["reviewer-1:r1", "reviewer-1:r2"]
    );
    std::fs::write(f.at("merge"), "").unwrap();
    assert_eq!(w.finish(), 0);
}

/// `--agent-secret` gives the fixer (in its sandbox) a variable of cordon's environment,
/// redacted from its recorded output.
#[test]
fn watch_agent_secrets_reach_the_fixer_redacted() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let id = f.create();
    f.add_items(&[item("k1", "use the key")]);
    let secret = "agent-api-key-0815-abcdef";
    let source = f.source();
    let fixer = format!("test \"$AGENT_KEY\" = {secret} || exit 7; echo \"key: $AGENT_KEY\"");
    let mut command = f.command(&[
        "session",
        "watch",
        &id,
        "--source",
        &source,
        "--fixer",
        &fixer,
        "--agent-secret",
        "AGENT_KEY",
        "--backoff-min",
        "50ms",
        "--json-events",
    ]);
    command.env("AGENT_KEY", secret);
    let mut w = follow(command);
    let finished = w.next("round_finished");
    assert_eq!(finished["event"]["exit_code"], 0, "{finished}");
    let run = finished["event"]["run_id"].as_str().unwrap().to_owned();
    let logs = String::from_utf8(f.ok(&["runs", "logs", &run]).stdout).unwrap();
    assert!(logs.contains("key: ") && !logs.contains(secret), "{logs}");
    std::fs::write(f.at("merge"), "").unwrap();
    assert_eq!(w.finish(), 0);
}

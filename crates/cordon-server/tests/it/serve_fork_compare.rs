//! `session.fork` and `session.compare` jobs end to end: a real server, a real git repository,
//! sessions in the real sandbox. A session with state is forked into three; each fork tries
//! something; the comparison ranks them; a compare holds as many of the concurrency limits'
//! slots as it verifies at once, and waits, saying why, until they are free; bad input is
//! refused at submission with the field at fault.

use std::path::{Path, PathBuf};

use cordon_test_support::repo_with;
use cordon_test_support::server::Server;
use serde_json::{Value, json};

pub(crate) const POLICY: &str = r#"
workers = 4

[projects.a]
concurrency = 2
max_timeout = "120s"
allow = [["sh", "*"], ["git", "*"], ["true"]]

[projects.b]
allow = [["sh", "*"], ["true"]]
"#;

/// A repository whose one required stage passes when `RESULT` says `good` (it says `start`).
fn repo(dir: &Path) -> PathBuf {
    repo_with(
        dir,
        &[
            ("RESULT", "start\n"),
            (
                "cordon.toml",
                r#"
[[stage]]
name = "check"
category = "test"
run = ["sh", "-c", "test \"$(cat RESULT)\" = good || { echo \"RESULT is $(cat RESULT)\" >&2; exit 1; }"]
"#,
            ),
        ],
    )
}

fn ok(server: &Server, token: &str, project: &str, job_type: &str, inputs: Value) -> Value {
    let job = server.run_to_end(
        token,
        &json!({"project": project, "type": job_type, "inputs": inputs}),
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    job
}

/// What the scenario made: the session's job, the fork job, and the forks' session ids.
pub(crate) struct Forked {
    pub(crate) created: String,
    pub(crate) fork_job: String,
    pub(crate) ids: Vec<String>,
}

/// A session of `repo` with an untracked file, forked into three: fork 0 makes the stage
/// pass with a one-line change, fork 1 makes it fail, fork 2 makes it pass with a larger
/// change. Each fork first checks it sees the source's file.
pub(crate) fn three_forks(server: &Server, token: &str) -> Forked {
    let src = repo(server.dir.path());
    let clone = ok(
        server,
        token,
        "a",
        "repo.clone",
        json!({"url": src.display().to_string()}),
    );
    let created = ok(
        server,
        token,
        "a",
        "session.create",
        json!({"workspace": {"from_job": clone["id"]}}),
    );
    let session = json!({"from_job": created["id"]});
    ok(
        server,
        token,
        "a",
        "session.exec",
        json!({"session": session, "argv": ["sh", "-c", "echo shared state > SHARED"]}),
    );
    let fork = ok(
        server,
        token,
        "a",
        "session.fork",
        json!({"session": session, "count": 3}),
    );
    let report = &fork["result"];
    assert_eq!(report["schema"], "cordon.session-fork/v1", "{fork}");
    assert_eq!(report["source"], created["result"]["id"], "{fork}");
    let ids: Vec<String> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "{fork}");
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
    let attempts = [
        "echo good > RESULT",
        "echo bad > RESULT",
        "echo good > RESULT && seq 1 40 > NOTES",
    ];
    for (i, script) in attempts.iter().enumerate() {
        let ran = ok(
            server,
            token,
            "a",
            "session.exec",
            json!({"session": {"from_job": fork["id"], "fork": i},
                   "argv": ["sh", "-c", format!("cat SHARED && {script}")]}),
        );
        assert_eq!(ran["result"]["stdout"]["head"], "shared state\n", "{ran}");
    }
    Forked {
        created: created["id"].as_str().unwrap().to_owned(),
        fork_job: fork["id"].as_str().unwrap().to_owned(),
        ids,
    }
}

/// Starts a job of project a that holds one of its slots until cancelled; its id, once it
/// runs.
pub(crate) fn hold_a_slot(server: &Server, token: &str) -> String {
    let (status, blocker) = server.submit(
        token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c",
            "echo holding a slot; exec sleep 600"]}}),
    );
    assert_eq!(status, 201, "{blocker}");
    let blocker = blocker["id"].as_str().unwrap().to_owned();
    server.wait_for_output(token, &blocker);
    blocker
}

/// Submits a compare of the scenario's forks in the order `order`; returns the job's id.
pub(crate) fn submit_compare(
    server: &Server,
    token: &str,
    forked: &Forked,
    order: &[u32],
) -> String {
    let sessions: Vec<Value> = order
        .iter()
        .map(|i| json!({"from_job": forked.fork_job, "fork": i}))
        .collect();
    let (status, job) = server.submit(
        token,
        &json!({"project": "a", "type": "session.compare", "inputs": {"sessions": sessions}}),
    );
    assert_eq!(status, 201, "{job}");
    job["id"].as_str().unwrap().to_owned()
}

#[test]
fn serve_forks_a_session_and_compares_the_forks_ranked() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let forked = three_forks(&server, &token);

    let id = submit_compare(&server, &token, &forked, &[1, 2, 0]);
    server.events(&token, &id, None);
    let job = server.job(&token, &id);
    assert_eq!(job["state"], "succeeded", "{job}");
    // Three candidates, two of the project's two slots: two verified at once.
    assert_eq!(job["slots"], 2, "{job}");
    let report = &job["result"];
    assert_eq!(report["schema"], "cordon.session-compare/v1", "{job}");
    assert_eq!(report["parallel"], 2, "{job}");
    let rows = report["candidates"].as_array().unwrap();
    let order: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let ids = &forked.ids;
    assert_eq!(
        order,
        [ids[0].as_str(), ids[2].as_str(), ids[1].as_str()],
        "the one-line pass, the larger pass, the failure: {job}"
    );
    assert_eq!(report["winner"], ids[0].as_str(), "{job}");
    let verdicts: Vec<&str> = rows
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["passed", "passed", "blocked"], "{job}");
    assert!(
        rows[0]["diff_lines"].as_u64() < rows[1]["diff_lines"].as_u64(),
        "{job}"
    );
    let failing = rows[2]["reason"].as_str().unwrap();
    assert!(failing.contains("blocked by check"), "{failing}");
    assert!(rows[2]["blocking_findings"].as_u64() >= Some(1), "{job}");
    for (rank, row) in rows.iter().enumerate() {
        assert_eq!(row["rank"], rank + 1, "{row}");
        assert_eq!(row["report"]["schema"], "cordon.run-report/v1", "{row}");
    }
    assert!(
        rows[2]["report"]["stages"][0]["stderr"]["head"]
            .as_str()
            .unwrap()
            .contains("RESULT is bad"),
        "{job}"
    );

    // A comparison where nothing passes fails, its report kept; the source session and the
    // forks stay usable (the winner comes back with session.pull).
    let lone = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.compare",
                "inputs": {"sessions": [{"from_job": forked.fork_job, "fork": 1}]}}),
    );
    assert_eq!(lone["state"], "failed", "{lone}");
    assert_eq!(lone["result"]["winner"], Value::Null, "{lone}");
    assert_eq!(
        lone["slots"],
        Value::Null,
        "a one-candidate compare holds one slot: {lone}"
    );
    let reason = lone["failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("no candidate passed the gate"), "{reason}");
    let source = ok(
        &server,
        &token,
        "a",
        "session.exec",
        json!({"session": {"from_job": forked.created}, "argv": ["sh", "-c", "cat RESULT SHARED"]}),
    );
    assert_eq!(
        source["result"]["stdout"]["head"], "start\nshared state\n",
        "{source}"
    );
    let commit = ok(
        &server,
        &token,
        "a",
        "session.exec",
        json!({"session": {"from_job": forked.fork_job, "fork": 0}, "argv": ["sh", "-c",
            "git add -A && git -c user.name=a -c user.email=a@x commit -qm winner && echo done"]}),
    );
    assert_eq!(commit["result"]["stdout"]["head"], "done\n", "{commit}");
    let pulled = ok(
        &server,
        &token,
        "a",
        "session.pull",
        json!({"session": {"from_job": forked.fork_job, "fork": 0}}),
    );
    assert_eq!(pulled["result"]["commits"], 1, "{pulled}");
}

#[test]
fn serve_a_compare_waits_for_as_many_free_slots_as_it_verifies_at_once() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let other = server.token("b", "submit,read");
    let forked = three_forks(&server, &token);
    // One of project a's two slots is busy until the test cancels it.
    let blocker = hold_a_slot(&server, &token);

    let compare = submit_compare(&server, &token, &forked, &[0, 1]);
    // Another project's job runs meanwhile: the workers looked at the queue after the
    // compare was in it, and passed it over.
    let witness = server.run_to_end(
        &other,
        &json!({"project": "b", "type": "run", "inputs": {"argv": ["true"]}}),
    );
    assert_eq!(witness["state"], "succeeded", "{witness}");
    let waiting = server.job(&token, &compare);
    assert_eq!(waiting["state"], "queued", "{waiting}");
    assert_eq!(waiting["slots"], 2, "{waiting}");
    let why = waiting["waiting"].as_str().unwrap_or_default();
    assert!(
        why.contains("runs 2 verifications at once")
            && why.contains("starts when 2 are free")
            && why.contains("1 of 2 busy"),
        "{waiting}"
    );
    // A job of the same project queued after it waits behind it, though one slot is free.
    let (status, behind) = server.submit(
        &token,
        &json!({"project": "a", "type": "run", "inputs": {"argv": ["true"]}}),
    );
    assert_eq!(status, 201, "{behind}");
    let behind = behind["id"].as_str().unwrap().to_owned();
    let witness = server.run_to_end(
        &other,
        &json!({"project": "b", "type": "run", "inputs": {"argv": ["true"]}}),
    );
    assert_eq!(witness["state"], "succeeded", "{witness}");
    assert_eq!(server.job(&token, &behind)["state"], "queued");

    let (status, cancelled) = server.json(
        "POST",
        &format!("/v1/jobs/{blocker}/cancel"),
        &token,
        &Value::Null,
    );
    assert!(status == 200 || status == 202, "{status} {cancelled}");
    server.events(&token, &compare, None);
    let compared = server.job(&token, &compare);
    assert_eq!(compared["state"], "succeeded", "{compared}");
    assert_eq!(compared["result"]["parallel"], 2, "{compared}");
    assert!(compared.get("waiting").is_none(), "{compared}");
    server.events(&token, &behind, None);
    assert_eq!(server.job(&token, &behind)["state"], "succeeded");
}

#[test]
fn serve_refuses_bad_fork_and_compare_inputs_at_submission() {
    let server = Server::start(POLICY);
    let token = server.token("a", "submit,read");
    let other = server.token("b", "submit,read");
    let forked = three_forks(&server, &token);
    let session = json!({"from_job": forked.created});
    let fork = |i: u32| json!({"from_job": forked.fork_job, "fork": i});
    let refused = |token: &str, project: &str, job_type: &str, inputs: Value, wanted: &str| {
        let (status, answer) = server.submit(
            token,
            &json!({"project": project, "type": job_type, "inputs": inputs}),
        );
        assert_eq!(status, 400, "{inputs}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(wanted), "{inputs}: {message}");
    };
    refused(
        &token,
        "a",
        "session.fork",
        json!({"session": session, "count": 0}),
        "inputs.count: 0 is not within 1 to 100",
    );
    refused(
        &token,
        "a",
        "session.fork",
        json!({"session": session, "count": 101}),
        "inputs.count: 101 is not within 1 to 100",
    );
    refused(
        &token,
        "a",
        "session.fork",
        json!({"session": session, "count": -1}),
        "inputs",
    );
    refused(
        &token,
        "a",
        "session.fork",
        json!({"session": {"from_job": "j-nonesuch"}}),
        "inputs.session.from_job",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": []}),
        "inputs.sessions: 0 sessions; compare 1 to 100",
    );
    let many: Vec<Value> = (0..101).map(|_| session.clone()).collect();
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": many}),
        "inputs.sessions: 101 sessions",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": [fork(0), fork(1), fork(0)]}),
        "inputs.sessions[2] names the same session as an earlier entry (fork 0 of job",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": [fork(0), {"from_job": forked.fork_job}]}),
        "inputs.sessions[1]: job",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": [fork(3)]}),
        "inputs.sessions[0].fork: 3 is past the 3 sessions",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": [{"from_job": forked.created, "fork": 0}]}),
        "is a session.create job",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": [{"from_job": "j-abcdefghij"}]}),
        "no session.create or session.fork job",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": [fork(0)], "categories": ["vibes"]}),
        "inputs.categories: unknown category",
    );
    refused(
        &token,
        "a",
        "session.compare",
        json!({"sessions": [fork(0)], "bogus": 1}),
        "unknown field",
    );
    // Another project's sessions are not there for it.
    refused(
        &other,
        "b",
        "session.compare",
        json!({"sessions": [fork(0)]}),
        "no session.create or session.fork job",
    );
    refused(
        &other,
        "b",
        "session.fork",
        json!({"session": session, "count": 2}),
        "no session.create or session.fork job",
    );
    // A stage that is not in the plan is refused before anything runs.
    let job = server.run_to_end(
        &token,
        &json!({"project": "a", "type": "session.compare",
                "inputs": {"sessions": [fork(0)], "stages": ["nonesuch"]}}),
    );
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["failure"]["category"], "usage", "{job}");
    assert!(
        job["failure"]["reason"]
            .as_str()
            .unwrap()
            .contains("no stage named `nonesuch`"),
        "{job}"
    );
}

#[test]
fn serve_checks_each_candidates_plan_against_the_policy_before_anything_runs() {
    // Project c may run `true` only: the repository's plan runs `sh`, refused as policy.
    let server = Server::start(&format!(
        "{POLICY}\n[projects.c]\nallow = [[\"sh\", \"-c\", \"echo shared state > SHARED\"], \
         [\"sh\", \"-c\", \"cat SHARED && echo good > RESULT\"], [\"git\", \"*\"]]\n"
    ));
    let token = server.token("c", "submit,read");
    let src = repo(server.dir.path());
    let clone = ok(
        &server,
        &token,
        "c",
        "repo.clone",
        json!({"url": src.display().to_string()}),
    );
    let created = ok(
        &server,
        &token,
        "c",
        "session.create",
        json!({"workspace": {"from_job": clone["id"]}}),
    );
    let fork = ok(
        &server,
        &token,
        "c",
        "session.fork",
        json!({"session": {"from_job": created["id"]}, "count": 2}),
    );
    let job = server.run_to_end(
        &token,
        &json!({"project": "c", "type": "session.compare",
                "inputs": {"sessions": [{"from_job": fork["id"], "fork": 0},
                                        {"from_job": fork["id"], "fork": 1}]}}),
    );
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["failure"]["category"], "policy", "{job}");
    let reason = job["failure"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("stage `check` would run") && reason.contains("nothing ran"),
        "{reason}"
    );
    assert_eq!(job["result"], Value::Null, "{job}");
}

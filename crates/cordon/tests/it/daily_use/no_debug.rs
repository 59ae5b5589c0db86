//! No Rust `Debug` rendering reaches a person: every text surface the suite's fixtures
//! exercise here — each command's text output and errors, the review watcher's lines, the
//! dashboard's pages — is searched for `Some(`, `None` and the names of cordon's enum
//! variants (`Crashed`, `Marker`, `Merged`, ...).

use std::io::{Read, Write};
use std::net::TcpStream;

use super::{Fixture, text};
use crate::support::{self, TestDir, server::Server};

/// What only `{:?}` of cordon's own values prints.
const DEBUG_WORDS: &[&str] = &[
    "Some(",
    "None",
    "Crashed",
    "Marker",
    "Merged",
    "Closed",
    "TimedOut",
    "MaxRounds",
    "IdleTimeout",
    "SessionEnded",
    "FixerMisconfigured",
    "OwnerGone",
    "CreationAbandoned",
    "RemovalInterrupted",
    "GitWorktree",
    "UpToDate",
    "Added",
    "Modified",
    "Polling",
    "Reviewing",
];

/// Whether `text` holds `word` as a word of its own (`None`, not `Nonesuch`).
fn holds(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let after = text[at + word.len()..].chars().next();
        word.ends_with('(') || !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Everything rendered, with what rendered it.
#[derive(Default)]
struct Surfaces(Vec<(String, String)>);

impl Surfaces {
    /// Runs `cordon ARGS` in `f` and keeps what it printed (both streams; any exit code).
    fn cordon(&mut self, f: &Fixture, args: &[&str]) -> String {
        let out = f.cordon(args);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        self.0.push((args.join(" "), said.clone()));
        said
    }

    fn keep(&mut self, what: &str, said: String) {
        self.0.push((what.to_owned(), said));
    }

    #[track_caller]
    fn check(&self) {
        for (what, said) in &self.0 {
            for word in DEBUG_WORDS {
                assert!(!holds(said, word), "`{what}` printed {word:?}:\n{said}");
            }
        }
    }
}

/// One page of the dashboard, logged in with `token`.
fn dashboard_page(server: &Server, token: &str, path: &str) -> String {
    let exchange = |request: String| -> String {
        let mut stream = TcpStream::connect(&server.url).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        String::from_utf8_lossy(&raw).into_owned()
    };
    let form = format!("token={token}&next=%2F");
    let answer = exchange(format!(
        "POST /login HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        server.url,
        form.len()
    ));
    let cookie = answer
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().starts_with("set-cookie:").then(|| {
                l["set-cookie:".len()..]
                    .trim()
                    .split(';')
                    .next()
                    .unwrap()
                    .to_owned()
            })
        })
        .unwrap_or_else(|| panic!("no login: {answer}"));
    let page = exchange(format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nCookie: {cookie}\r\n\r\n",
        server.url
    ));
    assert!(page.starts_with("HTTP/1.1 200"), "{path}: {page}");
    page
}

#[test]
fn no_rust_debug_rendering_reaches_what_a_person_reads() {
    if !support::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut seen = Surfaces::default();

    // Workspaces: their life, their changes, their errors, gc's lines.
    let ws = seen
        .cordon(&f, &["workspace", "create"])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let patch = f.home.write(
        "p.diff",
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-alpha\n+beta\n",
    );
    let add = f.home.write(
        "add.diff",
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n",
    );
    for args in [
        &["workspace", "apply", &ws, patch.to_str().unwrap()][..],
        &["workspace", "apply", &ws, add.to_str().unwrap()],
        &["workspace", "diff", &ws, "--name-only"],
        &["workspace", "list"],
        &["workspace", "show", &ws],
        &["workspace", "remove", &ws],
        &["workspace", "show", &ws],
        &["workspace", "show", "abcd2345"],
    ] {
        seen.cordon(&f, args);
    }
    let transient = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} workspace create --transient",
            env!("CARGO_BIN_EXE_cordon")
        ))
        .env("CORDON_HOME", f.home.path())
        .current_dir(f.repo_path())
        .output()
        .unwrap();
    seen.keep("workspace create --transient", text(&transient.stderr));
    seen.cordon(&f, &["gc"]);

    // Sessions: commits, a review with a failing reviewer and fixer, endings, errors.
    let session = seen
        .cordon(&f, &["session", "create"])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    seen.cordon(
        &f,
        &[
            "session",
            "exec",
            &session,
            "--",
            "sh",
            "-c",
            "echo x > x && git add x && git -c user.name=a -c user.email=a@a commit -qm x",
        ],
    );
    seen.cordon(&f, &["session", "poke", &session, "--comment", "fix it"]);
    seen.cordon(
        &f,
        &[
            "session",
            "watch",
            &session,
            "--source",
            "true",
            "--reviewer",
            "echo oops >&2; exit 3",
            "--fixer",
            "exit 5",
        ],
    );
    seen.cordon(
        &f,
        &[
            "session",
            "watch",
            &session,
            "--source",
            "echo '{\"state\":\"merged\"}'",
            "--fixer",
            "true",
        ],
    );
    for args in [
        &["session", "list", "--all"][..],
        &["session", "show", &session],
        &["session", "pull", &session],
        &["session", "pull", &session],
        &["session", "show", "abcd2345"],
    ] {
        seen.cordon(&f, args);
    }
    let pushed = f
        .command(&["session", "push", "--", "sh", "-c", "echo agent"])
        .output()
        .unwrap();
    seen.keep(
        "session push",
        format!("{}{}", text(&pushed.stdout), text(&pushed.stderr)),
    );

    // The history, the schemas, the host, a plan.
    for args in [
        &["runs", "list"][..],
        &["runs", "list", "--kind", "watch"],
        &["schema"],
        &["doctor"],
        &["verify", "--explain"],
        &["runs", "show", "r-aaaaaaaaaa"],
    ] {
        seen.cordon(&f, args);
    }
    let run = f.json(&["runs", "list", "--json"])["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    seen.cordon(&f, &["runs", "show", &run]);

    service_surfaces(&f, &mut seen);

    assert!(seen.0.len() > 30);
    seen.check();
}

/// The job service's surfaces: its client's text, the dashboard's pages.
fn service_surfaces(f: &Fixture, seen: &mut Surfaces) {
    let dir = std::sync::Arc::new(TestDir::new());
    let policy = dir.write(
        "cordon-server.toml",
        "[projects.a]\nallow = [[\"sh\", \"*\"]]\n",
    );
    let server = Server::start_in(dir, policy);
    let token = server.token("a", "submit,read");
    let operator = server.token("*", "admin");
    let job = server.run_to_end(
        &token,
        &serde_json::json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "exit 3"]}}),
    );
    let id = job["id"].as_str().unwrap().to_owned();
    for args in [&["jobs", "list"][..], &["jobs", "show", &id]] {
        let out = f
            .command(args)
            .env("CORDON_SERVER", format!("http://{}", server.url))
            .env("CORDON_TOKEN", &token)
            .output()
            .unwrap();
        seen.keep(
            &args.join(" "),
            format!("{}{}", text(&out.stdout), text(&out.stderr)),
        );
    }
    for path in [
        "/".to_owned(),
        format!("/jobs/{id}"),
        "/projects".to_owned(),
    ] {
        seen.keep(&path, dashboard_page(&server, &token, &path));
    }
    seen.keep("/sessions", dashboard_page(&server, &operator, "/sessions"));
}

#[test]
fn the_search_finds_debug_words_as_words() {
    assert!(holds("exit code Some(3), signal None", "Some("));
    assert!(holds("exit code Some(3), signal None", "None"));
    assert!(holds("done (Crashed, exit 127)", "Crashed"));
    assert!(!holds("Nonesuch, none, Noneish", "None"));
}

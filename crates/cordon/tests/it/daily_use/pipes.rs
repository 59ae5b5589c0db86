//! Quiet pipes: when the reader of cordon's stdout goes away (`cordon runs list | head -1`),
//! every command ends quietly with the conventional status — 141, as SIGPIPE ends `ls` — with
//! no panic and no "Broken pipe" message.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use super::{Fixture, text};
use crate::support::{self, server::Server};

/// A pipe whose read end is already closed: every write to the other end fails with EPIPE.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it returns; both are owned below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors of our own.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

/// What cordon must never say about a closed stdout.
#[track_caller]
fn quiet(args: &[&str], stderr: &str) {
    for noise in ["Broken pipe", "panicked", "failed printing", "error:"] {
        assert!(!stderr.contains(noise), "{args:?}: {stderr}");
    }
}

/// A home with something in every list: a workspace, a session (with a run), recorded runs
/// (one printing many lines), and a job service with a token and a job.
struct Lists {
    f: Fixture,
    server: Server,
    token: String,
    workspace: String,
    session: String,
    run: String,
}

const POLICY: &str = "[projects.a]\nallow = [[\"sh\", \"*\"]]\n";

impl Lists {
    fn new() -> Lists {
        let f = Fixture::new();
        let workspace = text(&f.ok(&["workspace", "create"]).stdout)
            .trim()
            .to_owned();
        let session = text(&f.ok(&["session", "create"]).stdout).trim().to_owned();
        f.ok(&["session", "exec", &session, "--", "sh", "-c", "echo hello"]);
        f.ok(&["run", "--", "sh", "-c", "seq 1 20000"]);
        let runs = f.json(&["runs", "list", "--json"]);
        let run = runs["runs"][0]["id"].as_str().unwrap().to_owned();
        let server = Server::start(POLICY);
        let token = server.token("a", "submit,read");
        let (status, _) = server.submit(
            &token,
            &serde_json::json!({"project": "a", "type": "run", "inputs": {"argv": ["sh", "-c", "echo job"]}}),
        );
        assert_eq!(status, 201);
        Lists {
            f,
            server,
            token,
            workspace,
            session,
            run,
        }
    }

    /// `cordon ARGS` with the fixture's home, the job service and its token.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = self.f.command(args);
        command
            .env("CORDON_SERVER", format!("http://{}", self.server.url))
            .env("CORDON_TOKEN", &self.token);
        if args.first() == Some(&"token") {
            // Tokens live in the job service's store.
            command.env("CORDON_HOME", &self.server.home);
        }
        command
    }

    /// Every command that prints something on stdout, with the ids it needs.
    fn printing(&self) -> Vec<Vec<String>> {
        let (ws, session, run) = (&self.workspace, &self.session, &self.run);
        let lines: &[&str] = &[
            "workspace list",
            "workspace list --json",
            &format!("workspace show {ws}"),
            &format!("workspace show {ws} --json"),
            &format!("workspace diff {ws} --json"),
            "session list",
            "session list --all --json",
            &format!("session show {session}"),
            &format!("session show {session} --json"),
            "runs list",
            "runs list --json",
            &format!("runs show {run}"),
            &format!("runs logs {run}"),
            &format!("runs export {run}"),
            "schema",
            "schema run-report",
            "doctor --json",
            "gc --json",
            "jobs list",
            "jobs list --json",
            "token list",
            "token list --json",
        ];
        lines
            .iter()
            .map(|l| l.split(' ').map(str::to_owned).collect())
            .collect()
    }
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_141() {
    if !support::sandbox_available() {
        return;
    }
    let lists = Lists::new();
    for args in lists.printing() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = lists
            .command(&args)
            .stdout(Stdio::from(closed_pipe()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        quiet(&args, &text(&out.stderr));
        assert_eq!(
            out.status.code(),
            Some(141),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // The example: a removal whose document nobody reads still removes, quietly.
    let out = lists
        .command(&["session", "remove", &lists.session, "--json"])
        .stdout(Stdio::from(closed_pipe()))
        .output()
        .unwrap();
    quiet(&["session", "remove"], &text(&out.stderr));
    assert_eq!(
        lists.f.json(&["session", "show", &lists.session, "--json"])["state"],
        "ended"
    );
}

#[test]
fn listings_piped_into_head_never_panic_or_complain() {
    if !support::sandbox_available() {
        return;
    }
    let lists = Lists::new();
    let listings = [
        "workspace list",
        "session list",
        "runs list",
        "jobs list",
        "token list",
        "runs list --json",
        "jobs list --json",
    ];
    for listing in listings {
        for _ in 0..20 {
            let out = Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "\"$CORDON\" {listing} | head -1 >/dev/null; echo \"${{PIPESTATUS[0]}}\""
                ))
                .env("CORDON", env!("CARGO_BIN_EXE_cordon"))
                .env(
                    "CORDON_HOME",
                    if listing.starts_with("token") {
                        lists.server.home.as_path()
                    } else {
                        lists.f.home.path()
                    },
                )
                .env("CORDON_SERVER", format!("http://{}", lists.server.url))
                .env("CORDON_TOKEN", &lists.token)
                .current_dir(lists.f.repo_path())
                .output()
                .unwrap();
            let status = text(&out.stdout);
            quiet(&[listing], &text(&out.stderr));
            assert!(
                matches!(status.trim(), "0" | "141"),
                "{listing}: exited {status}: {}",
                text(&out.stderr)
            );
        }
    }
}

//! A real `cordon serve` for the integration tests (the `cordon` built beside the test
//! executable: [`cordon_bin`]): started on a loopback ephemeral port (or a Unix socket) with its
//! own home; its ready line is the synchronisation point; requests, SSE live logs and job
//! helpers over plain HTTP/1.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::{TestDir, cordon_bin};

/// A running `cordon serve` with its own home (store, workspaces).
pub struct Server {
    /// The server process.
    pub child: Child,
    /// `HOST:PORT` (`localhost` for a Unix socket).
    pub url: String,
    /// The Unix socket it listens on, if it does.
    pub socket: Option<PathBuf>,
    /// The store it uses when not its home's SQLite file (`CORDON_STORE`).
    pub store: Option<String>,
    /// Its `CORDON_HOME`.
    pub home: PathBuf,
    /// Its policy file.
    pub policy: PathBuf,
    /// The temp dir holding its home and policy (for fixtures of the test).
    pub dir: Arc<TestDir>,
}

/// A connection to the server.
pub trait Connection: Read + Write {}
impl<T: Read + Write> Connection for T {}

impl Server {
    /// A server with `policy` (the text of a `cordon-server.toml`) in a new temp dir.
    pub fn start(policy: &str) -> Self {
        let dir = Arc::new(TestDir::new());
        let policy = dir.write("cordon-server.toml", policy);
        Self::start_in(dir, policy)
    }

    /// A server with the policy file `policy`, its home under `dir`.
    pub fn start_in(dir: Arc<TestDir>, policy: PathBuf) -> Self {
        Self::start_with(dir, policy, |_| {})
    }

    /// Like [`Server::start_in`], with the command adjusted by `adjust` before it starts
    /// (more arguments, variables). A `--listen unix:PATH` server is reached by its socket.
    pub fn start_with(
        dir: Arc<TestDir>,
        policy: PathBuf,
        adjust: impl FnOnce(&mut Command),
    ) -> Self {
        let home = dir.path().join("home");
        let mut command = Command::new(cordon_bin());
        command
            .arg("serve")
            .arg("--config")
            .arg(&policy)
            .env("CORDON_HOME", &home)
            .env("SERVE_TEST_SECRET", "hunter2-very-secret")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        adjust(&mut command);
        for (flag, default) in [("--listen", "127.0.0.1:0"), ("--retry-backoff", "50ms")] {
            if !command.get_args().any(|a| a == flag) {
                command.args([flag, default]);
            }
        }
        // A store named by CORDON_STORE (PostgreSQL) is where tokens go too.
        let store = command
            .get_envs()
            .find(|(k, _)| *k == "CORDON_STORE")
            .and_then(|(_, v)| v)
            .map(|v| v.to_string_lossy().into_owned());
        let mut child = command.spawn().expect("cordon serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let listening = line
            .trim()
            .strip_prefix("cordon serve: listening on ")
            .unwrap_or_else(|| panic!("no ready line: {line:?}"))
            .to_owned();
        let (url, socket) = match listening.strip_prefix("unix:") {
            Some(path) => ("localhost".to_owned(), Some(PathBuf::from(path))),
            None => (
                listening
                    .strip_prefix("http://")
                    .unwrap_or_else(|| panic!("unexpected address: {listening}"))
                    .to_owned(),
                None,
            ),
        };
        Server {
            child,
            url,
            socket,
            store,
            home,
            policy,
            dir,
        }
    }

    fn connect(&self) -> Box<dyn Connection> {
        match &self.socket {
            Some(path) => Box::new(std::os::unix::net::UnixStream::connect(path).unwrap()),
            None => Box::new(TcpStream::connect(&self.url).unwrap()),
        }
    }

    /// Kills the server with SIGKILL.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Starts a new server on the same home.
    pub fn restart(self) -> Self {
        let dir = Arc::clone(&self.dir);
        let policy = self.policy.clone();
        drop(self);
        Self::start_in(dir, policy)
    }

    /// A new token of `project` with `scopes` (`cordon token create`, on the server's store).
    pub fn token(&self, project: &str, scopes: &str) -> String {
        let mut command = Command::new(cordon_bin());
        command
            .args(["token", "create", "--project", project, "--scope", scopes])
            .env("CORDON_HOME", &self.home);
        if let Some(store) = &self.store {
            command.env("CORDON_STORE", store);
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// One HTTP/1.1 request; returns (status, headers, body).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String, Vec<u8>) {
        let mut stream = self.connect();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.url,
            body.len()
        );
        if let Some(token) = token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if !body.is_empty() {
            head.push_str("Content-Type: application/json\r\n");
        }
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        // The server may answer (413) before reading a large body.
        let _ = stream.write_all(body);
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no response: {}", String::from_utf8_lossy(&raw)));
        let headers = String::from_utf8_lossy(&raw[..split]).into_owned();
        let status = headers[9..12].parse().unwrap();
        let mut body = raw[split + 4..].to_vec();
        if headers
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        (status, headers, body)
    }

    /// One request with a JSON body (none when `body` is null); returns (status, answer).
    pub fn json(&self, method: &str, path: &str, token: &str, body: &Value) -> (u16, Value) {
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, _, body) = self.request(method, path, Some(token), &[], &bytes);
        let value = serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: {status} {e}: {}",
                String::from_utf8_lossy(&body)
            )
        });
        (status, value)
    }

    /// Submits a job (`POST /v1/jobs`); returns (status, answer).
    pub fn submit(&self, token: &str, body: &Value) -> (u16, Value) {
        self.json("POST", "/v1/jobs", token, body)
    }

    /// The job's live log from `after` until its `end` event: (id, event, data) each.
    pub fn events(&self, token: &str, id: &str, after: Option<u64>) -> Vec<(u64, String, Value)> {
        let mut events = Vec::new();
        self.follow(token, id, after, |e| {
            events.push(e.clone());
            e.1 != "end"
        });
        events
    }

    /// Opens the job's live log and reads the answer's head: its status and the connection,
    /// left open (the stream goes on until it is read to its end or dropped).
    pub fn open_events(&self, token: &str, id: &str) -> (u16, Box<dyn Connection>) {
        let mut stream = self.connect();
        write!(
            stream,
            "GET /v1/jobs/{id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).unwrap(), 1, "the head ended early");
            head.push(byte[0]);
        }
        let status = String::from_utf8_lossy(&head[9..12]).parse().unwrap();
        (status, stream)
    }

    /// Follows the job's live log until its first output (the program is running).
    pub fn wait_for_output(&self, token: &str, id: &str) {
        let mut started = false;
        self.follow(token, id, None, |e| {
            started |= e.1 == "output";
            !started
        });
        assert!(started, "job {id} ended without output");
    }

    /// Feeds SSE events to `each` until it returns false or the stream ends.
    pub fn follow(
        &self,
        token: &str,
        id: &str,
        after: Option<u64>,
        mut each: impl FnMut(&(u64, String, Value)) -> bool,
    ) {
        let mut stream = self.connect();
        let resume = after.map_or(String::new(), |a| format!("Last-Event-ID: {a}\r\n"));
        write!(
            stream,
            "GET /v1/jobs/{id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n{resume}Connection: close\r\n\r\n"
        )
        .unwrap();
        let reader = BufReader::new(stream);
        let (mut seq, mut name, mut data) = (None, String::new(), String::new());
        for line in reader.lines() {
            let Ok(line) = line else { break };
            // Chunked framing lines (sizes) are not SSE fields; skip them.
            if let Some(v) = line.strip_prefix("id: ") {
                seq = Some(v.trim().parse().unwrap());
            } else if let Some(v) = line.strip_prefix("event: ") {
                name = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = v.to_owned();
            } else if line.is_empty() && !name.is_empty() {
                // Every event has its own `id` (the API's schema says so; clients resume
                // from it).
                let event = (
                    seq.take()
                        .unwrap_or_else(|| panic!("a `{name}` event without an id: {data}")),
                    std::mem::take(&mut name),
                    serde_json::from_str(&data).unwrap(),
                );
                if !each(&event) {
                    return;
                }
            }
        }
    }

    /// The job document of `id` (`GET /v1/jobs/ID`), which must exist.
    pub fn job(&self, token: &str, id: &str) -> Value {
        let (status, job) = self.json("GET", &format!("/v1/jobs/{id}"), token, &Value::Null);
        assert_eq!(status, 200, "{job}");
        job
    }

    /// Submits a job and follows it to its end; returns the final job document.
    pub fn run_to_end(&self, token: &str, body: &Value) -> Value {
        let (status, job) = self.submit(token, body);
        assert_eq!(status, 201, "{job}");
        let id = job["id"].as_str().unwrap().to_owned();
        let events = self.events(token, &id, None);
        assert_eq!(events.last().unwrap().1, "end", "{events:?}");
        self.job(token, &id)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body of a chunked HTTP/1.1 answer.
pub fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(std::str::from_utf8(&body[..eol]).unwrap().trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[eol + 2..eol + 2 + size]);
        body = &body[eol + 2 + size + 2..];
    }
}

/// A `run` job of `project` running `sh -c script`.
pub fn run_job(project: &str, script: &str) -> Value {
    json!({"project": project, "type": "run", "inputs": {"argv": ["sh", "-c", script]}})
}

/// Processes whose command line holds `marker`.
pub fn sleepers(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .count()
}

/// The text of every `output` event, in order.
pub fn outputs(events: &[(u64, String, Value)]) -> String {
    events
        .iter()
        .filter(|e| e.1 == "output")
        .map(|e| e.2["text"].as_str().unwrap().to_owned())
        .collect()
}

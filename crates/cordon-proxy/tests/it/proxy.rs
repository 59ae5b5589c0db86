//! The proxy against real sockets: a local origin server on loopback, the listening socket
//! handed over by `SCM_RIGHTS` as the sandbox helper does, and hostile programs.

use std::io::{IoSlice, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

use cordon_proxy::{Allowlist, ProxySettings, TestHooks, start_for_tests};
use cordon_types::{DeniedConnection, NetworkLimit, NetworkReport};
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};

/// A one-connection-at-a-time origin: answers every request with `body`, and remembers the
/// request heads it saw.
struct Origin {
    port: u16,
    seen: std::sync::Arc<Mutex<Vec<String>>>,
}

fn origin(body: Vec<u8>) -> Origin {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
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
            log.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            let _ = stream.write_all(answer.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    Origin { port, seen }
}

/// Runs the proxy around `program` (which gets the proxy's address) and returns the report
/// and the refusals the notice saw.
fn with_proxy(
    settings: ProxySettings,
    hooks: TestHooks,
    program: impl FnOnce(std::net::SocketAddr),
) -> (NetworkReport, Vec<DeniedConnection>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (ours, helpers) = UnixStream::pair().unwrap();
    // What the sandbox helper does: send the listening socket over the inherited socket.
    let fds = [listener.as_fd()];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    assert!(cmsg.push(SendAncillaryMessage::ScmRights(&fds)));
    sendmsg(
        &helpers,
        &[IoSlice::new(b"L")],
        &mut cmsg,
        SendFlags::empty(),
    )
    .unwrap();
    drop(listener);
    drop(helpers);
    let notices = Mutex::new(Vec::new());
    let notice = |d: &DeniedConnection| notices.lock().unwrap().push(d.clone());
    let report = std::thread::scope(|scope| {
        let proxy = start_for_tests(
            scope,
            &settings,
            cordon_proxy::Listener::FromSandbox(ours),
            cordon_proxy::Companions {
                notice: Some(&notice),
                intercept: None,
            },
            hooks,
        )
        .unwrap();
        program(addr);
        proxy.finish()
    });
    (report, notices.into_inner().unwrap())
}

fn exchange(proxy: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.write_all(request).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn hooks(names: &[(&str, &str)], loopback: bool) -> TestHooks {
    TestHooks {
        allow_loopback: loopback,
        resolve: names
            .iter()
            .map(|(n, ip)| (n.to_string(), vec![ip.parse::<IpAddr>().unwrap()]))
            .collect(),
        trust: None,
    }
}

fn allowing(entries: &[String]) -> ProxySettings {
    ProxySettings {
        allow: Allowlist::parse(entries).unwrap(),
        ..ProxySettings::default()
    }
}

#[test]
fn plain_http_to_an_allowed_host_is_relayed_in_origin_form_and_accounted() {
    let o = origin(b"hello".to_vec());
    let settings = allowing(&[format!("origin.test:{}", o.port)]);
    let (report, notices) = with_proxy(
        settings,
        hooks(&[("origin.test", "127.0.0.1")], true),
        |p| {
            let req = format!(
                "GET http://Origin.Test:{}/simple/pkg/ HTTP/1.1\r\nHost: elsewhere.test\r\nProxy-Authorization: Basic eA==\r\n\r\n",
                o.port
            );
            let answer = exchange(p, req.as_bytes());
            assert!(
                answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("hello"),
                "{answer}"
            );
        },
    );
    let seen = o.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [format!(
            "GET /simple/pkg/ HTTP/1.1\r\nHost: Origin.Test:{}\r\nConnection: close\r\n\r\n",
            o.port
        )]
    );
    assert!(notices.is_empty() && report.denied.is_empty(), "{report:?}");
    assert_eq!(report.allowed.len(), 1);
    let t = &report.allowed[0];
    assert_eq!(
        (t.host.as_str(), t.port, t.connections),
        ("Origin.Test", o.port, 1)
    );
    assert_eq!(t.bytes_up, seen[0].len() as u64);
    assert_eq!(t.bytes_down, 38 + 5);
}

#[test]
fn connect_tunnels_to_an_allowed_host() {
    let o = origin(b"tunnelled".to_vec());
    let settings = allowing(&[format!("*.origin.test:{}", o.port)]);
    let (report, _) = with_proxy(
        settings,
        hooks(&[("a.origin.test", "127.0.0.1")], true),
        |p| {
            let req = format!(
                "CONNECT a.origin.test:{0} HTTP/1.1\r\nHost: a.origin.test:{0}\r\n\r\nGET /inner HTTP/1.1\r\n\r\n",
                o.port
            );
            let answer = exchange(p, req.as_bytes());
            assert!(
                answer.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
                "{answer}"
            );
            assert!(answer.ends_with("tunnelled"), "{answer}");
        },
    );
    assert_eq!(o.seen.lock().unwrap()[0], "GET /inner HTTP/1.1\r\n\r\n");
    assert_eq!(report.allowed[0].connections, 1);
    assert_eq!(report.allowed[0].bytes_up, 23);
}

#[test]
fn hosts_outside_the_allowlist_ip_literals_and_junk_are_refused_with_reasons() {
    let o = origin(b"secret".to_vec());
    let settings = allowing(&[format!("origin.test:{}", o.port)]);
    let names = [("origin.test", "127.0.0.1"), ("evil.test", "127.0.0.1")];
    let (report, notices) = with_proxy(settings, hooks(&names, true), |p| {
        for req in [
            format!("CONNECT evil.test:{} HTTP/1.1\r\n\r\n", o.port),
            format!("CONNECT origin.test:{} HTTP/1.1\r\n\r\n", o.port + 1),
            format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", o.port),
            format!("GET http://[::1]:{}/ HTTP/1.1\r\n\r\n", o.port),
            format!("GET http://2130706433:{}/ HTTP/1.1\r\n\r\n", o.port),
            "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n".to_string(),
            "CONNECT origin.test HTTP/1.1\r\n\r\n".to_string(),
            "GET https://origin.test/ HTTP/1.1\r\n\r\n".to_string(),
            "\x16\x03\x01\x02\x00\x01\x00\x01\x7f\x03\x03 binary junk\r\n\r\n".to_string(),
        ] {
            let answer = exchange(p, req.as_bytes());
            assert!(
                answer.starts_with("HTTP/1.1 403") || answer.starts_with("HTTP/1.1 400"),
                "{req:?} -> {answer}"
            );
            assert!(!answer.contains("secret"), "{answer}");
        }
    });
    assert!(
        o.seen.lock().unwrap().is_empty(),
        "nothing reached the origin"
    );
    assert!(report.allowed.is_empty(), "{report:?}");
    let reasons: Vec<(String, Option<u16>, String)> = report
        .denied
        .iter()
        .map(|d| (d.host.clone(), d.port, d.reason.clone()))
        .collect();
    let port = Some(o.port);
    let literal = "an IP address, not a host name (the allowlist names hosts)";
    assert_eq!(
        reasons[0],
        ("evil.test".into(), port, "not in the allowlist".into())
    );
    assert_eq!(
        reasons[1],
        (
            "origin.test".into(),
            Some(o.port + 1),
            "not in the allowlist".into()
        )
    );
    assert_eq!(reasons[2], ("127.0.0.1".into(), port, literal.into()));
    assert_eq!(reasons[3], ("[::1]".into(), port, literal.into()));
    assert_eq!(reasons[4], ("2130706433".into(), port, literal.into()));
    assert_eq!(
        reasons[5],
        ("evil.test".into(), Some(80), "not in the allowlist".into())
    );
    assert_eq!(reasons[6].2, "the destination is not host:port");
    assert_eq!(
        reasons[7].2,
        "only http:// requests and CONNECT tunnels are proxied"
    );
    assert!(
        reasons[8].2.starts_with("malformed request"),
        "{:?}",
        reasons[8]
    );
    assert_eq!(notices, report.denied);
}

#[test]
fn a_listed_name_resolving_to_an_internal_address_is_refused() {
    let o = origin(b"internal".to_vec());
    let settings = allowing(&[
        "rebind.test".into(),
        "metadata.test".into(),
        "mapped.test".into(),
        format!("local.test:{}", o.port),
    ]);
    let names = [
        ("rebind.test", "10.0.0.1"),
        ("metadata.test", "169.254.169.254"),
        ("mapped.test", "::ffff:192.168.1.1"),
        ("local.test", "127.0.0.1"),
    ];
    // Loopback stays refused without the test switch.
    let (report, _) = with_proxy(settings, hooks(&names, false), |p| {
        for name in ["rebind.test:443", "metadata.test:80", "mapped.test:443"] {
            assert!(
                exchange(p, format!("CONNECT {name} HTTP/1.1\r\n\r\n").as_bytes())
                    .starts_with("HTTP/1.1 403")
            );
        }
        let local = format!("CONNECT local.test:{} HTTP/1.1\r\n\r\n", o.port);
        assert!(exchange(p, local.as_bytes()).starts_with("HTTP/1.1 403"));
    });
    let reasons: Vec<&str> = report.denied.iter().map(|d| d.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "resolves to a private address (10.0.0.0/8): 10.0.0.1",
            "resolves to a link-local address (169.254.0.0/16, cloud metadata): 169.254.169.254",
            "resolves to a private address (192.168.0.0/16): ::ffff:192.168.1.1",
            "resolves to a loopback address (127.0.0.0/8): 127.0.0.1",
        ]
    );
    assert!(o.seen.lock().unwrap().is_empty());
}

#[test]
fn a_slow_request_head_is_cut_at_the_head_timeout() {
    let settings = ProxySettings {
        head_timeout: Duration::from_millis(300),
        ..allowing(&["origin.test".into()])
    };
    let (report, _) = with_proxy(settings, TestHooks::default(), |p| {
        let mut s = TcpStream::connect(p).unwrap();
        s.write_all(b"CONNECT origin.test:443 HTTP/1.1\r\nX-Slow: ")
            .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    });
    assert_eq!(report.denied[0].reason, "no complete request within 300ms");
}

#[test]
fn an_idle_tunnel_is_closed_and_the_proxy_stops_with_the_run() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let settings = ProxySettings {
        idle_timeout: Duration::from_millis(300),
        ..allowing(&[format!("quiet.test:{port}")])
    };
    let (report, _) = with_proxy(settings, hooks(&[("quiet.test", "127.0.0.1")], true), |p| {
        let mut s = TcpStream::connect(p).unwrap();
        s.write_all(format!("CONNECT quiet.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .unwrap();
        let _held = listener.accept().unwrap();
        let mut answer = String::new();
        // Returns once the proxy closes the silent tunnel.
        let _ = s.read_to_string(&mut answer);
        assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\n");
    });
    assert_eq!(report.allowed[0].connections, 1);
}

#[test]
fn the_byte_budget_cuts_connections() {
    let o = origin(vec![b'x'; 1 << 20]);
    let settings = ProxySettings {
        max_bytes: 64 * 1024,
        ..allowing(&[format!("origin.test:{}", o.port)])
    };
    let (report, _) = with_proxy(
        settings,
        hooks(&[("origin.test", "127.0.0.1")], true),
        |p| {
            let req = format!("GET http://origin.test:{}/big HTTP/1.1\r\n\r\n", o.port);
            let answer = exchange(p, req.as_bytes());
            assert!(
                answer.len() < 64 * 1024,
                "{} bytes got through",
                answer.len()
            );
        },
    );
    assert_eq!(report.limits_hit, [NetworkLimit::Bytes]);
    let t = &report.allowed[0];
    assert!(t.bytes_up + t.bytes_down <= 64 * 1024, "{t:?}");
}

#[test]
fn the_connection_budget_refuses_later_connections() {
    let o = origin(b"ok".to_vec());
    let settings = ProxySettings {
        max_connections: 3,
        ..allowing(&[format!("origin.test:{}", o.port)])
    };
    let (report, _) = with_proxy(
        settings,
        hooks(&[("origin.test", "127.0.0.1")], true),
        |p| {
            let req = format!("GET http://origin.test:{}/ HTTP/1.1\r\n\r\n", o.port);
            for i in 0..5 {
                let answer = exchange(p, req.as_bytes());
                let expected = if i < 3 {
                    "HTTP/1.1 200"
                } else {
                    "HTTP/1.1 403"
                };
                assert!(answer.starts_with(expected), "{i}: {answer}");
            }
        },
    );
    assert_eq!(report.allowed[0].connections, 3);
    assert_eq!(report.limits_hit, [NetworkLimit::Connections]);
    assert_eq!(report.denied.len(), 2);
    assert_eq!(
        report.denied[0].reason,
        "connection limit reached (3 per run)"
    );
}

#[test]
fn a_name_with_internal_and_permitted_answers_is_pinned_to_the_permitted_one() {
    let o = origin(b"pinned".to_vec());
    let settings = allowing(&[format!("mixed.test:{}", o.port)]);
    let hooks = TestHooks {
        allow_loopback: true,
        resolve: vec![(
            "mixed.test".into(),
            vec!["10.0.0.1".parse().unwrap(), "127.0.0.1".parse().unwrap()],
        )],
        trust: None,
    };
    let (report, _) = with_proxy(settings, hooks, |p| {
        let req = format!("GET http://mixed.test:{}/ HTTP/1.1\r\n\r\n", o.port);
        assert!(exchange(p, req.as_bytes()).ends_with("pinned"));
    });
    assert!(report.denied.is_empty(), "{report:?}");
    assert_eq!(report.allowed[0].connections, 1);
}

#[test]
fn connections_beyond_the_open_bound_are_refused_until_one_ends() {
    let settings = allowing(&["origin.test".into()]);
    let (report, _) = with_proxy(settings, TestHooks::default(), |p| {
        // Each holds its connection open with an unfinished request head.
        let held: Vec<TcpStream> = (0..cordon_proxy::MAX_OPEN_CONNECTIONS)
            .map(|_| {
                let mut s = TcpStream::connect(p).unwrap();
                s.write_all(b"CONNECT origin.test:443 HTTP/1.1\r\n")
                    .unwrap();
                s
            })
            .collect();
        let answer = exchange(p, b"CONNECT origin.test:443 HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        drop(held);
    });
    let reasons: Vec<&str> = report.denied.iter().map(|d| d.reason.as_str()).collect();
    assert!(
        reasons.contains(&"too many open connections (at most 64)"),
        "{reasons:?}"
    );
}

/// The test hooks must never reach a binary built for use: cargo's normal (non-test) build of
/// the CLI resolves `cordon-proxy` without the `test-hooks` feature.
#[test]
fn the_cli_built_for_use_has_no_test_hooks() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tree = |edges: &str| {
        let out = std::process::Command::new(&cargo)
            .args([
                "tree",
                "--offline",
                "-p",
                "cordon",
                "-i",
                "cordon-proxy",
                "-e",
                edges,
            ])
            .current_dir(&workspace)
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let normal = tree("normal,features");
    assert!(
        normal.contains("cordon-proxy feature \"default\""),
        "{normal}"
    );
    assert!(!normal.contains("test-hooks"), "{normal}");
    // ... while the tests' build has them (so this check checks something).
    assert!(tree("normal,dev,features").contains("test-hooks"));
}

#[test]
fn a_pipelined_request_for_another_host_never_leaves_the_allowed_connection() {
    let allowed = origin(b"allowed".to_vec());
    let other = origin(b"other".to_vec());
    let settings = allowing(&[format!("origin.test:{}", allowed.port)]);
    let names = [("origin.test", "127.0.0.1"), ("other.test", "127.0.0.1")];
    let (report, _) = with_proxy(settings, hooks(&names, true), |p| {
        let req = format!(
            "GET http://origin.test:{0}/a HTTP/1.1\r\n\r\nGET http://other.test:{1}/b HTTP/1.1\r\nHost: other.test:{1}\r\n\r\n",
            allowed.port, other.port
        );
        let answer = exchange(p, req.as_bytes());
        assert!(answer.ends_with("allowed"), "{answer}");
    });
    assert!(
        other.seen.lock().unwrap().is_empty(),
        "the other host got nothing"
    );
    assert_eq!(report.allowed.len(), 1);
    assert_eq!(report.allowed[0].host, "origin.test");
}

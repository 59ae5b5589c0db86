//! The proxy of one run: receives the listening socket the sandbox helper made inside the
//! sandbox's network namespace, accepts the program's connections on it, judges each
//! request, and relays allowed ones to the address it resolved itself.

use std::io::{IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Instant;

use cordon_types::{
    DeniedConnection, HostTraffic, MAX_DENIALS_REPORTED, NetworkLimit, NetworkMode, NetworkReport,
};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};

use crate::address;
use crate::error::ProxyError;
use crate::hooks::TestHooks;
use crate::host::{self, HostName};
use crate::intercept::{self, Interception};
use crate::relay::{self, Budget};
use crate::request::{self, Ask, Refusal};
use crate::settings::{MAX_OPEN_CONNECTIONS, ProxySettings};

/// Called with every refused connection, as it happens (the terminal's notice line).
pub type Notice<'a> = &'a (dyn Fn(&DeniedConnection) + Sync);

/// A running proxy; [`ProxyHandle::finish`] stops it and returns its report.
pub struct ProxyHandle<'scope, 'env> {
    stop_w: OwnedFd,
    acceptor: ScopedJoinHandle<'scope, ()>,
    shared: Arc<Shared<'env>>,
}

/// What every thread of one proxy shares.
pub(crate) struct Shared<'env> {
    pub(crate) settings: &'env ProxySettings,
    /// The credentials and the run's authority, when the run has credentials.
    intercept: Option<&'env Interception>,
    hooks: TestHooks,
    notice: Option<Notice<'env>>,
    /// Readable (hung up) once the proxy must stop.
    pub(crate) stop: OwnedFd,
    pub(crate) bytes: AtomicU64,
    attempts: AtomicU64,
    open: AtomicUsize,
    report: Mutex<NetworkReport>,
}

/// Where the proxy's listening socket comes from.
#[derive(Debug)]
pub enum Listener {
    /// The namespace tier: the sandbox helper makes it on loopback inside the sandbox's
    /// private network namespace and sends it on this socket (`SCM_RIGHTS`).
    FromSandbox(UnixStream),
    /// The landlock tier: cordon bound it on the host's loopback itself.
    Bound(TcpListener),
}

/// What a proxy serves with besides its settings.
#[derive(Default, Clone, Copy)]
pub struct Companions<'env> {
    /// Called with every refused connection, as it happens.
    pub notice: Option<Notice<'env>>,
    /// The run's credentials (with their values) and authority: CONNECTs to their hosts are
    /// intercepted. `None`: every CONNECT is a plain tunnel.
    pub intercept: Option<&'env Interception>,
}

/// Starts the proxy of one run in `scope`: it takes its listening socket from `listener`
/// (waiting for the sandbox helper's, in the namespace tier), then serves until
/// [`ProxyHandle::finish`].
pub fn start<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    settings: &'env ProxySettings,
    listener: Listener,
    companions: Companions<'env>,
) -> Result<ProxyHandle<'scope, 'env>, ProxyError> {
    start_with_hooks(scope, settings, listener, companions, TestHooks::from_env())
}

/// [`start`] with explicit test hooks (test builds only).
#[cfg(feature = "test-hooks")]
pub fn start_for_tests<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    settings: &'env ProxySettings,
    listener: Listener,
    companions: Companions<'env>,
    hooks: TestHooks,
) -> Result<ProxyHandle<'scope, 'env>, ProxyError> {
    start_with_hooks(scope, settings, listener, companions, hooks)
}

fn start_with_hooks<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    settings: &'env ProxySettings,
    listener: Listener,
    companions: Companions<'env>,
    hooks: TestHooks,
) -> Result<ProxyHandle<'scope, 'env>, ProxyError> {
    let (stop_r, stop_w) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| ProxyError {
            what: "create its stop pipe",
            source: e.into(),
        })?;
    let shared = Arc::new(Shared {
        settings,
        intercept: companions.intercept,
        hooks,
        notice: companions.notice,
        stop: stop_r,
        bytes: AtomicU64::new(0),
        attempts: AtomicU64::new(0),
        open: AtomicUsize::new(0),
        report: Mutex::new(NetworkReport {
            mode: NetworkMode::Allowlist,
            allow: settings.allow.entries(),
            ..NetworkReport::default()
        }),
    });
    let for_thread = Arc::clone(&shared);
    let acceptor = std::thread::Builder::new()
        .name("cordon-proxy".into())
        .spawn_scoped(scope, move || {
            let listener = match listener {
                Listener::FromSandbox(control) => receive_listener(&control, &for_thread),
                Listener::Bound(listener) => listener.set_nonblocking(true).ok().map(|()| listener),
            };
            if let Some(listener) = listener {
                serve(scope, &for_thread, &listener);
            }
        })
        .map_err(|e| ProxyError {
            what: "start its thread",
            source: e,
        })?;
    Ok(ProxyHandle {
        stop_w,
        acceptor,
        shared,
    })
}

impl ProxyHandle<'_, '_> {
    /// Stops accepting, cuts every open connection, waits for the proxy's threads and
    /// returns what the program reached and was refused.
    pub fn finish(self) -> NetworkReport {
        drop(self.stop_w);
        let _ = self.acceptor.join();
        let report = self.shared.report.lock().map(|r| r.clone());
        report.unwrap_or_default()
    }
}

/// Waits for the listening socket (or the stop, or the helper closing its end first: it
/// failed before it could make one, and the run reports that).
fn receive_listener(control: &UnixStream, shared: &Shared<'_>) -> Option<TcpListener> {
    if !wait_readable(control, &shared.stop, None) {
        return None;
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    recvmsg(
        control,
        &mut [IoSliceMut::new(&mut byte)],
        &mut cmsg,
        RecvFlags::CMSG_CLOEXEC,
    )
    .ok()?;
    let fd: OwnedFd = cmsg.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    })?;
    let listener = TcpListener::from(fd);
    listener.set_nonblocking(true).ok()?;
    Some(listener)
}

/// Accepts until the stop; each connection in its own thread, joined before returning.
fn serve<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    shared: &Arc<Shared<'env>>,
    listener: &TcpListener,
) {
    let mut workers: Vec<ScopedJoinHandle<'scope, ()>> = Vec::new();
    while wait_readable(listener, &shared.stop, None) {
        let Ok((client, _)) = listener.accept() else {
            continue;
        };
        workers.retain(|w| !w.is_finished());
        let attempt = shared.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        let max = shared.settings.max_connections;
        if attempt > max {
            shared.limit(NetworkLimit::Connections);
            let reason = format!("connection limit reached ({max} per run)");
            refuse(shared, &client, None, None, &reason, 403);
            continue;
        }
        if shared.open.load(Ordering::Relaxed) >= MAX_OPEN_CONNECTIONS {
            let reason = format!("too many open connections (at most {MAX_OPEN_CONNECTIONS})");
            refuse(shared, &client, None, None, &reason, 503);
            continue;
        }
        shared.open.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("cordon-proxy-conn".into())
            .spawn_scoped(scope, move || {
                handle(&shared, client);
                shared.open.fetch_sub(1, Ordering::Relaxed);
            });
        if let Ok(worker) = spawned {
            workers.push(worker);
        }
    }
    for worker in workers {
        let _ = worker.join();
    }
}

/// Serves one connection from the program.
fn handle(shared: &Shared<'_>, mut client: TcpStream) {
    let settings = shared.settings;
    let _ = client.set_nonblocking(false);
    let _ = client.set_nodelay(true);
    let _ = client.set_write_timeout(Some(settings.idle_timeout));
    let (buf, ask, head_len) = match read_head(shared, &mut client) {
        Ok(Some(head)) => head,
        Ok(None) => return,
        Err(refusal) => {
            let (host, port) = match &refusal.authority {
                Some(a) => authority_parts(a),
                None => (None, None),
            };
            refuse(shared, &client, host.as_deref(), port, &refusal.reason, 400);
            return;
        }
    };
    let (authority, default_port, upstream_head) = match ask {
        Ask::Connect { authority } => (authority, None, Vec::new()),
        Ask::Http { authority, head } => (authority, Some(80), head),
    };
    let Some((host_text, port)) = host::split_authority(&authority, default_port) else {
        let (host, port) = authority_parts(&authority);
        let reason = "the destination is not host:port";
        refuse(shared, &client, host.as_deref(), port, reason, 400);
        return;
    };
    let name = match host::judge(host_text) {
        HostName::Name(name) => name,
        HostName::Literal => {
            let reason = "an IP address, not a host name (the allowlist names hosts)";
            refuse(shared, &client, Some(host_text), Some(port), reason, 403);
            return;
        }
        HostName::Invalid => {
            let reason = "not a host name";
            refuse(shared, &client, Some(host_text), Some(port), reason, 400);
            return;
        }
    };
    // Judged (lowercase) for the decision, recorded as the program wrote it: a secret spelled
    // into a host name must stay recognisable to the redaction of the result.
    let recorded = host::shown(host_text.strip_suffix('.').unwrap_or(host_text));
    if !settings.allow.allows(&name, port) {
        let reason = "not in the allowlist";
        refuse(shared, &client, Some(&recorded), Some(port), reason, 403);
        return;
    }
    let mut upstream = match connect(shared, &name, port) {
        Ok(stream) => stream,
        Err((reason, status)) => {
            refuse(
                shared,
                &client,
                Some(&recorded),
                Some(port),
                &reason,
                status,
            );
            return;
        }
    };
    let recorded_name = recorded;
    let credentials = shared
        .intercept
        .map(|ix| ix.for_host(&name, port))
        .unwrap_or_default();
    let credential = credentials.first().map(|c| c.rule.name.clone());
    shared.traffic(&recorded_name, port, |t| {
        t.connections += 1;
        t.credential.clone_from(&credential);
    });
    let is_connect = upstream_head.is_empty();
    if let (true, Some(ix), false) = (is_connect, shared.intercept, credentials.is_empty()) {
        intercepted(
            shared,
            ix,
            &client,
            &upstream,
            (&name, &recorded_name, port),
            credentials,
        );
        return;
    }
    let name = recorded_name;
    if !is_connect {
        shared.traffic(&name, port, |t| t.requests += 1);
    }
    if is_connect
        && client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_err()
    {
        return;
    }
    let mut first = upstream_head;
    first.extend_from_slice(&buf[head_len..]);
    let _ = upstream.set_nodelay(true);
    let _ = upstream.set_write_timeout(Some(settings.idle_timeout));
    let budget = Budget { shared };
    let mut moved = relay::Moved::default();
    if !first.is_empty() {
        let granted = budget.take(first.len());
        let sent = upstream.write_all(&first[..granted]).is_ok();
        if !sent || granted < first.len() {
            shared.traffic(&name, port, |t| t.bytes_up += granted as u64);
            return;
        }
        moved.up += granted as u64;
    }
    relay::relay(&budget, &client, &upstream, &mut moved);
    shared.traffic(&name, port, |t| {
        t.bytes_up += moved.up;
        t.bytes_down += moved.down;
    });
}

/// Serves a CONNECT to a credential host: TLS terminated with the run's authority, the
/// credential added, the traffic accounted. `names`: the judged name, the name as recorded,
/// the port.
fn intercepted(
    shared: &Shared<'_>,
    ix: &Interception,
    client: &TcpStream,
    upstream: &TcpStream,
    (name, recorded, port): (&str, &str, u16),
    credentials: Vec<&crate::credential::HeldCredential>,
) {
    let budget = Budget { shared };
    let done = match intercept::intercept(ix, &budget, client, upstream, name, credentials) {
        Ok(done) => done,
        Err((refused, done)) => {
            let reason = match refused {
                intercept::Refused::Server(why) => {
                    Some((format!("the server's TLS failed ({why})"), 502))
                }
                intercept::Refused::Program(why) => Some((
                    format!(
                        "the program refused the run's certificate for this credential host ({why}): does it trust $SSL_CERT_FILE?"
                    ),
                    0,
                )),
                intercept::Refused::Gone => None,
            };
            if let Some((reason, status)) = reason {
                refuse(shared, client, Some(recorded), Some(port), &reason, status);
            }
            done
        }
    };
    shared.traffic(recorded, port, |t| {
        t.bytes_up += done.moved.up;
        t.bytes_down += done.moved.down;
        t.requests += done.requests;
        t.credential_requests += done.requests;
    });
}

/// Reads a complete request head within the head timeout. `Ok(None)`: the program closed
/// the connection, or the proxy is stopping.
fn read_head(
    shared: &Shared<'_>,
    client: &mut TcpStream,
) -> Result<Option<(Vec<u8>, Ask, usize)>, Refusal> {
    let deadline = Instant::now() + shared.settings.head_timeout;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Refusal {
                authority: None,
                reason: format!(
                    "no complete request within {:?}",
                    shared.settings.head_timeout
                ),
            });
        }
        if !wait_readable(&*client, &shared.stop, Some(left)) {
            if Instant::now() < deadline {
                // The proxy is stopping.
                return Ok(None);
            }
            continue;
        }
        let room = request::MAX_HEAD_BYTES - buf.len().min(request::MAX_HEAD_BYTES);
        let want = room.clamp(1, chunk.len());
        let n = match client.read(&mut chunk[..want]) {
            Ok(0) | Err(_) => return Ok(None),
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some((ask, len)) = request::parse(&buf)? {
            return Ok(Some((buf, ask, len)));
        }
    }
}

/// Resolves `name` (or takes a test's answer), keeps the addresses a program may reach and
/// connects to the first that answers: the connection is pinned to an address checked here.
fn connect(shared: &Shared<'_>, name: &str, port: u16) -> Result<TcpStream, (String, u16)> {
    let ips: Vec<IpAddr> = match shared.hooks.resolved(name) {
        Some(ips) => ips.to_vec(),
        None => (name, port)
            .to_socket_addrs()
            .map_err(|e| (format!("cannot resolve the name ({e})"), 502))?
            .map(|a| a.ip())
            .collect(),
    };
    let mut refused = None;
    let mut usable = Vec::new();
    for ip in ips {
        match address::refusal(ip) {
            Some(_) if shared.hooks.permits(ip) => usable.push(ip),
            Some(why) => refused = refused.or(Some(format!("resolves to {why}: {ip}"))),
            None => usable.push(ip),
        }
    }
    if usable.is_empty() {
        let reason = refused.unwrap_or_else(|| "the name has no address".into());
        return Err((reason, 403));
    }
    let mut last = None;
    for ip in usable {
        match TcpStream::connect_timeout(
            &SocketAddr::new(ip, port),
            shared.settings.connect_timeout,
        ) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    let e = last.map_or_else(String::new, |e| e.to_string());
    Err((format!("cannot connect ({e})"), 502))
}

/// Records a refusal, tells the caller's notice, and answers the program with `status`
/// (0: no answer, it was answered already).
fn refuse(
    shared: &Shared<'_>,
    client: &TcpStream,
    host: Option<&str>,
    port: Option<u16>,
    reason: &str,
    status: u16,
) {
    let denied = DeniedConnection {
        host: host.map(host::shown).unwrap_or_default(),
        port,
        reason: reason.to_owned(),
    };
    if let Some(notice) = shared.notice {
        notice(&denied);
    }
    let text = format!("cordon: network denied {}: {reason}\n", describe(&denied));
    if let Ok(mut report) = shared.report.lock() {
        if report.denied.len() < MAX_DENIALS_REPORTED {
            report.denied.push(denied);
        } else {
            report.denied_omitted += 1;
        }
    }
    if status == 0 {
        let _ = client.shutdown(std::net::Shutdown::Both);
        return;
    }
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        503 => "Service Unavailable",
        _ => "Bad Gateway",
    };
    let answer = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = client.set_nonblocking(true);
    let _ = (&*client).write_all(answer.as_bytes());
    let _ = client.shutdown(std::net::Shutdown::Both);
}

/// `host:port` of a refusal, as shown in notices.
pub fn describe(denied: &DeniedConnection) -> String {
    let host = if denied.host.is_empty() {
        "(no destination)"
    } else {
        &denied.host
    };
    match denied.port {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

fn authority_parts(authority: &str) -> (Option<String>, Option<u16>) {
    match host::split_authority(authority, None) {
        Some((h, p)) => (Some(h.to_owned()), Some(p)),
        None => (Some(authority.to_owned()), None),
    }
}

impl Shared<'_> {
    /// Updates (creating on first use) the traffic entry of `host:port`.
    fn traffic(&self, host: &str, port: u16, update: impl FnOnce(&mut HostTraffic)) {
        let Ok(mut report) = self.report.lock() else {
            return;
        };
        let at = match report
            .allowed
            .iter()
            .position(|t| t.host == host && t.port == port)
        {
            Some(at) => at,
            None => {
                report.allowed.push(HostTraffic {
                    host: host.to_owned(),
                    port,
                    connections: 0,
                    bytes_up: 0,
                    bytes_down: 0,
                    credential: None,
                    requests: 0,
                    credential_requests: 0,
                });
                report.allowed.len() - 1
            }
        };
        update(&mut report.allowed[at]);
    }

    /// Records that a bound was reached (once).
    pub(crate) fn limit(&self, limit: NetworkLimit) {
        if let Ok(mut report) = self.report.lock()
            && !report.limits_hit.contains(&limit)
        {
            report.limits_hit.push(limit);
        }
    }
}

/// Waits until `fd` is readable (or hung up): `false` when the proxy is stopping or the
/// timeout passed first.
pub(crate) fn wait_readable(
    fd: impl AsFd,
    stop: &OwnedFd,
    timeout: Option<std::time::Duration>,
) -> bool {
    let timeout = timeout.map(|t| Timespec {
        tv_sec: t.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: t.subsec_nanos().into(),
    });
    loop {
        let mut fds = [
            PollFd::new(&fd, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
        ];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) => return false,
            Ok(_) => return fds[1].revents().is_empty(),
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

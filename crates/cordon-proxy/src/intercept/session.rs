//! One intercepted connection: TLS with the real server first (verified; a server that fails
//! is refused before the program is answered), then TLS with the program under the run's
//! authority, then both relayed: requests rewritten on the way out, the credential hidden on
//! the way in, within the run's byte budget and idle timeout.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, ServerConnection};

use super::Interception;
use super::mask::{HOLD, Masker};
use super::rewrite::Rewriter;
use crate::credential::HeldCredential;
use crate::relay::{Budget, Moved};

/// What an intercepted connection did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Intercepted {
    /// Bytes on the wire to and from the server.
    pub(crate) moved: Moved,
    /// Requests that went out, each carrying the credential.
    pub(crate) requests: u64,
}

/// Why an intercepted connection could not start.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The server's TLS failed (an untrusted certificate, a wrong name, no TLS): the program
    /// has not been answered yet.
    Server(String),
    /// The program's TLS failed (it does not trust the run's authority, or went away).
    Program(String),
    /// The program could not be answered.
    Gone,
}

/// Serves one CONNECT to a credential host over `upstream` (connected, not yet answered).
pub(crate) fn intercept(
    ix: &Interception,
    budget: &Budget<'_, '_>,
    client: &TcpStream,
    upstream: &TcpStream,
    host: &str,
    credentials: Vec<&HeldCredential>,
) -> Result<Intercepted, (Refused, Intercepted)> {
    let settings = budget.shared.settings;
    let mut done = Intercepted::default();
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| (Refused::Server(e.to_string()), done))?;
    let mut server = ClientConnection::new(ix.client.clone(), name)
        .map_err(|e| (Refused::Server(e.to_string()), done))?;
    if let Err(e) = handshake(&mut server, upstream, settings.connect_timeout, &mut done) {
        return Err((Refused::Server(e), done));
    }
    if (&*client)
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return Err((Refused::Gone, done));
    }
    let config = ix
        .authority
        .server_config(host, &ix.provider)
        .map_err(|e| (Refused::Program(e.to_string()), done))?;
    let mut program =
        ServerConnection::new(config).map_err(|e| (Refused::Program(e.to_string()), done))?;
    let mut ignored = Intercepted::default();
    if let Err(e) = handshake(&mut program, client, settings.head_timeout, &mut ignored) {
        return Err((Refused::Program(e), done));
    }
    server.set_buffer_limit(None);
    program.set_buffer_limit(None);
    let mut relay = Relay {
        budget,
        client,
        upstream,
        program,
        server,
        rewriter: Rewriter::new(credentials),
        masker: Masker::new(ix.needles.as_ref()),
        done,
    };
    relay.run();
    relay.done.requests = relay.rewriter.requests;
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    Ok(relay.done)
}

/// Completes a TLS handshake on a blocking socket within `timeout`, counting the server's
/// bytes.
fn handshake<D>(
    conn: &mut rustls::ConnectionCommon<D>,
    sock: &TcpStream,
    timeout: Duration,
    done: &mut Intercepted,
) -> Result<(), String> {
    let _ = sock.set_nonblocking(false);
    let _ = sock.set_read_timeout(Some(timeout));
    let _ = sock.set_write_timeout(Some(timeout));
    let deadline = Instant::now() + timeout;
    let mut sock = sock;
    while conn.is_handshaking() {
        if Instant::now() > deadline {
            return Err(format!("no TLS handshake within {timeout:?}"));
        }
        match conn.complete_io(&mut sock) {
            Ok((read, written)) => {
                done.moved.down += read as u64;
                done.moved.up += written as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// How many bytes one turn of the relay reads from one side (as the socket has them) before
/// it writes to the other: TLS reads come 4 KiB at a time, and a poll for each would cost
/// more than the copying.
const TURN_BYTES: usize = 256 * 1024;

/// One read of one side.
enum Step {
    /// This many bytes came, and were passed on.
    Read(usize),
    /// Nothing more for now.
    Blocked,
    /// The side ended, or the connection must.
    End(Ended),
}

/// The relay of one intercepted connection.
struct Relay<'a, 'b, 'c> {
    budget: &'a Budget<'b, 'c>,
    client: &'a TcpStream,
    upstream: &'a TcpStream,
    /// TLS with the program (cordon is the server).
    program: ServerConnection,
    /// TLS with the real server (cordon is the client).
    server: ClientConnection,
    rewriter: Rewriter<'a>,
    masker: Masker<'a>,
    done: Intercepted,
}

/// Which way a read went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// More may come.
    Open,
    /// That side is done sending.
    Closed,
    /// The connection must end (an error, a malformed request, the budget).
    Abort,
}

impl Relay<'_, '_, '_> {
    fn run(&mut self) {
        let _ = self.client.set_nonblocking(true);
        let _ = self.upstream.set_nonblocking(true);
        let idle = self.budget.shared.settings.idle_timeout;
        let mut up_open = true;
        let mut upstream_hup = false;
        let mut last = Instant::now();
        let mut buf = vec![0u8; 64 * 1024];
        // What arrived with the handshakes.
        if self.drain_program(&mut buf) == Ended::Abort
            || self.drain_server(&mut buf) == Ended::Abort
        {
            return;
        }
        loop {
            if !self.flush() {
                return;
            }
            let want_up = up_open && !self.server.wants_write();
            let want_down = !self.program.wants_write();
            let flags = |read: bool, write: bool| {
                let mut f = PollFlags::empty();
                if read {
                    f |= PollFlags::IN;
                }
                if write {
                    f |= PollFlags::OUT;
                }
                f
            };
            let wait = if self.masker.holding() {
                HOLD
            } else {
                idle.saturating_sub(last.elapsed())
            };
            let timeout = Timespec {
                tv_sec: wait.as_secs().try_into().unwrap_or(i64::MAX),
                tv_nsec: wait.subsec_nanos().into(),
            };
            // A server that hung up while the program is still being served stays out of the
            // poll until its rest is wanted (its hang-up would wake every poll).
            let poll_upstream = want_down || !upstream_hup || self.server.wants_write();
            let mut fds = vec![
                PollFd::new(&self.budget.shared.stop, PollFlags::IN),
                PollFd::new(self.client, flags(want_up, self.program.wants_write())),
            ];
            if poll_upstream {
                fds.push(PollFd::new(
                    self.upstream,
                    flags(want_down, self.server.wants_write()),
                ));
            }
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) if self.masker.holding() => {
                    let mut out = Vec::new();
                    self.masker.flush(&mut out);
                    if self.program.writer().write_all(&out).is_err() {
                        return;
                    }
                    continue;
                }
                Ok(0) => return,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return,
            }
            if !fds[0].revents().is_empty() {
                return;
            }
            let ready = |fd: &PollFd<'_>| {
                fd.revents()
                    .intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR)
            };
            let hung_up =
                |fd: &PollFd<'_>| fd.revents().intersects(PollFlags::HUP | PollFlags::ERR);
            let client_ready = ready(&fds[1]);
            // The program is gone (nothing more can reach it).
            if !want_up && hung_up(&fds[1]) {
                return;
            }
            let upstream_ready = fds.get(2).is_some_and(ready);
            upstream_hup |= fds.get(2).is_some_and(hung_up);
            last = Instant::now();
            if want_up && client_ready {
                match self.read_program(&mut buf) {
                    Ended::Open => {}
                    Ended::Closed => {
                        up_open = false;
                        self.server.send_close_notify();
                    }
                    Ended::Abort => return,
                }
            }
            if want_down && upstream_ready {
                match self.read_server(&mut buf) {
                    Ended::Open => {}
                    Ended::Closed => {
                        let mut out = Vec::new();
                        self.masker.flush(&mut out);
                        let _ = self.program.writer().write_all(&out);
                        self.program.send_close_notify();
                        self.finish_program();
                        return;
                    }
                    Ended::Abort => return,
                }
            }
        }
    }

    /// Writes what TLS has to send on both sides, as far as the sockets take it; `false` when
    /// the connection must end.
    fn flush(&mut self) -> bool {
        while self.program.wants_write() {
            match self.program.write_tls(&mut &*self.client) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        while self.server.wants_write() {
            match self.server.write_tls(&mut &*self.upstream) {
                Ok(n) => {
                    let granted = self.budget.take(n);
                    self.done.moved.up += granted as u64;
                    if granted < n {
                        return false;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads what the program sent, rewritten for the server.
    fn read_program(&mut self, buf: &mut [u8]) -> Ended {
        let mut turn = 0;
        loop {
            match self.read_program_once(buf) {
                Step::Read(n) if turn + n < TURN_BYTES => turn += n,
                Step::Read(_) | Step::Blocked => return Ended::Open,
                Step::End(ended) => return ended,
            }
        }
    }

    /// One read of the program's TLS, passed on.
    fn read_program_once(&mut self, buf: &mut [u8]) -> Step {
        let (eof, n) = match self.program.read_tls(&mut &*self.client) {
            Ok(0) => (true, 0),
            Ok(n) => (false, n),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                return Step::Blocked;
            }
            Err(_) => return Step::End(Ended::Abort),
        };
        if self.program.process_new_packets().is_err() {
            let _ = self.program.write_tls(&mut &*self.client);
            return Step::End(Ended::Abort);
        }
        match self.drain_program(buf) {
            Ended::Open if eof => Step::End(Ended::Closed),
            Ended::Open => Step::Read(n),
            ended => Step::End(ended),
        }
    }

    /// Passes on what the program's TLS has decrypted (some may have come with its
    /// handshake, before the relay began).
    fn drain_program(&mut self, buf: &mut [u8]) -> Ended {
        let mut out = Vec::new();
        let mut ended = Ended::Open;
        loop {
            match self.program.reader().read(buf) {
                Ok(0) => {
                    ended = Ended::Closed;
                    break;
                }
                Ok(n) => {
                    if self.rewriter.feed(&buf[..n], &mut out).is_err() {
                        return Ended::Abort;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    ended = Ended::Closed;
                    break;
                }
            }
        }
        if !out.is_empty() && self.server.writer().write_all(&out).is_err() {
            return Ended::Abort;
        }
        ended
    }

    /// Reads what the server sent, masked for the program.
    fn read_server(&mut self, buf: &mut [u8]) -> Ended {
        let mut turn = 0;
        loop {
            match self.read_server_once(buf) {
                Step::Read(n) if turn + n < TURN_BYTES => turn += n,
                Step::Read(_) | Step::Blocked => return Ended::Open,
                Step::End(ended) => return ended,
            }
        }
    }

    /// One read of the server's TLS, masked and passed on.
    fn read_server_once(&mut self, buf: &mut [u8]) -> Step {
        let (eof, n) = match self.server.read_tls(&mut &*self.upstream) {
            Ok(0) => (true, 0),
            Ok(n) => {
                let granted = self.budget.take(n);
                self.done.moved.down += granted as u64;
                if granted < n {
                    return Step::End(Ended::Abort);
                }
                (false, n)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                return Step::Blocked;
            }
            Err(_) => return Step::End(Ended::Abort),
        };
        if self.server.process_new_packets().is_err() {
            let _ = self.server.write_tls(&mut &*self.upstream);
            return Step::End(Ended::Abort);
        }
        match self.drain_server(buf) {
            Ended::Open if eof => Step::End(Ended::Closed),
            Ended::Open => Step::Read(n),
            ended => Step::End(ended),
        }
    }

    /// Passes on what the server's TLS has decrypted.
    fn drain_server(&mut self, buf: &mut [u8]) -> Ended {
        let mut out = Vec::new();
        let mut ended = Ended::Open;
        loop {
            match self.server.reader().read(buf) {
                Ok(0) => {
                    ended = Ended::Closed;
                    break;
                }
                Ok(n) => self.masker.feed(&buf[..n], &mut out),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    ended = Ended::Closed;
                    break;
                }
            }
        }
        if !out.is_empty() && self.program.writer().write_all(&out).is_err() {
            return Ended::Abort;
        }
        ended
    }

    /// Delivers what is left for the program (the server is done), within the idle timeout.
    fn finish_program(&mut self) {
        let deadline = Instant::now() + self.budget.shared.settings.idle_timeout;
        while self.program.wants_write() && Instant::now() < deadline {
            match self.program.write_tls(&mut &*self.client) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let mut fds = [
                        PollFd::new(self.client, PollFlags::OUT),
                        PollFd::new(&self.budget.shared.stop, PollFlags::IN),
                    ];
                    let left = deadline.saturating_duration_since(Instant::now());
                    let timeout = Timespec {
                        tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
                        tv_nsec: left.subsec_nanos().into(),
                    };
                    if poll(&mut fds, Some(&timeout)).is_err() || !fds[1].revents().is_empty() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

//! A PostgreSQL outage for one test: a relay between a process under test and the test
//! cluster's Unix socket that can be cut (every open connection closed, every new one hung up
//! on at once, as a stopped server does) and mended, without stopping the cluster the other
//! tests share.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The name of the socket file a PostgreSQL client looks for in its `host` directory.
const SOCKET: &str = ".s.PGSQL.5432";

/// A relay in a directory of its own; [`Relay::url`] reaches the database through it.
pub struct Relay {
    /// The database URL through the relay.
    pub url: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<UnixStream>>>,
    stop: Arc<AtomicBool>,
    socket: PathBuf,
}

impl Relay {
    /// A relay to the database of `url` (a `?host=DIR` Unix-socket URL, as `scripts/test`
    /// makes) listening in `dir`.
    pub fn start(url: &str, dir: &Path) -> Relay {
        let (base, query) = url.split_once('?').expect("a URL with ?host=DIR");
        let target_dir = query
            .split('&')
            .find_map(|p| p.strip_prefix("host="))
            .expect("a Unix-socket URL (host=DIR)");
        let target = Path::new(target_dir).join(SOCKET);
        let socket = dir.join(SOCKET);
        let listener = UnixListener::bind(&socket).expect("the relay binds");
        let relay = Relay {
            url: format!("{base}?host={}", dir.display()),
            cut: Arc::new(AtomicBool::new(false)),
            open: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
            socket,
        };
        let (cut, open, stop) = (
            Arc::clone(&relay.cut),
            Arc::clone(&relay.open),
            Arc::clone(&relay.stop),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                if cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = UnixStream::connect(&target) else {
                    continue;
                };
                {
                    let mut open = open.lock().unwrap();
                    for s in [&client, &server] {
                        open.push(s.try_clone().unwrap());
                    }
                }
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        relay
    }

    /// Cuts the database off: open connections are closed, new ones hung up on.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Lets connections through again.
    pub fn mend(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so that it sees the stop.
        let _ = UnixStream::connect(&self.socket);
    }
}

/// Copies `from` to `to` on a thread of its own until either side closes.
fn pipe(mut from: UnixStream, mut to: UnixStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if std::io::Write::write_all(&mut to, &buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
        let _ = from.shutdown(std::net::Shutdown::Both);
    });
}

//! Where the service listens: a TCP address or a Unix socket that only the server's user may
//! connect to.

use std::path::{Path, PathBuf};

use crate::run::ServeError;

/// Where the service listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address (`127.0.0.1:7878`).
    Tcp(std::net::SocketAddr),
    /// A Unix socket (`unix:/run/cordon.sock`), created with mode 0600: only the server's
    /// user may connect. A stale socket file left by a dead server is replaced; any other
    /// file there is refused.
    Unix(PathBuf),
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(path) = text.strip_prefix("unix:") {
            let path = Path::new(path);
            if !path.is_absolute() {
                return Err(format!("{text:?}: the socket path must be absolute"));
            }
            return Ok(Listen::Unix(path.to_owned()));
        }
        text.parse()
            .map(Listen::Tcp)
            .map_err(|e| format!("{text:?} is neither HOST:PORT nor unix:/PATH ({e})"))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(addr) => write!(f, "http://{addr}"),
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

pub(crate) enum Socket {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

pub(crate) struct Bound {
    pub(crate) socket: Socket,
    pub(crate) bound: Listen,
}

pub(crate) async fn bind(listen: &Listen) -> Result<Bound, ServeError> {
    let failed = |source| ServeError::Listen {
        addr: listen.clone(),
        source,
    };
    match listen {
        Listen::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(failed)?;
            let addr = listener.local_addr().map_err(ServeError::Serve)?;
            Ok(Bound {
                socket: Socket::Tcp(listener),
                bound: Listen::Tcp(addr),
            })
        }
        Listen::Unix(path) => {
            use std::os::unix::fs::{FileTypeExt, PermissionsExt};
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_socket() => {
                    // A live server answers on it: do not steal its socket.
                    if std::os::unix::net::UnixStream::connect(path).is_ok() {
                        return Err(failed(std::io::Error::new(
                            std::io::ErrorKind::AddrInUse,
                            "another server answers on this socket",
                        )));
                    }
                    std::fs::remove_file(path).map_err(failed)?;
                }
                Ok(_) => {
                    return Err(failed(std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "a file that is not a socket is in the way",
                    )));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(failed(e)),
            }
            // Bound inside a private directory, then moved into place with mode 0600, so
            // nobody else can connect in between.
            let dir = path.parent().unwrap_or(Path::new("/"));
            let private = tempfile_dir(dir).map_err(failed)?;
            let staged = private.join("sock");
            let listener = tokio::net::UnixListener::bind(&staged).map_err(failed)?;
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
                .map_err(failed)?;
            std::fs::rename(&staged, path).map_err(failed)?;
            let _ = std::fs::remove_dir(&private);
            Ok(Bound {
                socket: Socket::Unix(listener),
                bound: listen.clone(),
            })
        }
    }
}

/// A new directory (mode 0700) next to the socket's place.
fn tempfile_dir(parent: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    for attempt in 0..16u32 {
        let dir = parent.join(format!(".cordon-sock-{}-{attempt}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "cannot make a private directory for the socket",
    ))
}

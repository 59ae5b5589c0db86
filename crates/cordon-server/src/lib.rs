//! The job service of cordon: `cordon serve`.
//!
//! Clients submit **jobs** over HTTP (`POST /v1/jobs`, bearer tokens bound to a project and
//! scopes), watch their live logs (`GET /v1/jobs/{id}/events`, Server-Sent Events resumable
//! with `Last-Event-ID`) and read typed results (`cordon.job/v1`). The pieces:
//!
//! - [`Policy`] (`cordon-server.toml`, or [`Policy::builtin`]): per project the allowed job
//!   types and command prefixes (deny rules win), concurrency, timeouts, daily budgets,
//!   secrets and variables; the global number of workers.
//! - [`Service`]: the decisions — authenticate, refuse by policy (403 with the rule) or
//!   budget (429 with the reset time), enqueue idempotently, cancel.
//! - The queue lives in the store ([`cordon_store::Store::claim_job`]): persistent, limits
//!   enforced at the claim, every attempt recorded, restarts recover running jobs.
//! - Workers (plain long-lived threads) run each attempt through the same crates as the CLI:
//!   `cordon-runner` for programs, `cordon-verify` for verifications, hardened `cordon-git`
//!   for clones; failures a retry may fix are retried with exponential backoff.
//! - The HTTP layer (axum on tokio) is started only by [`serve`]: the rest of the CLI never
//!   starts a runtime for it. It also serves the operator dashboard at `/` (server-rendered
//!   HTML, a login with the same tokens; an operator token — project `*`, scope `admin` —
//!   sees every project, in the API as in the dashboard).
//!
//! ```no_run
//! use cordon_server::{Policy, ServeOptions};
//!
//! let store = cordon_store::Store::open_default()?;
//! let options = ServeOptions::new(store, Policy::builtin(), "/var/lib/cordon".into());
//! cordon_server::serve(options, |addr| println!("listening on http://{addr}"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
mod api;
mod client;
mod dashboard;
mod execute;
mod http;
mod openapi;
mod policy;
mod secrets;
mod service;
mod worker;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

pub use api::{
    ApiError, ApiErrorTag, ApplyPatchInputs, CloneInputs, FromJob, JobDocument, JobFailure,
    JobList, JobListTag, JobRequest, JobRequestTag, JobTag, JobType, NetworkRequest, RunInputs,
    SessionCreateInputs, SessionExecInputs, SessionInputs, SessionRef, VerifyInputs, WireState,
};
pub use client::{Answer, Client, ClientError};
pub use execute::{Outcome, STAGE_CATEGORIES};
pub use openapi::document as openapi_document;
pub use policy::{
    Budget, DEFAULT_TOOLS, DenyRule, NetworkRule, Policy, PolicyError, ProjectPolicy, Refusal,
};
pub use secrets::{SecretValues, SecretsError};
pub use service::{RequestError, SCOPES, Service, clone_remote, create_token, token_hash};

/// The default request body bound (a patch travels in a body).
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;

/// How `cordon serve` runs.
#[derive(Debug)]
pub struct ServeOptions {
    /// The store (queue, events, tokens, audit).
    pub store: cordon_store::Store,
    /// The policy at start.
    pub policy: Policy,
    /// The policy file, re-read on SIGHUP.
    pub policy_path: Option<PathBuf>,
    /// Where clone workspaces and scratch directories live.
    pub data_dir: PathBuf,
    /// Where to listen (loopback TCP by default; port 0 picks a free one).
    pub listen: Listen,
    /// Request bodies above this many bytes are refused with 413.
    pub max_body: usize,
    /// The first retry's delay; doubled for each next one.
    pub retry_backoff: Duration,
}

impl ServeOptions {
    /// Options with the defaults: `127.0.0.1:7878`, 4 MiB bodies, 1 s first backoff.
    pub fn new(store: cordon_store::Store, policy: Policy, data_dir: PathBuf) -> Self {
        ServeOptions {
            store,
            policy,
            policy_path: None,
            data_dir,
            listen: Listen::Tcp(SocketAddr::from(([127, 0, 0, 1], 7878))),
            max_body: DEFAULT_MAX_BODY,
            retry_backoff: Duration::from_secs(1),
        }
    }
}

/// Where the service listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address (`127.0.0.1:7878`).
    Tcp(SocketAddr),
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

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The runtime could not start.
    #[error("cannot start the server's runtime")]
    Runtime(#[source] std::io::Error),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}")]
    Listen {
        /// The address.
        addr: Listen,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Recovering the previous process's jobs failed.
    #[error("cannot recover the jobs of the previous server")]
    Recover(#[source] cordon_store::StoreError),
    /// Serving failed.
    #[error("the server failed")]
    Serve(#[source] std::io::Error),
    /// The policy's secrets file is refused.
    #[error(transparent)]
    Secrets(#[from] PolicyError),
}

/// Serves until SIGTERM or SIGINT: recovers jobs a previous process left running (requeued
/// when they have attempts left, else `interrupted`), starts the workers, binds, calls
/// `ready` with where it listens (the bound port for TCP), and answers requests. SIGHUP
/// re-reads the policy file.
pub fn serve(options: ServeOptions, ready: impl FnOnce(&Listen)) -> Result<(), ServeError> {
    let secrets = options.policy.load_secrets()?;
    let recovered = options
        .store
        .recover_jobs(&worker::name())
        .map_err(ServeError::Recover)?;
    worker::log_recovered(&options.store, &recovered);
    // Scratch directories of attempts that died with the previous process.
    let _ = std::fs::remove_dir_all(options.data_dir.join("scratch"));
    let service = Arc::new(Service {
        store: options.store,
        policy: RwLock::new(Arc::new(options.policy)),
        secrets: RwLock::new(Arc::new(secrets)),
        policy_path: options.policy_path,
        data_dir: options.data_dir,
        retry_backoff: options.retry_backoff,
        running: Mutex::new(Default::default()),
        wake: (Mutex::new(0), Condvar::new()),
        shutting_down: AtomicBool::new(false),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let workers = worker::start(&service, service.policy().workers, &stop);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("cordon-serve")
        .enable_io()
        .enable_time()
        .build()
        .map_err(ServeError::Runtime)?;
    let result = runtime.block_on(async {
        let listener = bind(&options.listen).await?;
        ready(&listener.bound);
        let app = http::router(Arc::clone(&service), options.max_body);
        let reloader = Arc::clone(&service);
        tokio::spawn(async move {
            let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            else {
                return;
            };
            while hup.recv().await.is_some() {
                let service = Arc::clone(&reloader);
                let outcome = tokio::task::spawn_blocking(move || service.reload_policy()).await;
                match outcome {
                    Ok(Ok(())) => eprintln!("cordon serve: policy reloaded"),
                    Ok(Err(error)) => eprintln!("cordon serve: policy kept: {error}"),
                    Err(_) => {}
                }
            }
        });
        let stopping = Arc::clone(&service);
        let stopped = async move {
            shutdown_signal().await;
            // Running jobs go back to the queue (not cancelled), and live logs end, so
            // the graceful shutdown does not wait for long jobs or idle followers.
            stopping.shutting_down.store(true, Ordering::SeqCst);
            for handle in stopping
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
            {
                handle.cancel();
            }
        };
        let served = match listener.socket {
            Socket::Tcp(l) => axum::serve(l, app).with_graceful_shutdown(stopped).await,
            Socket::Unix(l) => axum::serve(l, app).with_graceful_shutdown(stopped).await,
        };
        if let Listen::Unix(path) = &listener.bound {
            let _ = std::fs::remove_file(path);
        }
        served.map_err(ServeError::Serve)
    });
    stop.store(true, Ordering::SeqCst);
    service.shutting_down.store(true, Ordering::SeqCst);
    for handle in service
        .running
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
    {
        handle.cancel();
    }
    service.notify();
    for worker in workers {
        let _ = worker.join();
    }
    result
}

enum Socket {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

struct Bound {
    socket: Socket,
    bound: Listen,
}

async fn bind(listen: &Listen) -> Result<Bound, ServeError> {
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

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

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
//!   starts a runtime for it.
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

mod api;
mod client;
mod execute;
mod http;
mod openapi;
mod policy;
mod service;
mod worker;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

pub use api::{
    ApiError, ApiErrorTag, ApplyPatchInputs, CloneInputs, FromJob, JobDocument, JobFailure,
    JobList, JobListTag, JobRequest, JobRequestTag, JobTag, JobType, RunInputs, VerifyInputs,
    WireState,
};
pub use client::{Answer, Client, ClientError};
pub use openapi::document as openapi_document;
pub use policy::{Budget, DEFAULT_TOOLS, DenyRule, Policy, PolicyError, ProjectPolicy, Refusal};
pub use service::{RequestError, SCOPES, Service, create_token, token_hash};

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
    /// The address to listen on (loopback by default; port 0 picks a free one).
    pub listen: SocketAddr,
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
            listen: SocketAddr::from(([127, 0, 0, 1], 7878)),
            max_body: DEFAULT_MAX_BODY,
            retry_backoff: Duration::from_secs(1),
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
        addr: SocketAddr,
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
}

/// Serves until SIGTERM or SIGINT: recovers jobs a previous process left running (requeued
/// when they have attempts left, else `interrupted`), starts the workers, binds, calls
/// `ready` with the bound address, and answers requests. SIGHUP re-reads the policy file.
pub fn serve(options: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    let recovered = options.store.recover_jobs().map_err(ServeError::Recover)?;
    for (ids, state) in [
        (&recovered.requeued, "queued"),
        (&recovered.interrupted, "interrupted"),
    ] {
        for id in ids {
            let data = serde_json::json!({"state": state, "reason": "the server stopped while the job ran"});
            let _ = options.store.append_job_event(id, "state", &data);
            if state == "interrupted" {
                let _ =
                    options
                        .store
                        .append_job_event(id, "end", &serde_json::json!({"state": state}));
            }
        }
    }
    // Scratch directories of attempts that died with the previous process.
    let _ = std::fs::remove_dir_all(options.data_dir.join("scratch"));
    let service = Arc::new(Service {
        store: options.store,
        policy: RwLock::new(Arc::new(options.policy)),
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
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|source| ServeError::Listen {
                addr: options.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(ServeError::Serve)?;
        ready(addr);
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
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
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
            })
            .await
            .map_err(ServeError::Serve)
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

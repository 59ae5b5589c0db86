//! Starting the service: `serve` (the HTTP API, the dashboard and, unless told otherwise, this
//! process's workers) and `work` (workers alone, for more machines on one shared store).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use crate::listen::{Listen, Socket, bind};
use crate::policy::{Policy, PolicyError};
use crate::service::Service;
use crate::{DEFAULT_MAX_BODY, http, worker};

/// How a process's workers claim and hold jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSettings {
    /// Jobs this process runs at once: `None` for the policy's `workers`, `Some(0)` for none
    /// (an API-only replica).
    pub slots: Option<u32>,
    /// The name the store knows this process's workers by: unique among the live processes
    /// sharing the store, and the same after a restart (the restarted process then takes its
    /// unfinished jobs back at once instead of after their leases run out).
    pub name: String,
    /// How long a claimed job stays this process's without a renewal.
    pub lease: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            slots: None,
            name: worker::default_name(),
            lease: worker::DEFAULT_LEASE,
        }
    }
}

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
    /// This process's workers.
    pub workers: WorkerSettings,
    /// More routes served beside the API and the dashboard (`/mcp`: the MCP tools).
    pub routes: Option<Routes>,
}

/// Routes another door adds to the service (`cordon-mcp`'s `/mcp`), made once the service
/// exists: they answer with the same store, policy, queue and tokens.
pub struct Routes(Box<dyn FnOnce(Arc<Service>) -> axum::Router + Send>);

impl Routes {
    /// The routes `make` makes from the service.
    pub fn new(make: impl FnOnce(Arc<Service>) -> axum::Router + Send + 'static) -> Self {
        Routes(Box::new(make))
    }
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Routes(..)")
    }
}

impl ServeOptions {
    /// Options with the defaults: `127.0.0.1:7878`, 4 MiB bodies, 1 s first backoff, the
    /// policy's number of workers named after the host, 30 s leases.
    pub fn new(store: cordon_store::Store, policy: Policy, data_dir: PathBuf) -> Self {
        ServeOptions {
            store,
            policy,
            policy_path: None,
            data_dir,
            listen: Listen::Tcp(std::net::SocketAddr::from(([127, 0, 0, 1], 7878))),
            max_body: DEFAULT_MAX_BODY,
            retry_backoff: Duration::from_secs(1),
            workers: WorkerSettings::default(),
            routes: None,
        }
    }
}

/// How `cordon worker` runs: workers without the HTTP API.
#[derive(Debug)]
pub struct WorkOptions {
    /// The store shared with the API servers (PostgreSQL for several machines).
    pub store: cordon_store::Store,
    /// The policy at start (limits are counted in the store, for every process sharing it).
    pub policy: Policy,
    /// The policy file, re-read on SIGHUP.
    pub policy_path: Option<PathBuf>,
    /// Where clone workspaces and scratch directories live.
    pub data_dir: PathBuf,
    /// The first retry's delay; doubled for each next one.
    pub retry_backoff: Duration,
    /// The workers.
    pub workers: WorkerSettings,
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
    /// Listening for the store's recorded events failed.
    #[error("cannot listen for the store's job events")]
    Observe(#[source] cordon_store::StoreError),
    /// Listing this process among the store's workers failed.
    #[error("cannot register this worker in the store")]
    Register(#[source] cordon_store::StoreError),
    /// Serving failed.
    #[error("the server failed")]
    Serve(#[source] std::io::Error),
    /// The policy's secrets file is refused.
    #[error(transparent)]
    Secrets(#[from] PolicyError),
    /// The worker settings are unusable.
    #[error("{0}")]
    Settings(String),
}

/// The shared state of a process, with the jobs its workers left running taken back.
struct Started {
    service: Arc<Service>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Held while this process's workers run under their name (released when it ends).
    _name_lock: Option<std::fs::File>,
}

/// Takes the lock of worker `name` under `data_dir` (`workers/<name>.lock`): a second process
/// on this host under the same name is refused before it touches the first one's jobs.
fn lock_name(data_dir: &std::path::Path, name: &str) -> Result<std::fs::File, ServeError> {
    let dir = data_dir.join("workers");
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{safe}.lock"));
    let file = std::fs::create_dir_all(&dir)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
        })
        .map_err(|e| ServeError::Settings(format!("cannot lock {}: {e}", path.display())))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(ServeError::Settings(format!(
            "another process on this host runs workers named {name:?} (it holds {}): give this \
             one another --name",
            path.display()
        ))),
        Err(e) => Err(ServeError::Settings(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
    }
}

fn start(
    store: cordon_store::Store,
    policy: Policy,
    policy_path: Option<PathBuf>,
    data_dir: PathBuf,
    retry_backoff: Duration,
    settings: &WorkerSettings,
    default_slots: Option<u32>,
) -> Result<Started, ServeError> {
    if settings.name.trim().is_empty() || settings.name.len() > 200 {
        return Err(ServeError::Settings(
            "the worker name must be 1 to 200 characters".into(),
        ));
    }
    if settings.lease < Duration::from_secs(1) {
        return Err(ServeError::Settings("the lease must be at least 1s".into()));
    }
    let secrets = policy.load_secrets()?;
    // An unreachable store is told once per outage, with its cause, and again when it is back.
    store.observe_outages(Arc::new(crate::logging::OutageLog));
    let live_wake = Arc::new(crate::live_wake::LiveWake::default());
    let slots = settings.slots.or(default_slots).unwrap_or(policy.workers);
    let name_lock = (slots > 0)
        .then(|| lock_name(&data_dir, &settings.name))
        .transpose()?;
    let service = Arc::new(Service {
        store,
        policy: RwLock::new(Arc::new(policy)),
        secrets: RwLock::new(Arc::new(secrets)),
        policy_path,
        data_dir,
        retry_backoff,
        running: Mutex::new(Default::default()),
        worker_name: settings.name.clone(),
        lease: settings.lease,
        wake: (Mutex::new(0), Condvar::new()),
        shutting_down: AtomicBool::new(false),
        over_budget: Mutex::new(None),
        live_streams: Default::default(),
        worker_info: (slots > 0).then(|| cordon_store::WorkerInfo {
            name: settings.name.clone(),
            host: crate::worker::default_name(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
            slots,
            lease: settings.lease,
        }),
        draining: AtomicBool::new(false),
        live_wake,
        webhook_wake: Default::default(),
    });
    if slots > 0 {
        // What this worker left running when it died: back to the queue at once.
        let recovered = service
            .store
            .recover_jobs(&settings.name)
            .map_err(ServeError::Recover)?;
        worker::log_recovered(&service, &recovered);
    }
    if let Some(info) = &service.worker_info {
        // Listed for operators (`GET /v1/workers`) from now until it stops.
        service
            .store
            .register_worker(info)
            .map_err(ServeError::Register)?;
    }
    if slots > 0 {
        // Scratch directories of attempts that died with this worker's previous process.
        let _ = std::fs::remove_dir_all(service.scratch_dir());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = worker::start(&service, slots, &stop);
    threads.push(crate::webhooks::start(&service, &stop));
    Ok(Started {
        service,
        stop,
        threads,
        _name_lock: name_lock,
    })
}

impl Started {
    /// Stops the workers: running jobs are ended and go back to the queue (the process
    /// stopped, not the client), then the threads are joined.
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        stop_running(&self.service);
        self.service.notify();
        for thread in self.threads {
            let _ = thread.join();
        }
        if let Some(info) = &self.service.worker_info
            && let Err(error) = self.service.store.remove_worker(&info.name)
        {
            eprintln!("cordon: cannot remove this worker from the store's list: {error}");
        }
    }
}

fn stop_running(service: &Service) {
    service.shutting_down.store(true, Ordering::SeqCst);
    for (_, job) in service.running_jobs() {
        job.cancel.cancel();
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ServeError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("cordon-serve")
        .enable_io()
        .enable_time()
        .build()
        .map_err(ServeError::Runtime)
}

/// Re-reads the policy on every SIGHUP.
fn reload_on_hangup(service: &Arc<Service>) {
    let reloader = Arc::clone(service);
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hup.recv().await.is_some() {
            let service = Arc::clone(&reloader);
            let outcome = tokio::task::spawn_blocking(move || service.reload_policy()).await;
            match outcome {
                Ok(Ok(())) => eprintln!("cordon: policy reloaded"),
                Ok(Err(error)) => eprintln!("cordon: policy kept: {error}"),
                Err(_) => {}
            }
        }
    });
}

/// Serves until SIGTERM or SIGINT: takes back the jobs this process's name left running
/// (requeued when they have attempts left, else `interrupted`), starts the workers (unless
/// `workers.slots` is `Some(0)`), binds, calls `ready` with where it listens (the bound port
/// for TCP), and answers requests. SIGHUP re-reads the policy file.
pub fn serve(options: ServeOptions, ready: impl FnOnce(&Listen)) -> Result<(), ServeError> {
    let runtime = runtime()?;
    // Bound first: a second server started by mistake fails here, before it takes anything
    // of the first one's.
    let listener = runtime.block_on(bind(&options.listen))?;
    let started = start(
        options.store,
        options.policy,
        options.policy_path,
        options.data_dir,
        options.retry_backoff,
        &options.workers,
        None,
    )?;
    let service = Arc::clone(&started.service);
    // Live logs wake when their job has new events (PostgreSQL: also other processes').
    service
        .store
        .observe_events(Arc::clone(&service.live_wake) as Arc<dyn cordon_store::EventObserver>)
        .map_err(ServeError::Observe)?;
    let result = runtime.block_on(async {
        ready(&listener.bound);
        let mut app = http::router(Arc::clone(&service), options.max_body);
        if let Some(Routes(make)) = options.routes {
            app = app.merge(make(Arc::clone(&service)));
        }
        reload_on_hangup(&service);
        let stopping = Arc::clone(&service);
        let stopped = async move {
            shutdown_signal().await;
            // Running jobs go back to the queue (not cancelled), and live logs end, so
            // the graceful shutdown does not wait for long jobs or idle followers.
            stop_running(&stopping);
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
    let stopping = std::time::Instant::now();
    started.stop();
    crate::logging::shutdown("serve", stopping.elapsed());
    result
}

/// Runs workers without the HTTP API until SIGTERM or SIGINT (`cordon worker`): takes back
/// what this worker's name left running, claims jobs from the shared store within the
/// cluster-wide limits, renews their leases, and ends a job whose cancel was asked for on any
/// API server. Calls `ready` with the number of slots once the workers run. SIGHUP re-reads
/// the policy file.
pub fn work(options: WorkOptions, ready: impl FnOnce(u32)) -> Result<(), ServeError> {
    let slots = options.workers.slots.unwrap_or(options.policy.workers);
    if slots == 0 {
        return Err(ServeError::Settings(
            "a worker needs at least one slot".into(),
        ));
    }
    let started = start(
        options.store,
        options.policy,
        options.policy_path,
        options.data_dir,
        options.retry_backoff,
        &options.workers,
        Some(slots),
    )?;
    let service = Arc::clone(&started.service);
    let runtime = runtime()?;
    runtime.block_on(async {
        reload_on_hangup(&service);
        ready(slots);
        tokio::select! {
            () = shutdown_signal() => {}
            () = drained(&service) => {
                eprintln!("cordon: drained: the running jobs ended; stopping");
            }
        }
    });
    let stopping = std::time::Instant::now();
    started.stop();
    crate::logging::shutdown("worker", stopping.elapsed());
    Ok(())
}

/// Ends once this worker was asked to drain and runs no job any more.
async fn drained(service: &Service) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if service.draining.load(Ordering::SeqCst) && service.running_jobs().is_empty() {
            return;
        }
    }
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

//! What `cordon serve` and `cordon worker` log, on stderr, through `tracing`: one line per
//! HTTP request (method, path, status, milliseconds, project), one when a job's attempt starts
//! and one when it ends (job, project, type, attempt, outcome, milliseconds), and one at
//! shutdown; as text or as JSON lines ([`LogFormat`]).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

/// How the log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One human-readable line per event (`2026-…Z INFO request method=GET path=/healthz …`).
    #[default]
    Text,
    /// One JSON object per line (`{"timestamp":…,"level":"INFO","fields":{…}}`).
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("unknown log format {other:?} (text or json)")),
        }
    }
}

/// Sends this process's log lines to stderr in `format` (the first call wins; later ones, and
/// a process that has a subscriber already, change nothing).
pub fn init_logging(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

tokio::task_local! {
    /// The project of the request being answered, once its token is known.
    static REQUEST_PROJECT: RefCell<Option<String>>;
}

/// Notes the project the request being answered acts for (its token's), for its log line.
pub(crate) fn note_project(project: &str) {
    let _ = REQUEST_PROJECT.try_with(|p| *p.borrow_mut() = Some(project.to_owned()));
}

/// The middleware that logs each request once its answer is ready (for a live log: when the
/// stream starts).
pub(crate) async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    // The path without its query (cursors, filters: nothing a log needs).
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let (response, project) = REQUEST_PROJECT
        .scope(RefCell::new(None), async move {
            let response = next.run(request).await;
            let project = REQUEST_PROJECT.with(|p| p.borrow().clone());
            (response, project)
        })
        .await;
    tracing::info!(
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        ms = millis(started.elapsed()),
        project = project.as_deref().unwrap_or("-"),
        "request"
    );
    response
}

/// A job's attempt starts on `worker`.
pub(crate) fn job_started(job: &cordon_store::JobRow, worker: &str) {
    tracing::info!(
        job = %job.id,
        project = %job.project,
        job_type = %job.job_type,
        attempt = job.attempt,
        worker = worker,
        "job started"
    );
}

/// A job's attempt ended with `outcome` after `took`.
pub(crate) fn job_ended(job: &cordon_store::JobRow, outcome: &crate::Outcome, took: Duration) {
    tracing::info!(
        job = %job.id,
        project = %job.project,
        job_type = %job.job_type,
        attempt = job.attempt,
        state = outcome.state.as_str(),
        failure = outcome.failure.as_ref().map_or("-", |f| f.category.as_str()),
        ms = millis(took),
        "job ended"
    );
}

/// The process stops (`what`: `serve` or `worker`).
pub(crate) fn shutdown(what: &str, took: Duration) {
    tracing::info!(process = what, ms = millis(took), "shutdown");
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Tells the server's log when the store stops answering (once per outage, with the whole
/// cause) and when it answers again.
#[derive(Debug, Default)]
pub(crate) struct OutageLog;

impl cordon_store::OutageObserver for OutageLog {
    fn failing(&self, error: &cordon_store::StoreError) {
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text.push_str(&format!("\n  caused by: {cause}"));
            source = cause.source();
        }
        eprintln!("cordon: the store does not answer (told once until it is back): {text}");
    }

    fn recovered(&self, down: Duration, failures: u64) {
        eprintln!(
            "cordon: the store answers again after {:.1}s ({failures} operations failed meanwhile)",
            down.as_secs_f64()
        );
    }
}

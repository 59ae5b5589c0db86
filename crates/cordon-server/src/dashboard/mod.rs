//! The operator dashboard, served by `cordon serve` at `/`: what is queued and running per
//! project, why a job failed (stage timeline, findings, output tails), a running job's live
//! log, budgets, and the review sessions on this host.
//!
//! Server-rendered HTML (maud: compile-time templates that escape every value), one small
//! hand-written script for the live parts (polling the jobs table, the live log over SSE),
//! one stylesheet; all embedded in the binary, nothing fetched from elsewhere. People log in
//! with an API token ([`auth`]); the dashboard shows what that token may see through the API
//! (a project token its project, an operator token every project), redacted as stored.

mod assets;
mod auth;
mod error;
mod job_page;
mod job_view;
mod jobs_page;
mod layout;
mod projects_page;
mod sessions_page;
mod timeline;
mod workers_page;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::middleware;
use axum::response::Response;
use axum::routing::{get, post};

use crate::service::Service;

/// What the dashboard's handlers share.
pub(crate) struct Dashboard {
    /// The job service (store, policy, cancel).
    service: Arc<Service>,
    /// Who is logged in.
    logins: auth::Logins,
    /// The review sessions under this server's `CORDON_HOME` (`None`: no home is known).
    sessions: Option<cordon_session::Sessions>,
}

/// The dashboard's routes.
pub(crate) fn router(service: Arc<Service>) -> Router {
    let state = Arc::new(Dashboard {
        service,
        logins: auth::Logins::default(),
        sessions: cordon_session::Sessions::from_env().ok(),
    });
    Router::new()
        .route("/", get(jobs_page::page))
        .route("/fragments/jobs", get(jobs_page::fragment))
        .route("/jobs/{id}", get(job_page::page))
        .route("/jobs/{id}/summary", get(job_page::summary))
        .route("/jobs/{id}/candidates/{session}", get(job_page::candidate))
        .route("/jobs/{id}/live", get(job_page::live))
        .route("/jobs/{id}/cancel", post(job_page::cancel))
        .route("/jobs/{id}/rerun", post(job_page::rerun))
        .route("/jobs/{id}/download/{file}", get(job_page::download))
        .route("/projects", get(projects_page::page))
        .route("/sessions", get(sessions_page::page))
        .route("/workers", get(workers_page::page))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/assets/{file}", get(assets::serve))
        .layer(middleware::map_response(security_headers))
        .with_state(state)
}

/// The policy every dashboard answer carries: scripts, styles and connections from this
/// origin only (no inline script or style), no framing, no plug-ins, forms post here only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

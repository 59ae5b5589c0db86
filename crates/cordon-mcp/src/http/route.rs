//! The routes of `/mcp`: rmcp's Streamable HTTP service over [`Jobs`], behind a check of
//! the bearer token on every request.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cordon_server::{RequestError, Service};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::jobs::Jobs;
use crate::server::{Backend, CordonMcp};

/// The routes of `/mcp`, for [`cordon_server::ServeOptions::routes`].
pub fn routes() -> cordon_server::Routes {
    cordon_server::Routes::new(router)
}

/// `/mcp` over `service`: every request needs a live bearer token (401 otherwise).
pub fn router(service: Arc<Service>) -> axum::Router {
    // Every request carries a token the service checks, so a page the browser was tricked
    // into (DNS rebinding) gets nowhere: the Host check is the tokens' to do, and the
    // service may listen on any address.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let backend: Arc<dyn Backend> = Arc::new(Jobs::new(Arc::clone(&service)));
    let mcp = StreamableHttpService::new(
        move || Ok(CordonMcp::new(Arc::clone(&backend))),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(service, require_token))
}

/// Answers 401 (with the service's error document) to a request without a live token.
async fn require_token(
    State(service): State<Arc<Service>>,
    request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let checked =
        tokio::task::spawn_blocking(move || service.authenticate(header.as_deref())).await;
    if matches!(checked, Ok(Ok(_))) {
        return next.run(request).await;
    }
    let body = cordon_types::ApiError {
        schema: cordon_types::ApiErrorTag,
        error: "unauthorized".into(),
        message: RequestError::Unauthorized.to_string(),
        rule: None,
        resets_at: None,
        job: None,
    };
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        axum::Json(body),
    )
        .into_response()
}

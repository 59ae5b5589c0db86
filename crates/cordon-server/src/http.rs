//! The HTTP layer (axum): routes, authentication, error mapping, live logs over SSE. Every
//! store call runs on a blocking thread (the store blocks).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cordon_store::{JobFilter, JobId, JobState, TokenRow};
use serde::Deserialize;

use crate::api::{ApiError, ApiErrorTag, JobDocument, JobList, JobListTag, JobRequest};
use crate::service::{RequestError, Service, require, token_hash};

/// The service's routes, with request bodies bounded to `max_body` bytes (413 beyond), and
/// the dashboard's (`/`, `/jobs/…`, `/projects`, `/sessions`, `/login`, `/assets/…`).
pub fn router(service: Arc<Service>, max_body: usize) -> Router {
    let dashboard = crate::dashboard::router(Arc::clone(&service));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/v1/jobs", post(submit).get(list))
        .route("/v1/jobs/{id}", get(show))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/jobs/{id}/rerun", post(rerun))
        .route("/v1/jobs/{id}/events", get(events))
        .route("/v1/jobs/{id}/transcript", get(transcript))
        .route("/v1/jobs/{id}/attempts", get(crate::ops_routes::attempts))
        .route(
            "/v1/jobs/{id}/deliveries",
            get(crate::ops_routes::deliveries),
        )
        .route("/v1/workers", get(crate::ops_routes::workers))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::map_response(
            move |r: Response| async move { too_large_document(r, max_body) },
        ))
        .with_state(service)
        .merge(dashboard)
        .layer(axum::middleware::from_fn(crate::logging::log_request))
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            RequestError::Unauthorized | RequestError::TokenRefused(_) => {
                (StatusCode::UNAUTHORIZED, "unauthorized")
            }
            RequestError::Scope(_) => (StatusCode::FORBIDDEN, "forbidden"),
            RequestError::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            RequestError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            RequestError::Policy { .. } => (StatusCode::FORBIDDEN, "policy"),
            RequestError::Conflict { .. } => (StatusCode::CONFLICT, "conflict"),
            RequestError::Budget { .. } => (StatusCode::TOO_MANY_REQUESTS, "budget"),
            RequestError::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "busy"),
            RequestError::Store(error) if error.is_unavailable() => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            RequestError::Store(_) | RequestError::Internal => {
                (StatusCode::INTERNAL_SERVER_ERROR, "internal")
            }
        };
        let body = ApiError {
            schema: ApiErrorTag,
            error: code.into(),
            message: match &self {
                RequestError::Store(error) if error.is_unavailable() => {
                    "the job store does not answer (the server's log says why); try again shortly"
                        .into()
                }
                _ => self.to_string(),
            },
            rule: match &self {
                RequestError::Policy { rule, .. } => Some(rule.clone()),
                _ => None,
            },
            resets_at: match &self {
                RequestError::Budget { resets_at_ms } => Some(
                    humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH
                            + Duration::from_millis(u64::try_from(*resets_at_ms).unwrap_or(0)),
                    )
                    .to_string(),
                ),
                _ => None,
            },
            job: match &self {
                RequestError::Conflict { job, .. } => Some(job.clone()),
                _ => None,
            },
        };
        let retry_after = match &self {
            RequestError::Budget { resets_at_ms } => Some(seconds_until(*resets_at_ms)),
            RequestError::Busy(_) => Some(BUSY_RETRY_AFTER_SECS),
            RequestError::Store(error) if error.is_unavailable() => Some(BUSY_RETRY_AFTER_SECS),
            _ => None,
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// A `413` of the body limit as the error document (axum's own is plain text), like every
/// other refusal of the API.
fn too_large_document(response: Response, max_body: usize) -> Response {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE || json {
        return response;
    }
    let body = ApiError {
        schema: ApiErrorTag,
        error: "too_large".into(),
        message: format!(
            "the request body is larger than the server takes ({max_body} bytes: cordon serve \
             --max-body)"
        ),
        rule: None,
        resets_at: None,
        job: None,
    };
    (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(body)).into_response()
}

/// The `Retry-After` of a `busy` answer (a full queue, too many live logs), in seconds: when
/// a place frees is not known, so clients look again soon.
const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// Whole seconds from now until `at_ms` (Unix epoch ms), at least 1: a `budget` answer's
/// `Retry-After`.
fn seconds_until(at_ms: i64) -> u64 {
    let left = at_ms.saturating_sub(crate::service::now_ms()).max(0);
    u64::try_from(left).unwrap_or(0).div_ceil(1000).max(1)
}

/// How long `/readyz` waits for the store to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Readiness (`/readyz`): 200 while the store answers within [`READY_TIMEOUT`], 503 while it
/// does not (the cause goes to the server's log, once per outage). `/healthz` is liveness:
/// it answers as long as the process serves HTTP.
async fn readyz(State(service): State<Arc<Service>>) -> Response {
    let pinged = tokio::task::spawn_blocking(move || service.store.ping(READY_TIMEOUT)).await;
    match pinged {
        Ok(Ok(())) => "ready\n".into_response(),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the store does not answer (the server's log says why)\n",
        )
            .into_response(),
    }
}

/// Runs `f` on a blocking thread.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RequestError> + Send + 'static,
) -> Result<T, RequestError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|_| {
        // A panic's text stays in the server's log, not in the answer.
        Err(RequestError::Internal)
    })
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

pub(crate) async fn authenticate(
    service: &Arc<Service>,
    headers: &HeaderMap,
) -> Result<TokenRow, RequestError> {
    let service = Arc::clone(service);
    let header = bearer(headers);
    let token = blocking(move || service.authenticate(header.as_deref())).await?;
    crate::logging::note_project(&token.project);
    Ok(token)
}

async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::document(),
    )
}

async fn submit(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, RequestError> {
    let token = authenticate(&service, &headers).await?;
    let request: JobRequest = serde_json::from_slice(&body)
        .map_err(|e| RequestError::BadRequest(format!("invalid job request: {e}")))?;
    let (job, created) = blocking(move || service.submit(&token, &request)).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(JobDocument::from(&job))).into_response())
}

async fn show(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<axum::Json<JobDocument>, RequestError> {
    let token = authenticate(&service, &headers).await?;
    let (job, waiting) = blocking(move || {
        let job = service.visible_job(&token, &id)?;
        let waiting = service.waiting_reason(&job)?;
        Ok((job, waiting))
    })
    .await?;
    Ok(axum::Json(JobDocument {
        waiting,
        ..JobDocument::from(&job)
    }))
}

/// The query of `GET /v1/jobs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    project: Option<String>,
    state: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn list(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::Json<JobList>, RequestError> {
    let Query(query) = query.map_err(|e| RequestError::BadRequest(e.body_text()))?;
    let token = authenticate(&service, &headers).await?;
    require(&token, "read")?;
    let state = query
        .state
        .map(|s| s.parse::<JobState>().map_err(RequestError::BadRequest))
        .transpose()?;
    let before = query
        .cursor
        .map(|c| {
            c.split_once('.')
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.parse::<JobId>().ok()?)))
                .map(|(at, id)| (at, id.to_string()))
                .ok_or_else(|| RequestError::BadRequest(format!("cursor {c:?} is invalid")))
        })
        .transpose()?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(RequestError::BadRequest(format!(
            "limit {limit} is not within 1..=500"
        )));
    }
    // Another project's jobs are invisible, not forbidden; an operator token sees them all.
    let Some(projects) = crate::access::listed_projects(&token, query.project.as_deref()) else {
        return Ok(axum::Json(JobList {
            schema: JobListTag,
            jobs: Vec::new(),
            next_cursor: None,
        }));
    };
    let filter = JobFilter {
        projects,
        state,
        before,
        limit,
    };
    let jobs = blocking(move || Ok(service.store.list_jobs(&filter)?)).await?;
    let next_cursor = (jobs.len() == limit as usize)
        .then(|| jobs.last().map(|j| format!("{}.{}", j.created_at_ms, j.id)))
        .flatten();
    Ok(axum::Json(JobList {
        schema: JobListTag,
        jobs: jobs.iter().map(JobDocument::from).collect(),
        next_cursor,
    }))
}

async fn cancel(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<axum::Json<JobDocument>, RequestError> {
    let token = authenticate(&service, &headers).await?;
    let job = blocking(move || service.cancel(&token, &id)).await?;
    Ok(axum::Json(JobDocument::from(&job)))
}

/// The query of `GET /v1/jobs/{id}/transcript`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TranscriptQuery {
    /// One attempt's output only.
    attempt: Option<u32>,
}

async fn rerun(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, RequestError> {
    let token = authenticate(&service, &headers).await?;
    let job = blocking(move || service.rerun(&token, &id)).await?;
    Ok((StatusCode::CREATED, axum::Json(JobDocument::from(&job))).into_response())
}

async fn transcript(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<TranscriptQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, RequestError> {
    let Query(query) = query.map_err(|e| RequestError::BadRequest(e.body_text()))?;
    let token = authenticate(&service, &headers).await?;
    let text = blocking(move || {
        let job = service.visible_job(&token, &id)?;
        match query.attempt {
            Some(attempt) => attempt_transcript_text(&service, &job, attempt),
            None => transcript_text(&service, &job.id),
        }
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// A job's output so far, every attempt's (redacted when it was written), as one text.
pub(crate) fn transcript_text(service: &Service, id: &JobId) -> Result<String, RequestError> {
    output_text(|after| Ok(service.store.job_events(id, after, 1000)?))
}

/// One attempt's output (404 for an attempt the job has not started).
pub(crate) fn attempt_transcript_text(
    service: &Service,
    job: &cordon_store::JobRow,
    attempt: u32,
) -> Result<String, RequestError> {
    if attempt == 0 || attempt > job.attempt {
        return Err(RequestError::NotFound);
    }
    output_text(|after| {
        Ok(service
            .store
            .attempt_events(&job.id, attempt, after, 1000)?)
    })
}

/// The text of the `output` events `page` reads, page after page.
fn output_text(
    page: impl Fn(u64) -> Result<Vec<cordon_store::JobEvent>, RequestError>,
) -> Result<String, RequestError> {
    let mut text = String::new();
    let mut after = 0;
    loop {
        let page = page(after)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for event in page.iter().filter(|e| e.kind == "output") {
            text.push_str(
                event
                    .data
                    .get("text")
                    .and_then(|t| t.as_str())
                    .unwrap_or(""),
            );
        }
    }
    Ok(text)
}

async fn events(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, RequestError> {
    let token = authenticate(&service, &headers).await?;
    let token_id = token.id.clone();
    let job = {
        let service = Arc::clone(&service);
        blocking(move || service.visible_job(&token, &id)).await?
    };
    let hash = bearer(&headers)
        .and_then(|h| {
            h.split_once(' ')
                .map(|(_, secret)| token_hash(secret.trim()))
        })
        .unwrap_or_default();
    live_log(service, (&token_id, hash), job.id, last_event_id(&headers))
}

/// The `Last-Event-ID` a reconnecting SSE client sends (0: from the start).
pub(crate) fn last_event_id(headers: &HeaderMap) -> u64 {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// An event's data with the attempt that wrote it (`attempt`), unless it says already: a
/// live log that spans a retry tells which attempt each line comes from.
fn labelled(mut data: serde_json::Value, attempt: u32) -> serde_json::Value {
    if let Some(map) = data.as_object_mut()
        && !map.contains_key("attempt")
    {
        map.insert("attempt".into(), attempt.into());
    }
    data
}

/// How often an open live log looks its client's token up again.
const TOKEN_RECHECK: Duration = Duration::from_secs(5);

/// How long a live log stays quiet before it looks at its job's state (and again as long as
/// it stays quiet).
const ENDLESS_CHECK: Duration = Duration::from_secs(2);

/// Where a live log stands.
struct Follow {
    service: Arc<Service>,
    id: JobId,
    after: u64,
    buffered: std::collections::VecDeque<cordon_store::JobEvent>,
    ended: bool,
    /// Wakes the stream when its job has new events.
    changes: crate::live_wake::Subscription,
    /// When the stream last had an event to send, or last looked at the job's state.
    quiet_since: std::time::Instant,
    /// The SHA-256 of the client's token, looked up again every [`TOKEN_RECHECK`].
    token_hash: String,
    token_checked: std::time::Instant,
    /// Held while the stream lives (dropped when the client goes away or the log ends).
    _permit: crate::streams::StreamPermit,
}

/// A job's live log as Server-Sent Events from after event `after` until its `end` event
/// (or the server's stop). The caller has checked that the client may see the job; a token
/// that holds too many streams open already (or a server that does) is answered 429.
pub(crate) fn live_log(
    service: Arc<Service>,
    (token_id, token_hash): (&str, String),
    id: JobId,
    after: u64,
) -> Result<Response, RequestError> {
    let permit = service
        .live_streams
        .open(token_id)
        .map_err(RequestError::Busy)?;
    let changes = service.live_wake.subscribe(&id);
    let follow = Follow {
        service,
        id,
        after,
        buffered: std::collections::VecDeque::new(),
        ended: false,
        changes,
        quiet_since: std::time::Instant::now(),
        token_hash,
        token_checked: std::time::Instant::now(),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        loop {
            // A token revoked (or expired) while its stream is open: the stream ends.
            if f.token_checked.elapsed() >= TOKEN_RECHECK {
                f.token_checked = std::time::Instant::now();
                let (service, hash) = (Arc::clone(&f.service), f.token_hash.clone());
                let live =
                    tokio::task::spawn_blocking(move || service.store.find_token(&hash)).await;
                if !matches!(live, Ok(Ok(Some(_)))) {
                    return None;
                }
            }
            if let Some(event) = f.buffered.pop_front() {
                f.after = event.seq;
                f.ended |= event.kind == "end";
                let sse = Event::default()
                    .id(event.seq.to_string())
                    .event(event.kind.clone())
                    .data(labelled(event.data, event.attempt).to_string());
                return Some((Ok::<_, Infallible>(sse), f));
            }
            if f.ended
                || f.service
                    .shutting_down
                    .load(std::sync::atomic::Ordering::SeqCst)
            {
                return None;
            }
            // Seen from here: an event recorded from now on wakes the wait below.
            f.changes.changes.borrow_and_update();
            let page = {
                let (service, id, after) = (Arc::clone(&f.service), f.id.clone(), f.after);
                tokio::task::spawn_blocking(move || service.store.job_events(&id, after, 256)).await
            };
            match page {
                Ok(Ok(page)) if !page.is_empty() => {
                    f.buffered = page.into();
                    f.quiet_since = std::time::Instant::now();
                }
                Ok(Ok(_)) => {
                    // A job that ended without its `end` event (the store refused the write
                    // under load): after a quiet while, the stream ends with one made up from
                    // the job's state, instead of waiting for ever. Its events are read once
                    // more after the state (a worker records the state, then the events):
                    // an event that came meanwhile is sent instead. The made-up event's `id`
                    // is the last real one's, so a client resuming from it misses nothing.
                    if f.quiet_since.elapsed() >= ENDLESS_CHECK {
                        f.quiet_since = std::time::Instant::now();
                        let (service, id, after) = (Arc::clone(&f.service), f.id.clone(), f.after);
                        let looked = tokio::task::spawn_blocking(move || {
                            let job = service.store.get_job(&id)?;
                            let late = service.store.job_events(&id, after, 256)?;
                            Ok::<_, cordon_store::StoreError>((job, late))
                        })
                        .await;
                        if let Ok(Ok((_, late))) = &looked
                            && !late.is_empty()
                        {
                            f.buffered = late.clone().into();
                            continue;
                        }
                        if let Ok(Ok((Some(job), _))) = looked
                            && job.state.is_final()
                        {
                            f.ended = true;
                            let sse = Event::default().id(f.after.to_string()).event("end").data(
                                serde_json::json!({
                                    "state": job.state.as_str(),
                                    "note": "the job's own end event is missing; see the job document"
                                })
                                .to_string(),
                            );
                            return Some((Ok(sse), f));
                        }
                    }
                    // Woken when the job has a new event (recorded here, or NOTIFYed by
                    // another process on PostgreSQL); read again after a while anyway.
                    let _ = tokio::time::timeout(
                        crate::live_wake::FALLBACK,
                        f.changes.changes.changed(),
                    )
                    .await;
                }
                _ => return None,
            }
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

async fn metrics(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
) -> Result<Response, RequestError> {
    let token = authenticate(&service, &headers).await?;
    require(&token, "admin")?;
    let text = blocking(move || Ok(crate::metrics::render(&service.store, &token)?)).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(error: RequestError) -> (StatusCode, Option<String>, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
            .unwrap();
        (status, retry_after, serde_json::from_slice(&body).unwrap())
    }

    #[test]
    fn busy_and_budget_answers_say_when_to_try_again() {
        let (status, retry_after, body) = answer(RequestError::Busy("queue full".into()));
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(retry_after.as_deref(), Some("1"));
        assert_eq!(body["error"], "busy");

        // The budget resets in 90.5 s: the client waits 91.
        let resets_at_ms = crate::service::now_ms() + 90_500;
        let (status, retry_after, body) = answer(RequestError::Budget { resets_at_ms });
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        let seconds: u64 = retry_after.expect("Retry-After").parse().unwrap();
        assert!((90..=91).contains(&seconds), "{seconds}");
        assert_eq!(body["error"], "budget");
        assert!(body["resets_at"].is_string(), "{body}");

        // Other refusals carry none.
        let (status, retry_after, _) = answer(RequestError::NotFound);
        assert_eq!((status, retry_after), (StatusCode::NOT_FOUND, None));
    }

    #[test]
    fn a_conflict_names_the_job_its_key_holds() {
        let (status, retry_after, body) = answer(RequestError::Conflict {
            job: "j-abcdefghij".into(),
            message: "idempotency key already names job j-abcdefghij".into(),
        });
        assert_eq!((status, retry_after), (StatusCode::CONFLICT, None));
        assert_eq!(body["error"], "conflict");
        assert_eq!(body["job"], "j-abcdefghij");
        let (_, _, other) = answer(RequestError::BadRequest("no".into()));
        assert!(other.get("job").is_none(), "{other}");
    }
}

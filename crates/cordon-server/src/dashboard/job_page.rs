//! A job's page: its summary ([`job_view`](super::job_view)), its live log (the script follows
//! [`live`], the job's event log as Server-Sent Events, authenticated by the login cookie),
//! the downloads, and the cancel button.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cordon_store::{JobEvent, JobRow, TokenRow};
use maud::html;

use super::Dashboard;
use super::auth::{ChangeForm, Viewer, check_change};
use super::error::PageError;
use super::job_view::{self, Outcome};
use super::layout::{self, Nav};
use super::timeline::Timeline;
use crate::api::JobDocument;
use crate::http::{attempt_transcript_text, blocking, last_event_id, live_log, transcript_text};
use crate::service::{RequestError, Service, now_ms};

/// At most this many events of a job are read for its timeline (its log can be long; the
/// timeline needs the state and stage events only).
const MAX_EVENTS: usize = 200_000;

/// A job, the timeline of its latest attempt, and why it waits if it does.
type Loaded = (JobRow, Timeline, Option<String>);

/// A job, the timeline of its latest attempt, and why it waits if it does.
fn load(service: &Service, token: &TokenRow, id: &str) -> Result<Loaded, RequestError> {
    let job = service.visible_job(token, id)?;
    let mut kept: Vec<JobEvent> = Vec::new();
    let (mut after, mut read) = (0, 0);
    while read < MAX_EVENTS {
        let page = service.store.job_events(&job.id, after, 1000)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        read += page.len();
        kept.extend(page.into_iter().filter(|e| e.kind != "output"));
    }
    let timeline = Timeline::from_events(&kept, &job.job_type, now_ms());
    let waiting = service.waiting_reason(&job)?;
    Ok((job, timeline, waiting))
}

async fn load_async(
    dash: &Arc<Dashboard>,
    viewer: &Viewer,
    id: String,
) -> Result<Loaded, PageError> {
    let service = Arc::clone(&dash.service);
    let token = viewer.token.clone();
    Ok(blocking(move || load(&service, &token, &id)).await?)
}

/// `GET /jobs/{id}`.
pub(crate) async fn page(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let (job, timeline, waiting) = load_async(&dash, &viewer, id).await?;
    let attempts = {
        let (service, id) = (Arc::clone(&dash.service), job.id.clone());
        blocking(move || Ok(service.store.job_attempts(&id)?)).await?
    };
    let body = html! {
        p.crumbs { a href="/" { "← Jobs" } }
        div #job-summary data-summary={ "/jobs/" (job.id) "/summary" }
            data-final=(job.state.is_final()) {
            (job_view::summary(&job, &timeline, waiting.as_deref(), &viewer))
        }
        (job_view::attempts(&job, &attempts))
        section.log-section aria-labelledby="log-h" {
            div.log-head {
                h2 #log-h { "Log" }
                span #log-status role="status" { "" }
                button #log-jump type="button" hidden { "Follow the end ↓" }
            }
            pre #log.log tabindex="0" aria-labelledby="log-h"
                data-events={ "/jobs/" (job.id) "/live" } {}
            noscript {
                p { "The live log needs JavaScript; "
                    a href={ "/jobs/" (job.id) "/download/log.txt" } { "download the log" } " instead." }
            }
        }
    };
    let title = format!("Job {}", job.id);
    Ok(layout::page(&title, Some(&viewer), Nav::Jobs, body).into_response())
}

/// `GET /jobs/{id}/candidates/{session}`: one candidate of a `session.compare` job, its
/// verification's report rendered as a verify job's page renders one.
pub(crate) async fn candidate(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    Path((id, session)): Path<(String, String)>,
) -> Result<Response, PageError> {
    let service = Arc::clone(&dash.service);
    let token = viewer.token.clone();
    let job = blocking(move || service.visible_job(&token, &id)).await?;
    let Outcome::Compare(report) = Outcome::of(&job) else {
        return Err(PageError::NotFound);
    };
    let row = report
        .candidates
        .iter()
        .find(|c| c.id == session)
        .ok_or(PageError::NotFound)?;
    let title = format!("Candidate {} of job {}", row.id, job.id);
    let body = job_view::candidate(&job, row);
    Ok(layout::page(&title, Some(&viewer), Nav::Jobs, body).into_response())
}

/// `GET /jobs/{id}/summary`: the part above the log, for the live update.
pub(crate) async fn summary(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let (job, timeline, waiting) = load_async(&dash, &viewer, id).await?;
    Ok(job_view::summary(&job, &timeline, waiting.as_deref(), &viewer).into_response())
}

/// `GET /jobs/{id}/live`: the job's event log as SSE (resumes after `Last-Event-ID`).
pub(crate) async fn live(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let service = Arc::clone(&dash.service);
    let token = viewer.token;
    let token_id = token.id.clone();
    let job = blocking(move || service.visible_job(&token, &id)).await?;
    Ok(live_log(
        Arc::clone(&dash.service),
        (&token_id, viewer.token_hash),
        job.id,
        last_event_id(&headers),
    )?)
}

/// `POST /jobs/{id}/cancel`: cancels, then back to the job's page.
pub(crate) async fn cancel(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<ChangeForm>,
) -> Result<Response, PageError> {
    check_change(&viewer, &headers, &form.csrf)?;
    let service = Arc::clone(&dash.service);
    let token = viewer.token;
    let job = blocking(move || service.cancel(&token, &id)).await?;
    Ok((
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/jobs/{}", job.id))],
    )
        .into_response())
}

/// `POST /jobs/{id}/rerun`: submits the ended job again, then to the new job's page.
pub(crate) async fn rerun(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<ChangeForm>,
) -> Result<Response, PageError> {
    check_change(&viewer, &headers, &form.csrf)?;
    let service = Arc::clone(&dash.service);
    let token = viewer.token;
    let job = blocking(move || service.rerun(&token, &id)).await?;
    Ok((
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/jobs/{}", job.id))],
    )
        .into_response())
}

/// The attempt whose log `file` names (`log-N.txt`).
fn attempt_log(file: &str) -> Option<u32> {
    file.strip_prefix("log-")?
        .strip_suffix(".txt")?
        .parse()
        .ok()
}

/// `GET /jobs/{id}/download/{file}`: `job.json`, `report.json`, `report.xml` (JUnit),
/// `report.md`, `log.txt`, one attempt's `log-N.txt`.
pub(crate) async fn download(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    Path((id, file)): Path<(String, String)>,
) -> Result<Response, PageError> {
    let service = Arc::clone(&dash.service);
    let token = viewer.token;
    let wanted = file.clone();
    let (job, body) = blocking(move || {
        let job = service.visible_job(&token, &id)?;
        let body = if wanted == "log.txt" {
            Some(transcript_text(&service, &job.id)?)
        } else if let Some(n) = attempt_log(&wanted) {
            Some(attempt_transcript_text(&service, &job, n)?)
        } else {
            None
        };
        Ok((job, body))
    })
    .await?;
    let pretty =
        |value: &serde_json::Value| serde_json::to_string_pretty(value).unwrap_or_default() + "\n";
    let report = match Outcome::of(&job) {
        Outcome::Report(report) => Some(report),
        _ => None,
    };
    let (content_type, text) = match file.as_str() {
        "job.json" => (
            "application/json",
            serde_json::to_string_pretty(&JobDocument::from(&job)).unwrap_or_default() + "\n",
        ),
        "report.json" => (
            "application/json",
            pretty(job.result.as_ref().ok_or(PageError::NotFound)?),
        ),
        "report.xml" => (
            "application/xml",
            cordon_verify::render::junit(report.as_ref().ok_or(PageError::NotFound)?),
        ),
        "report.md" => (
            "text/markdown; charset=utf-8",
            cordon_verify::render::markdown(report.as_ref().ok_or(PageError::NotFound)?),
        ),
        "log.txt" => ("text/plain; charset=utf-8", body.unwrap_or_default()),
        _ if attempt_log(&file).is_some() => {
            ("text/plain; charset=utf-8", body.unwrap_or_default())
        }
        _ => return Err(PageError::NotFound),
    };
    // The id is checked (`j-` and base32) and the name one of the above: safe in the header.
    let disposition = format!("attachment; filename=\"{}-{file}\"", job.id);
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        text,
    )
        .into_response())
}

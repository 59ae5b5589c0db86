//! The jobs table: newest first, filtered by project, state and type, paged by cursor. The
//! first page stays live: the script fetches [`fragment`] every two seconds and swaps the
//! table when it changed (new jobs appear, states change); older pages stay still, so rows do
//! not move under the reader.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use cordon_store::{JobFilter, JobRow, JobState, TokenRow};
use maud::{Markup, html};
use serde::Deserialize;

use super::Dashboard;
use super::auth::Viewer;
use super::error::PageError;
use super::layout::{self, Nav};
use crate::api::JobType;
use crate::http::blocking;
use crate::service::{RequestError, Service, now_ms};

/// Rows per page.
const PAGE: usize = 50;
/// With a type filter, at most this many jobs are read for one page (the store filters by
/// project and state; the type is filtered here).
const SCAN: usize = 2000;

/// The filters of the jobs table (all optional; empty means any).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct JobsQuery {
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default, rename = "type")]
    job_type: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

impl JobsQuery {
    fn get(value: &Option<String>) -> Option<&str> {
        value.as_deref().map(str::trim).filter(|v| !v.is_empty())
    }

    /// The query string of these filters (with `cursor` when `with_cursor`).
    fn encode(&self, cursor: Option<&str>) -> String {
        let mut pairs = Vec::new();
        for (key, value) in [
            ("project", Self::get(&self.project)),
            ("state", Self::get(&self.state)),
            ("type", Self::get(&self.job_type)),
            ("cursor", cursor),
        ] {
            if let Some(value) = value {
                pairs.push((key, value));
            }
        }
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    }
}

/// One page of the table.
struct Listing {
    rows: Vec<JobRow>,
    /// The cursor of the next (older) page.
    next: Option<String>,
}

fn parse_cursor(cursor: &str) -> Result<(i64, String), RequestError> {
    cursor
        .split_once('.')
        .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())))
        .ok_or_else(|| RequestError::BadRequest(format!("cursor {cursor:?} is invalid")))
}

fn cursor_of(job: &JobRow) -> String {
    format!("{}.{}", job.created_at_ms, job.id)
}

fn load(service: &Service, token: &TokenRow, query: &JobsQuery) -> Result<Listing, RequestError> {
    let Some(projects) = crate::access::listed_projects(token, JobsQuery::get(&query.project))
    else {
        return Ok(Listing {
            rows: Vec::new(),
            next: None,
        });
    };
    let state = JobsQuery::get(&query.state)
        .map(|s| s.parse::<JobState>().map_err(RequestError::BadRequest))
        .transpose()?;
    let job_type = JobsQuery::get(&query.job_type)
        .map(|t| {
            JobType::parse(t)
                .map(JobType::as_str)
                .ok_or_else(|| RequestError::BadRequest(format!("unknown job type {t:?}")))
        })
        .transpose()?;
    let mut filter = JobFilter {
        projects,
        state,
        before: JobsQuery::get(&query.cursor)
            .map(parse_cursor)
            .transpose()?,
        limit: 0,
    };
    let mut rows = Vec::new();
    let mut scanned = 0;
    loop {
        let want = if job_type.is_some() { 200 } else { PAGE + 1 };
        filter.limit = want as u32;
        let batch = service.store.list_jobs(&filter)?;
        let exhausted = batch.len() < want;
        for job in batch {
            scanned += 1;
            filter.before = Some((job.created_at_ms, job.id.to_string()));
            if job_type.is_none_or(|t| t == job.job_type) {
                if rows.len() == PAGE {
                    // One more than a page: there is an older page, after the last row shown.
                    let next = rows.last().map(cursor_of);
                    return Ok(Listing { rows, next });
                }
                rows.push(job);
            }
        }
        if exhausted {
            return Ok(Listing { rows, next: None });
        }
        if scanned >= SCAN {
            // Enough reading for one page: the next page goes on from the last job read.
            let next = filter.before.map(|(at, id)| format!("{at}.{id}"));
            return Ok(Listing { rows, next });
        }
    }
}

/// What a job ended with, in a few words.
fn outcome(job: &JobRow) -> Markup {
    let failure = job.failure.as_ref().and_then(|f| {
        Some((
            f.get("category")?.as_str()?.to_owned(),
            f.get("reason")
                .and_then(|r| r.as_str())
                .unwrap_or("")
                .to_owned(),
        ))
    });
    html! {
        @match (job.state, failure) {
            (JobState::Queued | JobState::Running, Some((category, reason))) => {
                span.muted title=(layout::short(&reason, 400)) {
                    "previous attempt: " span.category { (category) }
                }
            }
            (JobState::Succeeded, _) => {
                @if job.job_type == "verify" { "gate passed" } @else { "done" }
            }
            (_, Some((category, reason))) => {
                span.category { (category) } " "
                span.reason title=(layout::short(&reason, 400)) { (layout::short(&reason, 70)) }
            }
            _ => {}
        }
    }
}

fn job_duration(job: &JobRow) -> Option<u64> {
    let started = job.started_at_ms?;
    let end = match job.state {
        JobState::Running => now_ms(),
        _ => job.finished_at_ms?,
    };
    u64::try_from(end - started).ok()
}

fn rows(listing: &Listing, query: &JobsQuery) -> Markup {
    let now = now_ms();
    html! {
        div.table-wrap { table.jobs {
            caption.sr-only { "Jobs, newest first" }
            thead {
                tr {
                    th scope="col" { "Job" }
                    th scope="col" { "Project" }
                    th scope="col" { "Type" }
                    th scope="col" { "State" }
                    th scope="col" { "Attempt" }
                    th scope="col" { "Queued (UTC)" }
                    th scope="col" { "Started (UTC)" }
                    th scope="col" { "Duration" }
                    th scope="col" { "Outcome" }
                }
            }
            tbody {
                @for job in &listing.rows {
                    tr data-job=(job.id) data-state=(job.state.as_str()) {
                        td.id data-label="Job" { a href={ "/jobs/" (job.id) } { code { (job.id) } } }
                        td data-label="Project" { (job.project) }
                        td data-label="Type" { (job.job_type) }
                        td data-label="State" { (layout::state_badge(job.state)) }
                        td data-label="Attempt" { (job.attempt) " / " (job.max_attempts) }
                        td data-label="Queued" { (layout::when_short(job.created_at_ms, now)) }
                        td data-label="Started" {
                            @if let Some(at) = job.started_at_ms { (layout::when_short(at, now)) } @else { "—" }
                        }
                        td data-label="Duration" {
                            @if let Some(ms) = job_duration(job) { (layout::duration(ms)) } @else { "—" }
                        }
                        td data-label="Outcome" { (outcome(job)) }
                    }
                }
                @if listing.rows.is_empty() {
                    tr { td.empty colspan="9" { "No jobs match these filters." } }
                }
            }
        } }
        nav.pager aria-label="Pages" {
            @if JobsQuery::get(&query.cursor).is_some() {
                a href={ "/?" (query.encode(None)) } { "← Newest" }
            }
            @if let Some(next) = &listing.next {
                a href={ "/?" (query.encode(Some(next))) } rel="next" { "Older →" }
            }
        }
    }
}

fn filters(viewer: &Viewer, query: &JobsQuery, projects: &[String]) -> Markup {
    let selected = |value: &Option<String>, option: &str| JobsQuery::get(value) == Some(option);
    html! {
        form.filters method="get" action="/" data-autosubmit {
            @if viewer.is_operator() {
                div.field {
                    label for="f-project" { "Project" }
                    input #f-project name="project" list="f-projects" placeholder="every project"
                        value=(JobsQuery::get(&query.project).unwrap_or(""));
                    datalist #f-projects {
                        @for project in projects { option value=(project) {} }
                    }
                }
            }
            div.field {
                label for="f-state" { "State" }
                select #f-state name="state" {
                    option value="" { "any" }
                    @for state in JobState::ALL {
                        option value=(state.as_str()) selected[selected(&query.state, state.as_str())] {
                            (state.as_str())
                        }
                    }
                }
            }
            div.field {
                label for="f-type" { "Type" }
                select #f-type name="type" {
                    option value="" { "any" }
                    @for t in [JobType::Run, JobType::Verify, JobType::RepoClone, JobType::RepoApplyPatch] {
                        option value=(t.as_str()) selected[selected(&query.job_type, t.as_str())] {
                            (t.as_str())
                        }
                    }
                }
            }
            button type="submit" { "Filter" }
            a href="/" { "Clear" }
        }
    }
}

/// `GET /`: the jobs page.
pub(crate) async fn page(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    Query(query): Query<JobsQuery>,
) -> Result<Response, PageError> {
    let service = Arc::clone(&dash.service);
    let (token, q) = (viewer.token.clone(), query.clone());
    let operator = viewer.is_operator();
    let (listing, projects) = blocking(move || {
        let listing = load(&service, &token, &q)?;
        let projects = if operator {
            super::projects_page::known_projects(&service)?
        } else {
            Vec::new()
        };
        Ok((listing, projects))
    })
    .await?;
    let live = JobsQuery::get(&query.cursor).is_none();
    let body = html! {
        h1 { "Jobs" }
        (filters(&viewer, &query, &projects))
        @if live {
            div #jobs-live data-refresh={ "/fragments/jobs?" (query.encode(None)) } aria-live="off" {
                (rows(&listing, &query))
            }
        } @else {
            div #jobs-live { (rows(&listing, &query)) }
        }
    };
    Ok(layout::page("Jobs", Some(&viewer), Nav::Jobs, body).into_response())
}

/// `GET /fragments/jobs`: the table alone, for the live update.
pub(crate) async fn fragment(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
    Query(query): Query<JobsQuery>,
) -> Result<Response, PageError> {
    let service = Arc::clone(&dash.service);
    let q = query.clone();
    let listing = blocking(move || load(&service, &viewer.token, &q)).await?;
    Ok(rows(&listing, &query).into_response())
}

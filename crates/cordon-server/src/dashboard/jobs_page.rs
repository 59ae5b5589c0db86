//! The jobs table: newest first, filtered by project, state and type, paged by cursor. The
//! first page stays live: the script fetches [`fragment`] every two seconds and swaps the
//! table when it changed (new jobs appear, states change); older pages stay still, so rows do
//! not move under the reader.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use cordon_store::{JobFilter, JobRow, JobState, Store, TokenRow};
use maud::{Markup, html};
use serde::Deserialize;

use super::Dashboard;
use super::auth::Viewer;
use super::error::PageError;
use super::layout::{self, Nav};
use crate::api::JobType;
use crate::http::blocking;
use crate::service::{RequestError, now_ms};

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

fn load(store: &Store, token: &TokenRow, query: &JobsQuery) -> Result<Listing, RequestError> {
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
        let batch = store.list_jobs(&filter)?;
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
                    @for t in JobType::ALL {
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
        let listing = load(&service.store, &token, &q)?;
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
    let listing = blocking(move || load(&service.store, &viewer.token, &q)).await?;
    Ok(rows(&listing, &query).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordon_store::NewJob;

    fn token(project: &str) -> TokenRow {
        TokenRow {
            id: "t-x".into(),
            project: project.into(),
            scopes: vec!["read".into(), "admin".into()],
            created_at_ms: 0,
            expires_at_ms: None,
            revoked_at_ms: None,
            name: None,
            last_used_at_ms: None,
        }
    }

    fn job(project: &str, job_type: &str) -> NewJob {
        NewJob {
            project: project.into(),
            job_type: job_type.into(),
            priority: 0,
            max_attempts: 1,
            timeout_ms: 1000,
            idempotency_key: None,
            inputs: serde_json::json!({}),
            submitted_by: "t-x".into(),
            rerun_of: None,
            slots: 1,
        }
    }

    /// Every page from the first, following the cursors: the ids of each.
    fn pages(store: &Store, token: &TokenRow, mut query: JobsQuery) -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        loop {
            let listing = load(store, token, &query).unwrap();
            pages.push(listing.rows.iter().map(|j| j.id.to_string()).collect());
            match listing.next {
                Some(next) => query.cursor = Some(next),
                None => return pages,
            }
        }
    }

    #[test]
    fn cursors_page_through_every_job_once_newest_first_with_and_without_a_type_filter() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("cordon.db")).unwrap();
        let mut runs = Vec::new();
        // Many jobs share a millisecond: the cursor breaks ties by id.
        for i in 0..130 {
            let job_type = if i % 3 == 0 { "verify" } else { "run" };
            let (row, _) = store.insert_job(&job("web", job_type)).unwrap();
            if job_type == "run" {
                runs.push(row.id.to_string());
            }
            store.insert_job(&job("api", "run")).unwrap();
        }
        let web = token("web");
        let all = pages(&store, &web, JobsQuery::default());
        assert_eq!(all.iter().map(Vec::len).collect::<Vec<_>>(), [50, 50, 30]);
        let flat: Vec<String> = all.concat();
        let mut unique = flat.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 130, "no job twice, none lost");
        let typed = JobsQuery {
            job_type: Some("run".into()),
            ..JobsQuery::default()
        };
        let flat_runs: Vec<String> = pages(&store, &web, typed).concat();
        let mut expected = runs.clone();
        expected.sort();
        let mut got = flat_runs.clone();
        got.sort();
        assert_eq!(got, expected);
        assert_eq!(
            flat_runs,
            flat.iter()
                .filter(|id| runs.contains(id))
                .cloned()
                .collect::<Vec<_>>(),
            "the same order as the unfiltered pages"
        );
        // An operator sees both projects; a filter narrows; a project token asking for another
        // project gets nothing.
        let operator = TokenRow {
            project: "*".into(),
            ..token("*")
        };
        assert_eq!(
            pages(&store, &operator, JobsQuery::default())
                .concat()
                .len(),
            260
        );
        let api = JobsQuery {
            project: Some("api".into()),
            ..JobsQuery::default()
        };
        assert_eq!(pages(&store, &operator, api.clone()).concat().len(), 130);
        assert_eq!(pages(&store, &web, api).concat().len(), 0);
        let bad = JobsQuery {
            state: Some("sleeping".into()),
            ..JobsQuery::default()
        };
        assert!(load(&store, &web, &bad).is_err());
    }
}

//! Projects at a glance: the concurrency slots its running jobs hold (a compare holds several)
//! and its queued jobs against the project's concurrency, today's wall-clock budget use, and what
//! its recent failures were.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use cordon_store::{JobFilter, JobState, TokenRow};
use maud::{Markup, html};

use super::Dashboard;
use super::auth::Viewer;
use super::error::PageError;
use super::layout::{self, Nav};
use crate::access::ALL_PROJECTS;
use crate::http::blocking;
use crate::service::{RequestError, Service, now_ms};

const DAY_MS: i64 = 86_400_000;
/// Recent jobs read to find the projects active today.
const RECENT_READ: u32 = 2000;
/// Failed jobs per project whose categories are counted.
const FAILURES_READ: u32 = 50;

/// Every project worth showing to an operator: those the policy names, and those with jobs
/// submitted today or still queued or running.
pub(crate) fn known_projects(service: &Service) -> Result<Vec<String>, RequestError> {
    let mut names: BTreeSet<String> = service
        .policy()
        .projects
        .keys()
        .filter(|k| *k != ALL_PROJECTS)
        .cloned()
        .collect();
    names.extend(
        service
            .store
            .running_per_project()?
            .into_iter()
            .map(|r| r.project),
    );
    let day_start = now_ms() - now_ms().rem_euclid(DAY_MS);
    for state in [Some(JobState::Queued), None] {
        let recent = service.store.list_jobs(&JobFilter {
            projects: Vec::new(),
            state,
            before: None,
            limit: RECENT_READ,
        })?;
        names.extend(
            recent
                .into_iter()
                .filter(|j| state.is_some() || j.created_at_ms >= day_start)
                .map(|j| j.project),
        );
    }
    Ok(names.into_iter().collect())
}

/// One project's row.
struct ProjectRow {
    name: String,
    /// Its running jobs, and the concurrency slots they hold (a compare holds several).
    running: (u32, u32),
    queued: u64,
    concurrency: u32,
    used_ms: u64,
    budget_ms: Option<u64>,
    failures: Vec<(String, u32)>,
}

fn load(service: &Service, token: &TokenRow) -> Result<(Vec<ProjectRow>, u32, u32), RequestError> {
    let names = if crate::access::is_operator(token) {
        known_projects(service)?
    } else {
        vec![token.project.clone()]
    };
    let policy = service.policy();
    let running: BTreeMap<String, (u32, u32)> = service
        .store
        .running_per_project()?
        .into_iter()
        .map(|r| (r.project, (r.jobs, r.slots)))
        .collect();
    // One aggregate query, whatever the queue's length.
    let queued: BTreeMap<String, u64> = service
        .store
        .queue_depth()?
        .into_iter()
        .map(|d| (d.project, u64::from(d.queued)))
        .collect();
    let day_start = now_ms() - now_ms().rem_euclid(DAY_MS);
    let mut rows = Vec::new();
    for name in names {
        let failed = service.store.list_jobs(&JobFilter {
            projects: vec![name.clone()],
            state: Some(JobState::Failed),
            before: None,
            limit: FAILURES_READ,
        })?;
        let mut categories: BTreeMap<String, u32> = BTreeMap::new();
        for job in failed {
            let category = job
                .failure
                .as_ref()
                .and_then(|f| f.get("category")?.as_str().map(str::to_owned))
                .unwrap_or_else(|| "unknown".into());
            *categories.entry(category).or_default() += 1;
        }
        let mut failures: Vec<(String, u32)> = categories.into_iter().collect();
        failures.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let rules = policy.project(&name).map(|(_, rules)| rules);
        rows.push(ProjectRow {
            running: running.get(&name).copied().unwrap_or((0, 0)),
            queued: queued.get(&name).copied().unwrap_or(0),
            concurrency: policy.concurrency(&name),
            used_ms: service.store.project_wall_ms(&name, day_start)?,
            budget_ms: rules
                .and_then(|r| r.daily_wall())
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            failures,
            name,
        });
    }
    let slots_total = running.values().map(|(_, slots)| slots).sum();
    Ok((rows, slots_total, policy.workers))
}

fn table(rows: &[ProjectRow]) -> Markup {
    html! {
        table.projects {
            caption.sr-only { "Projects" }
            thead {
                tr {
                    th scope="col" { "Project" }
                    th scope="col" { "Running / concurrency" }
                    th scope="col" { "Queued" }
                    th scope="col" { "Today's wall-clock budget (UTC day)" }
                    th scope="col" { "Recent failures (last " (FAILURES_READ) ")" }
                }
            }
            tbody {
                @for row in rows {
                    tr data-project=(row.name) {
                        th scope="row" data-label="Project" {
                            a href={ "/?" (serde_urlencoded::to_string([("project", row.name.as_str())]).unwrap_or_default()) } {
                                (row.name)
                            }
                        }
                        td data-label="Running" {
                            @let (jobs, slots) = row.running;
                            meter min="0" max=(row.concurrency.max(1)) value=(slots)
                                aria-label={ "concurrency slots in use by " (row.name) } {}
                            " " span.count { (slots) " / " (row.concurrency) }
                            @if jobs != slots {
                                " " span.jobs {
                                    "(" (jobs) @if jobs == 1 { " job" } @else { " jobs" } ")"
                                }
                            }
                        }
                        td data-label="Queued" {
                            (row.queued)
                        }
                        td data-label="Budget" {
                            @if let Some(budget) = row.budget_ms {
                                meter min="0" max=(budget.max(1)) value=(row.used_ms.min(budget))
                                    high=(budget * 9 / 10) optimum="0"
                                    aria-label={ "budget used by " (row.name) } {}
                                " " span.count {
                                    (layout::duration(row.used_ms)) " of " (layout::duration(budget))
                                }
                            } @else {
                                (layout::duration(row.used_ms)) " (no budget)"
                            }
                        }
                        td data-label="Failures" {
                            @if row.failures.is_empty() {
                                "none"
                            } @else {
                                ul.chips {
                                    @for (category, n) in &row.failures {
                                        li.category { (category) " × " (n) }
                                    }
                                }
                            }
                        }
                    }
                }
                @if rows.is_empty() {
                    tr { td.empty colspan="5" { "No projects yet." } }
                }
            }
        }
    }
}

/// `GET /projects`.
pub(crate) async fn page(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
) -> Result<Response, PageError> {
    let service = Arc::clone(&dash.service);
    let token = viewer.token.clone();
    let (rows, slots, workers) = blocking(move || load(&service, &token)).await?;
    let body = html! {
        h1 { "Projects" }
        p.lead {
            @if viewer.is_operator() {
                "In use on this server: " strong { (slots) } " of " (workers) " worker slots. "
            }
            "Budgets count the wall-clock time of every attempt since midnight UTC."
        }
        (table(&rows))
    };
    Ok(layout::page("Projects", Some(&viewer), Nav::Projects, body).into_response())
}

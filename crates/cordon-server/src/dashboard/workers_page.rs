//! The workers sharing the store (`GET /workers`, operator tokens only): each one's host,
//! version, slots, running jobs, last heartbeat and state — `live`, `draining` (it finishes
//! its jobs and takes no new ones) or `lost` (no heartbeat for longer than its lease).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use cordon_store::WorkerRow;
use maud::{Markup, html};

use super::Dashboard;
use super::auth::Viewer;
use super::error::PageError;
use super::layout::{self, Nav};
use crate::service::now_ms;

fn row(worker: &WorkerRow, now: i64) -> Markup {
    let state = worker.state(now).as_str();
    html! {
        tr data-worker=(worker.name) {
            th scope="row" data-label="Worker" { code { (worker.name) } }
            td data-label="State" {
                span class={ "status status-" (layout::css_name(state)) } { (state) }
            }
            td data-label="Host" { (worker.host) " (pid " (worker.pid) ")" }
            td data-label="Version" { (worker.version) }
            td data-label="Slots" { (worker.running.len()) " of " (worker.slots) " busy" }
            td data-label="Running" {
                @for (n, id) in worker.running.iter().enumerate() {
                    @if n > 0 { ", " }
                    a href={ "/jobs/" (id) } { code { (id) } }
                }
            }
            td data-label="Last heartbeat" {
                (layout::duration(u64::try_from(now - worker.heartbeat_at_ms).unwrap_or(0))) " ago"
            }
            td data-label="Started (UTC)" { (layout::when(worker.started_at_ms)) }
        }
    }
}

/// `GET /workers`.
pub(crate) async fn page(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
) -> Result<Response, PageError> {
    let body = if !viewer.is_operator() {
        html! {
            h1 { "Workers" }
            p { "Workers run every project's jobs: an operator token (project " code { "*" }
                ", scope " code { "admin" } ") sees them." }
        }
    } else {
        let service = Arc::clone(&dash.service);
        let workers = tokio::task::spawn_blocking(move || service.store.list_workers())
            .await
            .map_err(|_| PageError::Internal)?
            .map_err(crate::service::RequestError::from)?;
        let now = now_ms();
        html! {
            h1 { "Workers" }
            p.lead {
                (workers.len()) " worker(s). Drain one with "
                code { "cordon worker --drain --name NAME" } "."
            }
            @if !workers.is_empty() {
                table.workers {
                    caption { "Workers" }
                    thead {
                        tr {
                            th scope="col" { "Worker" }
                            th scope="col" { "State" }
                            th scope="col" { "Host" }
                            th scope="col" { "Version" }
                            th scope="col" { "Slots" }
                            th scope="col" { "Running" }
                            th scope="col" { "Last heartbeat" }
                            th scope="col" { "Started (UTC)" }
                        }
                    }
                    tbody { @for worker in &workers { (row(worker, now)) } }
                }
            }
        }
    };
    Ok(layout::page("Workers", Some(&viewer), Nav::Workers, body).into_response())
}

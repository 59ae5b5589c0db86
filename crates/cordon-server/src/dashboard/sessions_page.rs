//! The live review sessions of this host (`cordon session`, read through `cordon-session`'s
//! library): their rounds (items, the fixer's outcome), what waits for the next round, and
//! the idle time left before `cordon gc` ends them. Sessions belong to no project, so only
//! operator tokens see them.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use cordon_session::{ReviewPhase, ReviewRound, SessionRecord, SessionStatus};
use maud::{Markup, html};

use super::Dashboard;
use super::auth::Viewer;
use super::error::PageError;
use super::layout::{self, Nav};

fn millis(at: &str) -> Option<i64> {
    let at = humantime::parse_rfc3339_weak(at).ok()?;
    i64::try_from(at.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_millis()).ok()
}

fn when(at: &str) -> Markup {
    match millis(at) {
        Some(ms) => layout::when(ms),
        None => html! { (at) },
    }
}

fn phase(phase: ReviewPhase) -> &'static str {
    match phase {
        ReviewPhase::Idle => "idle",
        ReviewPhase::Polling => "polling",
        ReviewPhase::Reviewing => "reviewing",
        ReviewPhase::Round => "round",
        ReviewPhase::Done => "done",
    }
}

fn round_row(round: &ReviewRound) -> Markup {
    let took = round
        .finished_at
        .as_deref()
        .and_then(millis)
        .zip(millis(&round.started_at))
        .map(|(end, start)| layout::duration(u64::try_from(end - start).unwrap_or(0)));
    html! {
        tr {
            th scope="row" data-label="Round" { (round.number) }
            td data-label="Items" {
                (round.items.len()) " "
                span.muted { (layout::short(&round.items.join(", "), 120)) }
            }
            td data-label="Started" { (when(&round.started_at)) }
            td data-label="Took" { (took.unwrap_or_else(|| "running".into())) }
            td data-label="Fixer" {
                @match (round.exit_code, &round.finished_at) {
                    (Some(0), _) => { (layout::status_badge("pass")) " handled " (round.handled.len()) }
                    (Some(code), _) => { (layout::status_badge("fail")) " exit " (code) }
                    (None, None) => { (layout::status_badge("running")) }
                    (None, Some(_)) => { (layout::status_badge("error")) " no exit code" }
                }
                @if !round.dropped.is_empty() { ", dropped " (round.dropped.len()) }
            }
        }
    }
}

fn session(record: &SessionRecord, now: SystemTime) -> Markup {
    let idle = record.idle_for(now);
    let timeout = Duration::from_secs(record.idle_timeout_s);
    let left = timeout.saturating_sub(idle);
    let review = &record.review;
    html! {
        article.session data-session=(record.id) aria-labelledby={ "s-" (record.id) } {
            h2 id={ "s-" (record.id) } {
                code { (record.id) } " "
                span class={ "status status-" (layout::css_name(phase(review.phase))) } {
                    "review " (phase(review.phase))
                }
            }
            dl.facts {
                div { dt { "Repository" } dd { code { (record.repo.display()) } } }
                div { dt { "Branch" } dd { code { (record.branch) } " from " code { (record.host_branch) } } }
                div { dt { "Created" } dd { (when(&record.created_at)) } }
                div { dt { "Last activity" } dd { (when(&record.last_activity)) } }
                div {
                    dt { "Idle time left" }
                    dd.idle-left {
                        @if left.is_zero() { "none: due for " code { "cordon gc" } }
                        @else { (layout::duration(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))) }
                        " of " (layout::duration(record.idle_timeout_s * 1000))
                    }
                }
                div { dt { "Rounds" } dd { (record.rounds) } }
                div { dt { "Waiting items" } dd { (review.pending.len()) } }
                @if let Some(writer) = record.writer.as_ref().filter(|w| w.alive()) {
                    div { dt { "Writer" } dd { (writer.activity.to_string()) " (pid " (writer.pid) ")" } }
                }
            }
            @if !review.pending.is_empty() {
                h3 { "Waiting for the next round" }
                ul.items {
                    @for item in review.pending.iter().take(10) {
                        li { code { (item.id) } " " (layout::short(&item.body, 160)) }
                    }
                }
            }
            @if review.history.is_empty() && review.current_round.is_none() {
                p.muted { "No review round yet." }
            } @else {
                table.rounds {
                    caption { "Review rounds" }
                    thead {
                        tr {
                            th scope="col" { "Round" }
                            th scope="col" { "Items" }
                            th scope="col" { "Started (UTC)" }
                            th scope="col" { "Took" }
                            th scope="col" { "Fixer" }
                        }
                    }
                    tbody {
                        @if let Some(round) = &review.current_round { (round_row(round)) }
                        @for round in review.history.iter().rev() { (round_row(round)) }
                    }
                }
            }
        }
    }
}

/// `GET /sessions`.
pub(crate) async fn page(
    State(dash): State<Arc<Dashboard>>,
    viewer: Viewer,
) -> Result<Response, PageError> {
    let body = if !viewer.is_operator() {
        html! {
            h1 { "Sessions" }
            p { "Sessions belong to no project: an operator token (project " code { "*" }
                ", scope " code { "admin" } ") sees them." }
        }
    } else {
        let records = match &dash.sessions {
            Some(sessions) => {
                let sessions = sessions.clone();
                tokio::task::spawn_blocking(move || sessions.list())
                    .await
                    .map_err(|_| PageError::Internal)?
                    .map_err(|error| {
                        eprintln!("cordon serve: dashboard: cannot list sessions: {error}");
                        PageError::Internal
                    })?
            }
            None => Vec::new(),
        };
        let live: Vec<&SessionRecord> = records
            .iter()
            .filter(|r| r.state != SessionStatus::Ended)
            .collect();
        let now = SystemTime::now();
        html! {
            h1 { "Sessions" }
            p.lead { (live.len()) " live session(s) on this host." }
            @for record in &live { (session(record, now)) }
        }
    };
    Ok(layout::page("Sessions", Some(&viewer), Nav::Sessions, body).into_response())
}

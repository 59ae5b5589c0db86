//! A job's stage timeline, read from its event log: each attempt's `stage` events say when
//! each stage started and how it ended (a job without stages is one bar of its own), and the
//! bars are drawn on one time axis, coloured by status, with their durations in text. The
//! latest attempt is shown open; earlier attempts (after a retry or a lost worker) folded
//! below it.
//!
//! Bars are small inline SVGs (a rectangle's `x` and `width` are attributes, so the page
//! needs no inline style, which its Content-Security-Policy forbids).

use cordon_store::JobEvent;
use maud::{Markup, html};

use super::layout;

/// One bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bar {
    /// The stage (or the job type, for a job without stages).
    pub name: String,
    /// `pass`, `fail`, `timeout`, `error`, `skipped`, `cancelled`, `interrupted` (its worker
    /// stopped or died while it ran) or `running`.
    pub status: String,
    /// From the attempt's start, milliseconds.
    pub start_ms: u64,
    /// How long it ran (so far, when running), milliseconds.
    pub duration_ms: u64,
}

/// The bars of the latest attempt, and the timelines of the attempts before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Timeline {
    /// The attempt they belong to (0: none started).
    pub attempt: u32,
    /// In the order the stages started.
    pub bars: Vec<Bar>,
    /// The earlier attempts' timelines, oldest first (their own `earlier` empty).
    pub earlier: Vec<Timeline>,
}

fn text<'a>(event: &'a JobEvent, key: &str) -> Option<&'a str> {
    event.data.get(key).and_then(|v| v.as_str())
}

/// A job state as a bar's status.
fn status_of_state(state: &str) -> &'static str {
    match state {
        "succeeded" => "pass",
        "failed" => "fail",
        "cancelled" => "cancelled",
        // The worker stopped or died: the job was interrupted or queued for another attempt.
        "interrupted" | "queued" => "interrupted",
        _ => "running",
    }
}

impl Timeline {
    /// The timeline of the latest attempt in `events` (a job's whole log, in order), with
    /// running bars drawn up to `now_ms`. `job_type` names the bar of a job without stages.
    pub(crate) fn from_events(events: &[JobEvent], job_type: &str, now_ms: i64) -> Timeline {
        let starts: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == "state" && text(e, "state") == Some("running"))
            .map(|(i, _)| i)
            .collect();
        let Some((&latest, before)) = starts.split_last() else {
            return Timeline::default();
        };
        let mut timeline = Timeline::of_attempt(events, latest, job_type, now_ms);
        timeline.earlier = before
            .iter()
            .map(|&start| Timeline::of_attempt(events, start, job_type, now_ms))
            .collect();
        timeline
    }

    /// The timeline of the attempt whose `running` state event is `events[start]`: its
    /// events up to the first state event after it (how the attempt ended).
    fn of_attempt(events: &[JobEvent], start: usize, job_type: &str, now_ms: i64) -> Timeline {
        let t0 = events[start].at_ms;
        let offset = |at: i64| u64::try_from(at - t0).unwrap_or(0);
        let attempt = events[start]
            .data
            .get("attempt")
            .and_then(|a| a.as_u64())
            .and_then(|a| u32::try_from(a).ok())
            .unwrap_or(0);
        let mut bars: Vec<Bar> = Vec::new();
        // Where the attempt ended: the first state event after its start.
        let mut ended: Option<(i64, &str)> = None;
        for event in &events[start + 1..] {
            if event.kind == "state" && text(event, "state") == Some("running") {
                break; // the next attempt
            }
            match event.kind.as_str() {
                "stage" => {
                    let name = text(event, "stage").unwrap_or("?").to_owned();
                    let status = text(event, "status").unwrap_or("error").to_owned();
                    if status == "running" {
                        bars.push(Bar {
                            name,
                            status,
                            start_ms: offset(event.at_ms),
                            duration_ms: 0,
                        });
                        continue;
                    }
                    let measured = event.data.get("duration_ms").and_then(|d| d.as_u64());
                    let open = bars
                        .iter_mut()
                        .rev()
                        .find(|b| b.name == name && b.status == "running");
                    match open {
                        Some(bar) => {
                            bar.duration_ms = measured.unwrap_or_else(|| {
                                offset(event.at_ms).saturating_sub(bar.start_ms)
                            });
                            bar.status = status;
                        }
                        // A stage that never started (skipped): a mark where it was decided.
                        None => bars.push(Bar {
                            name,
                            status,
                            start_ms: offset(event.at_ms),
                            duration_ms: measured.unwrap_or(0),
                        }),
                    }
                }
                "state" if ended.is_none() => {
                    // A failed attempt queued again for a retry failed; one queued again
                    // without a failure lost its worker.
                    let state = match text(event, "state").unwrap_or("") {
                        "queued" if event.data.get("failure").is_some_and(|f| !f.is_null()) => {
                            "failed"
                        }
                        state => state,
                    };
                    ended = Some((event.at_ms, state));
                }
                _ => {}
            }
        }
        let end = ended.map_or(now_ms, |(at, _)| at);
        if bars.is_empty() {
            bars.push(Bar {
                name: job_type.to_owned(),
                status: ended
                    .map_or("running", |(_, state)| status_of_state(state))
                    .to_owned(),
                start_ms: 0,
                duration_ms: offset(end),
            });
        }
        for bar in bars.iter_mut().filter(|b| b.status == "running") {
            // Still running, or its attempt ended without saying how the stage did.
            bar.duration_ms = offset(end).saturating_sub(bar.start_ms);
            // How the attempt ended says how the stage did: cancelled, interrupted (its
            // worker stopped), or an error (the attempt ended without its stage's end).
            if let Some((_, state)) = ended {
                bar.status = match status_of_state(state) {
                    "cancelled" => "cancelled",
                    "interrupted" => "interrupted",
                    _ => "error",
                }
                .into();
            }
        }
        Timeline {
            attempt,
            bars,
            earlier: Vec::new(),
        }
    }

    /// The axis length: the end of the last bar (at least 1 ms).
    pub(crate) fn total_ms(&self) -> u64 {
        self.bars
            .iter()
            .map(|b| b.start_ms + b.duration_ms)
            .max()
            .unwrap_or(0)
            .max(1)
    }

    /// The timeline as HTML: the latest attempt's, then each earlier attempt's folded (a
    /// `details` element, newest first).
    pub(crate) fn render(&self) -> Markup {
        html! {
            (self.render_one())
            @for earlier in self.earlier.iter().rev() {
                details.earlier-attempt data-attempt=(earlier.attempt) {
                    summary { "Attempt " (earlier.attempt) }
                    (earlier.render_one())
                }
            }
        }
    }

    /// One attempt's timeline as HTML: one row per bar (name, status, start and duration
    /// written out, the bar drawn on the shared axis).
    fn render_one(&self) -> Markup {
        let total = self.total_ms();
        // The bar's place on a 1000-unit axis; a bar is at least 3 units wide to be seen.
        let place = |bar: &Bar| {
            let x = bar.start_ms * 1000 / total;
            let width = (bar.duration_ms * 1000 / total)
                .max(3)
                .min(1000 - x.min(997));
            (x.min(997), width)
        };
        html! {
            @if self.bars.is_empty() {
                p.empty { "No attempt has started yet." }
            } @else {
                p.muted.note {
                    "Attempt " (self.attempt) ", from its start; before the first stage the "
                    "workspace is made and the plan read."
                }
                ol.timeline aria-label={ "Stages of attempt " (self.attempt) } {
                    li.axis aria-hidden="true" {
                        span.name {}
                        span.ticks {
                            @for quarter in 0..=4u64 {
                                span { (layout::duration(total * quarter / 4)) }
                            }
                        }
                        span.took {}
                    }
                    @for bar in &self.bars {
                        @let (x, width) = place(bar);
                        li data-stage=(bar.name) data-status=(bar.status) {
                            span.name { (bar.name) " " (layout::status_badge(&bar.status)) }
                            svg.track viewBox="0 0 1000 10" preserveAspectRatio="none"
                                aria-hidden="true" focusable="false" {
                                line.grid x1="250" y1="0" x2="250" y2="10" {}
                                line.grid x1="500" y1="0" x2="500" y2="10" {}
                                line.grid x1="750" y1="0" x2="750" y2="10" {}
                                rect class={ "bar bar-" (layout::css_name(&bar.status)) }
                                    x=(x) y="0" width=(width) height="10" rx="1" {}
                            }
                            span.took {
                                (layout::duration(bar.duration_ms))
                                span.sr-only { ", from " (layout::duration(bar.start_ms)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, at_ms: i64, kind: &str, data: serde_json::Value) -> JobEvent {
        JobEvent {
            seq,
            at_ms,
            kind: kind.into(),
            data,
            attempt: 0,
        }
    }

    #[test]
    fn stages_of_the_latest_attempt_are_placed_on_its_axis() {
        let events = [
            event(1, 0, "state", json!({"state": "queued", "attempt": 0})),
            event(2, 10, "state", json!({"state": "running", "attempt": 1})),
            event(3, 20, "stage", json!({"stage": "old", "status": "running"})),
            event(4, 30, "state", json!({"state": "queued", "retry": true})),
            event(5, 1000, "state", json!({"state": "running", "attempt": 2})),
            event(
                6,
                1100,
                "stage",
                json!({"stage": "compile", "status": "running"}),
            ),
            event(7, 1200, "output", json!({"text": "x"})),
            event(
                8,
                1400,
                "stage",
                json!({"stage": "compile", "status": "pass", "duration_ms": 290}),
            ),
            event(
                9,
                1400,
                "stage",
                json!({"stage": "lint", "status": "skipped", "duration_ms": 0}),
            ),
            event(
                10,
                1500,
                "stage",
                json!({"stage": "test", "status": "running"}),
            ),
            event(
                11,
                2500,
                "stage",
                json!({"stage": "test", "status": "fail", "duration_ms": 1000}),
            ),
            event(12, 2600, "state", json!({"state": "failed"})),
        ];
        let timeline = Timeline::from_events(&events, "verify", 9_999);
        assert_eq!(timeline.attempt, 2);
        let bars: Vec<(&str, &str, u64, u64)> = timeline
            .bars
            .iter()
            .map(|b| {
                (
                    b.name.as_str(),
                    b.status.as_str(),
                    b.start_ms,
                    b.duration_ms,
                )
            })
            .collect();
        assert_eq!(
            bars,
            [
                ("compile", "pass", 100, 290),
                ("lint", "skipped", 400, 0),
                ("test", "fail", 500, 1000)
            ]
        );
        assert_eq!(timeline.total_ms(), 1500);
        // The first attempt keeps its own timeline: its stage ended when the attempt was
        // queued again without a failure (its worker was lost).
        assert_eq!(timeline.earlier.len(), 1);
        let first = &timeline.earlier[0];
        assert_eq!(first.attempt, 1);
        let bars: Vec<(&str, &str, u64, u64)> = first
            .bars
            .iter()
            .map(|b| {
                (
                    b.name.as_str(),
                    b.status.as_str(),
                    b.start_ms,
                    b.duration_ms,
                )
            })
            .collect();
        assert_eq!(bars, [("old", "interrupted", 10, 10)]);
        let html = timeline.render().into_string();
        assert_eq!(html.matches("<rect").count(), 4, "{html}");
        assert!(
            html.contains("bar-fail") && html.contains("1.0 s"),
            "{html}"
        );
        assert!(
            html.contains(
                r#"<details class="earlier-attempt" data-attempt="1"><summary>Attempt 1</summary>"#
            ),
            "{html}"
        );
    }

    #[test]
    fn a_job_without_stages_is_one_bar_and_a_running_one_grows() {
        let events = [
            event(1, 0, "state", json!({"state": "running", "attempt": 1})),
            event(2, 50, "output", json!({"text": "tick"})),
        ];
        let timeline = Timeline::from_events(&events, "run", 2_000);
        assert_eq!(
            timeline.bars,
            [Bar {
                name: "run".into(),
                status: "running".into(),
                start_ms: 0,
                duration_ms: 2_000
            }]
        );
        let mut done = events.to_vec();
        done.push(event(3, 700, "state", json!({"state": "cancelled"})));
        let timeline = Timeline::from_events(&done, "run", 2_000);
        assert_eq!(
            (
                timeline.bars[0].status.as_str(),
                timeline.bars[0].duration_ms
            ),
            ("cancelled", 700)
        );
        assert_eq!(Timeline::from_events(&[], "run", 5), Timeline::default());
    }

    #[test]
    fn a_stage_whose_worker_died_is_interrupted_not_cancelled() {
        let mut events = vec![
            event(1, 0, "state", json!({"state": "running", "attempt": 1})),
            event(
                2,
                10,
                "stage",
                json!({"stage": "test", "status": "running"}),
            ),
        ];
        for (state, shown) in [
            ("queued", "interrupted"),
            ("retry", "error"),
            ("interrupted", "interrupted"),
            ("cancelled", "cancelled"),
            ("failed", "error"),
        ] {
            events.truncate(2);
            let data = match state {
                "retry" => json!({"state": "queued", "failure": {"category": "infra"}}),
                _ => json!({"state": state}),
            };
            events.push(event(3, 900, "state", data));
            let timeline = Timeline::from_events(&events, "verify", 2_000);
            assert_eq!(
                (
                    timeline.bars[0].status.as_str(),
                    timeline.bars[0].duration_ms
                ),
                (shown, 890),
                "{state}"
            );
        }
    }

    #[test]
    fn hostile_stage_names_are_text() {
        let events = [
            event(1, 0, "state", json!({"state": "running", "attempt": 1})),
            event(
                2,
                1,
                "stage",
                json!({"stage": "<script>alert(1)</script>", "status": "\"><b>"}),
            ),
        ];
        let html = Timeline::from_events(&events, "verify", 10)
            .render()
            .into_string();
        assert!(
            !html.contains("<script>") && !html.contains("\"><b>"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }
}

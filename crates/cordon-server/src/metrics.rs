//! `GET /metrics`: the service in Prometheus' text format, read from the store (so any API
//! replica reports the whole cluster). A token with the `admin` scope is required: an
//! operator token sees every project's series, a project's admin token its own.

use std::fmt::Write;

use cordon_store::{Store, StoreError, TokenRow};

use crate::access;

/// The upper bounds of the attempt-duration histogram, in seconds.
pub const DURATION_BUCKETS_S: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0,
];

/// A label value, escaped as the text format wants it.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The metrics `token` may see, as Prometheus text.
pub fn render(store: &Store, token: &TokenRow) -> Result<String, StoreError> {
    let visible = |project: &str| access::sees(token, project);
    let mut out = String::new();

    header(
        &mut out,
        "cordon_queue_depth",
        "gauge",
        "Jobs waiting in a project's queue (retries in their backoff included).",
    );
    let depth = store.queue_depth()?;
    for d in depth.iter().filter(|d| visible(&d.project)) {
        let _ = writeln!(
            out,
            "cordon_queue_depth{{project=\"{}\"}} {}",
            label(&d.project),
            d.queued
        );
    }
    header(
        &mut out,
        "cordon_queue_ready",
        "gauge",
        "Queued jobs a worker could claim now (no backoff left).",
    );
    for d in depth.iter().filter(|d| visible(&d.project)) {
        let _ = writeln!(
            out,
            "cordon_queue_ready{{project=\"{}\"}} {}",
            label(&d.project),
            d.ready
        );
    }
    header(
        &mut out,
        "cordon_jobs_running",
        "gauge",
        "Running jobs per project, on every worker sharing the store.",
    );
    let running: Vec<_> = store
        .running_per_project()?
        .into_iter()
        .filter(|r| visible(&r.project))
        .collect();
    for r in &running {
        let _ = writeln!(
            out,
            "cordon_jobs_running{{project=\"{}\"}} {}",
            label(&r.project),
            r.jobs
        );
    }
    header(
        &mut out,
        "cordon_job_slots_running",
        "gauge",
        "Concurrency slots held by running jobs per project (a session.compare holds several).",
    );
    for r in &running {
        let _ = writeln!(
            out,
            "cordon_job_slots_running{{project=\"{}\"}} {}",
            label(&r.project),
            r.slots
        );
    }
    if access::is_operator(token) {
        header(
            &mut out,
            "cordon_jobs",
            "gauge",
            "Jobs in the store by state, every project.",
        );
        for (state, n) in store.jobs_per_state()? {
            let _ = writeln!(out, "cordon_jobs{{state=\"{}\"}} {n}", state.as_str());
        }
    }

    let bounds_ms: Vec<u64> = DURATION_BUCKETS_S
        .iter()
        .map(|s| (s * 1000.0) as u64)
        .collect();
    header(
        &mut out,
        "cordon_attempt_duration_seconds",
        "histogram",
        "How long attempts ran, by project, job type and outcome (a final state, retry, lost).",
    );
    for series in store
        .attempt_histogram(&bounds_ms)?
        .iter()
        .filter(|h| visible(&h.project))
    {
        let labels = format!(
            "project=\"{}\",type=\"{}\",outcome=\"{}\"",
            label(&series.project),
            label(&series.job_type),
            label(&series.outcome)
        );
        for (bound, count) in DURATION_BUCKETS_S.iter().zip(&series.at_most) {
            let _ = writeln!(
                out,
                "cordon_attempt_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
            );
        }
        let _ = writeln!(
            out,
            "cordon_attempt_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
            series.count
        );
        let _ = writeln!(
            out,
            "cordon_attempt_duration_seconds_sum{{{labels}}} {}",
            series.sum_ms as f64 / 1000.0
        );
        let _ = writeln!(
            out,
            "cordon_attempt_duration_seconds_count{{{labels}}} {}",
            series.count
        );
    }
    Ok(out)
}

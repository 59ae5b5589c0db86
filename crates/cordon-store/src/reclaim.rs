//! The rules for jobs whose worker is gone, shared by every backend: which jobs a reclaim
//! takes, what becomes of them, and what their failure says.

use crate::jobs::{JobId, JobState, Recovered};

/// Which running jobs a reclaim takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaim<'a> {
    /// Those whose lease ended (or that never had one: left by a store of version 3).
    Expired,
    /// Those of this worker (restarted) and those without a worker.
    Worker(&'a str),
}

/// The `failure` a reclaimed job and its lost attempt carry.
pub(crate) fn reclaim_failure(
    which: Reclaim<'_>,
    worker: Option<&str>,
    cancel_requested: bool,
) -> serde_json::Value {
    let who = worker.unwrap_or("the previous server");
    let why = match which {
        Reclaim::Expired => format!(
            "the lease of {who} expired while the job ran (the worker died, stalled or lost the \
             store)"
        ),
        Reclaim::Worker(_) => format!("{who} restarted while the job ran"),
    };
    if cancel_requested {
        serde_json::json!({"category": "cancelled", "reason": format!("cancelled; {why}")})
    } else {
        serde_json::json!({"category": "infra", "reason": why})
    }
}

/// What a reclaim makes of a job: cancelled when a cancel was asked for, else requeued while
/// attempts are left, else interrupted.
pub(crate) fn reclaimed_state(attempt: i64, max_attempts: i64, cancel_requested: bool) -> JobState {
    if cancel_requested {
        JobState::Cancelled
    } else if attempt < max_attempts {
        JobState::Queued
    } else {
        JobState::Interrupted
    }
}

impl Recovered {
    /// Files `id` under what became of it.
    pub(crate) fn add(&mut self, state: JobState, id: JobId) {
        match state {
            JobState::Queued => self.requeued.push(id),
            JobState::Cancelled => self.cancelled.push(id),
            JobState::Running | JobState::Succeeded | JobState::Failed | JobState::Interrupted => {
                self.interrupted.push(id)
            }
        }
    }
}

//! `cordon.review-event/v1`: what the review watcher reports, one document per event (the
//! lines of `cordon session watch --json-events`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::id::SessionId;
use crate::record::ItemOrigin;
use crate::review_items::SourceState;

cordon_types::schema_tag!(
    /// The `schema` tag of a watcher event: always `"cordon.review-event/v1"`.
    ReviewEventTag,
    "cordon.review-event/v1"
);

/// One thing the review watcher did or saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-revision" = 2))]
pub struct ReviewEvent {
    /// Always `cordon.review-event/v1`.
    pub schema: ReviewEventTag,
    /// The session watched.
    pub session: SessionId,
    /// When (RFC 3339, UTC, milliseconds).
    pub at: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened.
    pub event: ReviewEventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReviewEventKind {
    /// The watcher started (or resumed a watch a dead watcher left).
    Started {
        /// Whether a round or reviews a dead watcher left are continued.
        resumed: bool,
        /// Rounds run so far.
        rounds: u32,
        /// Items waiting for the fixer.
        pending: usize,
    },
    /// The source was polled.
    Poll {
        /// Its run in the run history.
        run_id: Option<String>,
        /// Its exit code.
        exit_code: u8,
        /// New items it brought.
        new_items: usize,
        /// The state of the change it reported, if any.
        state: Option<SourceState>,
        /// When it failed: the last lines of its standard error (redacted).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stderr_tail: Vec<String>,
    },
    /// New items went to the pending queue.
    Items {
        /// Where they came from.
        origin: ItemOrigin,
        /// Their ids.
        ids: Vec<String>,
    },
    /// A reviewer's review ended.
    Reviewer {
        /// The reviewer command.
        command: String,
        /// Its run in the run history.
        run_id: Option<String>,
        /// Its exit code (0 also when it printed the completion marker and was ended).
        exit_code: u8,
        /// How its review ended.
        completion: ReviewerCompletion,
        /// When it failed or timed out: the last lines of its standard error (redacted).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stderr_tail: Vec<String>,
    },
    /// A round started: the fixer runs on these items.
    RoundStarted {
        /// The round's number.
        round: u32,
        /// The items' ids.
        items: Vec<String>,
        /// Whether it is a round a dead watcher left, run again with the same items.
        resumed: bool,
    },
    /// A round finished.
    RoundFinished {
        /// The round's number.
        round: u32,
        /// The fixer's run in the run history.
        run_id: Option<String>,
        /// The fixer's exit code.
        exit_code: u8,
        /// Items handled (the fixer exited 0).
        handled: Vec<String>,
        /// Items left pending for another try.
        retry: Vec<String>,
        /// Items dropped after their last try.
        dropped: Vec<String>,
        /// When the fixer failed: the last lines of its standard error (redacted).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stderr_tail: Vec<String>,
    },
    /// The watcher waits this long before the next poll.
    Backoff {
        /// The interval, in milliseconds.
        delay_ms: u64,
    },
    /// `cordon session poke` woke the watcher.
    Poke,
    /// Something went wrong that does not stop the watch (a bad line, a reviewer that timed
    /// out or crashed, a source that failed).
    Warning {
        /// What.
        message: String,
    },
    /// The watch ended.
    Ended {
        /// Why.
        reason: WatchEndReason,
        /// The exit code of `cordon session watch`.
        exit_code: u8,
        /// When the ending ended the session: its commits the host branch lacked, kept in
        /// the host repository (`cordon session pull` brings them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kept: Option<crate::record::KeptCommits>,
    },
}

/// How a reviewer's review ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewerCompletion {
    /// It exited 0.
    Exited,
    /// It printed an item containing `[REVIEW COMPLETE]` (and was ended).
    Marker,
    /// It ran out of time (a warning: the round goes on with what it posted).
    TimedOut,
    /// It failed (a warning: the round goes on with what it posted).
    Crashed,
}

/// Why a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WatchEndReason {
    /// The source said the change was merged: the session was removed.
    Merged,
    /// The source said the change was closed: the session was removed.
    Closed,
    /// Items were pending after `--max-rounds` rounds: the session is kept.
    MaxRounds,
    /// Nothing happened for `--idle-timeout`: `--on-timeout` ran, the session was removed.
    IdleTimeout,
    /// The session ended under the watcher (`cordon session remove`, gc).
    SessionEnded,
    /// The fixer failed the same way twice in a row, each time within a second (the same
    /// exit code and error output): a configuration error (a wrong path, a missing
    /// program), not retried to the limit. The session and its pending items are kept.
    FixerMisconfigured,
}

impl std::fmt::Display for WatchEndReason {
    /// Why, in words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WatchEndReason::Merged => "the change was merged; the session was removed",
            WatchEndReason::Closed => "the change was closed; the session was removed",
            WatchEndReason::MaxRounds => {
                "items were still pending after --max-rounds rounds; the session is kept"
            }
            WatchEndReason::IdleTimeout => {
                "nothing happened for --idle-timeout; the session was removed"
            }
            WatchEndReason::SessionEnded => "the session ended",
            WatchEndReason::FixerMisconfigured => {
                "the fixer fails the same way at once on every try: a configuration error, not retried (the session and its pending items are kept)"
            }
        })
    }
}

impl std::fmt::Display for ReviewerCompletion {
    /// How, in words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReviewerCompletion::Exited => "finished",
            ReviewerCompletion::Marker => "finished (review complete)",
            ReviewerCompletion::TimedOut => "timed out",
            ReviewerCompletion::Crashed => "failed",
        })
    }
}

impl WatchEndReason {
    /// The exit code of `cordon session watch` for this ending: 1 for the round limit, 2 for
    /// a misconfigured fixer, 0 otherwise.
    pub fn exit_code(self) -> u8 {
        match self {
            WatchEndReason::MaxRounds => 1,
            WatchEndReason::FixerMisconfigured => 2,
            WatchEndReason::Merged
            | WatchEndReason::Closed
            | WatchEndReason::IdleTimeout
            | WatchEndReason::SessionEnded => 0,
        }
    }
}

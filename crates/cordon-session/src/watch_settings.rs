//! [`WatchSettings`]: what a review watch runs, recorded in the session's state.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::backoff::Backoff;

/// What a watch runs and within which bounds. Recorded in the session's state so that
/// `cordon session resume` runs the same watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WatchSettings {
    /// The source: a shell command (`sh -c`) run outside the session's sandbox, with the
    /// bounds of `cordon run`, that prints review items and the change's state as JSON lines.
    pub source: String,
    /// The fixer: a shell command run in the session, writable, with the pending items in
    /// `$CORDON_REVIEW_ITEMS` and on standard input.
    pub fixer: String,
    /// The reviewers: shell commands run in the session read-only before each round.
    pub reviewers: Vec<String>,
    /// Items still pending after this many rounds end the watch (exit 1).
    pub max_rounds: u32,
    /// The first polling interval, in milliseconds.
    pub backoff_min_ms: u64,
    /// The longest polling interval, in milliseconds.
    pub backoff_max_ms: u64,
    /// No new item and no round for this long ends the watch, in milliseconds.
    pub idle_timeout_ms: u64,
    /// A shell command run (like the source) when the idle timeout ends the watch.
    pub on_timeout: Option<String>,
    /// Variables of cordon's environment passed to the source and `on_timeout` as secrets
    /// (redacted wherever output goes).
    pub secrets: Vec<String>,
    /// Variables of cordon's environment passed to the reviewers and the fixer (in their
    /// sandbox) as secrets, e.g. an agent's API key; redacted from their output.
    #[serde(default)]
    pub agent_secrets: Vec<String>,
    /// The source's (and `on_timeout`'s) time limit, in milliseconds.
    pub source_timeout_ms: u64,
    /// A reviewer's time limit, in milliseconds (then its review is complete, with a
    /// warning).
    pub reviewer_timeout_ms: u64,
    /// The fixer's time limit, in milliseconds (then it failed: its items stay pending).
    pub fixer_timeout_ms: u64,
    /// Where the source and `on_timeout` run.
    pub cwd: PathBuf,
    /// Whether every run is recorded in the run history.
    pub record: bool,
    /// The command-line options that started the watch (what `cordon session resume` runs
    /// again); empty for library callers.
    pub cli_args: Vec<String>,
}

impl WatchSettings {
    /// A watch with the defaults: 10 rounds, backoff 5 s to 5 min, idle timeout 24 h,
    /// source 5 min, reviewers and fixer 1 h each, every run recorded.
    pub fn new(
        source: impl Into<String>,
        fixer: impl Into<String>,
        cwd: impl Into<PathBuf>,
    ) -> Self {
        WatchSettings {
            source: source.into(),
            fixer: fixer.into(),
            reviewers: Vec::new(),
            max_rounds: 10,
            backoff_min_ms: 5_000,
            backoff_max_ms: 300_000,
            idle_timeout_ms: 24 * 3600 * 1000,
            on_timeout: None,
            secrets: Vec::new(),
            agent_secrets: Vec::new(),
            source_timeout_ms: 300_000,
            reviewer_timeout_ms: 3_600_000,
            fixer_timeout_ms: 3_600_000,
            cwd: cwd.into(),
            record: true,
            cli_args: Vec::new(),
        }
    }

    pub(crate) fn backoff(&self) -> Backoff {
        Backoff {
            min: Duration::from_millis(self.backoff_min_ms),
            max: Duration::from_millis(self.backoff_max_ms),
        }
    }
}

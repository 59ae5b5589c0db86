//! `cordon.session/v1`: the state of one session, written atomically under a lock.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cordon_workspace::ProcessIdentity;
use cordon_workspace::state;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::SessionError;
use crate::id::SessionId;

cordon_types::schema_tag!(
    /// The `schema` tag of a session's state: always `"cordon.session/v1"`.
    SessionRecordTag,
    "cordon.session/v1"
);

/// The default idle timeout of a session: 24 hours.
pub const DEFAULT_IDLE_TIMEOUT_S: u64 = 24 * 60 * 60;

/// The most recent runs a record keeps (older ones stay in the run history).
const MAX_RUNS_KEPT: usize = 200;

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Being created by its creator; collected by gc if the creator is gone.
    Creating,
    /// Its tree exists; programs run in it.
    Active,
    /// Its tree is gone; the record stays (with its runs) until `gc --older-than`.
    Ended,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// `cordon session remove`.
    Removed,
    /// Its review watcher's source reported the change merged.
    Merged,
    /// Its review watcher's source reported the change closed.
    Closed,
    /// Nothing happened in it for longer than its idle timeout (`cordon gc`).
    Idle,
    /// A transient session whose owner process is gone.
    OwnerGone,
    /// Its creator died while creating it.
    CreationAbandoned,
}

impl std::fmt::Display for EndReason {
    /// Why, in words (for the lines `session list`, `gc` and the watcher print).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EndReason::Removed => "removed",
            EndReason::Merged => "the change was merged",
            EndReason::Closed => "the change was closed",
            EndReason::Idle => "idle past its idle timeout",
            EndReason::OwnerGone => "transient, its creator ended",
            EndReason::CreationAbandoned => "its creation was interrupted",
        })
    }
}

/// The session's commits the host branch lacked when the session ended, kept in the host
/// repository (`refs/cordon/sessions/<id>`) so that nothing is lost: `cordon session pull`
/// still brings them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KeptCommits {
    /// The host ref holding them: `refs/cordon/sessions/<id>`.
    pub session_ref: String,
    /// The session branch's last commit.
    pub commit: cordon_git::CommitId,
    /// How many commits the host branch lacked.
    pub commits: u64,
    /// The host branch they were counted against (what `session pull` fast-forwards).
    pub branch: String,
}

impl KeptCommits {
    /// What an ending says about them: how many, where, and the command that gets them.
    pub fn describe(&self) -> String {
        let id = self.session_ref.rsplit('/').next().unwrap_or_default();
        format!(
            "its {} unpulled commit(s) are kept in {}: `cordon session pull {id}` brings them to {}",
            self.commits, self.session_ref, self.branch
        )
    }
}

/// What a writer does in the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriterActivity {
    /// The session is being created.
    Create,
    /// A program runs writable (`session exec` without `--read-only`).
    Exec,
    /// Commits from the host are imported (`session push --session`).
    Push,
    /// cordon bundles the session's branch (`session pull`).
    Pull,
}

impl std::fmt::Display for WriterActivity {
    /// What the writer does, in words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WriterActivity::Create => "creating it",
            WriterActivity::Exec => "running a program",
            WriterActivity::Push => "importing commits",
            WriterActivity::Pull => "bundling its branch",
        })
    }
}

/// The holder of a session's writer lock, as recorded when it took it. The lock itself is a
/// `flock` the kernel releases when the holder dies; this says who it was (a dead holder is
/// recognised by its pid and start time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WriterInfo {
    /// The process that took the lock.
    pub pid: u32,
    /// Its start time (`/proc/<pid>/stat` field 22), against pid reuse.
    pub start_time: Option<u64>,
    /// What it does.
    pub activity: WriterActivity,
    /// Since when (RFC 3339, UTC).
    pub since: String,
}

impl WriterInfo {
    /// Whether the recorded holder still runs.
    pub fn alive(&self) -> bool {
        ProcessIdentity {
            pid: self.pid,
            start_time: self.start_time,
        }
        .liveness()
            != cordon_workspace::Liveness::Gone
    }
}

/// One program run in the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionRun {
    /// The run's id in the run history (`cordon runs show`), when recorded.
    pub run_id: Option<String>,
    /// Whether it ran as a reviewer (the tree read-only).
    pub read_only: bool,
    /// The command line, redacted.
    pub command: Vec<String>,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// The cordon process that ran it.
    pub pid: u32,
    /// That process's start time, against pid reuse.
    pub pid_start_time: Option<u64>,
    /// Its exit code, once it ended (`None`: it is running, or its cordon died).
    pub exit_code: Option<u8>,
}

/// What the review watcher keeps between rounds (issue 12): everything it needs to continue
/// where it stopped after a crash. Sessions without a watcher keep the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewState {
    /// The watcher's phase (`idle` when none ever ran).
    pub phase: ReviewPhase,
    /// Review items waiting for the fixer, oldest first.
    #[serde(default)]
    pub pending: Vec<ReviewItem>,
    /// Review items the fixer handled, by id.
    #[serde(default)]
    pub handled: Vec<String>,
    /// Review items dropped after [`MAX_ITEM_TRIES`] failed fixer runs, by id.
    #[serde(default)]
    pub failed: Vec<String>,
    /// The last polling interval, in milliseconds (`None`: the next wait is the minimum).
    pub backoff_ms: Option<u64>,
    /// How the fixer failed in the last round, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fixer_failure: Option<FixerFailure>,
    /// The round that runs (or ran when the watcher died: it is run again with the same
    /// items).
    #[serde(default)]
    pub current_round: Option<ReviewRound>,
    /// The finished rounds, oldest first.
    #[serde(default)]
    pub history: Vec<ReviewRound>,
    /// The reviewers' runs (in the run history) since the last round; the next round takes
    /// them.
    #[serde(default)]
    pub reviewer_runs: Vec<String>,
    /// Whether the reviewers run before the next round (at the start, and after each round).
    #[serde(default)]
    pub reviews_due: bool,
    /// When something last happened for the review: a new item or a round (RFC 3339, UTC).
    #[serde(default)]
    pub last_progress: Option<String>,
    /// How many times `cordon session poke` asked the watcher to poll at once.
    #[serde(default)]
    pub pokes: u64,
    /// The watcher process, as last recorded (alive only while it holds the watcher lock).
    #[serde(default)]
    pub watcher: Option<WatcherInfo>,
    /// The watcher's settings, for `cordon session resume`.
    #[serde(default)]
    pub settings: Option<crate::watch_settings::WatchSettings>,
}

/// How many fixer runs may fail on one item before it is dropped (reported as failed).
pub const MAX_ITEM_TRIES: u32 = 3;

/// One review comment for the fixer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewItem {
    /// Its id at its origin (unique: an id seen once is never taken again).
    pub id: String,
    /// The comment (redacted; cut at 256 KiB).
    pub body: String,
    /// Who wrote it, when known.
    pub author: Option<String>,
    /// Where it is, when known.
    pub url: Option<String>,
    /// Where it came from.
    pub origin: ItemOrigin,
    /// Fixer runs that failed with it so far.
    #[serde(default)]
    pub tries: u32,
}

/// Where a review item came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ItemOrigin {
    /// The `--source` command.
    Source,
    /// A `--reviewer` run in the session.
    Reviewer,
    /// `cordon session poke --comment`.
    Poke,
}

impl std::fmt::Display for ItemOrigin {
    /// Where from, in words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ItemOrigin::Source => "the source",
            ItemOrigin::Reviewer => "a reviewer",
            ItemOrigin::Poke => "a poke",
        })
    }
}

/// How the fixer failed last (exit code, last lines of its standard error, how fast): two
/// failures alike, each within a second, are a configuration error, not something a retry
/// fixes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FixerFailure {
    /// Its exit code.
    pub exit_code: u8,
    /// The last lines of its standard error (redacted).
    pub stderr_tail: Vec<String>,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
}

/// One round: the fixer run on the pending items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewRound {
    /// Its number (1 for the first).
    pub number: u32,
    /// The ids of the items given to the fixer.
    pub items: Vec<String>,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// When it finished.
    pub finished_at: Option<String>,
    /// The fixer's run in the run history.
    pub fixer_run_id: Option<String>,
    /// The fixer's exit code.
    pub exit_code: Option<u8>,
    /// The items handled (the fixer exited 0).
    pub handled: Vec<String>,
    /// The items dropped after their last try.
    pub dropped: Vec<String>,
    /// The reviewers' runs (in the run history) whose items led to this round.
    #[serde(default)]
    pub reviewer_run_ids: Vec<String>,
}

/// The process that watches a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WatcherInfo {
    /// Its pid.
    pub pid: u32,
    /// Its start time, against pid reuse.
    pub start_time: Option<u64>,
    /// Since when it watches (RFC 3339, UTC).
    pub since: String,
}

/// Where the review watcher is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewPhase {
    /// No watcher is working on the session.
    #[default]
    Idle,
    /// Polling the source for items.
    Polling,
    /// Running the reviewers.
    Reviewing,
    /// Running a round (the fixer).
    Round,
    /// The watcher ended (merged, closed, round limit, idle timeout).
    Done,
}

impl std::fmt::Display for ReviewPhase {
    /// The phase, in words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReviewPhase::Idle => "idle",
            ReviewPhase::Polling => "polling",
            ReviewPhase::Reviewing => "reviewing",
            ReviewPhase::Round => "in a round",
            ReviewPhase::Done => "done",
        })
    }
}

/// The state of one session (`$CORDON_HOME/sessions/<id>/state.json`), printed by
/// `cordon session create|show --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-revision" = 4))]
pub struct SessionRecord {
    /// Always `cordon.session/v1`.
    pub schema: SessionRecordTag,
    /// The session's id.
    pub id: SessionId,
    /// The host repository (the top of its checkout, or its git directory when bare).
    pub repo: PathBuf,
    /// The host repository's common git directory.
    pub git_common_dir: PathBuf,
    /// The session's branch, in the session's own repository.
    pub branch: String,
    /// The host branch the session started from (what `pull` fast-forwards by default).
    pub host_branch: String,
    /// The commit the session and the host last agreed on: where it was pushed from, or what
    /// was last pulled.
    pub base_commit: cordon_git::CommitId,
    /// The session's tree (its own repository, with its `.git`). For an overlay session, an
    /// empty directory: the tree exists only inside the sandbox (see `tree_base`).
    pub path: PathBuf,
    /// An overlay session's base: the commit whose shared, read-only base tree lies under the
    /// session's own layer (`sessions/<id>/layer`, which holds its `.git` and its changes).
    /// `None`: the tree is a full checkout of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_base: Option<cordon_git::CommitId>,
    /// An overlay session's frozen layers (`$CORDON_HOME/layers/<id>`), topmost first:
    /// read-only, between its own upper layer and the base tree. A fork freezes the upper
    /// layer the session had and shares it with the new sessions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
    /// Which upper layer of its own an overlay session writes to: 0 is `layer/upper`, `n`
    /// is `layer/<n>/upper` (each fork of the session starts the next one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub layer_generation: u32,
    /// The session this one was forked from (`cordon session fork`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<SessionId>,
    /// Where the session is in its life.
    pub state: SessionStatus,
    /// Whether the session ends with the process that created it.
    pub transient: bool,
    /// Whether the session's history is shallow (`--depth`).
    pub shallow: bool,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// When something last happened in it (RFC 3339, UTC): create, push, exec, pull.
    pub last_activity: String,
    /// Idle this long, `cordon gc` ends it.
    pub idle_timeout_s: u64,
    /// Review rounds run so far (issue 12's watcher).
    pub rounds: u32,
    /// The process that created the session (a transient session's owner).
    pub owner_pid: u32,
    /// That process's start time, against pid reuse.
    pub owner_start_time: Option<u64>,
    /// The writer lock's holder as last recorded (`None`: no writer recorded).
    pub writer: Option<WriterInfo>,
    /// The most recent programs run in the session, oldest first.
    pub runs: Vec<SessionRun>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// Why it ended.
    pub end_reason: Option<EndReason>,
    /// The commits the host branch lacked when it ended, kept in the host repository
    /// (`cordon session pull` brings them); absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptCommits>,
    /// The review watcher's state.
    pub review: ReviewState,
}

impl SessionRecord {
    /// The process that created the session.
    pub fn owner(&self) -> ProcessIdentity {
        ProcessIdentity {
            pid: self.owner_pid,
            start_time: self.owner_start_time,
        }
    }

    /// How long the session has been idle, at `now`.
    pub fn idle_for(&self, now: SystemTime) -> std::time::Duration {
        humantime::parse_rfc3339(&self.last_activity)
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    }

    pub(crate) fn push_run(&mut self, run: SessionRun) {
        self.runs.push(run);
        let excess = self.runs.len().saturating_sub(MAX_RUNS_KEPT);
        self.runs.drain(..excess);
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Now, as the records write it (RFC 3339, UTC, milliseconds).
pub(crate) fn now_text() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Reads a record; `Ok(None)` when there is none.
pub(crate) fn read(path: &Path) -> Result<Option<SessionRecord>, SessionError> {
    Ok(state::read_json(path)?)
}

/// Writes a record atomically and durably (see [`state::write_json`]): readers see the old
/// record or the new one, never a mix, whenever the writer dies.
pub(crate) fn write(path: &Path, record: &SessionRecord) -> Result<(), SessionError> {
    Ok(state::write_json(path, record, state::Durability::Durable)?)
}

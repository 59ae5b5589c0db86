//! Sessions: persistent sandboxes of a repository that agents share.
//!
//! A session is an isolated copy of a repository with its own writable git history. It
//! lives across many sandboxed commands, survives the crash of whoever drives it, and hands
//! its commits back only as a verified fast-forward.
//!
//! - [`Sessions`] is the set of sessions under `CORDON_HOME`: [`create`](Sessions::create)
//!   (the host branch as a checked bundle, shallow with a depth), [`list`](Sessions::list),
//!   [`open`](Sessions::open), [`gc`](Sessions::gc).
//! - [`Session`] is one of them: [`push`](Session::push) new host commits in,
//!   [`exec`](Session::exec) a program (or [`begin_exec`](Session::begin_exec) for callers
//!   that run it themselves through `cordon_runner`) writable or [`Access::ReadOnly`],
//!   [`fork`](Session::fork) it into new sessions with its exact state (copy-on-write: its
//!   upper layer frozen and shared, [`ForkRequest`], [`ForkReport`]; a stack deeper than
//!   [`FLATTEN_DEPTH`] merged into one layer first, [`Flattened`]),
//!   [`pull`](Session::pull) its branch back as a fast-forward, [`diff`](Session::diff) it
//!   against its base, [`remove`](Session::remove),
//!   [`watch`](Session::watch) it: review comments fed to a fixer in rounds until the change
//!   is merged or closed ([`WatchSettings`], [`ReviewEvent`]), [`poke`](Session::poke) the
//!   watcher.
//! - [`SessionRecord`] (`cordon.session/v1`) is its state file,
//!   `$CORDON_HOME/sessions/<id>/state.json`: written atomically (temp file, fsync, rename)
//!   under a lock, so `kill -9` at any moment leaves the old state or the new one. One
//!   writer at a time holds the session's writer lock (a `flock` the kernel releases when the
//!   holder dies); readers never wait.
//!
//! The session's repository belongs to whatever runs in it (config, hooks, refs, even symlinks
//! in `.git`), so cordon never runs git on it from the host once a program has run: imports
//! and the bundle of the session's branch run in the session's sandbox, and the bundle that
//! comes out is checked on the host ([`check_bundle_file`], [`import_into_host`]) before
//! anything of it reaches the host repository.
//!
//! ```no_run
//! use std::time::Duration;
//! use cordon_runner::{Hooks, RunRequest};
//! use cordon_session::{Access, CreateRequest, PullRequest, Sessions};
//!
//! # fn main() -> Result<(), cordon_session::SessionError> {
//! let sessions = Sessions::from_env()?;
//! let record = sessions.create(&CreateRequest::new("/path/to/project"))?;
//! let session = sessions.open(&record.id)?;
//! let agent = RunRequest::new(["sh", "-c", "echo hi > x && git add x && git commit -qm x"], "");
//! session.exec(agent, Access::Write, Duration::ZERO, Hooks::default())?;
//! let report = session.pull(&PullRequest::default())?;
//! println!("{:?}: {} new commit(s)", report.outcome, report.commits);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backoff;
mod diff;
mod error;
mod exec;
mod flatten;
mod fork;
mod gc;
mod id;
mod layout;
mod pull;
mod push;
mod record;
mod reports;
mod review_items;
mod sandboxed;
mod sessions;
mod watch;
mod watch_events;
mod watch_runs;
mod watch_settings;

pub use backoff::Backoff;
pub use diff::{MAX_DIFF_BYTES, SessionDiff, SessionDiffTag};
pub use error::{SessionError, SessionErrorClass, SessionErrorKind};
pub use exec::{Access, ExecLease};
pub use flatten::{FLATTEN_DEPTH, Flattened};
pub use fork::{ForkReport, ForkReportTag, ForkRequest, MAX_FORKS, MAX_LAYERS};
pub use id::SessionId;
pub use pull::{
    DEFAULT_MAX_CHECKOUT_BYTES, DEFAULT_MAX_CHECKOUT_FILE_BYTES, DEFAULT_PULL_WAIT, PullRequest,
    import_into_host,
};
pub use push::PushRequest;
pub use record::{
    DEFAULT_IDLE_TIMEOUT_S, EndReason, ItemOrigin, KeptCommits, MAX_ITEM_TRIES, ReviewItem,
    ReviewPhase, ReviewRound, ReviewState, SessionRecord, SessionRecordTag, SessionRun,
    SessionStatus, WatcherInfo, WriterActivity, WriterInfo,
};
pub use reports::{
    PullOutcome, PullReport, PullReportTag, PushReport, PushReportTag, SessionGcEntry,
    SessionGcFailure, SessionGcReport, SessionList, SessionListTag,
};
pub use review_items::{
    MAX_BODY_BYTES, MAX_ID_BYTES, MAX_LINE_BYTES, REVIEW_COMPLETE, SourceState,
};
pub use sessions::{CreateRequest, DEFAULT_MAX_BUNDLE_BYTES, Session, Sessions, check_bundle_file};
pub use watch::MAX_PENDING;
pub use watch_events::{
    ReviewEvent, ReviewEventKind, ReviewEventTag, ReviewerCompletion, WatchEndReason,
};
pub use watch_settings::WatchSettings;

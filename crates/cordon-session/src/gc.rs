//! Garbage collection of sessions: [`Sessions::gc`] and [`Sessions::reconcile_on_start`].
//!
//! | record / condition                                     | what happens           |
//! |--------------------------------------------------------|------------------------|
//! | `creating`, creator gone (pid + start time)            | ended, `creation_abandoned` |
//! | `active`, transient, owner gone                        | ended, `owner_gone`    |
//! | `active`, idle longer than its `idle_timeout_s`        | ended, `idle`          |
//! | `ended`, ended longer ago than `older_than` (full gc)  | record deleted         |
//! | directory without a record, older than a minute (full) | deleted                |
//! | `active`, holds frozen layers it no longer stands on (full) | lets go of them once no program runs over them |
//!
//! Ending takes the writer lock without waiting: a session with a writer running is kept.
//! Ending keeps the commits the host branch lacks (`refs/cordon/sessions/<id>`); a session
//! whose commits cannot be kept is not ended (a failure of this gc, tried again by the next).

use std::time::{Duration, SystemTime};

use cordon_workspace::Liveness;

use crate::error::SessionError;
use crate::id::SessionId;
use crate::record::{self, EndReason, KeptCommits, SessionRecord, SessionStatus};
use crate::reports::{SessionGcEntry, SessionGcFailure, SessionGcReport};
use crate::sessions::{Session, Sessions};
use cordon_workspace::state::FileLock;

/// A directory younger than this without a record may be a create in progress.
const ORPHAN_GRACE: Duration = Duration::from_secs(60);

enum Outcome {
    Kept,
    Ended(EndReason, Option<KeptCommits>),
    Deleted,
}

impl Sessions {
    /// Ends idle and orphaned sessions; with `older_than`, also deletes the records of
    /// sessions that ended longer ago, and directories without a record.
    pub fn gc(&self, older_than: Option<Duration>) -> Result<SessionGcReport, SessionError> {
        self.collect(older_than, true)
    }

    /// The cheap gc each cordon session command starts with: ends what must end (transient
    /// sessions whose owner is gone, idle ones, abandoned creations); deletes nothing else.
    pub fn reconcile_on_start(&self) -> Result<SessionGcReport, SessionError> {
        self.collect(None, false)
    }

    fn collect(
        &self,
        older_than: Option<Duration>,
        full: bool,
    ) -> Result<SessionGcReport, SessionError> {
        let mut report = SessionGcReport::default();
        for id in self.ids()? {
            match self.examine(&id, older_than, full) {
                Ok(Outcome::Kept) => report.kept += 1,
                Ok(Outcome::Ended(reason, kept)) => report.ended.push(SessionGcEntry {
                    id,
                    reason: Some(reason),
                    kept,
                }),
                Ok(Outcome::Deleted) => report.deleted.push(id),
                Err(e) => report.failures.push(SessionGcFailure {
                    id,
                    message: e.to_string(),
                }),
            }
        }
        Ok(report)
    }

    fn examine(
        &self,
        id: &SessionId,
        older_than: Option<Duration>,
        full: bool,
    ) -> Result<Outcome, SessionError> {
        let dir = self.layout.dir(id);
        let Some(rec) = record::read(&self.layout.state(id)).unwrap_or(None) else {
            let old = std::fs::metadata(&dir)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > ORPHAN_GRACE);
            if full && old && !self.layout.state(id).exists() {
                cordon_workspace::remove_tree(&dir).map_err(|e| SessionError::io(&dir, e))?;
                return Ok(Outcome::Deleted);
            }
            return Ok(Outcome::Kept);
        };
        if rec.state == SessionStatus::Ended {
            let expired = older_than.is_some_and(|limit| {
                rec.ended_at
                    .as_deref()
                    .and_then(|t| humantime::parse_rfc3339(t).ok())
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .is_some_and(|age| age > limit)
            });
            if full && expired {
                cordon_workspace::remove_tree(&dir).map_err(|e| SessionError::io(&dir, e))?;
                return Ok(Outcome::Deleted);
            }
            return Ok(Outcome::Kept);
        }
        let Some(reason) = verdict(&rec) else {
            if full && rec.tree_base.is_some() {
                // Frozen layers a flatten replaced, once nothing runs over them.
                let session = Session {
                    sessions: self.clone(),
                    id: id.clone(),
                };
                session.release_stale_layers()?;
            }
            return Ok(Outcome::Kept);
        };
        let Some(_writer) = FileLock::try_acquire(&self.layout.writer_lock(id))? else {
            return Ok(Outcome::Kept);
        };
        let session = Session {
            sessions: self.clone(),
            id: id.clone(),
        };
        // Decided again under the lock: an exec may have started meanwhile.
        match verdict(&session.record()?) {
            Some(reason) => {
                let ended = session.end(reason, true)?;
                Ok(Outcome::Ended(reason, ended.kept))
            }
            None => {
                let _ = reason;
                Ok(Outcome::Kept)
            }
        }
    }
}

/// Why a live session should end, if it should.
fn verdict(rec: &SessionRecord) -> Option<EndReason> {
    let owner = rec.owner().liveness();
    match rec.state {
        SessionStatus::Ended => None,
        SessionStatus::Creating => {
            // The creator is recorded as the writer (the owner may be another process).
            let creator = rec.writer.as_ref().map_or(owner, |w| {
                cordon_workspace::ProcessIdentity {
                    pid: w.pid,
                    start_time: w.start_time,
                }
                .liveness()
            });
            (creator == Liveness::Gone).then_some(EndReason::CreationAbandoned)
        }
        SessionStatus::Active => {
            if rec.transient && owner == Liveness::Gone {
                Some(EndReason::OwnerGone)
            } else if rec.idle_for(SystemTime::now()) > Duration::from_secs(rec.idle_timeout_s) {
                Some(EndReason::Idle)
            } else {
                None
            }
        }
    }
}

//! Forking a session ([`Session::fork`]): new sessions that start from its exact current
//! state — committed, uncommitted and untracked files, its git history and branch — without
//! copying its tree.
//!
//! An overlay session is its upper layer over frozen layers over a base tree. A fork
//! freezes the upper layer (a rename into `$CORDON_HOME/layers/<id>`, see
//! [`cordon_workspace::Workspaces::publish_layer`]) and puts it under a new, empty upper
//! layer for each fork *and* for the source, which goes on writing into a fresh layer of its
//! own (`layer/<n>/`). Nothing is copied: a fork costs the same whatever the tree holds, and
//! disk grows only with what each session changes afterwards. An upper layer with nothing
//! in it (the source was forked and has not written since) is not frozen again: the forks
//! share the layers the source has, so the stack does not grow.
//!
//! A source whose stack is [`crate::FLATTEN_DEPTH`] layers deep first has them merged into
//! one ([`crate::flatten`]'s order), so that the forks never stand on more than that.
//!
//! Order, against a crash at any point (the source holds its writer lock throughout):
//! 1. each fork's directory (claimed by `mkdir`) with an empty layer of its own;
//! 2. the frozen layer reserved, its holds written (the source and every fork);
//! 3. the source's record names the frozen layer and its next upper layer;
//! 4. the source's upper layer renamed into the frozen layer (a crash between 3 and 4 is
//!    finished by whoever next mounts the source, in `Session::overlay`);
//! 5. each fork's record, active, naming its parent.
//!
//! A crash before 5 leaves fork directories without records, which gc deletes; their holds
//! then prove nothing and gc lets the layers go.

use std::time::Duration;

use cordon_workspace::{BaseHolder, ProcessIdentity, Workspaces};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{SessionError, SessionErrorKind};
use crate::id::SessionId;
use crate::record::{self, ReviewState, SessionRecord, SessionStatus};
use crate::sessions::Session;

/// The most sessions one fork makes.
pub const MAX_FORKS: u32 = 100;

/// The most frozen layers a session's tree may have: past it, a fork is refused. Forks
/// flatten a stack deeper than [`crate::FLATTEN_DEPTH`] first, so only a stack whose flatten
/// failed (reported in the fork's `flatten_failure`) ever grows this deep. Each lookup of a
/// name that is in no upper layer walks the layers, so a deep stack slows every program in
/// the session (`bench/session-depth.sh`).
pub const MAX_LAYERS: usize = 32;

cordon_types::schema_tag!(
    /// The `schema` tag of a fork's report: always `"cordon.session-fork/v1"`.
    ForkReportTag,
    "cordon.session-fork/v1"
);

/// What to fork.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkRequest {
    /// How many sessions to make (1 to [`MAX_FORKS`]).
    pub count: u32,
    /// How long to wait for a writer in the source to finish (its state must hold still).
    pub wait: Duration,
    /// Whether the forks end with their owner process.
    pub transient: bool,
    /// The forks' owner (default: this process).
    pub owner: Option<ProcessIdentity>,
}

impl ForkRequest {
    /// `count` persistent forks, refusing at once when a writer runs in the source.
    pub fn new(count: u32) -> ForkRequest {
        ForkRequest {
            count,
            wait: Duration::ZERO,
            transient: false,
            owner: None,
        }
    }
}

/// What a fork made (`cordon session fork --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkReport {
    /// Always `cordon.session-fork/v1`.
    pub schema: ForkReportTag,
    /// The session forked.
    pub source: SessionId,
    /// The layer the source's upper layer became, shared by the source and the forks;
    /// `None` when it had nothing to freeze (the forks share the layers it had).
    pub frozen_layer: Option<String>,
    /// How many frozen layers the forks' trees have (the stack's depth above the base).
    pub depth: usize,
    /// The source's frozen layers merged into one before the fork (its stack had reached
    /// [`crate::FLATTEN_DEPTH`]); absent when there was no need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flattened: Option<crate::Flattened>,
    /// Why the source's layers could not be merged (the fork went on over the deeper stack);
    /// absent when they were, or did not need to be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flatten_failure: Option<String>,
    /// The new sessions.
    pub sessions: Vec<SessionRecord>,
}

impl Session {
    /// Forks the session into `request.count` new sessions with its exact current state
    /// (see the module documentation); the source goes on as it was.
    pub fn fork(&self, request: &ForkRequest) -> Result<ForkReport, SessionError> {
        self.fork_or_stop(request, &|| false)
    }

    /// Like [`Session::fork`], and the wait for the source's writer ends as soon as `stop`
    /// says so (the caller's cancel): [`SessionErrorKind::WaitCancelled`].
    pub fn fork_or_stop(
        &self,
        request: &ForkRequest,
        stop: &dyn Fn() -> bool,
    ) -> Result<ForkReport, SessionError> {
        if request.count == 0 || request.count > MAX_FORKS {
            return Err(SessionError::new(SessionErrorKind::ForkCount(
                request.count,
            )));
        }
        // The state holds still: no writer in the source until the forks exist.
        let _writer = self.writer_lock_or_stop(request.wait, stop)?;
        let mut rec = self.active_record()?;
        let Some(base) = rec.tree_base.clone() else {
            return Err(SessionError::new(SessionErrorKind::NotForkable).with_id(&self.id));
        };
        // A stack as deep as the flatten depth is merged into one layer first, so that the
        // forks (one layer deeper) never stand on more than that.
        let (mut flattened, mut flatten_failure) = (None, None);
        if rec.layers.len() >= crate::flatten::flatten_depth() {
            match self.flatten_locked(&rec) {
                Ok((new, done)) => {
                    rec = new;
                    flattened = Some(done);
                }
                Err(e) => flatten_failure = Some(e.to_string()),
            }
        }
        if rec.layers.len() >= MAX_LAYERS {
            return Err(
                SessionError::new(SessionErrorKind::TooManyLayers(rec.layers.len()))
                    .with_id(&self.id),
            );
        }
        let mut ids = Vec::with_capacity(request.count as usize);
        let result = self
            .fork_into(&rec, &base, request, &mut ids)
            .map(|report| ForkReport {
                flattened,
                flatten_failure,
                ..report
            });
        if result.is_err() {
            let layout = &self.sessions.layout;
            for id in &ids {
                let _ = cordon_workspace::remove_tree(&layout.dir(id));
            }
        }
        result.map_err(|e| e.with_id(&self.id))
    }

    fn fork_into(
        &self,
        rec: &SessionRecord,
        base: &cordon_git::CommitId,
        request: &ForkRequest,
        ids: &mut Vec<SessionId>,
    ) -> Result<ForkReport, SessionError> {
        let layout = &self.sessions.layout;
        let workspaces = Workspaces::new(self.sessions.home());
        let holder = |id: &SessionId| BaseHolder {
            name: format!("session-{id}"),
            proof: layout.layer(id),
        };
        // 1. The forks' directories, each with an empty layer of its own.
        for _ in 0..request.count {
            let id = self.sessions.claim_id()?;
            ids.push(id.clone());
            for dir in [
                layout.tree(&id),
                layout.layer(&id).join("upper"),
                layout.layer(&id).join("work"),
            ] {
                std::fs::create_dir_all(&dir).map_err(|e| SessionError::io(&dir, e))?;
            }
        }
        let fork_holders: Vec<BaseHolder> = ids.iter().map(holder).collect();
        for h in &fork_holders {
            workspaces
                .hold_existing_base(base, h)
                .and_then(|_| workspaces.hold_layers(&rec.layers, h))
                .map_err(|e| workspace_error(&h.proof, e))?;
        }
        // 2-4. The source's upper layer frozen, unless it holds nothing.
        let upper = layout
            .generation(&self.id, rec.layer_generation)
            .join("upper");
        let frozen = if is_empty_dir(&upper)? {
            None
        } else {
            let mut holders = fork_holders.clone();
            holders.push(holder(&self.id));
            let frozen = workspaces
                .reserve_layer(&holders)
                .map_err(|e| workspace_error(&upper, e))?;
            let generation = rec.layer_generation + 1;
            let next = layout.generation(&self.id, generation);
            for dir in [next.join("upper"), next.join("work")] {
                std::fs::create_dir_all(&dir).map_err(|e| SessionError::io(&dir, e))?;
            }
            self.update(|r| {
                r.layers.insert(0, frozen.clone());
                r.layer_generation = generation;
                r.last_activity = record::now_text();
            })?;
            workspaces
                .publish_layer(&frozen, &upper)
                .map_err(|e| workspace_error(&upper, e))?;
            // The old layer's work directory is overlayfs's scratch: nothing to keep.
            let _ = cordon_workspace::remove_tree(
                &layout
                    .generation(&self.id, rec.layer_generation)
                    .join("work"),
            );
            Some(frozen)
        };
        let layers: Vec<String> = frozen.iter().chain(&rec.layers).cloned().collect();
        // 5. The forks' records.
        let owner = request.owner.unwrap_or_else(ProcessIdentity::current);
        let now = record::now_text();
        let mut sessions = Vec::with_capacity(ids.len());
        for id in ids.iter() {
            let fork = SessionRecord {
                id: id.clone(),
                path: layout.tree(id),
                layers: layers.clone(),
                layer_generation: 0,
                parent: Some(self.id.clone()),
                state: SessionStatus::Active,
                transient: request.transient,
                created_at: now.clone(),
                last_activity: now.clone(),
                rounds: 0,
                owner_pid: owner.pid,
                owner_start_time: owner.start_time,
                writer: None,
                runs: Vec::new(),
                ended_at: None,
                end_reason: None,
                kept: None,
                review: ReviewState::default(),
                ..rec.clone()
            };
            record::write(&layout.state(id), &fork)?;
            sessions.push(fork);
        }
        Ok(ForkReport {
            schema: ForkReportTag,
            source: self.id.clone(),
            frozen_layer: frozen,
            depth: layers.len(),
            flattened: None,
            flatten_failure: None,
            sessions,
        })
    }
}

fn is_empty_dir(dir: &std::path::Path) -> Result<bool, SessionError> {
    let mut entries = std::fs::read_dir(dir).map_err(|e| SessionError::io(dir, e))?;
    Ok(entries.next().is_none())
}

fn workspace_error(path: &std::path::Path, e: cordon_workspace::WorkspaceError) -> SessionError {
    SessionError::io(path, std::io::Error::other(e.to_string()))
}

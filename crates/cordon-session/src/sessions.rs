//! [`Sessions`] and [`Session`]: create, find, list and end sessions.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_git::{BundleHeader, Repo};
use cordon_workspace::ProcessIdentity;

use crate::error::{SessionError, SessionErrorKind};
use crate::id::SessionId;
use crate::layout::Layout;
use crate::record::{
    self, DEFAULT_IDLE_TIMEOUT_S, EndReason, ReviewState, SessionRecord, SessionRecordTag,
    SessionStatus, WriterActivity, WriterInfo,
};
use cordon_workspace::state::{Create, FileLock};

/// The default largest bundle that crosses the boundary: 1 GiB.
pub const DEFAULT_MAX_BUNDLE_BYTES: u64 = 1 << 30;

/// The sessions kept under one `CORDON_HOME`.
///
/// Cheap to clone; safe to use from many processes at once (each session has a state lock
/// and a writer lock). Programs run in a session are sandboxed with cordon's home masked, so
/// the home must be this process's `CORDON_HOME` ([`Sessions::from_env`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sessions {
    pub(crate) layout: Layout,
}

/// One session, by id: what every operation on an existing session goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub(crate) sessions: Sessions,
    pub(crate) id: SessionId,
}

/// What to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    /// The host repository (any directory of its checkout).
    pub repo: PathBuf,
    /// The branch to start from (`HEAD`: the checked-out branch).
    pub rev: String,
    /// The session's branch name (default: the host branch's name).
    pub branch: Option<String>,
    /// Only this many commits of history (a shallow session).
    pub depth: Option<u32>,
    /// Whether the session ends with its owner process.
    pub transient: bool,
    /// Idle this long, `gc` ends the session.
    pub idle_timeout: Duration,
    /// The owner (default: this process). The CLI names its parent, as for workspaces.
    pub owner: Option<ProcessIdentity>,
    /// The largest bundle accepted.
    pub max_bundle_bytes: u64,
}

impl CreateRequest {
    /// A persistent session of `repo` at its checked-out branch, with the defaults.
    pub fn new(repo: impl Into<PathBuf>) -> CreateRequest {
        CreateRequest {
            repo: repo.into(),
            rev: "HEAD".to_owned(),
            branch: None,
            depth: None,
            transient: false,
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_S),
            owner: None,
            max_bundle_bytes: DEFAULT_MAX_BUNDLE_BYTES,
        }
    }
}

impl Sessions {
    /// The sessions under `home` (created on first use).
    pub fn new(home: impl Into<PathBuf>) -> Sessions {
        Sessions {
            layout: Layout::new(home.into()),
        }
    }

    /// The sessions under the `CORDON_HOME` of this process's environment.
    pub fn from_env() -> Result<Sessions, SessionError> {
        cordon_types::cordon_home()
            .map(Sessions::new)
            .map_err(|e| SessionError::new(SessionErrorKind::HomeUnknown(e)))
    }

    /// The `CORDON_HOME` directory.
    pub fn home(&self) -> &Path {
        self.layout.home()
    }

    /// A session by id; fails when there is none.
    pub fn open(&self, id: &SessionId) -> Result<Session, SessionError> {
        let session = Session {
            sessions: self.clone(),
            id: id.clone(),
        };
        session.record()?;
        Ok(session)
    }

    /// A session by its id as text (validated first).
    pub fn open_str(&self, id: &str) -> Result<Session, SessionError> {
        self.open(&id.parse()?)
    }

    /// Every session with a readable record, oldest first.
    pub fn list(&self) -> Result<Vec<SessionRecord>, SessionError> {
        let mut records: Vec<SessionRecord> = self
            .ids()?
            .iter()
            .filter_map(|id| record::read(&self.layout.state(id)).ok().flatten())
            .collect();
        records.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        Ok(records)
    }

    /// The ids of every session directory.
    pub(crate) fn ids(&self) -> Result<Vec<SessionId>, SessionError> {
        Ok(self
            .layout
            .entry_names()?
            .iter()
            .filter_map(|name| name.parse().ok())
            .collect())
    }

    /// Creates a session: bundles the branch of the host repository (`git bundle create`,
    /// shallow with `depth`), checks the bundle, and imports it into a new repository of the
    /// session's own. The record is written first (state `creating`, this process as
    /// creator), so a crash leaves something gc collects; on failure everything is removed.
    pub fn create(&self, request: &CreateRequest) -> Result<SessionRecord, SessionError> {
        let host = Repo::open(&request.repo)?;
        if !host.has_commits() {
            // A fresh `git init`: HEAD names a branch without a commit.
            return Err(SessionError::new(SessionErrorKind::NoCommits));
        }
        let full = match host.full_ref_name(&request.rev)? {
            Some(full) if full.starts_with("refs/heads/") => full,
            _ => {
                return Err(SessionError::new(SessionErrorKind::NotABranch(
                    request.rev.clone(),
                )));
            }
        };
        let host_branch = full["refs/heads/".len()..].to_owned();
        let branch = request
            .branch
            .clone()
            .unwrap_or_else(|| host_branch.clone());
        cordon_git::check_branch_name(&branch)?;
        let commit = host.resolve_commit(&full)?;
        let sessions_dir = self.layout.sessions();
        std::fs::create_dir_all(&sessions_dir).map_err(|e| SessionError::io(&sessions_dir, e))?;
        let id = self.claim_id()?;
        let owner = request.owner.unwrap_or_else(ProcessIdentity::current);
        let now = record::now_text();
        let mut rec = SessionRecord {
            schema: SessionRecordTag,
            id: id.clone(),
            repo: host.toplevel().unwrap_or(host.common_dir()).to_owned(),
            git_common_dir: host.common_dir().to_owned(),
            branch: branch.clone(),
            host_branch,
            base_commit: commit.clone(),
            path: self.layout.tree(&id),
            tree_base: None,
            layers: Vec::new(),
            layer_generation: 0,
            parent: None,
            state: SessionStatus::Creating,
            transient: request.transient,
            shallow: request.depth.is_some(),
            created_at: now.clone(),
            last_activity: now.clone(),
            idle_timeout_s: request.idle_timeout.as_secs().max(1),
            rounds: 0,
            owner_pid: owner.pid,
            owner_start_time: owner.start_time,
            // The creator (this process; the owner may be another one): gc ends the creation
            // once it is gone.
            writer: Some(WriterInfo {
                pid: std::process::id(),
                start_time: ProcessIdentity::current().start_time,
                activity: WriterActivity::Create,
                since: now.clone(),
            }),
            runs: Vec::new(),
            ended_at: None,
            end_reason: None,
            kept: None,
            review: ReviewState::default(),
        };
        let result = (|| {
            // Overlay where this host mounts it: the commit's base tree, held for the session.
            let workspaces = cordon_workspace::Workspaces::new(self.layout.home());
            let strategy = std::env::var(cordon_workspace::STRATEGY_ENV).unwrap_or_default();
            if strategy != "git-worktree" && workspaces.overlay_support().is_ok() {
                let layer = self.layout.layer(&id);
                for dir in [rec.path.clone(), layer.join("upper"), layer.join("work")] {
                    std::fs::create_dir_all(&dir).map_err(|e| SessionError::io(&dir, e))?;
                }
                let holder = cordon_workspace::BaseHolder {
                    name: format!("session-{id}"),
                    proof: layer,
                };
                workspaces.hold_base(&host, &commit, &holder).map_err(|e| {
                    SessionError::io(&rec.path, std::io::Error::other(e.to_string()))
                })?;
                rec.tree_base = Some(commit.clone());
            }
            record::write(&self.layout.state(&id), &rec)?;
            let transfer = self.layout.transfer(&id, "create");
            let imported = self.import_new(&host, &full, &commit, request, &rec, &transfer);
            let _ = cordon_workspace::remove_tree(&transfer);
            imported?;
            let _lock = FileLock::acquire(&self.layout.state_lock(&id), Create::IfMissing)?;
            rec.state = SessionStatus::Active;
            rec.writer = None;
            rec.last_activity = record::now_text();
            record::write(&self.layout.state(&id), &rec)
        })();
        match result {
            Ok(()) => Ok(rec),
            Err(e) => {
                let _ = cordon_workspace::remove_tree(&self.layout.dir(&id));
                Err(e.with_id(&id))
            }
        }
    }

    /// Picks a fresh random id by creating its directory (`mkdir` is atomic: a collision
    /// with a live or ended session picks again).
    pub(crate) fn claim_id(&self) -> Result<SessionId, SessionError> {
        loop {
            let id = SessionId::random()?;
            let dir = self.layout.dir(&id);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(id),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(SessionError::io(&dir, e)),
            }
        }
    }

    /// Bundles `full` of the host (through a shallow clone when `depth` is set), checks the
    /// bundle, and imports it into a new repository at the session's tree. The new
    /// repository is cordon's own until the first program runs, so this runs on the host.
    fn import_new(
        &self,
        host: &Repo,
        full: &str,
        commit: &cordon_git::CommitId,
        request: &CreateRequest,
        rec: &SessionRecord,
        transfer: &Path,
    ) -> Result<(), SessionError> {
        std::fs::create_dir(transfer).map_err(|e| SessionError::io(transfer, e))?;
        let bundle = transfer.join("push.bundle");
        let shallow = match request.depth {
            Some(depth) => {
                let staging = transfer.join("staging.git");
                let staged = host.shallow_clone(&staging, full, depth.max(1))?;
                staged.create_bundle(&bundle, &[full.to_owned()])?;
                std::fs::read(staging.join("shallow")).ok()
            }
            None => {
                host.create_bundle(&bundle, &[full.to_owned()])?;
                None
            }
        };
        check_bundle_file(&bundle, full, Some(commit), request.max_bundle_bytes)?;
        // An overlay session's repository is made in its upper layer, over the commit's
        // shared base tree; otherwise in its own full checkout.
        let work_tree = match &rec.tree_base {
            Some(_) => self.layout.layer(&rec.id).join("upper"),
            None => rec.path.clone(),
        };
        let session = Repo::init(&work_tree, &rec.branch)?;
        if let Some(shallow) = shallow {
            let path = work_tree.join(".git/shallow");
            std::fs::write(&path, shallow).map_err(|e| SessionError::io(&path, e))?;
        }
        session
            .verify_bundle(&bundle)
            .map_err(|e| refused(format!("git bundle verify: {e}")))?;
        // The bundle is the host's own history, going into a repository cordon just made:
        // there is nothing to check it against (what comes back is checked on pull).
        session
            .fetch_bundle_checked(&bundle, &format!("{full}:refs/heads/{}", rec.branch), false)
            .map_err(|e| refused(format!("its objects: {e}")))?;
        match &rec.tree_base {
            // The files are the base tree's: its index (their stat data as the overlay shows
            // them) is the session's, and `git status` there reads no file it need not.
            Some(base_commit) => {
                let base = cordon_workspace::Workspaces::new(self.layout.home())
                    .existing_base(base_commit)
                    .ok_or_else(|| refused("the base tree vanished"))?;
                let index = work_tree.join(".git/index");
                std::fs::copy(&base.index, &index).map_err(|e| SessionError::io(&index, e))?;
            }
            None => session.checkout_head()?,
        }
        Ok(())
    }
}

pub(crate) fn refused(why: impl Into<String>) -> SessionError {
    SessionError::new(SessionErrorKind::BundleRefused(why.into()))
}

/// Checks a bundle file before git imports anything from it: a regular file (never a
/// symlink) of at most `max_bytes`, a well-formed header naming exactly one ref, `expected_ref`
/// (at `expected_tip` when given) — no tags, no other branch, nothing outside `refs/heads/`.
pub fn check_bundle_file(
    path: &Path,
    expected_ref: &str,
    expected_tip: Option<&cordon_git::CommitId>,
    max_bytes: u64,
) -> Result<BundleHeader, SessionError> {
    let meta = path
        .symlink_metadata()
        .map_err(|e| SessionError::io(path, e))?;
    if !meta.is_file() {
        return Err(refused("it is not a regular file"));
    }
    if meta.len() > max_bytes {
        return Err(refused(format!(
            "it is {} bytes, more than the limit of {max_bytes} bytes (--max-bundle)",
            meta.len()
        )));
    }
    let header = BundleHeader::read(path).map_err(|e| refused(e.to_string()))?;
    if !expected_ref.starts_with("refs/heads/") {
        return Err(refused(format!("{expected_ref} is not a branch")));
    }
    match header.refs.as_slice() {
        [(tip, name)] if name == expected_ref => {
            if let Some(expected) = expected_tip
                && tip != expected
            {
                return Err(refused(format!("{name} is at {tip}, expected {expected}")));
            }
        }
        refs => {
            let names: Vec<&str> = refs.iter().map(|(_, n)| n.as_str()).collect();
            return Err(refused(format!(
                "it must carry exactly the ref {expected_ref}, it carries {names:?}"
            )));
        }
    }
    Ok(header)
}

impl Session {
    /// An overlay session's layers as the sandbox mounts them (`None`: a full checkout): its
    /// current upper layer over its frozen layers over the base tree.
    pub(crate) fn overlay(
        &self,
        rec: &SessionRecord,
    ) -> Result<Option<cordon_runner::OverlayMount>, SessionError> {
        let Some(commit) = &rec.tree_base else {
            return Ok(None);
        };
        let workspaces = cordon_workspace::Workspaces::new(self.sessions.home());
        let base = workspaces.existing_base(commit).ok_or_else(|| {
            SessionError::io(
                self.sessions.home().join("bases").join(commit.as_str()),
                std::io::Error::other("the session's base tree is missing"),
            )
        })?;
        let mut lowers = Vec::with_capacity(rec.layers.len() + 1);
        for (i, id) in rec.layers.iter().enumerate() {
            let layer = workspaces.frozen_layer(id);
            if i == 0 && !layer.is_dir() && rec.layer_generation > 0 {
                // A fork that died between recording the freeze and making it: the upper
                // layer it froze is still where it was.
                let previous = self
                    .sessions
                    .layout
                    .generation(&self.id, rec.layer_generation - 1)
                    .join("upper");
                workspaces
                    .publish_layer(id, &previous)
                    .map_err(|e| SessionError::io(&layer, std::io::Error::other(e.to_string())))?;
            }
            lowers.push(layer);
        }
        lowers.push(base.tree);
        let layer = self
            .sessions
            .layout
            .generation(&self.id, rec.layer_generation);
        let layer = layer
            .canonicalize()
            .map_err(|e| SessionError::io(&layer, e))?;
        Ok(Some(cordon_runner::OverlayMount {
            lowers,
            layer,
            git_dir: None,
            dot_git: None,
            caches: Vec::new(),
        }))
    }

    /// The session's own git directory as the host sees it (an overlay's is in its upper
    /// layer: the base tree never has a `.git`); `None` for a forked overlay session, whose
    /// git directory is spread over its layers (seen whole only in a sandbox).
    pub(crate) fn git_dir(&self, rec: &SessionRecord) -> Option<PathBuf> {
        match rec.tree_base {
            Some(_) if !rec.layers.is_empty() => None,
            Some(_) => Some(self.sessions.layout.layer(&self.id).join("upper/.git")),
            None => Some(rec.path.join(".git")),
        }
    }

    /// The session's id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The session's current record.
    pub fn record(&self) -> Result<SessionRecord, SessionError> {
        record::read(&self.sessions.layout.state(&self.id))
            .and_then(|r| r.ok_or_else(|| SessionError::new(SessionErrorKind::NotFound)))
            .map_err(|e| e.with_id(&self.id))
    }

    /// The record, which must be active.
    pub(crate) fn active_record(&self) -> Result<SessionRecord, SessionError> {
        let rec = self.record()?;
        match rec.state {
            SessionStatus::Active => Ok(rec),
            SessionStatus::Ended => {
                Err(SessionError::new(SessionErrorKind::Ended).with_id(&self.id))
            }
            SessionStatus::Creating => {
                Err(SessionError::new(SessionErrorKind::NotReady).with_id(&self.id))
            }
        }
    }

    /// Changes the record under its lock (read again under the lock, written atomically).
    pub(crate) fn update(
        &self,
        change: impl FnOnce(&mut SessionRecord),
    ) -> Result<SessionRecord, SessionError> {
        let layout = &self.sessions.layout;
        let _lock = FileLock::acquire(&layout.state_lock(&self.id), Create::IfMissing)?;
        let mut rec = self.record()?;
        change(&mut rec);
        record::write(&layout.state(&self.id), &rec).map_err(|e| e.with_id(&self.id))?;
        Ok(rec)
    }

    /// Changes the review watcher's state and the round count under the state lock, written
    /// atomically (for the review watcher: a crash leaves the state before or after, never
    /// between). Also counts as activity.
    pub fn update_review(
        &self,
        change: impl FnOnce(&mut ReviewState, &mut u32),
    ) -> Result<SessionRecord, SessionError> {
        self.active_record()?;
        self.update(|rec| {
            change(&mut rec.review, &mut rec.rounds);
            rec.last_activity = record::now_text();
        })
    }

    /// Ends the session (`cordon session remove`): asks whatever runs in it to stop (SIGTERM
    /// to the cordon processes running its programs, which end their sandboxes), waits for
    /// the writer lock (at most `wait`), keeps the commits the host branch lacks in the host
    /// repository (`refs/cordon/sessions/<id>`, the record's `kept`), deletes its tree and
    /// marks it ended. Its record and its runs in the history stay. When its commits cannot
    /// be kept, it is not ended (see [`Session::discard`]).
    pub fn remove(&self, wait: Duration) -> Result<SessionRecord, SessionError> {
        self.remove_or_stop(wait, &|| false)
    }

    /// Like [`Session::remove`], and its waits end as soon as `stop` says so (the caller's
    /// cancel): [`SessionErrorKind::WaitCancelled`], the session left as it was.
    pub fn remove_or_stop(
        &self,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<SessionRecord, SessionError> {
        self.end_after_stopping(EndReason::Removed, true, wait, stop)
    }

    /// Like [`Session::remove`], without keeping its commits: for a session whose commits
    /// cannot be bundled (its branch deleted, its repository broken).
    pub fn discard(&self, wait: Duration) -> Result<SessionRecord, SessionError> {
        self.end_after_stopping(EndReason::Removed, false, wait, &|| false)
    }

    /// Ends the session for `reason` as [`Session::remove`] does (keeping its commits when
    /// `keep`): the review watcher's endings (merged, closed, idle).
    pub(crate) fn end_after_stopping(
        &self,
        reason: EndReason,
        keep: bool,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<SessionRecord, SessionError> {
        let rec = self.record()?;
        if rec.state == SessionStatus::Ended {
            return Ok(rec);
        }
        crate::exec::stop_runs(&rec, wait, stop);
        let layout = &self.sessions.layout;
        let path = layout.writer_lock(&self.id);
        let Some(_writer) = FileLock::acquire_within_or_stop(&path, wait, stop)? else {
            let kind = if stop() {
                SessionErrorKind::WaitCancelled
            } else {
                SessionErrorKind::WaitTimedOut { waited: wait }
            };
            return Err(SessionError::new(kind).with_id(&self.id));
        };
        self.end(reason, keep)
    }

    /// Keeps the unpulled commits (when `keep`), deletes the tree and marks the record ended;
    /// the caller holds the writer lock. When the commits cannot be kept, nothing is ended.
    pub(crate) fn end(&self, reason: EndReason, keep: bool) -> Result<SessionRecord, SessionError> {
        let kept = if keep && reason != EndReason::CreationAbandoned {
            self.keep_unpulled().map_err(|e| {
                SessionError::new(SessionErrorKind::NotKept(Box::new(e))).with_id(&self.id)
            })?
        } else {
            None
        };
        let layout = &self.sessions.layout;
        let tree = layout.tree(&self.id);
        cordon_workspace::remove_tree(&tree).map_err(|e| SessionError::io(&tree, e))?;
        let layer = layout.layer(&self.id);
        cordon_workspace::remove_tree(&layer).map_err(|e| SessionError::io(&layer, e))?;
        if let Ok(rec) = self.record()
            && let Some(commit) = &rec.tree_base
        {
            let workspaces = cordon_workspace::Workspaces::new(self.sessions.home());
            let holder = format!("session-{}", self.id);
            let _ = workspaces.release_base(commit.as_str(), &holder);
            let _ = workspaces.release_layers(&rec.layers, &holder);
        }
        if let Ok(entries) = std::fs::read_dir(layout.dir(&self.id)) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with("transfer-") {
                    let _ = cordon_workspace::remove_tree(&entry.path());
                }
            }
        }
        self.update(|rec| {
            rec.state = SessionStatus::Ended;
            rec.ended_at = Some(record::now_text());
            rec.end_reason = Some(reason);
            rec.writer = None;
            rec.kept = kept;
        })
    }

    /// Checks that this process's `CORDON_HOME` (masked from every sandboxed program) is the
    /// sessions' home, so the session's state is never visible to what runs in it.
    pub(crate) fn check_home_masked(&self) -> Result<(), SessionError> {
        let env_home = cordon_types::cordon_home()
            .map_err(|e| SessionError::new(SessionErrorKind::HomeUnknown(e)))?;
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
        if canon(&env_home) == canon(self.sessions.home()) {
            Ok(())
        } else {
            Err(SessionError::io(
                self.sessions.home(),
                std::io::Error::other(format!(
                    "programs run in a session need its home to be CORDON_HOME (masked from them), which is {}",
                    env_home.display()
                )),
            ))
        }
    }
}

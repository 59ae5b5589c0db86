//! [`Workspaces`]: create, list, show, change and remove workspaces.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cordon_git::Repo;

use crate::ended::WorkspaceEndReason;
use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::id::WorkspaceId;
use crate::layout::Layout;
use crate::record::{
    self, Durability, Strategy, WorkspaceRecord, WorkspaceRecordTag, WorkspaceState,
};
use crate::reports::{
    ApplyReport, ApplyReportTag, WorkspaceDiff, WorkspaceDiffTag, WorkspaceInfo, WorkspaceInfoTag,
};
use crate::size::{MAX_ENTRIES, disk_usage};
use crate::state::ProcessIdentity;
use crate::state::{Create, FileLock};
use crate::strategy;

/// The workspaces kept under one `CORDON_HOME`.
///
/// Cheap to clone; safe to use from several threads and processes at once: each workspace
/// has a lock file, each source repository another (see `layout.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspaces {
    layout: Layout,
}

/// What to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    /// The source repository (any directory inside its checkout, or a bare repository).
    pub repo: PathBuf,
    /// The revision whose committed content the workspace gets (`HEAD`, a branch, a tag, an
    /// id). Uncommitted changes of the live checkout are never included.
    pub rev: String,
    /// Whether the workspace outlives the creating process.
    pub persistent: bool,
    /// A persistent workspace not used for this long is removed by gc (`None`: never for
    /// being idle; `gc --older-than` still applies).
    pub idle_timeout: Option<std::time::Duration>,
    /// How to make the files; `None` picks one: overlay where this host supports it, else a
    /// git worktree (the record's `strategy_note` says why), unless [`STRATEGY_ENV`] names
    /// one. An explicit choice this host cannot honour is an error, never a fallback.
    ///
    /// [`STRATEGY_ENV`]: crate::STRATEGY_ENV
    pub strategy: Option<Strategy>,
    /// The process a transient workspace belongs to (gc removes it once that process is
    /// gone); `None` means this process. The CLI names its parent (the shell or agent that
    /// ran `cordon workspace create`), since it exits at once itself.
    pub owner: Option<ProcessIdentity>,
}

impl CreateRequest {
    /// A workspace of `repo` at `rev`, of the strategy this host does best.
    pub fn new(
        repo: impl Into<PathBuf>,
        rev: impl Into<String>,
        persistent: bool,
    ) -> CreateRequest {
        CreateRequest {
            repo: repo.into(),
            rev: rev.into(),
            persistent,
            idle_timeout: None,
            strategy: None,
            owner: None,
        }
    }
}

impl CreateRequest {
    /// The same request with the strategy chosen (no fallback: see [`CreateRequest::strategy`]).
    pub fn with_strategy(mut self, strategy: Strategy) -> CreateRequest {
        self.strategy = Some(strategy);
        self
    }
}

impl Workspaces {
    /// The workspaces under `home` (created on first use).
    pub fn new(home: impl Into<PathBuf>) -> Workspaces {
        Workspaces {
            layout: Layout::new(home.into()),
        }
    }

    /// The workspaces under the `CORDON_HOME` of this process's environment.
    pub fn from_env() -> Result<Workspaces, WorkspaceError> {
        cordon_types::cordon_home()
            .map(Workspaces::new)
            .map_err(|e| WorkspaceError::new(WorkspaceErrorKind::HomeUnknown(e)))
    }

    /// The `CORDON_HOME` directory.
    pub fn home(&self) -> &Path {
        self.layout.home()
    }

    /// cordon's private directory for workspace `id` (e.g. the cache layers of a
    /// verification): beside the tree, never visible to programs, removed with the workspace.
    pub fn scratch_dir(&self, id: &WorkspaceId) -> PathBuf {
        self.layout.scratch(id)
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    fn ensure_dirs(&self) -> Result<(), WorkspaceError> {
        for dir in [self.layout.workspaces(), self.layout.locks()] {
            std::fs::create_dir_all(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
        }
        Ok(())
    }

    /// Creates a workspace with the committed content of `request.rev`.
    ///
    /// The record is written first, in state `creating` with this process as owner, so a
    /// concurrent gc leaves it alone (its lock is held) and a crash leaves something gc can
    /// collect. On failure everything created is removed again.
    pub fn create(&self, request: &CreateRequest) -> Result<WorkspaceRecord, WorkspaceError> {
        let repo_err = |e: WorkspaceError| e.with_repo(&request.repo);
        self.ensure_dirs().map_err(repo_err)?;
        let (repo, commit) =
            Repo::open_at(&request.repo, &request.rev).map_err(|e| repo_err(e.into()))?;
        let (strategy, strategy_note) = self.pick_strategy(request.strategy).map_err(repo_err)?;
        let (id, lock) = self.claim_id().map_err(repo_err)?;
        let owner = request.owner.unwrap_or_else(ProcessIdentity::current);
        let mut record = WorkspaceRecord {
            schema: WorkspaceRecordTag,
            id: id.clone(),
            checkout: (strategy == Strategy::GitWorktree).then(|| self.layout.tree(&id)),
            path: self.layout.tree(&id),
            repo: repo.toplevel().unwrap_or(repo.common_dir()).to_owned(),
            git_common_dir: repo.common_dir().to_owned(),
            git_dir: None,
            rev: request.rev.clone(),
            commit: commit.clone(),
            strategy,
            strategy_note,
            created_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            persistent: request.persistent,
            idle_timeout_s: request
                .idle_timeout
                .filter(|_| request.persistent)
                .map(|t| t.as_secs().max(1)),
            owner_pid: owner.pid,
            owner_start_time: owner.start_time,
            state: WorkspaceState::Creating,
        };
        let record_path = self.layout.record(&id);
        let result = (|| {
            // A git worktree writes into the repository and takes long: its record must
            // survive a power loss meanwhile, so gc finds what to undo. An overlay writes
            // only under its own directory, which gc collects as an orphan if need be.
            let durability = match strategy {
                Strategy::GitWorktree => Durability::Durable,
                Strategy::Overlay => Durability::Atomic,
            };
            record::write(&record_path, &record, durability)?;
            let dir = self.layout.dir(&id);
            std::fs::create_dir(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
            record.git_dir = strategy::create(self, &record, &repo)?;
            record.state = WorkspaceState::Ready;
            record::write(&record_path, &record, Durability::Atomic)
        })();
        if let Err(e) = result {
            let _ = self.destroy_locked(&record);
            drop(lock);
            return Err(e.with_id(&id).with_repo(&record.repo));
        }
        drop(lock);
        Ok(record)
    }

    /// The strategy of a new workspace, and why when it is not the one asked for.
    fn pick_strategy(
        &self,
        asked: Option<Strategy>,
    ) -> Result<(Strategy, Option<String>), WorkspaceError> {
        let from_env = std::env::var(crate::support::STRATEGY_ENV)
            .ok()
            .filter(|v| !v.is_empty() && v != "auto");
        let asked = match (asked, from_env) {
            (Some(asked), _) => Some(asked),
            (None, Some(text)) => Some(text.parse().map_err(|e: String| {
                WorkspaceError::new(WorkspaceErrorKind::OverlayUnavailable(format!(
                    "{}: {e}",
                    crate::support::STRATEGY_ENV
                )))
            })?),
            (None, None) => None,
        };
        match asked {
            Some(Strategy::GitWorktree) => Ok((Strategy::GitWorktree, None)),
            Some(Strategy::Overlay) => match self.overlay_support() {
                Ok(()) => Ok((Strategy::Overlay, None)),
                Err(why) => Err(WorkspaceError::new(WorkspaceErrorKind::OverlayUnavailable(
                    why,
                ))),
            },
            None => match self.overlay_support() {
                Ok(()) => Ok((Strategy::Overlay, None)),
                Err(why) => Ok((
                    Strategy::GitWorktree,
                    Some(format!(
                        "overlay workspaces are unavailable here ({why}): a git worktree instead"
                    )),
                )),
            },
        }
    }

    /// Picks a fresh random id and takes its lock (`create_new`: a collision picks again).
    fn claim_id(&self) -> Result<(WorkspaceId, FileLock), WorkspaceError> {
        loop {
            let id = WorkspaceId::random()?;
            if self.layout.record(&id).exists() || self.layout.dir(&id).exists() {
                continue;
            }
            match FileLock::acquire(&self.layout.lock(&id), Create::New)
                .map_err(WorkspaceError::from)
            {
                Ok(lock) => return Ok((id, lock)),
                Err(WorkspaceError {
                    kind: WorkspaceErrorKind::Io(ref e),
                    ..
                }) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Every workspace, sorted by creation time. Records that cannot be read are skipped.
    pub fn list(&self) -> Result<Vec<WorkspaceInfo>, WorkspaceError> {
        let mut infos: Vec<WorkspaceInfo> = self
            .record_ids()?
            .iter()
            .filter_map(|id| record::read(&self.layout.record(id)).ok().flatten())
            .map(|record| self.info(record))
            .collect();
        infos.sort_by(|a, b| {
            (&a.record.created_at, &a.record.id).cmp(&(&b.record.created_at, &b.record.id))
        });
        Ok(infos)
    }

    /// One workspace.
    pub fn show(&self, id: &WorkspaceId) -> Result<WorkspaceInfo, WorkspaceError> {
        Ok(self.info(self.read_record(id)?))
    }

    fn info(&self, record: WorkspaceRecord) -> WorkspaceInfo {
        let dir = self.layout.dir(&record.id);
        let path_exists = record.path.is_dir();
        let (size_bytes, size_truncated) = if dir.exists() {
            disk_usage(&dir, MAX_ENTRIES)
        } else {
            (0, false)
        };
        let last_used_at = std::fs::metadata(self.layout.record(&record.id))
            .and_then(|m| m.modified())
            .ok()
            .map(|t| humantime::format_rfc3339_seconds(t).to_string());
        WorkspaceInfo {
            schema: WorkspaceInfoTag,
            owner: record.owner().liveness(),
            record,
            size_bytes,
            size_truncated,
            path_exists,
            last_used_at,
        }
    }

    /// Removes a workspace: its files, its git metadata, its record and its lock file.
    pub fn remove(&self, id: &WorkspaceId) -> Result<WorkspaceRecord, WorkspaceError> {
        let (record, lock) = self.lock_existing(id)?;
        let result = self.destroy_locked(&record);
        if result.is_ok() {
            self.remember_end(&record, WorkspaceEndReason::Removed);
        }
        drop(lock);
        match result {
            Ok(()) => Ok(record),
            Err(e) => Err(e.with_id(id).with_repo(&record.repo)),
        }
    }

    /// Applies a patch to a workspace, all or nothing (see [`cordon_git::Worktree::apply_patch`]).
    pub fn apply(&self, id: &WorkspaceId, patch: &[u8]) -> Result<ApplyReport, WorkspaceError> {
        let (record, _lock) = self.lock_ready(id)?;
        self.check_location(&record)?;
        let _mounted = self.mount_guard(&record, true)?;
        let worktree = strategy::worktree(self, &record, true)
            .map_err(|e| e.with_id(id))?
            .ok_or_else(|| not_ready(&record))?;
        let files = worktree
            .apply_patch(patch)
            .map_err(|e| WorkspaceError::from(e).with_id(id))?;
        record::touch(&self.layout.record(id));
        Ok(ApplyReport {
            schema: ApplyReportTag,
            id: id.clone(),
            files,
        })
    }

    /// Writes whole files into a workspace (see [`cordon_git::Worktree::write_files`]: paths
    /// checked as a patch's, nothing written unless all pass): cheaper than a patch for files
    /// read from a checkout, since no git runs.
    pub fn write_files(
        &self,
        id: &WorkspaceId,
        files: &[cordon_git::NewFile],
    ) -> Result<ApplyReport, WorkspaceError> {
        let (record, _lock) = self.lock_ready(id)?;
        self.check_location(&record)?;
        let _mounted = self.mount_guard(&record, true)?;
        let worktree = strategy::worktree(self, &record, true)
            .map_err(|e| e.with_id(id))?
            .ok_or_else(|| not_ready(&record))?;
        let files = worktree
            .write_files(files)
            .map_err(|e| WorkspaceError::from(e).with_id(id))?;
        record::touch(&self.layout.record(id));
        Ok(ApplyReport {
            schema: ApplyReportTag,
            id: id.clone(),
            files,
        })
    }

    /// What changed in a workspace since its commit; with the patch unless `name_only`.
    pub fn diff(&self, id: &WorkspaceId, name_only: bool) -> Result<WorkspaceDiff, WorkspaceError> {
        let (record, _lock) = self.lock_ready(id)?;
        self.check_location(&record)?;
        let _mounted = self.mount_guard(&record, false)?;
        let worktree = strategy::worktree(self, &record, false)
            .map_err(|e| e.with_id(id))?
            .ok_or_else(|| not_ready(&record))?;
        let diff = worktree
            .diff(&record.commit, !name_only)
            .map_err(|e| WorkspaceError::from(e).with_id(id))?;
        record::touch(&self.layout.record(id));
        Ok(WorkspaceDiff {
            schema: WorkspaceDiffTag,
            id: id.clone(),
            base_commit: record.commit,
            files: diff.files,
            nested_repositories: diff.nested_repositories,
            patch: diff.patch,
        })
    }

    /// The layers of an overlay workspace (`None` for a git worktree), as the sandbox mounts
    /// them: from cordon's own layout, canonical.
    pub fn overlay_parts(
        &self,
        record: &WorkspaceRecord,
    ) -> Result<Option<strategy::OverlayParts>, WorkspaceError> {
        self.check_location(record)?;
        strategy::overlay_parts(self, record).map_err(|e| e.with_id(&record.id))
    }

    /// The workspace's git worktree (an overlay's through the helper, mounted `writable` or
    /// read-only), to diff or patch; `None` before it has a git directory. The caller holds
    /// the [`Workspaces::mount_guard`] while using it.
    pub fn worktree(
        &self,
        record: &WorkspaceRecord,
        writable: bool,
    ) -> Result<Option<cordon_git::Worktree>, WorkspaceError> {
        self.check_location(record)?;
        strategy::worktree(self, record, writable).map_err(|e| e.with_id(&record.id))
    }

    /// The workspace's files as cordon reads them on the host: an overlay's layers read
    /// directly, or the worktree's directory.
    pub fn tree(&self, record: &WorkspaceRecord) -> Result<cordon_git::Layers, WorkspaceError> {
        Ok(match self.overlay_parts(record)? {
            Some(parts) => parts.layers(),
            None => cordon_git::Layers::dir(record.path.clone()),
        })
    }

    /// Claims an overlay workspace's tree for one mount: `writable` ones one at a time
    /// (overlayfs's rule for an upper layer), read-only ones together but not beside a
    /// writer. Refuses at once ([`WorkspaceErrorKind::InUse`]) rather than wait. A git
    /// worktree needs no claim (`None`). Hold the guard while the tree is mounted.
    pub fn mount_guard(
        &self,
        record: &WorkspaceRecord,
        writable: bool,
    ) -> Result<Option<MountGuard>, WorkspaceError> {
        if record.strategy != Strategy::Overlay {
            return Ok(None);
        }
        let path = self.layout.mount_lock(&record.id);
        let lock = if writable {
            FileLock::try_acquire(&path)
        } else {
            FileLock::try_shared(&path)
        }
        .map_err(|e| WorkspaceError::from(e).with_id(&record.id))?;
        match lock {
            Some(lock) => Ok(Some(MountGuard { _lock: lock })),
            None => Err(WorkspaceError::new(WorkspaceErrorKind::InUse).with_id(&record.id)),
        }
    }

    pub(crate) fn read_record(&self, id: &WorkspaceId) -> Result<WorkspaceRecord, WorkspaceError> {
        record::read(&self.layout.record(id))
            .and_then(|r| {
                r.ok_or_else(|| {
                    WorkspaceError::new(match crate::ended::recall(&self.layout.ended(), id) {
                        Some(end) => WorkspaceErrorKind::Ended(Box::new(end)),
                        None => WorkspaceErrorKind::NotFound,
                    })
                })
            })
            .map_err(|e| e.with_id(id))
    }

    /// Remembers how a workspace whose files are gone ended (for errors about it).
    pub(crate) fn remember_end(&self, record: &WorkspaceRecord, reason: WorkspaceEndReason) {
        crate::ended::remember(
            &self.layout.ended(),
            &crate::ended::WorkspaceEnd::of(record, reason),
        );
    }

    /// Marks a workspace as just used (`cordon run --workspace`, a verification): its idle
    /// time starts again.
    pub fn touch(&self, id: &WorkspaceId) {
        record::touch(&self.layout.record(id));
    }

    /// Locks a workspace that has a record (the record is read again under the lock).
    fn lock_existing(
        &self,
        id: &WorkspaceId,
    ) -> Result<(WorkspaceRecord, FileLock), WorkspaceError> {
        // A missing record is reported before a lock file would be created for it.
        self.read_record(id)?;
        let lock = FileLock::acquire(&self.layout.lock(id), Create::IfMissing)
            .map_err(|e| WorkspaceError::from(e).with_id(id))?;
        Ok((self.read_record(id)?, lock))
    }

    pub(crate) fn lock_ready(
        &self,
        id: &WorkspaceId,
    ) -> Result<(WorkspaceRecord, FileLock), WorkspaceError> {
        let (record, lock) = self.lock_existing(id)?;
        if record.state != WorkspaceState::Ready {
            return Err(not_ready(&record));
        }
        Ok((record, lock))
    }

    /// A record's files must be where cordon puts them: `<home>/workspaces/<id>/tree` (a git
    /// worktree's checkout there, an overlay's on no host directory at all).
    pub(crate) fn check_location(&self, record: &WorkspaceRecord) -> Result<(), WorkspaceError> {
        let tree = self.layout.tree(&record.id);
        let named = match (record.strategy, &record.checkout) {
            _ if record.path != tree => Some(&record.path),
            (Strategy::GitWorktree, Some(checkout)) if *checkout == tree => None,
            (Strategy::Overlay, None) => None,
            (_, checkout) => Some(checkout.as_ref().unwrap_or(&record.path)),
        };
        match named {
            None => Ok(()),
            Some(path) => {
                Err(
                    WorkspaceError::new(WorkspaceErrorKind::Tampered { path: path.clone() })
                        .with_id(&record.id),
                )
            }
        }
    }

    /// Removes everything of a workspace whose lock the caller holds; the record goes last,
    /// after being marked `removing`, so an interrupted removal is finished by gc.
    pub(crate) fn destroy_locked(&self, record: &WorkspaceRecord) -> Result<(), WorkspaceError> {
        let record_path = self.layout.record(&record.id);
        if record.state != WorkspaceState::Removing && record_path.exists() {
            let removing = WorkspaceRecord {
                state: WorkspaceState::Removing,
                ..record.clone()
            };
            record::write(&record_path, &removing, Durability::Atomic)?;
        }
        // A forged record must not steer git or a deletion outside cordon's own directory.
        if self.check_location(record).is_ok() {
            strategy::destroy(self, record)?;
        }
        strategy::remove_dir_all(&self.layout.dir(&record.id))?;
        // A removed git worktree's record goes durably (a power loss must not bring back a
        // record of a worktree the repository forgot); an overlay's record brought back would
        // name a missing directory, which gc collects.
        let durability = match record.strategy {
            Strategy::GitWorktree => Durability::Durable,
            Strategy::Overlay => Durability::Atomic,
        };
        record::remove(&record_path, durability)?;
        // Whoever waits on this lock file re-reads the record and finds none.
        let _ = std::fs::remove_file(self.layout.lock(&record.id));
        Ok(())
    }

    /// The ids of every record file.
    pub(crate) fn record_ids(&self) -> Result<Vec<WorkspaceId>, WorkspaceError> {
        Ok(self
            .entry_names()?
            .iter()
            .filter_map(|name| name.strip_suffix(".json")?.parse().ok())
            .collect())
    }

    /// The names in the workspaces directory (none if it does not exist yet).
    pub(crate) fn entry_names(&self) -> Result<Vec<String>, WorkspaceError> {
        Ok(self.layout.entry_names()?)
    }
}

/// A claim on an overlay workspace's tree (see [`Workspaces::mount_guard`]); released when
/// dropped.
#[derive(Debug)]
pub struct MountGuard {
    _lock: FileLock,
}

fn not_ready(record: &WorkspaceRecord) -> WorkspaceError {
    WorkspaceError::new(WorkspaceErrorKind::NotReady(record.state)).with_id(&record.id)
}

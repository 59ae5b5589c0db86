//! Base trees: a commit's files, checked out once (hardened git) into
//! `$CORDON_HOME/bases/<commit>` and shared, read-only, by every overlay workspace, session
//! and build cache of that commit.
//!
//! A base is *held*: each holder (a workspace, a session, a trusted build cache) has a file in
//! `bases/<commit>.holds/` naming the path that proves it still exists (its record). gc
//! removes a base once no live holder is left. Creating, holding, releasing and removing a
//! base all happen under `bases/<commit>.lock`, so a base is never removed while someone
//! takes hold of it, and two processes never check out the same commit twice.
//!
//! Nothing ever writes a base after it is published (a rename of a finished temporary
//! directory): programs see it only as the lower layer of an overlay, at another path, and
//! cordon's own host-side work writes into upper layers only.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cordon_git::{CommitId, Repo};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::state::FileLock;
use crate::workspaces::Workspaces;

cordon_types::schema_tag!(
    /// The `schema` tag of a base's description: always `"cordon.base/v1"`.
    BaseRecordTag,
    "cordon.base/v1"
);

/// A base tree's description (`bases/<commit>/base.json`), written before it is published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BaseRecord {
    /// Always `cordon.base/v1`.
    pub schema: BaseRecordTag,
    /// The commit whose files the base holds.
    pub commit: CommitId,
    /// When it was checked out (RFC 3339, UTC). Its files' modification times are about
    /// this time: a build cache made from this base is only as fresh as this instance.
    pub created_at: String,
    /// The repository it was checked out from (any repository with the commit has the same
    /// files).
    pub source_repo: PathBuf,
    /// When its checkout began (ms since the epoch): every file of it is newer.
    #[serde(default)]
    pub created_ms: u64,
}

/// A base tree that the caller holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseTree {
    /// The commit.
    pub commit: CommitId,
    /// `bases/<commit>` (canonical).
    pub dir: PathBuf,
    /// The files: the read-only lower layer of every overlay of the commit (canonical).
    pub tree: PathBuf,
    /// A git index of `tree` with its files' stat data: hard-linked into each workspace's
    /// git directory (git replaces an index it changes, never writes it in place), so `git
    /// status` there sees the base's files as unchanged without reading them.
    pub index: PathBuf,
    /// The description.
    pub record: BaseRecord,
}

/// Who holds a base: a name unique among holders (`ws-<id>`, `session-<id>`,
/// `cache-<key>`) and the path whose existence proves the holder is still there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseHolder {
    /// The holder's name (a safe file name).
    pub name: String,
    /// Its record: when this path is gone, gc treats the hold as stale.
    pub proof: PathBuf,
}

/// One base gc removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BaseRemoval {
    /// The commit.
    pub commit: String,
    /// The bytes its files took (symlinks not followed; a lower bound when the walk stopped).
    pub size_bytes: u64,
}

impl Workspaces {
    fn bases_dir(&self) -> PathBuf {
        self.layout().bases()
    }

    fn base_dir(&self, commit: &str) -> PathBuf {
        self.bases_dir().join(commit)
    }

    fn base_lock(&self, commit: &str) -> PathBuf {
        self.bases_dir().join(format!("{commit}.lock"))
    }

    fn base_holds(&self, commit: &str) -> PathBuf {
        self.bases_dir().join(format!("{commit}.holds"))
    }

    /// The base tree of `commit`, checked out from `repo` first if there is none, held by
    /// `holder` until [`Workspaces::release_base`].
    pub fn hold_base(
        &self,
        repo: &Repo,
        commit: &CommitId,
        holder: &BaseHolder,
    ) -> Result<BaseTree, WorkspaceError> {
        check_holder_name(&holder.name)?;
        let bases = self.bases_dir();
        std::fs::create_dir_all(&bases).map_err(|e| WorkspaceError::io(&bases, e))?;
        let _lock = self.lock_base(commit.as_str())?;
        let dir = self.base_dir(commit.as_str());
        let record = match read_base_record(&dir) {
            Some(record) if record.commit == *commit => record,
            _ => self.create_base(repo, commit)?,
        };
        let holds = self.base_holds(commit.as_str());
        std::fs::create_dir_all(&holds).map_err(|e| WorkspaceError::io(&holds, e))?;
        let hold = holds.join(&holder.name);
        std::fs::write(&hold, holder.proof.as_os_str().as_encoded_bytes())
            .map_err(|e| WorkspaceError::io(&hold, e))?;
        // The description's time is the base's last use.
        crate::record::touch(&dir.join("base.json"));
        let dir = dir
            .canonicalize()
            .map_err(|e| WorkspaceError::io(&dir, e))?;
        Ok(BaseTree {
            commit: commit.clone(),
            tree: dir.join("tree"),
            index: dir.join("index"),
            dir,
            record,
        })
    }

    /// The existing base tree of `commit`, held by `holder` too (a copy of a tree over it:
    /// a session's fork); fails when there is none.
    pub fn hold_existing_base(
        &self,
        commit: &CommitId,
        holder: &BaseHolder,
    ) -> Result<BaseTree, WorkspaceError> {
        check_holder_name(&holder.name)?;
        let _lock = self.lock_base(commit.as_str())?;
        let base = self.existing_base(commit).ok_or_else(|| {
            WorkspaceError::io(
                self.base_dir(commit.as_str()),
                std::io::Error::other("the base tree is gone"),
            )
        })?;
        let holds = self.base_holds(commit.as_str());
        std::fs::create_dir_all(&holds).map_err(|e| WorkspaceError::io(&holds, e))?;
        let hold = holds.join(&holder.name);
        std::fs::write(&hold, holder.proof.as_os_str().as_encoded_bytes())
            .map_err(|e| WorkspaceError::io(&hold, e))?;
        Ok(base)
    }

    /// Lets go of a base (the base stays until gc finds it without holders).
    pub fn release_base(&self, commit: &str, holder: &str) -> Result<(), WorkspaceError> {
        check_holder_name(holder)?;
        if !self.base_holds(commit).is_dir() {
            return Ok(());
        }
        let _lock = self.lock_base(commit)?;
        let hold = self.base_holds(commit).join(holder);
        match std::fs::remove_file(&hold) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(WorkspaceError::io(&hold, e)),
        }
    }

    /// The base of `commit` if it exists (not held: for reading only while a holder is known
    /// to exist).
    pub fn existing_base(&self, commit: &CommitId) -> Option<BaseTree> {
        let dir = self.base_dir(commit.as_str()).canonicalize().ok()?;
        let record = read_base_record(&dir).filter(|r| r.commit == *commit)?;
        Some(BaseTree {
            commit: commit.clone(),
            tree: dir.join("tree"),
            index: dir.join("index"),
            dir,
            record,
        })
    }

    /// Takes the base's lock, on the lock file that is still in place (gc removes lock files
    /// of bases it removed: a waiter that got the lock on such a file takes the new one).
    fn lock_base(&self, commit: &str) -> Result<FileLock, WorkspaceError> {
        let path = self.base_lock(commit);
        loop {
            let lock = FileLock::acquire(&path, crate::state::Create::IfMissing)?;
            if lock.is_at(&path) {
                return Ok(lock);
            }
        }
    }

    /// Checks out `commit` into a temporary directory and publishes it (the caller holds the
    /// base's lock).
    fn create_base(&self, repo: &Repo, commit: &CommitId) -> Result<BaseRecord, WorkspaceError> {
        let dir = self.base_dir(commit.as_str());
        // A directory without a description is a removal that was cut short.
        if dir.exists() {
            crate::remove::remove_tree(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
        }
        let tmp = self.bases_dir().join(format!(
            ".tmp-{commit}-{}-{}",
            std::process::id(),
            crate::state::random_short_id().map_err(|e| WorkspaceError::io(&dir, e))?
        ));
        let created_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        let result = (|| {
            let tree = tmp.join("tree");
            std::fs::create_dir_all(&tree).map_err(|e| WorkspaceError::io(&tree, e))?;
            repo.checkout_tree(commit, &tree, &tmp.join("index"))?;
            let record = BaseRecord {
                schema: BaseRecordTag,
                commit: commit.clone(),
                created_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
                source_repo: repo.toplevel().unwrap_or(repo.common_dir()).to_owned(),
                created_ms,
            };
            let text = serde_json::to_vec_pretty(&record)
                .map_err(|e| WorkspaceError::new(WorkspaceErrorKind::Record(e)))?;
            let file = tmp.join("base.json");
            std::fs::write(&file, text).map_err(|e| WorkspaceError::io(&file, e))?;
            std::fs::rename(&tmp, &dir).map_err(|e| WorkspaceError::io(&dir, e))?;
            Ok(record)
        })();
        if result.is_err() {
            let _ = crate::remove::remove_tree(&tmp);
        }
        result
    }

    /// Removes every base without a live holder (and what interrupted creations and
    /// removals left); bases being created or held right now are left alone.
    pub(crate) fn gc_bases(&self) -> (Vec<BaseRemoval>, Vec<String>) {
        let mut removed = Vec::new();
        let mut failures = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.bases_dir()) else {
            return (removed, failures);
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for name in names {
            let outcome = if let Some(rest) = name.strip_prefix(".tmp-") {
                let commit = rest.split('-').next().unwrap_or_default().to_owned();
                self.collect_leftover(&commit, &name).map(|_| None)
            } else if name.starts_with(".trash-") {
                let path = self.bases_dir().join(&name);
                crate::remove::remove_tree(&path)
                    .map_err(|e| WorkspaceError::io(&path, e))
                    .map(|()| None)
            } else if CommitId::parse(&name).is_some_and(|c| c.as_str() == name) {
                self.collect_base(&name)
            } else {
                Ok(None)
            };
            match outcome {
                Ok(Some(removal)) => removed.push(removal),
                Ok(None) => {}
                Err(e) => failures.push(format!("base {name}: {e}")),
            }
        }
        (removed, failures)
    }

    /// A temporary directory of a creation: removed when nobody is creating that base.
    fn collect_leftover(&self, commit: &str, name: &str) -> Result<(), WorkspaceError> {
        if CommitId::parse(commit).is_none() {
            return Ok(());
        }
        let Some(_lock) = FileLock::try_acquire(&self.base_lock(commit))? else {
            return Ok(());
        };
        let path = self.bases_dir().join(name);
        crate::remove::remove_tree(&path).map_err(|e| WorkspaceError::io(&path, e))
    }

    fn collect_base(&self, commit: &str) -> Result<Option<BaseRemoval>, WorkspaceError> {
        let lock_path = self.base_lock(commit);
        let Some(lock) = FileLock::try_acquire(&lock_path)? else {
            return Ok(None);
        };
        if !lock.is_at(&lock_path) {
            return Ok(None);
        }
        let holds = self.base_holds(commit);
        let mut live = 0;
        if let Ok(entries) = std::fs::read_dir(&holds) {
            for entry in entries.flatten() {
                let proof = std::fs::read(entry.path())
                    .ok()
                    .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b)));
                if proof.is_some_and(|p| p.exists()) {
                    live += 1;
                } else {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        if live > 0 {
            return Ok(None);
        }
        let dir = self.base_dir(commit);
        let (size_bytes, _) = crate::size::disk_usage(&dir, crate::size::MAX_ENTRIES);
        // Out of sight first, so nobody ever finds half a base under its name.
        let trash = self.bases_dir().join(format!(
            ".trash-{commit}-{}-{}",
            std::process::id(),
            crate::state::random_short_id().map_err(|e| WorkspaceError::io(&dir, e))?
        ));
        std::fs::rename(&dir, &trash).map_err(|e| WorkspaceError::io(&dir, e))?;
        let _ = std::fs::remove_dir(&holds);
        let _ = std::fs::remove_file(&lock_path);
        drop(lock);
        crate::remove::remove_tree(&trash).map_err(|e| WorkspaceError::io(&trash, e))?;
        Ok(Some(BaseRemoval {
            commit: commit.to_owned(),
            size_bytes,
        }))
    }
}

use std::os::unix::ffi::OsStringExt;

fn read_base_record(dir: &Path) -> Option<BaseRecord> {
    let bytes = std::fs::read(dir.join("base.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Holder names (of base trees and frozen layers) are file names of letters, digits, `-` and
/// `_`, at most 128 bytes.
pub(crate) fn check_holder_name(name: &str) -> Result<(), WorkspaceError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(WorkspaceError::new(WorkspaceErrorKind::InvalidId(
            name.to_owned(),
        )))
    }
}

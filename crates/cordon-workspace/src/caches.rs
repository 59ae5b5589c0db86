//! Trusted build caches: read-only layers a verification mounts under its own private layer.
//!
//! ```text
//! $CORDON_HOME/caches/
//!   entries/<key>.json   a cache (cordon.build-cache/v1): what it is for and its layers
//!   entries/<key>.lock   flock: shared while a verification uses the entry, exclusive while
//!                        it is promoted or removed
//!   layers/<id>/         one layer: what one trusted build wrote into one place (a directory
//!                        of the workspace such as `target/`, or a host cache such as
//!                        `~/.cargo/registry`), moved here from the build's private upper
//!                        layer; only ever mounted as a read-only lower layer
//!   empty/               an empty directory, the lower layer of a place with no cache yet
//!   gc.lock              flock: shared while layers are promoted, exclusive while gc deletes
//!                        unreferenced ones
//! ```
//!
//! Only a trusted build (the base commit, or a ref the operator names) is promoted: what a
//! candidate wrote (its `build.rs`, its install scripts) stays in its own upper layer and is
//! deleted with its workspace, so it can never change what the next verification sees. An
//! entry holds its base tree (gc keeps it), so the files the cache was built against keep
//! their modification times.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cordon_git::CommitId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bases::BaseHolder;
use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::state::FileLock;
use crate::workspaces::Workspaces;

cordon_types::schema_tag!(
    /// The `schema` tag of a build cache entry: always `"cordon.build-cache/v1"`.
    CacheEntryTag,
    "cordon.build-cache/v1"
);

/// Where a cache's layers are mounted.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(tag = "kind", content = "path", rename_all = "snake_case")]
pub enum CachePlace {
    /// A directory of the workspace, relative to its top (`target`, `web/node_modules`).
    Tree(PathBuf),
    /// A host cache at its own path (`/home/u/.cargo/registry`): the layers hold what trusted
    /// builds added to it.
    Host(PathBuf),
}

impl std::fmt::Display for CachePlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CachePlace::Tree(p) => write!(f, "{}/", p.display()),
            CachePlace::Host(p) => write!(f, "{}", p.display()),
        }
    }
}

/// One place of a cache and its layers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CachedPlace {
    /// Where the layers are mounted.
    pub place: CachePlace,
    /// The layers' ids, topmost first (an entry built over an earlier one shares its layers).
    pub layers: Vec<String>,
}

/// A trusted build cache (`caches/entries/<key>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CacheEntry {
    /// Always `cordon.build-cache/v1`.
    pub schema: CacheEntryTag,
    /// Its key: a digest of the repository, commit, toolchain and plan.
    pub key: String,
    /// The repository's common git directory.
    pub repo: PathBuf,
    /// The commit that was built.
    pub commit: CommitId,
    /// When the base tree it was built against was made (ms since the epoch): its files'
    /// modification times are after it.
    pub base_created_ms: u64,
    /// The toolchains' versions, as the verification found them.
    pub toolchain: String,
    /// A digest of the stages that ran.
    pub plan: String,
    /// Digests of the dependency manifests at the commit (`Cargo.lock`, `package-lock.json`,
    /// ...), by repository-relative path.
    pub lockfiles: BTreeMap<String, String>,
    /// When the build that made it ended (ms since the epoch): every file in its layers is
    /// older.
    pub built_ms: u64,
    /// The run that made it.
    pub run_id: Option<String>,
    /// Its places and layers.
    pub places: Vec<CachedPlace>,
    /// Lockfiles the trusted build's tools wrote where the commit has none (a library's
    /// `Cargo.lock`), by repository-relative path: a candidate that changes no manifest
    /// starts from them, with the versions the cache was built with, instead of resolving
    /// its dependencies again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub made_lockfiles: BTreeMap<String, String>,
}

impl CacheEntry {
    /// The layers of `place`, if the entry has it.
    pub fn layers_of(&self, place: &CachePlace) -> Option<&[String]> {
        self.places
            .iter()
            .find(|p| p.place == *place)
            .map(|p| p.layers.as_slice())
    }
}

/// An entry in use: its shared lock keeps gc away until dropped.
#[derive(Debug)]
pub struct CacheInUse {
    /// The entry.
    pub entry: CacheEntry,
    _lock: FileLock,
}

/// A place a trusted build wrote, to promote: its private upper layer, and the layers it was
/// built over (topmost first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotedPlace {
    /// Where it was mounted.
    pub place: CachePlace,
    /// The build's upper layer (moved into the cache).
    pub upper: PathBuf,
    /// The cache layers it was built over.
    pub over: Vec<String>,
}

/// The trusted build caches of one `CORDON_HOME`.
#[derive(Debug, Clone)]
pub struct BuildCaches {
    workspaces: Workspaces,
    dir: PathBuf,
}

/// One cache gc removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CacheRemoval {
    /// The entry's key.
    pub key: String,
    /// The commit it was built from.
    pub commit: String,
}

/// How long an unused cache is kept when gc is not given `--older-than`.
pub const CACHE_IDLE_DEFAULT: Duration = Duration::from_secs(14 * 24 * 3600);

impl Workspaces {
    /// The trusted build caches under this `CORDON_HOME`.
    pub fn caches(&self) -> BuildCaches {
        BuildCaches {
            dir: self.home().join("caches"),
            workspaces: self.clone(),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

impl BuildCaches {
    fn entries(&self) -> PathBuf {
        self.dir.join("entries")
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.entries().join(format!("{key}.json"))
    }

    fn entry_lock(&self, key: &str) -> PathBuf {
        self.entries().join(format!("{key}.lock"))
    }

    /// The directory of layer `id` (canonical when it exists).
    pub fn layer(&self, id: &str) -> PathBuf {
        let path = self.dir.join("layers").join(id);
        path.canonicalize().unwrap_or(path)
    }

    /// An empty directory: the lower layer of a place no cache holds yet.
    pub fn empty(&self) -> Result<PathBuf, WorkspaceError> {
        let path = self.dir.join("empty");
        std::fs::create_dir_all(&path).map_err(|e| WorkspaceError::io(&path, e))?;
        path.canonicalize()
            .map_err(|e| WorkspaceError::io(&path, e))
    }

    fn ensure_dirs(&self) -> Result<(), WorkspaceError> {
        for dir in [self.entries(), self.dir.join("layers")] {
            std::fs::create_dir_all(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
        }
        Ok(())
    }

    /// The entry `key`, held (shared) until the value is dropped; `None` when there is none.
    pub fn open(&self, key: &str) -> Result<Option<CacheInUse>, WorkspaceError> {
        check_key(key)?;
        if !self.entry_path(key).is_file() {
            return Ok(None);
        }
        self.ensure_dirs()?;
        let Some(lock) = FileLock::try_shared(&self.entry_lock(key))? else {
            // Being promoted or removed right now: as if absent.
            return Ok(None);
        };
        let Some(entry) = read_entry(&self.entry_path(key)) else {
            return Ok(None);
        };
        // Every layer must still be there (a damaged cache is not used).
        if entry
            .places
            .iter()
            .flat_map(|p| &p.layers)
            .any(|id| !self.dir.join("layers").join(id).is_dir())
        {
            return Ok(None);
        }
        crate::record::touch(&self.entry_path(key));
        Ok(Some(CacheInUse { entry, _lock: lock }))
    }

    /// Every entry (unlocked: for choosing one to build over, then [`BuildCaches::open`]).
    pub fn list(&self) -> Vec<CacheEntry> {
        let Ok(dir) = std::fs::read_dir(self.entries()) else {
            return Vec::new();
        };
        let mut out: Vec<CacheEntry> = dir
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| read_entry(&e.path()))
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.built_ms));
        out
    }

    /// Makes `entry` (its `places` filled from `promoted`) the cache of its key: each upper
    /// layer moves into `layers/` (never to be mounted writable again) and the entry holds
    /// `repo`'s base tree of its commit. An existing entry of the key is kept (what this build
    /// wrote is then discarded with its workspace).
    pub fn promote(
        &self,
        mut entry: CacheEntry,
        promoted: &[PromotedPlace],
    ) -> Result<Option<CacheEntry>, WorkspaceError> {
        check_key(&entry.key)?;
        self.ensure_dirs()?;
        let _gc = FileLock::try_shared(&self.dir.join("gc.lock"))?
            .ok_or_else(|| WorkspaceError::new(WorkspaceErrorKind::InUse))?;
        let Some(_lock) = FileLock::try_acquire(&self.entry_lock(&entry.key))? else {
            return Ok(None);
        };
        if self.entry_path(&entry.key).is_file() {
            return Ok(None);
        }
        let repo = cordon_git::Repo::from_common_dir(entry.repo.clone());
        let holder = BaseHolder {
            name: format!("cache-{}", &entry.key[..32]),
            proof: self.entry_path(&entry.key),
        };
        self.workspaces.hold_base(&repo, &entry.commit, &holder)?;
        entry.places.clear();
        for p in promoted {
            let written = std::fs::read_dir(&p.upper).is_ok_and(|mut d| d.next().is_some());
            if !written {
                // Nothing new there: the layers it was built over serve as they are.
                if !p.over.is_empty() {
                    entry.places.push(CachedPlace {
                        place: p.place.clone(),
                        layers: p.over.clone(),
                    });
                }
                continue;
            }
            let id =
                crate::state::random_short_id().map_err(|e| WorkspaceError::io(&p.upper, e))?;
            let id = format!("{id}{}", &entry.key[..8]);
            let dest = self.dir.join("layers").join(&id);
            std::fs::rename(&p.upper, &dest).map_err(|e| WorkspaceError::io(&dest, e))?;
            // A marker for whoever looks: this directory is never written again.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o555));
            let mut layers = vec![id];
            layers.extend(p.over.iter().cloned());
            entry.places.push(CachedPlace {
                place: p.place.clone(),
                layers,
            });
        }
        entry.built_ms = entry.built_ms.max(1);
        let text = serde_json::to_vec_pretty(&entry)
            .map_err(|e| WorkspaceError::new(WorkspaceErrorKind::Record(e)))?;
        let path = self.entry_path(&entry.key);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| WorkspaceError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| WorkspaceError::io(&path, e))?;
        Ok(Some(entry))
    }

    /// The time to put in [`CacheEntry::built_ms`]: now.
    pub fn now_ms() -> u64 {
        now_ms()
    }

    /// Removes entries unused for longer than `older_than` (default: two weeks) or whose
    /// repository is gone, then every layer no entry names. Entries in use are left alone.
    pub(crate) fn gc(&self, older_than: Option<Duration>) -> (Vec<CacheRemoval>, Vec<String>) {
        let limit = older_than.unwrap_or(CACHE_IDLE_DEFAULT);
        let mut removed = Vec::new();
        let mut failures = Vec::new();
        if !self.dir.is_dir() {
            return (removed, failures);
        }
        for entry in self.list() {
            let path = self.entry_path(&entry.key);
            let idle = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > limit);
            if !idle && entry.repo.is_dir() {
                continue;
            }
            match FileLock::try_acquire(&self.entry_lock(&entry.key)) {
                Ok(Some(_lock)) => {
                    let _ = std::fs::remove_file(&path);
                    let _ = self.workspaces.release_base(
                        entry.commit.as_str(),
                        &format!("cache-{}", &entry.key[..32]),
                    );
                    let _ = std::fs::remove_file(self.entry_lock(&entry.key));
                    removed.push(CacheRemoval {
                        key: entry.key.clone(),
                        commit: entry.commit.to_string(),
                    });
                }
                Ok(None) => {}
                Err(e) => failures.push(format!("cache {}: {e}", entry.key)),
            }
        }
        // Layers no entry names: only while no promotion is under way.
        if let Ok(Some(_gc)) = FileLock::try_acquire(&self.dir.join("gc.lock")) {
            let named: BTreeSet<String> = self
                .list()
                .iter()
                .flat_map(|e| e.places.iter().flat_map(|p| p.layers.iter().cloned()))
                .collect();
            if let Ok(dir) = std::fs::read_dir(self.dir.join("layers")) {
                for layer in dir.flatten() {
                    let name = layer.file_name().to_string_lossy().into_owned();
                    if named.contains(&name) {
                        continue;
                    }
                    if let Err(e) = crate::remove::remove_tree(&layer.path()) {
                        failures.push(format!("cache layer {name}: {e}"));
                    }
                }
            }
        }
        (removed, failures)
    }
}

fn read_entry(path: &Path) -> Option<CacheEntry> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Keys are lowercase hexadecimal digests.
fn check_key(key: &str) -> Result<(), WorkspaceError> {
    if key.len() >= 32
        && key
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(WorkspaceError::new(WorkspaceErrorKind::InvalidId(
            key.to_owned(),
        )))
    }
}

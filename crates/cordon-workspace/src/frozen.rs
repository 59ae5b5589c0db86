//! Frozen layers: an overlay's upper layer made read-only and shared, so that copies of one
//! tree (a session's forks) start from it without copying a file.
//!
//! Freezing is a `rename` of the upper directory to `$CORDON_HOME/layers/<id>`: it costs the
//! same whatever the tree holds. From then on nothing writes the layer: every tree that
//! contains it mounts it as a lower layer, below an upper layer of its own. A former upper
//! layer reads as a lower one with the same rules (its whiteouts and opaque directories are
//! overlayfs's own, made under `userxattr`).
//!
//! A frozen layer is *held* like a base tree ([`crate::BaseHolder`]): one file per holder in
//! `layers/<id>.holds/`, naming the path that proves the holder still exists. gc removes a
//! layer once no live holder is left. Reserving, holding, releasing and collecting happen
//! under `layers/.lock`, so a layer is never removed while someone takes hold of it.
//!
//! A freeze is two steps so that a crash between them is finished rather than lost:
//! [`Workspaces::reserve_layer`] writes the holds (the caller then records the layer as part
//! of its tree), [`Workspaces::publish_layer`] renames the upper directory into place; a
//! reader that finds the layer missing publishes it again from where it was
//! (`publish_layer` is idempotent).

use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bases::BaseHolder;
use crate::error::{WorkspaceError, WorkspaceErrorKind};
use crate::state::{Create, FileLock};
use crate::workspaces::Workspaces;

/// One frozen layer gc removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LayerRemoval {
    /// The layer's id.
    pub layer: String,
    /// The bytes its files took (symlinks not followed; a lower bound when the walk stopped).
    pub size_bytes: u64,
}

impl Workspaces {
    fn layers_dir(&self) -> PathBuf {
        self.layout().home().join("layers")
    }

    fn layer_holds(&self, id: &str) -> PathBuf {
        self.layers_dir().join(format!("{id}.holds"))
    }

    fn lock_layers(&self) -> Result<FileLock, WorkspaceError> {
        let dir = self.layers_dir();
        std::fs::create_dir_all(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
        Ok(FileLock::acquire(&dir.join(".lock"), Create::IfMissing)?)
    }

    /// Where the frozen layer `id` is (whether or not it is published yet).
    pub fn frozen_layer(&self, id: &str) -> PathBuf {
        self.layers_dir().join(id)
    }

    /// Reserves a new frozen layer for `holders`: its id, with their holds written (nothing
    /// is moved yet: [`Workspaces::publish_layer`]).
    pub fn reserve_layer(&self, holders: &[BaseHolder]) -> Result<String, WorkspaceError> {
        let _lock = self.lock_layers()?;
        let id = crate::state::random_short_id()
            .map_err(|e| WorkspaceError::io(self.layers_dir(), e))?;
        let holds = self.layer_holds(&id);
        std::fs::create_dir(&holds).map_err(|e| WorkspaceError::io(&holds, e))?;
        for holder in holders {
            write_hold(&holds, holder)?;
        }
        Ok(id)
    }

    /// Freezes `upper` as the layer `id` (reserved): renames it into place. When `upper` is
    /// gone and the layer is there, someone published it already: done.
    pub fn publish_layer(&self, id: &str, upper: &Path) -> Result<PathBuf, WorkspaceError> {
        check_layer_id(id)?;
        let target = self.frozen_layer(id);
        match std::fs::rename(upper, &target) {
            Ok(()) => {
                // The new name must survive a crash before anyone records a tree over it.
                let _ = crate::state::sync_dir(&self.layers_dir());
                Ok(target)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && target.is_dir() => Ok(target),
            Err(e) => Err(WorkspaceError::io(upper, e)),
        }
    }

    /// Publishes `built` (a directory made in `layers/` under a hidden name) as the frozen
    /// layer `id`, held by `holders`: its holds are written, then it is renamed into place.
    pub(crate) fn publish_built_layer(
        &self,
        id: &str,
        built: &Path,
        holders: &[BaseHolder],
    ) -> Result<(), WorkspaceError> {
        check_layer_id(id)?;
        let _lock = self.lock_layers()?;
        let holds = self.layer_holds(id);
        std::fs::create_dir(&holds).map_err(|e| WorkspaceError::io(&holds, e))?;
        for holder in holders {
            write_hold(&holds, holder)?;
        }
        let target = self.frozen_layer(id);
        std::fs::rename(built, &target).map_err(|e| WorkspaceError::io(&target, e))?;
        crate::state::sync_dir(&self.layers_dir()).map_err(|e| WorkspaceError::io(&target, e))
    }

    /// Makes `holder` a holder of each of `layers` too (a new tree over them). Fails, holding
    /// none, when one of them is gone.
    pub fn hold_layers(
        &self,
        layers: &[String],
        holder: &BaseHolder,
    ) -> Result<(), WorkspaceError> {
        let _lock = self.lock_layers()?;
        for id in layers {
            check_layer_id(id)?;
            let holds = self.layer_holds(id);
            if !holds.is_dir() {
                return Err(WorkspaceError::io(
                    self.frozen_layer(id),
                    std::io::Error::other("the frozen layer is gone"),
                ));
            }
        }
        for id in layers {
            write_hold(&self.layer_holds(id), holder)?;
        }
        Ok(())
    }

    /// The frozen layers `holder` holds (published or not), sorted.
    pub fn layers_held_by(&self, holder: &str) -> Result<Vec<String>, WorkspaceError> {
        crate::bases::check_holder_name(holder)?;
        let dir = self.layers_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(WorkspaceError::io(&dir, e)),
        };
        let mut held: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|name| name.strip_suffix(".holds").map(str::to_owned))
            .filter(|id| check_layer_id(id).is_ok() && self.layer_holds(id).join(holder).exists())
            .collect();
        held.sort();
        Ok(held)
    }

    /// Lets go of `layers` for `holder` (each stays until gc finds it without holders).
    pub fn release_layers(&self, layers: &[String], holder: &str) -> Result<(), WorkspaceError> {
        if layers.is_empty() {
            return Ok(());
        }
        let _lock = self.lock_layers()?;
        for id in layers {
            check_layer_id(id)?;
            let hold = self.layer_holds(id).join(holder);
            match std::fs::remove_file(&hold) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(WorkspaceError::io(&hold, e)),
            }
        }
        Ok(())
    }

    /// Removes every frozen layer without a live holder (and holds of layers never
    /// published whose holders are gone).
    pub(crate) fn gc_layers(&self) -> (Vec<LayerRemoval>, Vec<String>) {
        let mut removed = Vec::new();
        let mut failures = Vec::new();
        if !self.layers_dir().is_dir() {
            return (removed, failures);
        }
        let lock = match self.lock_layers() {
            Ok(lock) => lock,
            Err(e) => return (removed, vec![format!("layers: {e}")]),
        };
        let Ok(entries) = std::fs::read_dir(self.layers_dir()) else {
            return (removed, failures);
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        let mut doomed = Vec::new();
        for name in names {
            let Some(id) = name.strip_suffix(".holds") else {
                if let Some(rest) = name.strip_prefix(".trash-") {
                    doomed.push((rest.to_owned(), self.layers_dir().join(&name), 0));
                } else if crate::flatten::abandoned_build(&name) {
                    doomed.push((name.clone(), self.layers_dir().join(&name), 0));
                }
                continue;
            };
            if check_layer_id(id).is_err() || live_holds(&self.layer_holds(id)) > 0 {
                continue;
            }
            let layer = self.frozen_layer(id);
            let _ = std::fs::remove_dir_all(self.layer_holds(id));
            if layer.exists() {
                let (size, _) = crate::size::disk_usage(&layer, crate::size::MAX_ENTRIES);
                let trash = self.layers_dir().join(format!(".trash-{id}"));
                match std::fs::rename(&layer, &trash) {
                    Ok(()) => doomed.push((id.to_owned(), trash, size)),
                    Err(e) => failures.push(format!("layer {id}: {e}")),
                }
            }
        }
        drop(lock);
        // Out of sight already: removed without the lock.
        for (id, path, size_bytes) in doomed {
            match crate::remove::remove_tree(&path) {
                Ok(()) if size_bytes > 0 => removed.push(LayerRemoval {
                    layer: id,
                    size_bytes,
                }),
                Ok(()) => {}
                Err(e) => failures.push(format!("layer {id}: {e}")),
            }
        }
        (removed, failures)
    }
}

fn write_hold(holds: &Path, holder: &BaseHolder) -> Result<(), WorkspaceError> {
    crate::bases::check_holder_name(&holder.name)?;
    let hold = holds.join(&holder.name);
    std::fs::write(&hold, holder.proof.as_os_str().as_encoded_bytes())
        .map_err(|e| WorkspaceError::io(&hold, e))
}

/// How many holds in `holds` name a path that still exists (stale ones are deleted).
fn live_holds(holds: &Path) -> usize {
    let mut live = 0;
    for entry in std::fs::read_dir(holds).into_iter().flatten().flatten() {
        let proof = std::fs::read(entry.path())
            .ok()
            .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b)));
        if proof.is_some_and(|p| p.exists()) {
            live += 1;
        } else {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    live
}

pub(crate) fn check_layer_id(id: &str) -> Result<(), WorkspaceError> {
    if crate::state::is_short_id(id) {
        Ok(())
    } else {
        Err(WorkspaceError::new(WorkspaceErrorKind::InvalidId(
            id.to_owned(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(dir: &Path, name: &str) -> BaseHolder {
        let proof = dir.join(name);
        std::fs::create_dir_all(&proof).unwrap();
        BaseHolder {
            name: name.to_owned(),
            proof,
        }
    }

    #[test]
    fn a_frozen_layer_lives_while_one_holder_does() {
        let home = tempfile::tempdir().unwrap();
        let ws = Workspaces::new(home.path());
        let upper = home.path().join("upper");
        std::fs::create_dir(&upper).unwrap();
        std::fs::write(upper.join("f"), "x").unwrap();
        let (a, b) = (holder(home.path(), "a"), holder(home.path(), "b"));
        let id = ws.reserve_layer(std::slice::from_ref(&a)).unwrap();
        let layer = ws.publish_layer(&id, &upper).unwrap();
        assert_eq!(std::fs::read_to_string(layer.join("f")).unwrap(), "x");
        assert!(!upper.exists());
        // Published twice (a reader finishing an interrupted freeze): the same layer.
        assert_eq!(ws.publish_layer(&id, &upper).unwrap(), layer);
        ws.hold_layers(std::slice::from_ref(&id), &b).unwrap();
        std::fs::remove_dir(&a.proof).unwrap();
        assert_eq!(ws.gc_layers(), (Vec::new(), Vec::new()));
        assert!(layer.is_dir());
        ws.release_layers(std::slice::from_ref(&id), "b").unwrap();
        let (removed, failures) = ws.gc_layers();
        assert_eq!(failures, Vec::<String>::new());
        assert_eq!(removed.len(), 1);
        assert!(!layer.exists());
        assert!(ws.hold_layers(&[id], &b).is_err());
    }
}

//! Keeping a session's layer stack shallow: its frozen layers merged into one
//! ([`cordon_workspace::Workspaces::flatten_layers`]) when a fork would stack them deeper
//! than [`FLATTEN_DEPTH`].
//!
//! The merge reads only frozen layers, which nothing writes, and the swap happens under the
//! session's writer lock (a fork holds it), so neither a writer nor the session's record ever
//! sees a half-made layer. Order, against a crash at any point:
//! 1. the merged layer is built under a hidden name (gc deletes it once its builder is gone),
//!    then published with the session's hold on it;
//! 2. the record names the merged layer instead of the layers it replaces;
//! 3. the session lets go of the old layers — once no program runs over them: every program
//!    run over the session's layers (exec, read-only or not; a diff) holds `readers.lock`
//!    shared from before it reads the record until it ends, and the release first takes it
//!    exclusive without waiting. When one is running, the old layers stay held until
//!    `cordon gc` finds them unused ([`Session::release_stale_layers`]).
//!
//! Files of the merged layer are hard links to the old layers' files: while another session
//! still stands on the old layers, a file's link count (`st_nlink`) counts them too.
//!
//! A crash after 1 leaves a layer the session holds but does not name, and one after 2 holds
//! on layers it no longer names: `cordon gc` lets go of both. Other sessions over the old
//! layers (the source's earlier forks) are untouched: they hold the old layers themselves.

use std::time::Instant;

use cordon_workspace::state::FileLock;
use cordon_workspace::{BaseHolder, Workspaces};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::SessionError;
use crate::record::SessionRecord;
use crate::sessions::Session;

/// The most frozen layers a fork stacks before it merges its source's layers into one.
///
/// Measured with `bench/session-depth.sh` (BENCHMARKS.md, "Layer depth"; release build,
/// interleaved medians, each a ratio against one layer in the same run): `find` over the
/// tree, a lookup of every name through every layer, costs 1.08× at 8 layers, 1.14× at 16
/// and 1.22× at 32 on 3,000 files (1.04×, 1.08×, 1.21× on 30,000); a program's start, and
/// `git status` with reading every file, show no trend above the noise. Past 8 the cost
/// grows with each layer, and the stack no longer fits one `lowerdir` mount option (the
/// kernel then needs `lowerdir+`, Linux 6.8 or later), while a merge of 8 layers costs a
/// fork little (BENCHMARKS.md). So forks of forks stack up to 8 layers, and the next fork
/// first merges them: a tree never stands on more than 8.
///
/// `CORDON_FLATTEN_DEPTH` (2 to [`crate::MAX_LAYERS`]) overrides it, for benchmarks and
/// tests of deep stacks.
pub const FLATTEN_DEPTH: usize = 8;

/// What a flatten did (`cordon.session-fork/v1`'s `flattened`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Flattened {
    /// The new frozen layer, the merge of the others.
    pub layer: String,
    /// The frozen layers it replaces in the session's stack, topmost first.
    pub replaced: Vec<String>,
    /// How long the merge took, in milliseconds.
    pub duration_ms: u64,
}

/// The depth past which forks flatten: [`FLATTEN_DEPTH`], or `CORDON_FLATTEN_DEPTH`.
pub(crate) fn flatten_depth() -> usize {
    std::env::var("CORDON_FLATTEN_DEPTH")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(FLATTEN_DEPTH, |d| d.clamp(2, crate::MAX_LAYERS))
}

impl Session {
    fn layer_holder(&self) -> BaseHolder {
        BaseHolder {
            name: format!("session-{}", self.id),
            proof: self.sessions.layout.layer(&self.id),
        }
    }

    /// Merges the session's frozen layers into one (see the module documentation); the
    /// caller holds the writer lock, and `rec` is the record read under it. Returns the
    /// record after the swap.
    pub(crate) fn flatten_locked(
        &self,
        rec: &SessionRecord,
    ) -> Result<(SessionRecord, Flattened), SessionError> {
        let started = Instant::now();
        let workspaces = Workspaces::new(self.sessions.home());
        let layer = workspaces
            .flatten_layers(&rec.layers, &[self.layer_holder()])
            .map_err(|e| {
                SessionError::io(
                    self.sessions.home().join("layers"),
                    std::io::Error::other(format!("flattening the session's layers: {e}")),
                )
            })?;
        let replaced = rec.layers.clone();
        let new = self.update(|r| {
            if r.layers == replaced {
                r.layers = vec![layer.clone()];
            }
        })?;
        if new.layers != [layer.clone()] {
            // Cannot happen under the writer lock; the new layer is let go of, unused.
            let _ =
                workspaces.release_layers(std::slice::from_ref(&layer), &self.layer_holder().name);
            return Err(SessionError::io(
                self.sessions.layout.state(&self.id),
                std::io::Error::other("the session's layers changed during a flatten"),
            ));
        }
        let _ = self.release_stale_layers_locked(&new);
        Ok((
            new,
            Flattened {
                layer,
                replaced,
                duration_ms: started.elapsed().as_millis() as u64,
            },
        ))
    }

    /// Lets go of the frozen layers the session holds but no longer stands on (replaced by a
    /// flatten), when no program runs over them; returns how many it let go of. Takes the
    /// writer lock without waiting (a busy session is left for the next gc).
    pub(crate) fn release_stale_layers(&self) -> Result<usize, SessionError> {
        let lock = self.sessions.layout.writer_lock(&self.id);
        let Some(_writer) = FileLock::try_acquire(&lock)? else {
            return Ok(0);
        };
        let rec = self.active_record()?;
        self.release_stale_layers_locked(&rec)
    }

    /// [`Session::release_stale_layers`], the caller holding the writer lock.
    fn release_stale_layers_locked(&self, rec: &SessionRecord) -> Result<usize, SessionError> {
        if rec.tree_base.is_none() {
            return Ok(0);
        }
        let workspaces = Workspaces::new(self.sessions.home());
        let holder = self.layer_holder().name;
        let io = |e: cordon_workspace::WorkspaceError| {
            SessionError::io(
                self.sessions.home().join("layers"),
                std::io::Error::other(e.to_string()),
            )
        };
        let stale: Vec<String> = workspaces
            .layers_held_by(&holder)
            .map_err(io)?
            .into_iter()
            .filter(|id| !rec.layers.contains(id))
            .collect();
        if stale.is_empty() {
            return Ok(0);
        }
        // No program that may have read the old record runs (each holds the lock shared from
        // before it read the record); those that start from now on read the new one. So the
        // lock is let go of at once: readers never wait for the release.
        let readers = self.sessions.layout.readers_lock(&self.id);
        match FileLock::try_acquire(&readers)? {
            Some(lock) => drop(lock),
            None => return Ok(0),
        }
        workspaces.release_layers(&stale, &holder).map_err(io)?;
        Ok(stale.len())
    }
}

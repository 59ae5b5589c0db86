//! Isolated workspaces of a repository, with records, locks and garbage collection.
//!
//! A workspace is a private copy of a repository's *committed* state at some revision, where
//! unreviewed code can be changed, built and tested without touching the user's checkout.
//!
//! - [`Workspaces`] is the set of workspaces under `CORDON_HOME` ([`cordon_home`], shared with every crate):
//!   [`create`](Workspaces::create), [`list`](Workspaces::list),
//!   [`show`](Workspaces::show), [`remove`](Workspaces::remove),
//!   [`apply`](Workspaces::apply) a patch (all or nothing, paths confined),
//!   [`diff`](Workspaces::diff) against the base commit, [`export`](Workspaces::export) a
//!   plain copy of its files, [`gc`](Workspaces::gc) and the
//!   cheap [`reconcile_on_start`](Workspaces::reconcile_on_start).
//! - [`WorkspaceRecord`] (`cordon.workspace/v1`) is what is kept on disk per workspace,
//!   written atomically; its `owner_pid` and `owner_start_time` let gc tell a crashed owner
//!   from a live one even when the pid was reused.
//! - [`Strategy`] says how the files are made: today a detached `git worktree`
//!   ([`Strategy::GitWorktree`], through the hardened `cordon-git`).
//! - [`TransientWorkspace`] removes its workspace when dropped.
//! - Frozen layers ([`Workspaces::reserve_layer`], [`Workspaces::publish_layer`]): an
//!   overlay's upper layer made read-only and shared by the trees made from it (a session's
//!   forks), held like base trees and collected by gc; several merged into one
//!   ([`Workspaces::flatten_layers`]) when a stack grows deep.
//! - [`state`] holds what workspaces and sessions (`cordon-session`) keep on disk alike: short
//!   random ids, the state directory's layout, file locks, atomically written records, the
//!   owner process's liveness.
//!
//! Every operation returns serde data (snake_case JSON with a `schema` tag) and fails with a
//! [`WorkspaceError`] naming the workspace, repository or path concerned; an unknown id is
//! [`WorkspaceErrorKind::NotFound`], the id of a workspace that is gone
//! [`WorkspaceErrorKind::Ended`] (removed, expired, collected: [`WorkspaceEnd`]).
//!
//! ```no_run
//! use cordon_workspace::{CreateRequest, Workspaces};
//!
//! # fn main() -> Result<(), cordon_workspace::WorkspaceError> {
//! let workspaces = Workspaces::from_env()?;
//! workspaces.reconcile_on_start()?;
//! let record = workspaces.create(&CreateRequest::new("/path/to/project", "HEAD", false))?;
//! workspaces.apply(&record.id, b"diff --git a/x b/x\n...")?;
//! let diff = workspaces.diff(&record.id, true)?;
//! println!("{}", serde_json::to_string_pretty(&diff).unwrap());
//! workspaces.remove(&record.id)?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod bases;
mod caches;
mod ended;
mod error;
mod export;
mod flatten;
mod frozen;
mod gc;
mod id;
mod layout;
mod record;
mod remove;
mod reports;
mod size;
pub mod state;
mod strategy;
mod support;
mod transient;
mod workspaces;

pub use bases::{BaseHolder, BaseRecord, BaseRecordTag, BaseRemoval, BaseTree};
pub use caches::{
    BuildCaches, CACHE_IDLE_DEFAULT, CacheEntry, CacheEntryTag, CacheInUse, CachePlace,
    CacheRemoval, CachedPlace, PromotedPlace,
};
pub use cordon_types::{HomeError, cordon_home};
pub use ended::{WorkspaceEnd, WorkspaceEndReason};
pub use error::{WorkspaceError, WorkspaceErrorKind};
pub use frozen::LayerRemoval;
pub use id::WorkspaceId;
pub use record::{Strategy, WorkspaceRecord, WorkspaceRecordTag, WorkspaceState};
pub use remove::remove_tree;
pub use reports::{
    ApplyReport, ApplyReportTag, GcFailure, GcReason, GcRemoval, GcReport, GcReportTag,
    WorkspaceDiff, WorkspaceDiffTag, WorkspaceInfo, WorkspaceInfoTag, WorkspaceList,
    WorkspaceListTag,
};
pub use state::{ID_LEN, Liveness, ProcessIdentity, is_short_id, random_short_id};
pub use strategy::OverlayParts;
pub use support::STRATEGY_ENV;
pub use transient::TransientWorkspace;
pub use workspaces::{CreateRequest, MountGuard, Workspaces};

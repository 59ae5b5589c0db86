//! The git command line, hardened: every git invocation of cordon goes through this crate.
//!
//! The repositories cordon works on may be hostile. Their configuration can name hooks,
//! filters, diff drivers, an fsmonitor, a pager, credential helpers; their work trees can hold
//! `.gitattributes` that switch those drivers on, and symlinks that lead out. This crate runs
//! git so that none of that executes or escapes:
//!
//! - [`GitCommand`] is the one way to run git. It strips inherited `GIT_*` variables, reads no
//!   system or global configuration, forces [`HARDENING_CONFIG`], and can blank every per-name
//!   driver the repository's configuration defines ([`GitCommand::neutralize_drivers`]).
//! - [`Repo`] is the user's repository: resolve a revision, find a merge base, add, remove,
//!   list and prune detached worktrees — always through `--git-dir`, never touching the
//!   user's checkout, index, `HEAD` or branches.
//! - [`Checkout`] is the user's own checkout, read only: [`Checkout::changes`] snapshots what
//!   it holds beyond `HEAD` (staged, unstaged, untracked) as a patch, through a scratch index.
//! - [`Worktree`] is a worktree cordon created: [`Worktree::diff`] lists what changed since a
//!   base commit (untracked files included, via a scratch index), and
//!   [`Worktree::apply_patch`] applies a patch all or nothing, refusing paths outside the
//!   tree, inside `.git`, or through symlinks ([`RefusalReason`]).
//!
//! ```no_run
//! use cordon_git::Repo;
//!
//! # fn main() -> Result<(), cordon_git::GitError> {
//! let repo = Repo::open("/path/to/project".as_ref())?;
//! let commit = repo.resolve_commit("HEAD")?;
//! let worktree = repo.add_worktree("/tmp/ws/tree".as_ref(), &commit)?;
//! worktree.apply_patch(b"diff --git a/x b/x\n...")?;
//! let diff = worktree.diff(&commit, false)?;
//! for file in diff.files {
//!     println!("{:?} {}", file.status, file.path);
//! }
//! repo.remove_worktree(worktree.path())?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod bundle;
mod changes;
mod checkout;
mod command;
mod error;
mod files;
mod layers;
mod neutralize;
mod patch;
mod repo;
mod sanitize;
mod url;
mod worktree;

pub use bundle::{BundleHeader, CheckoutSize, check_branch_name};
pub use changes::{ChangeStatus, ChangedFile, RepoPath};
pub use checkout::{Checkout, StatusEntry, StatusKind};
pub use command::{
    GitCommand, GitContext, GitOutput, HARDENING_CONFIG, HARDENING_ENV, Launcher, RunBounds,
};
pub use error::{GitError, GitErrorKind};
pub use files::NewFile;
pub use layers::{Entry, EntryKind, Layers};
pub use patch::{MAX_PATCH_BYTES, RefusalReason};
pub use repo::{CommitId, Repo, WorktreeEntry};
pub use sanitize::{packed_refs_without_stash, sanitized_config, without_userinfo};
pub use url::{UrlKind, classify_url};
pub use worktree::{Worktree, WorktreeDiff};

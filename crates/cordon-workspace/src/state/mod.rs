//! The state directory's building blocks, one implementation for workspaces and sessions:
//! short random ids ([`ShortId`]), where an object's files live ([`StateLayout`]), the
//! `flock` around them ([`FileLock`]), records written atomically ([`write_json`],
//! [`read_json`]) and the owner process's liveness ([`ProcessIdentity`]).
//!
//! Why here: dependencies point down, and `cordon-session` already depends on this crate
//! (a session's tree is made like an overlay workspace's, on the same shared base trees),
//! while `cordon-types` holds the stable JSON contracts only, no locks or file I/O. So the
//! shared code lives in the lower of the two crates that use it, and each crate keeps its
//! own types over it: `WorkspaceId` and `SessionId` are thin newtypes over [`ShortId`],
//! each crate's `Layout` adds its own files to a [`StateLayout`], and a
//! [`StateFileError`] becomes each crate's own error (with the same message as before).
//!
//! The on-disk formats are unchanged: ids are the same 8 base32 characters, records the
//! same pretty-printed JSON with a final newline, temporary files the same names.

mod error;
mod id;
mod layout;
mod lock;
mod owner;
mod record;

pub use error::{StateFileError, StateFileErrorKind};
pub use id::{ID_LEN, ShortId, is_short_id, random_short_id};
pub use layout::{StateLayout, unique_name};
pub use lock::{Create, FileLock};
pub use owner::{Liveness, ProcessIdentity};
pub(crate) use record::sync_dir;
pub use record::{Durability, read_json, write_json};

//! The disk limit of a working tree: no kernel quota bounds a directory on the host's file
//! system for cordon, so the executor watches it.
//!
//! Cheap in the common case, exact when it matters: a few times a second the guard asks the
//! file system how much space it has lost since the run began (`statvfs`, one system call);
//! only when that exceeds the limit does it measure the tree itself (allocated blocks, not
//! following symlinks, not crossing into other file systems, stopping as soon as the limit is
//! passed). So a run is ended only when its tree really holds more than the limit, and a busy
//! host (another process filling the disk) costs a measurement, never a false kill of a small
//! tree.

use std::path::{Path, PathBuf};

use cordon_types::LimitKind;

use crate::io::LimitGuard;

/// How much a working tree may hold by default: 10 GiB.
pub const DEFAULT_DISK_LIMIT: u64 = 10 << 30;

/// Watches the disk use of one tree (see the module documentation).
#[derive(Debug)]
pub struct DiskGuard {
    root: PathBuf,
    limit: u64,
    free_at_start: Option<u64>,
}

impl DiskGuard {
    /// Watches `root` against `limit` bytes, from now.
    pub fn new(root: &Path, limit: u64) -> DiskGuard {
        DiskGuard {
            root: root.to_owned(),
            limit,
            free_at_start: available_bytes(root),
        }
    }

    /// Whether the tree holds more than the limit (measured now, stopping early).
    pub fn tree_exceeds_limit(&self) -> bool {
        tree_bytes_beyond(&self.root, self.limit).is_some()
    }
}

impl LimitGuard for DiskGuard {
    fn exceeded(&mut self) -> Option<LimitKind> {
        let lost = match (self.free_at_start, available_bytes(&self.root)) {
            (Some(start), Some(now)) => start.saturating_sub(now),
            // No figure from the file system: measure the tree every time.
            _ => u64::MAX,
        };
        (lost > self.limit && self.tree_exceeds_limit()).then_some(LimitKind::Disk)
    }
}

/// The bytes available to unprivileged users on the file system of `path`.
fn available_bytes(path: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(path).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// The bytes allocated under `root` (same file system, symlinks not followed), once they
/// exceed `limit`; `None` when the whole tree holds no more than `limit`. Walks with one open
/// directory at a time, whatever the depth.
pub fn tree_bytes_beyond(root: &Path, limit: u64) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let device = root.symlink_metadata().ok()?.dev();
    let mut total: u64 = 0;
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if total > limit {
                return Some(total);
            }
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_measured_until_it_passes_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b/c");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(nested.join("data"), vec![7u8; 256 * 1024]).unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("usr-link")).unwrap();
        assert!(tree_bytes_beyond(dir.path(), 128 * 1024).is_some());
        assert_eq!(
            tree_bytes_beyond(dir.path(), 64 << 20),
            None,
            "symlinks not followed"
        );
        let mut guard = DiskGuard::new(dir.path(), 64 << 20);
        assert_eq!(guard.exceeded(), None);
        // Once the file system has lost more than the limit, the tree is measured.
        let mut small = DiskGuard::new(dir.path(), 128 * 1024);
        small.free_at_start = Some(u64::MAX);
        assert_eq!(small.exceeded(), Some(LimitKind::Disk));
    }
}

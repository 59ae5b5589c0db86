//! The disk space a workspace takes, by a bounded walk that follows no symlink.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// At most this many entries are visited; beyond, the size is a lower bound.
pub(crate) const MAX_ENTRIES: usize = 1_000_000;

/// Bytes allocated on disk under `root` (512-byte blocks), and whether the walk stopped
/// early at `max_entries`. Symlinks count as themselves; unreadable entries are skipped.
pub(crate) fn disk_usage(root: &Path, max_entries: usize) -> (u64, bool) {
    let mut total = 0u64;
    let mut seen = 0usize;
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        seen += 1;
        if seen > max_entries {
            return (total, true);
        }
        total = total.saturating_add(meta.blocks().saturating_mul(512));
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    (total, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_files_not_symlink_targets_and_stops_at_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![1u8; 100_000]).unwrap();
        let big = tempfile::tempdir().unwrap();
        std::fs::write(big.path().join("huge"), vec![1u8; 4_000_000]).unwrap();
        std::os::unix::fs::symlink(big.path(), dir.path().join("link")).unwrap();
        let (bytes, truncated) = disk_usage(dir.path(), 100);
        assert!(!truncated);
        assert!((100_000..1_000_000).contains(&bytes), "{bytes}");
        assert!(disk_usage(dir.path(), 1).1);
    }
}

//! Which directories are canonical, remembered: `/etc` is asked about once, not once per
//! allowlisted file in it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Directories found to be (or not to be) reached through no symlink at all.
#[derive(Debug, Default)]
pub(crate) struct CanonicalDirs {
    known: HashMap<PathBuf, bool>,
}

impl CanonicalDirs {
    /// Whether `dir` (absolute, without `.` or `..`) is a directory reached through no symlink
    /// at all: then `dir/NAME`, when NAME is not itself a symlink, is a canonical path. Each
    /// component is lstat'ed once per [`CanonicalDirs`].
    pub(crate) fn contains(&mut self, dir: &Path) -> bool {
        let Some(parent) = dir.parent() else {
            return dir == Path::new("/");
        };
        if let Some(known) = self.known.get(dir) {
            return *known;
        }
        let canonical = self.contains(parent)
            && dir.file_name().is_some()
            && dir.symlink_metadata().is_ok_and(|m| m.file_type().is_dir());
        self.known.insert(dir.to_owned(), canonical);
        canonical
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_behind_symlinks_are_not_canonical() {
        let dir = std::env::temp_dir()
            .canonicalize()
            .unwrap()
            .join(format!("cordon-canonical-dirs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
        std::fs::write(dir.join("file"), "x").unwrap();
        std::os::unix::fs::symlink("sub", dir.join("link")).unwrap();
        let mut c = CanonicalDirs::default();
        assert!(c.contains(Path::new("/")));
        assert!(c.contains(&dir.join("sub/deeper")));
        assert!(!c.contains(&dir.join("link")));
        assert!(!c.contains(&dir.join("link/deeper")));
        assert!(!c.contains(&dir.join("file")));
        assert!(!c.contains(&dir.join("missing")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

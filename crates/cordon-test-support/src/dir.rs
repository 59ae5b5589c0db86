//! A temporary directory per test.

use std::path::{Path, PathBuf};

/// A temporary directory removed at the end of the test.
pub struct TestDir(tempfile::TempDir);

impl TestDir {
    /// A new, empty directory under the system's temp dir.
    pub fn new() -> Self {
        TestDir(tempfile::tempdir().expect("temp dir"))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `contents` to the file `name` in it; returns the file's path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Default for TestDir {
    fn default() -> Self {
        Self::new()
    }
}

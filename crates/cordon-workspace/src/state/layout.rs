//! [`StateLayout`]: where the objects of one kind (workspaces, sessions) keep their files
//! under `$CORDON_HOME`.
//!
//! ```text
//! $CORDON_HOME/<kind>/        the kind's directory (`workspaces/`, `sessions/`)
//!   <id>/                     one object's directory
//!     tree/                   its files (an overlay's: an empty directory, the mount point)
//!     layer/                  an overlay's layer (`upper/`, `work/`)
//! ```
//!
//! What else each kind keeps (records, locks, scratch) is named by its crate's own layout.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::StateFileError;
use super::id::ShortId;

/// The directories of one kind of object under `$CORDON_HOME`: `<home>/<kind>/<id>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLayout {
    home: PathBuf,
    kind: &'static str,
}

impl StateLayout {
    /// The layout of `kind` (a directory name: `workspaces`, `sessions`) under `home`.
    pub fn new(home: PathBuf, kind: &'static str) -> StateLayout {
        StateLayout { home, kind }
    }

    /// `$CORDON_HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The kind's directory: `<home>/<kind>`.
    pub fn root(&self) -> PathBuf {
        self.home.join(self.kind)
    }

    /// One object's directory: `<home>/<kind>/<id>`.
    pub fn dir(&self, id: &impl AsRef<ShortId>) -> PathBuf {
        self.root().join(id.as_ref().as_str())
    }

    /// The object's files: `<id>/tree`.
    pub fn tree(&self, id: &impl AsRef<ShortId>) -> PathBuf {
        self.dir(id).join("tree")
    }

    /// An overlay object's layer: `<id>/layer`.
    pub fn layer(&self, id: &impl AsRef<ShortId>) -> PathBuf {
        self.dir(id).join("layer")
    }

    /// The names in the kind's directory (none when it does not exist yet); names that are
    /// not UTF-8 are left out.
    pub fn entry_names(&self) -> Result<Vec<String>, StateFileError> {
        let dir = self.root();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StateFileError::io(&dir, e)),
        };
        Ok(entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect())
    }
}

/// A name no other call in any live process returns: `<prefix>-<pid>-<n>`, for temporary
/// files and scratch directories beside what they become.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Id(ShortId);

    impl AsRef<ShortId> for Id {
        fn as_ref(&self) -> &ShortId {
            &self.0
        }
    }

    #[test]
    fn an_object_lives_in_its_kinds_directory() {
        let layout = StateLayout::new(PathBuf::from("/home/c"), "sessions");
        let id = Id(ShortId::parse("abcd2345").unwrap());
        assert_eq!(layout.home(), Path::new("/home/c"));
        assert_eq!(layout.root(), Path::new("/home/c/sessions"));
        assert_eq!(layout.dir(&id), Path::new("/home/c/sessions/abcd2345"));
        assert_eq!(
            layout.tree(&id),
            Path::new("/home/c/sessions/abcd2345/tree")
        );
        assert_eq!(
            layout.layer(&id),
            Path::new("/home/c/sessions/abcd2345/layer")
        );
    }

    #[test]
    fn entry_names_of_a_missing_directory_are_none() {
        let home = tempfile::tempdir().unwrap();
        let layout = StateLayout::new(home.path().to_owned(), "workspaces");
        assert_eq!(layout.entry_names().unwrap(), Vec::<String>::new());
        std::fs::create_dir(layout.root()).unwrap();
        std::fs::write(layout.root().join("abcd2345.json"), "{}").unwrap();
        assert_eq!(layout.entry_names().unwrap(), vec!["abcd2345.json"]);
    }

    #[test]
    fn unique_names_differ_and_name_the_process() {
        let a = unique_name(".state.json.tmp");
        let b = unique_name(".state.json.tmp");
        assert_ne!(a, b);
        let pid = std::process::id();
        assert!(a.starts_with(&format!(".state.json.tmp-{pid}-")), "{a}");
    }
}

//! Records as JSON files: read whole, written atomically (a temporary file beside the
//! record, renamed over it), durably when asked.

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::StateFileError;
use super::layout::unique_name;

/// Reads a record; `Ok(None)` when there is none.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateFileError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StateFileError::io(path, e)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StateFileError::json(path, e))
}

/// How hard [`write_json`] works to make a record survive a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Temporary file, fsync, rename, fsync of the directory: the new record survives a
    /// power loss once `write_json` returns.
    Durable,
    /// Temporary file and rename only: a crashed process leaves the old record or the new
    /// one, never a mix; a power loss may bring back the old one (or, on filesystems without
    /// ext4's rename heuristics, an unreadable one, which gc collects).
    ///
    /// Used for the transitions after the work tree is written: git does not fsync the files
    /// it checks out, so a record cannot be more durable than the tree it describes, and on
    /// ext4 an fsync there waits for the whole checkout's metadata to reach the journal (it
    /// doubled the time of a 3,000-file create on a busy disk). Every state a power loss can
    /// bring back errs towards collection: `creating` (abandoned), `ready` with files gone
    /// (missing directory), or an unreadable record.
    Atomic,
}

/// Writes a record atomically (pretty-printed JSON and a newline): a temporary file in the
/// same directory (`.<name>.tmp-<pid>-<n>`), renamed over the record. Readers see the old
/// record or the new one, never a mix, whenever the writer dies; with
/// [`Durability::Durable`] the new one also survives a power loss.
pub fn write_json<T: Serialize>(
    path: &Path,
    record: &T,
    durability: Durability,
) -> Result<(), StateFileError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(unique_name(&format!(".{name}.tmp")));
    let mut text = serde_json::to_vec_pretty(record).map_err(|e| StateFileError::json(path, e))?;
    text.push(b'\n');
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(&text)?;
        if durability == Durability::Durable {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if durability == Durability::Durable {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| StateFileError::io(path, e))
}

/// Makes a directory's entries (a rename, a removal) durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateFileErrorKind;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Record {
        schema: String,
        n: u32,
    }

    #[test]
    fn a_record_written_is_read_back_as_pretty_json() {
        for durability in [Durability::Durable, Durability::Atomic] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.json");
            assert_eq!(read_json::<Record>(&path).unwrap(), None);
            let record = Record {
                schema: "x/v1".into(),
                n: 1,
            };
            write_json(&path, &record, durability).unwrap();
            assert_eq!(read_json::<Record>(&path).unwrap(), Some(record));
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                "{\n  \"schema\": \"x/v1\",\n  \"n\": 1\n}\n"
            );
        }
    }

    #[test]
    fn a_write_replaces_the_record_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abcd2345.json");
        for n in 0..3 {
            let record = Record {
                schema: "x/v1".into(),
                n,
            };
            write_json(&path, &record, Durability::Durable).unwrap();
        }
        assert_eq!(read_json::<Record>(&path).unwrap().unwrap().n, 2);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["abcd2345.json"]);
    }

    #[test]
    fn a_failed_write_names_the_record_and_leaves_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("state.json");
        let error = write_json(&path, &1, Durability::Atomic).unwrap_err();
        assert_eq!(error.path, path);
        assert!(matches!(error.kind, StateFileErrorKind::Io(_)));
    }

    #[test]
    fn a_record_that_is_not_the_type_is_a_json_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{\"other\": true}").unwrap();
        let error = read_json::<Record>(&path).unwrap_err();
        assert_eq!(error.path, path);
        assert!(matches!(error.kind, StateFileErrorKind::Json(_)));
    }
}

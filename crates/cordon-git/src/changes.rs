//! [`ChangedFile`]: one path that differs between two states, and the `-z` parsers that find
//! them.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A path relative to the top of a work tree, as git stores it: bytes, not necessarily UTF-8.
///
/// Serializes as a string; bytes that are not UTF-8 become U+FFFD there (the Rust value keeps
/// them exactly: see [`RepoPath::as_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoPath(Vec<u8>);

impl RepoPath {
    /// A path from its bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        RepoPath(bytes.into())
    }

    /// The exact bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// As a relative filesystem path.
    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }

    /// As text, with bytes that are not UTF-8 replaced.
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl std::fmt::Display for RepoPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

impl Serialize for RepoPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string_lossy())
    }
}

impl<'de> Deserialize<'de> for RepoPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| RepoPath(s.into_bytes()))
    }
}

impl JsonSchema for RepoPath {
    fn schema_name() -> Cow<'static, str> {
        "RepoPath".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A path relative to the top of the work tree (bytes that are not UTF-8 shown as U+FFFD)"
        })
    }
}

/// How a file changed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ChangeStatus {
    /// The file is new.
    Added,
    /// The file's content changed.
    Modified,
    /// The file was deleted.
    Deleted,
    /// The file was moved (`old_path` says from where), possibly with changes.
    Renamed,
    /// The file was copied from `old_path`.
    Copied,
    /// Only the file's mode changed (e.g. it became executable).
    ModeChanged,
    /// The file changed type (regular file, symlink, submodule).
    TypeChanged,
}

impl std::fmt::Display for ChangeStatus {
    /// The status as a word for people (`added`, `mode changed`), not its Rust name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChangeStatus::Added => "added",
            ChangeStatus::Modified => "modified",
            ChangeStatus::Deleted => "deleted",
            ChangeStatus::Renamed => "renamed",
            ChangeStatus::Copied => "copied",
            ChangeStatus::ModeChanged => "mode changed",
            ChangeStatus::TypeChanged => "type changed",
        })
    }
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChangedFile {
    /// The path after the change.
    pub path: RepoPath,
    /// For renames and copies, the path before the change.
    pub old_path: Option<RepoPath>,
    /// How it changed.
    pub status: ChangeStatus,
}

/// Parses `git diff --raw -z` output, which also tells mode-only changes apart.
pub(crate) fn parse_raw(out: &[u8]) -> Result<Vec<ChangedFile>, String> {
    let mut fields = crate::command::split_nul(out);
    let mut files = Vec::new();
    while let Some(meta) = fields.next() {
        // ":<old mode> <new mode> <old id> <new id> <status>"
        let meta = std::str::from_utf8(meta).map_err(|_| "raw record is not UTF-8".to_owned())?;
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [old_mode, new_mode, old_id, new_id, code] = parts[..] else {
            return Err(format!("unexpected raw record {meta:?}"));
        };
        let mut path = || {
            fields
                .next()
                .map(RepoPath::from_bytes)
                .ok_or_else(|| format!("{meta:?} without a path"))
        };
        let file = match code.as_bytes().first() {
            Some(b'R' | b'C') => {
                let old = path()?;
                let status = if code.starts_with('R') {
                    ChangeStatus::Renamed
                } else {
                    ChangeStatus::Copied
                };
                ChangedFile {
                    path: path()?,
                    old_path: Some(old),
                    status,
                }
            }
            Some(b'M') if old_id == new_id && old_mode != new_mode => ChangedFile {
                path: path()?,
                old_path: None,
                status: ChangeStatus::ModeChanged,
            },
            Some(b'A') => ChangedFile {
                path: path()?,
                old_path: None,
                status: ChangeStatus::Added,
            },
            Some(b'M') => ChangedFile {
                path: path()?,
                old_path: None,
                status: ChangeStatus::Modified,
            },
            Some(b'D') => ChangedFile {
                path: path()?,
                old_path: None,
                status: ChangeStatus::Deleted,
            },
            Some(b'T') => ChangedFile {
                path: path()?,
                old_path: None,
                status: ChangeStatus::TypeChanged,
            },
            _ => return Err(format!("unknown status in {meta:?}")),
        };
        files.push(file);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn raw_with_renames_and_odd_names() {
        let out = b":100644 100644 a b M\0a b\0:100644 100644 a a R100\0old\0new\nline\0:000000 100644 0 c A\0\xff\xfe\0";
        assert_eq!(
            parse_raw(out).unwrap(),
            vec![
                ChangedFile {
                    path: RepoPath::from_bytes("a b"),
                    old_path: None,
                    status: ChangeStatus::Modified
                },
                ChangedFile {
                    path: RepoPath::from_bytes("new\nline"),
                    old_path: Some(RepoPath::from_bytes("old")),
                    status: ChangeStatus::Renamed
                },
                ChangedFile {
                    path: RepoPath::from_bytes(&b"\xff\xfe"[..]),
                    old_path: None,
                    status: ChangeStatus::Added
                },
            ]
        );
    }

    #[test]
    fn truncated_or_unknown_output_is_an_error_not_a_panic() {
        assert!(parse_raw(b":100644 100644 a b M\0").is_err());
        assert!(parse_raw(b":100644 100644 a b Z\0x\0").is_err());
        assert!(parse_raw(b":100644 100644 abc\0x\0").is_err());
        assert!(parse_raw(b":100644 100755 abc abc M\0").is_err());
    }

    #[test]
    fn raw_tells_mode_changes_apart() {
        let out = b":100644 100755 aaa aaa M\0run.sh\0:100644 100644 aaa bbb M\0b\0";
        let statuses: Vec<_> = parse_raw(out)
            .unwrap()
            .into_iter()
            .map(|f| f.status)
            .collect();
        assert_eq!(
            statuses,
            vec![ChangeStatus::ModeChanged, ChangeStatus::Modified]
        );
    }
}

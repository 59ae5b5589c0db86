//! What changed in a session: its tree (commits, edits and new files alike) against the
//! commit it started from ([`Session::diff`]).
//!
//! The session's repository is the agent's, so git runs in the session's sandbox, read-only
//! (a reader: it never waits for the writer and is not recorded), with cordon's hardening: no external diff
//! drivers, no text conversion. New files are diffed against `/dev/null`: nothing is written to
//! the session's repository.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{SessionError, SessionErrorKind};
use crate::sandboxed::SandboxedGit;
use crate::sessions::Session;

cordon_types::schema_tag!(
    /// The tag of a session's diff: `cordon.session-diff/v1`.
    SessionDiffTag,
    "cordon.session-diff/v1"
);

/// The most bytes of a patch [`Session::diff`] returns (the rest is counted).
pub const MAX_DIFF_BYTES: usize = 192 * 1024;

/// What changed in a session against the commit it started from: `cordon.session-diff/v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionDiff {
    /// Always `cordon.session-diff/v1`.
    pub schema: SessionDiffTag,
    /// The session.
    pub id: String,
    /// The commit the diff is taken against (the session's base).
    pub base_commit: String,
    /// The patch (`git diff --binary` of the tree, new files included), at most
    /// `max_bytes` of it.
    pub patch: String,
    /// The patch's whole size.
    pub patch_bytes: u64,
    /// Whether `patch` stops before the end (it is then no patch to apply).
    pub truncated: bool,
}

/// The trailer the diff script ends its output with: the patch's whole size.
const TRAILER: &str = "\n#cordon-diff-bytes ";

/// Prints the tree's patch against `$1` (tracked files, then each new file against
/// `/dev/null`: nothing is written to the session's repository), at most `$2` bytes of it,
/// then [`TRAILER`] and its whole size. A new file whose name git cannot show on one line
/// fails the script rather than leave it out.
const DIFF_SCRIPT: &str = r#"base="$1"; max="$2"; t=$(mktemp -d)
set -- diff --no-ext-diff --no-textconv --no-color --binary --src-prefix=a/ --dst-prefix=b/
g "$@" "$base" -- > "$t/patch"
g ls-files -z --others --exclude-standard | tr '\0' '\n' > "$t/new"
while IFS= read -r f; do
  g "$@" --no-index -- /dev/null "$f" || [ $? -eq 1 ]
done < "$t/new" >> "$t/patch"
head -c "$max" "$t/patch"
printf '\n#cordon-diff-bytes %s\n' "$(wc -c < "$t/patch")"
"#;

impl Session {
    /// What changed in the session against its base commit: commits, edits and new files,
    /// as one patch of at most `max_bytes` (capped at [`MAX_DIFF_BYTES`]). Runs git in the
    /// session's sandbox as a reader: read-only, never waiting for the writer, leaving no
    /// trace in the session's record.
    pub fn diff(&self, max_bytes: usize) -> Result<SessionDiff, SessionError> {
        let max_bytes = max_bytes.min(MAX_DIFF_BYTES);
        // A reader: no lease (readers never wait, and a diff leaves no trace in the record);
        // the layers it mounts stay held while it runs.
        let _readers = self.readers_lock()?;
        let rec = self.active_record()?;
        self.check_home_masked()?;
        let base = rec.base_commit.to_string();
        let out = SandboxedGit {
            step: "diffing the session's tree",
            root: &rec.path,
            read_only: true,
            read_only_binds: Vec::new(),
            overlay: self.overlay(&rec)?,
            script: DIFF_SCRIPT,
            args: vec![base.clone(), max_bytes.to_string()],
        }
        .run()?;
        let (patch, patch_bytes) = split_trailer(&out).ok_or_else(|| {
            SessionError::new(SessionErrorKind::SandboxedGit {
                step: "diffing the session's tree",
                detail: "its output has no size trailer".into(),
            })
        })?;
        Ok(SessionDiff {
            schema: SessionDiffTag,
            id: self.id().to_string(),
            base_commit: base,
            truncated: u64::try_from(patch.len()).unwrap_or(u64::MAX) < patch_bytes,
            patch,
            patch_bytes,
        })
    }

    /// The session's change as the patch a comparison verifies: `Ok(None)` when nothing
    /// changed; `Err` says, for a person, why this candidate cannot be compared (a change
    /// over [`MAX_DIFF_BYTES`], or one that could not be read).
    pub fn compare_patch(&self) -> Result<Option<Vec<u8>>, String> {
        match self.diff(MAX_DIFF_BYTES) {
            Ok(diff) if diff.truncated => Err(format!(
                "its change is {} bytes, more than the {MAX_DIFF_BYTES} bytes compare takes",
                diff.patch_bytes
            )),
            Ok(diff) => Ok((!diff.patch.is_empty()).then(|| diff.patch.into_bytes())),
            Err(e) => Err(format!("its change could not be read: {e}")),
        }
    }
}

/// The patch and its whole size, from the script's output (the trailer is the last line, so
/// the last occurrence is the script's own whatever the patch holds).
fn split_trailer(out: &str) -> Option<(String, u64)> {
    let at = out.rfind(TRAILER)?;
    let bytes = out[at + TRAILER.len()..].trim().parse().ok()?;
    Some((out[..at].to_owned(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_trailer_is_the_scripts() {
        let out = format!("a{TRAILER}9\nb{TRAILER}12\n");
        assert_eq!(split_trailer(&out), Some((format!("a{TRAILER}9\nb"), 12)));
        assert_eq!(split_trailer("no trailer"), None);
    }
}

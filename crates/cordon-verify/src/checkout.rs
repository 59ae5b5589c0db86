//! What of the user's checkout a verification judges: `HEAD` plus its uncommitted changes
//! (`cordon verify`'s default), or a committed state with what it leaves out said aloud — and
//! the one line every rendering starts with ([`cordon_types::Subject`]).

use std::path::Path;

use cordon_git::{Checkout, CommitId, NewFile, StatusEntry, StatusKind};
use cordon_types::{ChangeCounts, Subject, SubjectKind};

use crate::error::VerifyError;

/// What a verification does with the checkout's uncommitted changes (staged, unstaged,
/// untracked and not ignored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Uncommitted {
    /// Not looked at: the ref (and patch) alone, as a job service verifies a clone.
    #[default]
    Ignored,
    /// Verified: `HEAD` plus the checkout's changes as they are when the verification starts,
    /// snapshotted without touching the checkout, its index or its stash (`cordon verify`
    /// without `--ref`, `--patch` or `--committed`). Needs the ref `HEAD` and no patch.
    Included,
    /// Left out, and said so: the verdict is about the committed state (`--committed`,
    /// `--ref`, `--patch`), and the report names what it did not see.
    Excluded,
}

/// The checkout's uncommitted changes, as the workspace gets them.
#[derive(Debug, Clone, Default)]
pub(crate) enum Changes {
    /// None, or not looked at.
    #[default]
    None,
    /// Changed and new regular files, written into the workspace as they are (no git runs).
    Files(Vec<NewFile>),
    /// A patch on `HEAD` (`git diff --binary`), for what whole files cannot say: deletions,
    /// renames, symlinks, mode changes.
    Patch(Vec<u8>),
}

/// The checkout's uncommitted changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// By kind.
    pub(crate) counts: ChangeCounts,
    /// What the workspace gets (`Changes::None` when they are only counted).
    pub(crate) changes: Changes,
    /// Untracked git repositories inside the checkout, which neither carries.
    pub(crate) nested: Vec<String>,
}

/// The most bytes of changed files a snapshot copies (as a patch's limit).
const MAX_SNAPSHOT_BYTES: u64 = cordon_git::MAX_PATCH_BYTES;

/// What `checkout` holds beyond `head`, from one `git status`: counted, and with `contents`
/// also taken — whole files where they say it all, else a patch through a scratch index.
pub(crate) fn snapshot(
    checkout: &Checkout,
    head: &CommitId,
    contents: bool,
) -> Result<Snapshot, VerifyError> {
    let status = checkout
        .status()
        .map_err(|e| VerifyError::infra("cannot read the checkout's uncommitted changes", e))?;
    let mut snapshot = Snapshot::default();
    for entry in &status {
        let counts = &mut snapshot.counts;
        match entry.kind {
            StatusKind::Untracked if entry.path.as_bytes().ends_with(b"/") => {
                snapshot.nested.push(entry.path.to_string());
            }
            StatusKind::Untracked => counts.untracked += 1,
            StatusKind::Added => counts.added += 1,
            StatusKind::Deleted => counts.deleted += 1,
            StatusKind::Renamed => counts.renamed += 1,
            StatusKind::Modified | StatusKind::Other => counts.modified += 1,
        }
    }
    if !contents || snapshot.counts.is_empty() {
        return Ok(snapshot);
    }
    snapshot.changes = match whole_files(checkout.top(), &status)? {
        Some(files) => Changes::Files(files),
        None => {
            let diff = checkout.changes(head, &std::env::temp_dir()).map_err(|e| {
                VerifyError::infra("cannot read the checkout's uncommitted changes", e)
            })?;
            Changes::Patch(diff.patch.unwrap_or_default())
        }
    };
    Ok(snapshot)
}

/// The changed and new files of `status` as whole files read from the checkout at `top`, when
/// that says everything: only changed or added regular files (no deletion, rename, symlink,
/// mode or type change, submodule, conflict, nested repository). `None` otherwise.
fn whole_files(top: &Path, status: &[StatusEntry]) -> Result<Option<Vec<NewFile>>, VerifyError> {
    let mut files = Vec::with_capacity(status.len());
    let mut bytes = 0u64;
    for entry in status {
        let plain = match entry.kind {
            StatusKind::Modified | StatusKind::Added => {
                matches!(entry.worktree_mode, Some(0o100644 | 0o100755))
            }
            StatusKind::Untracked => !entry.path.as_bytes().ends_with(b"/"),
            StatusKind::Deleted | StatusKind::Renamed | StatusKind::Other => false,
        };
        if !plain {
            return Ok(None);
        }
        let path = top.join(entry.path.as_path());
        // What is there now; anything but a regular file (a symlink, a file gone since) takes
        // the patch's way.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return Ok(None);
        };
        if !meta.is_file() {
            return Ok(None);
        }
        bytes += meta.len();
        if bytes > MAX_SNAPSHOT_BYTES {
            return Err(VerifyError::Usage(format!(
                "the checkout's uncommitted changes are larger than {MAX_SNAPSHOT_BYTES} bytes; \
                 commit them, add what should not be verified to .gitignore, or pass \
                 --committed to verify HEAD alone"
            )));
        }
        let Ok(contents) = std::fs::read(&path) else {
            return Ok(None);
        };
        files.push(NewFile {
            path: entry.path.clone(),
            contents,
            executable: std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0,
        });
    }
    Ok(Some(files))
}

impl Changes {
    /// Whether there is anything to bring into the workspace.
    pub(crate) fn is_some(&self) -> bool {
        !matches!(self, Changes::None)
    }

    /// A SHA-256 digest of the changes (the report's `patch`): of the patch, or of each file's
    /// path, mode and bytes.
    pub(crate) fn digest(&self) -> Option<String> {
        use sha2::{Digest, Sha256};
        let digest = match self {
            Changes::None => return None,
            Changes::Patch(patch) => Sha256::digest(patch),
            Changes::Files(files) => {
                let mut h = Sha256::new();
                for f in files {
                    h.update((f.path.as_bytes().len() as u64).to_le_bytes());
                    h.update(f.path.as_bytes());
                    h.update([u8::from(f.executable)]);
                    h.update((f.contents.len() as u64).to_le_bytes());
                    h.update(&f.contents);
                }
                h.finalize()
            }
        };
        Some(digest.iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// What a verification of `rev` (`commit`), with a patch or not, judged, given what it did
/// with the checkout (`uncommitted`, its `snapshot` when looked at).
pub(crate) fn subject(
    rev: &str,
    commit: &CommitId,
    patch_digest: Option<&str>,
    uncommitted: Uncommitted,
    snapshot: Option<&Snapshot>,
) -> Subject {
    let short = &commit.as_str()[..7];
    let changes = snapshot.map(|s| s.counts).filter(|c| !c.is_empty());
    let nested = snapshot
        .filter(|s| !s.nested.is_empty())
        .map(|s| {
            format!(
                " (not included: the nested repositories {})",
                s.nested.join(", ")
            )
        })
        .unwrap_or_default();
    match (uncommitted, changes) {
        (Uncommitted::Included, Some(counts)) => Subject {
            kind: SubjectKind::WorkingTree,
            summary: format!("{rev} {short} + {}{nested}", counts.describe()),
            changes: Some(counts),
            not_verified: None,
        },
        (Uncommitted::Included, None) => Subject {
            kind: SubjectKind::WorkingTree,
            summary: format!("{rev} {short} (no uncommitted changes){nested}"),
            changes: Some(ChangeCounts::default()),
            not_verified: None,
        },
        (_, left_out) => {
            let (kind, what) = match patch_digest {
                Some(digest) => (
                    SubjectKind::Patch,
                    format!("{rev} {short} + patch {}", &digest[..digest.len().min(12)]),
                ),
                None => (SubjectKind::Commit, format!("{rev} {short}")),
            };
            let summary = match left_out.filter(|_| uncommitted == Uncommitted::Excluded) {
                Some(counts) => format!(
                    "{what}, committed only (not verified: the checkout's {})",
                    counts.describe()
                ),
                None => what,
            };
            Subject {
                kind,
                summary,
                changes: None,
                not_verified: left_out.filter(|_| uncommitted == Uncommitted::Excluded),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_of(counts: ChangeCounts) -> Snapshot {
        Snapshot {
            counts,
            ..Snapshot::default()
        }
    }

    #[test]
    fn the_subject_says_what_was_verified_and_what_was_left_out() {
        let commit = CommitId::parse("79b129f0123456789abcdef0123456789abcdef0").unwrap();
        let dirty = snapshot_of(ChangeCounts {
            modified: 2,
            untracked: 1,
            ..ChangeCounts::default()
        });
        let clean = Snapshot::default();
        let line = |rev, patch, mode, snap| subject(rev, &commit, patch, mode, snap).summary;
        assert_eq!(
            line("HEAD", None, Uncommitted::Included, Some(&dirty)),
            "HEAD 79b129f + 2 modified, 1 untracked"
        );
        assert_eq!(
            line("HEAD", None, Uncommitted::Included, Some(&clean)),
            "HEAD 79b129f (no uncommitted changes)"
        );
        assert_eq!(
            line("HEAD", None, Uncommitted::Excluded, Some(&dirty)),
            "HEAD 79b129f, committed only (not verified: the checkout's 2 modified, 1 untracked)"
        );
        assert_eq!(
            line("main", None, Uncommitted::Excluded, Some(&clean)),
            "main 79b129f"
        );
        assert_eq!(
            line("HEAD", Some("3f2a9c00aabbccdd"), Uncommitted::Ignored, None),
            "HEAD 79b129f + patch 3f2a9c00aabb"
        );
        let s = subject("HEAD", &commit, None, Uncommitted::Excluded, Some(&dirty));
        assert_eq!(s.kind, SubjectKind::Commit);
        assert_eq!(s.not_verified.map(|c| c.modified), Some(2));
    }

    /// Runs git in `dir` for the fixtures (no configuration of the user's).
    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }

    #[test]
    fn changed_and_new_files_are_taken_whole_and_anything_else_as_a_patch() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        git(top, &["init", "-q", "-b", "main"]);
        std::fs::write(top.join("a.txt"), "a\n").unwrap();
        std::fs::write(top.join("b.txt"), "b\n").unwrap();
        git(top, &["add", "-A"]);
        git(top, &["commit", "-q", "-m", "base"]);
        let checkout = Checkout::open(top).unwrap().unwrap();
        let head = checkout.resolve_commit("HEAD").unwrap();
        let clean = snapshot(&checkout, &head, true).unwrap();
        assert!(clean.counts.is_empty() && !clean.changes.is_some());

        std::fs::write(top.join("a.txt"), "A\n").unwrap();
        std::fs::create_dir(top.join("new")).unwrap();
        std::fs::write(top.join("new/c.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            top.join("new/c.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let whole = snapshot(&checkout, &head, true).unwrap();
        assert_eq!(whole.counts.describe(), "1 modified, 1 untracked");
        let Changes::Files(files) = &whole.changes else {
            panic!("{:?}", whole.changes);
        };
        let got: Vec<(String, &[u8], bool)> = files
            .iter()
            .map(|f| (f.path.to_string(), f.contents.as_slice(), f.executable))
            .collect();
        assert_eq!(
            got,
            [
                ("a.txt".to_owned(), &b"A\n"[..], false),
                ("new/c.sh".to_owned(), &b"#!/bin/sh\n"[..], true)
            ]
        );
        // Counted only.
        let counted = snapshot(&checkout, &head, false).unwrap();
        assert_eq!(counted.counts, whole.counts);
        assert!(!counted.changes.is_some());

        // A deletion cannot be said with whole files: a patch.
        std::fs::remove_file(top.join("b.txt")).unwrap();
        let patched = snapshot(&checkout, &head, true).unwrap();
        assert_eq!(
            patched.counts.describe(),
            "1 modified, 1 deleted, 1 untracked"
        );
        let Changes::Patch(patch) = &patched.changes else {
            panic!("{:?}", patched.changes);
        };
        let text = String::from_utf8_lossy(patch);
        assert!(text.contains("deleted file mode 100644"), "{text}");
        assert!(text.contains("+A"), "{text}");
        assert_ne!(whole.changes.digest(), patched.changes.digest());
    }
}

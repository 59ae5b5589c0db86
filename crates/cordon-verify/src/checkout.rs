//! What of the user's checkout a verification judges: `HEAD` plus its uncommitted changes
//! (`cordon verify`'s default), or a committed state with what it leaves out said aloud — and
//! the one line every rendering starts with ([`cordon_types::Subject`]).

use std::path::Path;

use cordon_git::{ChangeStatus, Checkout, CommitId, WorktreeDiff};
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

/// The checkout's uncommitted changes as one patch on `HEAD`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// By kind.
    pub(crate) counts: ChangeCounts,
    /// The patch (`git diff --binary` of `HEAD` against the checkout's files).
    pub(crate) patch: Vec<u8>,
    /// Untracked git repositories inside the checkout, which a patch cannot carry.
    pub(crate) nested: Vec<String>,
}

/// The checkout containing `repo` (`None` for a bare repository).
pub(crate) fn open(repo: &Path) -> Result<Option<Checkout>, VerifyError> {
    Checkout::open(repo)
        .map_err(|e| VerifyError::infra("cannot read the checkout's git directory", e))
}

/// Snapshots what `checkout` holds beyond `head`.
pub(crate) fn snapshot(checkout: &Checkout, head: &CommitId) -> Result<Snapshot, VerifyError> {
    let diff = checkout
        .changes(head, &std::env::temp_dir())
        .map_err(|e| VerifyError::infra("cannot read the checkout's uncommitted changes", e))?;
    Ok(from_diff(diff))
}

fn from_diff(diff: WorktreeDiff) -> Snapshot {
    let mut counts = ChangeCounts::default();
    for file in &diff.files {
        if diff.untracked.contains(&file.path) {
            counts.untracked += 1;
            continue;
        }
        match file.status {
            ChangeStatus::Added | ChangeStatus::Copied => counts.added += 1,
            ChangeStatus::Deleted => counts.deleted += 1,
            ChangeStatus::Renamed => counts.renamed += 1,
            ChangeStatus::Modified | ChangeStatus::ModeChanged | ChangeStatus::TypeChanged => {
                counts.modified += 1
            }
        }
    }
    Snapshot {
        counts,
        patch: diff.patch.unwrap_or_default(),
        nested: diff
            .nested_repositories
            .iter()
            .map(|p| format!("{p}/"))
            .collect(),
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
}

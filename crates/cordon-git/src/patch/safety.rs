//! Which paths a patch may touch inside a work tree.
//!
//! A path is refused when it is empty, absolute, not normalized (`.`, `..` or empty
//! components), names git's own directory in any spelling a filesystem might fold to `.git`
//! (`.GIT`, `.git.`, `git~1`), names `.gitmodules` (a submodule URL or path is an attack on
//! whoever runs `git submodule update` later), passes through a symlink that exists in the
//! work tree (whatever it points to), or passes through a symlink the same patch creates.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::changes::RepoPath;

/// Why a patch path is refused.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, thiserror::Error,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RefusalReason {
    /// The path is empty.
    #[error("is empty")]
    Empty,
    /// The path is absolute.
    #[error("is absolute")]
    Absolute,
    /// The path has a `..` component.
    #[error("has a `..` component")]
    ParentComponent,
    /// The path has an empty or `.` component.
    #[error("is not normalized")]
    NotNormalized,
    /// The path is inside git's directory (`.git` in any case or spelling).
    #[error("is inside a .git directory")]
    GitDirectory,
    /// The path is a `.gitmodules` file.
    #[error("is a .gitmodules file")]
    Gitmodules,
    /// A directory on the path is a symlink in the work tree.
    #[error("goes through a symlink in the workspace")]
    ThroughSymlink,
    /// A directory on the path is a symlink the patch itself creates.
    #[error("goes through a symlink the patch creates")]
    ThroughNewSymlink,
}

/// Checks the spelling of one path.
pub(crate) fn check_lexical(path: &RepoPath) -> Result<(), RefusalReason> {
    let bytes = path.as_bytes();
    if bytes.is_empty() {
        return Err(RefusalReason::Empty);
    }
    if bytes.starts_with(b"/") {
        return Err(RefusalReason::Absolute);
    }
    for component in bytes.split(|&b| b == b'/') {
        match component {
            b"" | b"." => return Err(RefusalReason::NotNormalized),
            b".." => return Err(RefusalReason::ParentComponent),
            _ if is_dot_git(component) => return Err(RefusalReason::GitDirectory),
            _ if component.eq_ignore_ascii_case(b".gitmodules") => {
                return Err(RefusalReason::Gitmodules);
            }
            _ => {}
        }
    }
    Ok(())
}

/// `.git` as filesystems may fold it: any case, trailing dots or spaces, the 8.3 short name.
fn is_dot_git(component: &[u8]) -> bool {
    let trimmed = component
        .iter()
        .rposition(|&b| b != b'.' && b != b' ')
        .map_or(&[][..], |end| &component[..=end]);
    trimmed.eq_ignore_ascii_case(b".git") || component.eq_ignore_ascii_case(b"git~1")
}

/// Checks that no directory on `path` is a symlink, in the work tree or created by the patch.
pub(crate) fn check_no_symlink_on_path(
    root: &crate::layers::Layers,
    path: &RepoPath,
    new_symlinks: &HashSet<&[u8]>,
) -> Result<(), RefusalReason> {
    let bytes = path.as_bytes();
    let mut on_disk = true;
    for (at, _) in bytes.iter().enumerate().filter(|&(_, &b)| b == b'/') {
        let prefix = &bytes[..at];
        if new_symlinks.contains(prefix) {
            return Err(RefusalReason::ThroughNewSymlink);
        }
        if on_disk {
            match root.lstat(RepoPath::from_bytes(prefix.to_vec()).as_path()) {
                Ok(Some(entry)) if entry.kind == crate::layers::EntryKind::Symlink => {
                    return Err(RefusalReason::ThroughSymlink);
                }
                Ok(Some(_)) => {}
                // Nothing deeper exists either; the patch's own symlinks are still checked.
                Ok(None) | Err(_) => on_disk = false,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_refusals() {
        let check = |s: &str| check_lexical(&RepoPath::from_bytes(s));
        assert_eq!(check("src/main.rs"), Ok(()));
        assert_eq!(check("a/.github/x"), Ok(()));
        assert_eq!(check(".gitignore"), Ok(()));
        assert_eq!(check(""), Err(RefusalReason::Empty));
        assert_eq!(check("/etc/passwd"), Err(RefusalReason::Absolute));
        assert_eq!(check("../x"), Err(RefusalReason::ParentComponent));
        assert_eq!(check("a/../../x"), Err(RefusalReason::ParentComponent));
        assert_eq!(check("a//b"), Err(RefusalReason::NotNormalized));
        assert_eq!(check("./a"), Err(RefusalReason::NotNormalized));
        assert_eq!(
            check(".git/hooks/pre-commit"),
            Err(RefusalReason::GitDirectory)
        );
        assert_eq!(check(".GIT/config"), Err(RefusalReason::GitDirectory));
        assert_eq!(check("sub/.Git. /config"), Err(RefusalReason::GitDirectory));
        assert_eq!(check("GIT~1/config"), Err(RefusalReason::GitDirectory));
        assert_eq!(check(".git"), Err(RefusalReason::GitDirectory));
        assert_eq!(check(".gitmodules"), Err(RefusalReason::Gitmodules));
    }
}

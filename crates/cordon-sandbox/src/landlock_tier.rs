//! The landlock tier's plan: the same view the namespace tier builds with mounts, expressed
//! as Landlock rules on the host's own paths, for where no namespace can be made.
//!
//! The namespace tier's mount steps are planned first ([`crate::plan::plan_mounts`]), then
//! turned into rules: a read-only bind becomes a read rule on its path, a writable one a
//! write rule, a copied `/etc` file a read rule on the host's file, the sandbox's private
//! `/tmp` and home become private directories of cordon's (`HOME`, `TMPDIR`), its `/dev` the
//! few device files programs use. What a mount can do and a rule cannot is handled here:
//! - a masked secret inside a readable tree (`~/.cargo/credentials.toml` under a toolchain
//!   home) is left out by granting the tree's other entries one by one;
//! - a masked secret inside a *writable* tree cannot be left out (creating files in a
//!   directory is granted beneath it): the run is refused;
//! - a read-only tree inside a writable one (`.git` under the working directory) cannot be
//!   kept read-only: said in the result (`not_enforced`);
//! - copy-on-write trees (overlay workspaces) need a mount: refused, with the fix.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cordon_sandbox_init::{MountOp, SocketFamilies};
use cordon_types::NetworkMode;

use crate::error::{SandboxError, SandboxErrorKind};
use crate::policy::{Degradation, SandboxPolicy};
use crate::secrets::within;

/// The device files the landlock tier's program may read and write (the namespace tier
/// builds a `/dev` of its own with these).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The Landlock ABI whose rights confine connecting to Unix sockets by path.
const ABI_UNIX_SOCKETS: u32 = 9;

/// The rules and the rest of a landlock-tier plan.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    /// Readable trees and files.
    pub read: Vec<PathBuf>,
    /// Readable and writable trees.
    pub write: Vec<PathBuf>,
    /// Device files.
    pub devices: Vec<PathBuf>,
    /// What the namespace tier would protect that this one does not.
    pub not_enforced: Vec<String>,
}

/// Turns the namespace tier's mount steps into rules; `home` and `tmp` are the private
/// directories that stand for the sandbox's own.
pub(crate) fn rules(ops: &[MountOp], home: &Path, tmp: &Path) -> Result<Rules, SandboxError> {
    let mut read: Vec<PathBuf> = Vec::new();
    let mut write: Vec<PathBuf> = vec![home.to_owned(), tmp.to_owned()];
    let mut holes: Vec<PathBuf> = Vec::new();
    let mut read_only_inside: Vec<PathBuf> = Vec::new();
    let mut not_enforced = Vec::new();
    for op in ops {
        match op {
            MountOp::Bind { src, dst, rw, .. } => {
                if src != dst && !dst.starts_with("/etc") {
                    // A file shown with other content (git configuration without its
                    // credentials): without a mount the original would show, so it is not
                    // shown at all.
                    holes.push(dst.clone());
                    not_enforced.push(format!(
                        "{} with its credentials removed (it is unreadable instead)",
                        dst.display()
                    ));
                    continue;
                }
                if *rw {
                    write.push(src.clone());
                } else {
                    read_only_inside.push(src.clone());
                    read.push(src.clone());
                }
            }
            MountOp::CopyFile { src, .. } => read.push(src.clone()),
            MountOp::Overlay {
                lower, writable, ..
            } => {
                read.push(lower.clone());
                if *writable {
                    not_enforced.push(format!(
                        "a private writable layer over {} (it is read-only instead)",
                        lower.display()
                    ));
                }
            }
            MountOp::Layers { dst, .. } => {
                return Err(SandboxError::new(
                    SandboxErrorKind::Unenforceable {
                        what: "copy-on-write trees",
                        reason: format!(
                            "{} is an overlay workspace, which only a mount namespace can show",
                            dst.display()
                        ),
                    },
                    Some(
                        "use a git-worktree workspace (--strategy git-worktree, or \
                         CORDON_WORKSPACE_STRATEGY=git-worktree)"
                            .into(),
                    ),
                ));
            }
            MountOp::Tmpfs { dst, ro: true, .. } | MountOp::MaskFile { dst } => {
                holes.push(dst.clone());
            }
            MountOp::Proc => read.push("/proc".into()),
            MountOp::Tmpfs { ro: false, .. } | MountOp::Dev { .. } | MountOp::Symlink { .. } => {}
        }
    }
    // A read-only tree inside a writable one stays writable.
    for inner in read_only_inside {
        if write.iter().any(|w| w != &inner && within(&inner, w)) {
            not_enforced.push(format!(
                "{} read-only (it lies inside a writable tree)",
                inner.display()
            ));
        }
    }
    for hole in &holes {
        if let Some(tree) = write.iter().find(|w| within(hole, w)) {
            return Err(SandboxError::new(
                SandboxErrorKind::Unenforceable {
                    what: "hiding a secret",
                    reason: format!(
                        "{} lies inside {}, which the program may write: without a mount \
                         namespace it cannot be hidden",
                        hole.display(),
                        tree.display()
                    ),
                },
                Some("run in a directory that holds no secrets".into()),
            ));
        }
    }
    let read = punch_holes(dedup(read), &holes);
    Ok(Rules {
        read,
        write: dedup(write),
        devices: DEVICES
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect(),
        not_enforced,
    })
}

/// `trees` with every hole left out: a tree holding a hole is replaced by its entries,
/// one level at a time down to the hole (a hole that is a tree itself goes whole).
fn punch_holes(trees: Vec<PathBuf>, holes: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut queue = trees;
    while let Some(tree) = queue.pop() {
        if holes.iter().any(|h| within(&tree, h)) {
            continue;
        }
        if !holes.iter().any(|h| within(h, &tree)) {
            out.push(tree);
            continue;
        }
        // A hole below: the tree's entries instead (a directory's names stay listable
        // through the rules of its entries' ancestors only where those are granted).
        if let Ok(entries) = std::fs::read_dir(&tree) {
            queue.extend(entries.flatten().map(|e| e.path()));
        }
    }
    out.sort();
    out
}

fn dedup(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    // A path inside another of the list adds nothing.
    let all: BTreeSet<PathBuf> = paths.iter().cloned().collect();
    paths
        .into_iter()
        .filter(|p| !all.iter().any(|q| q != p && within(p, q)))
        .collect()
}

/// The socket families the program may create in the landlock tier, and why Unix sockets
/// are refused where they are.
pub(crate) fn sockets(
    policy: &SandboxPolicy,
    abi: u32,
) -> (Option<SocketFamilies>, Option<String>) {
    if policy.network == NetworkMode::Host {
        return (None, None);
    }
    let unix = abi >= ABI_UNIX_SOCKETS || policy.allows_degraded(Degradation::UnixSockets);
    let note = (!unix).then(|| {
        format!(
            "Unix sockets (refused: Landlock ABI {abi} cannot keep the program from connecting \
             to any socket file it can reach; --allow-degraded unix-sockets allows them)"
        )
    });
    (
        Some(SocketFamilies {
            unix,
            tcp: policy.network == NetworkMode::Allowlist,
        }),
        note,
    )
}

/// What the landlock tier never gives, said in every result.
pub(crate) fn always_not_enforced(policy: &SandboxPolicy, abi: u32) -> Vec<String> {
    let mut out = vec![
        "a private /proc: the program sees the host's processes and their command lines \
         (not their memory or environment)"
            .to_owned(),
        "a private PID space".to_owned(),
        "a private /tmp and /dev/shm: TMPDIR and HOME point at private directories; /tmp and \
         /dev/shm are not writable"
            .to_owned(),
        "a private System V IPC namespace".to_owned(),
    ];
    if abi < 6 {
        out.push(
            "signal and abstract-socket scoping (Landlock ABI 6): the program can signal \
             the user's other processes"
                .to_owned(),
        );
    }
    match policy.network {
        NetworkMode::None => out.push(
            "a private loopback: the program has no network at all (TCP and UDP sockets are \
             refused)"
                .to_owned(),
        ),
        NetworkMode::Allowlist => out.push(format!(
            "a private loopback: the program reaches cordon's proxy on the host's loopback, and \
             {}",
            if abi >= 4 {
                "Landlock lets it connect to the proxy's port only, on any address"
            } else {
                "without Landlock's TCP rules (ABI 4) it can connect to any TCP port"
            }
        )),
        NetworkMode::Host => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_splits_its_tree_into_the_other_entries() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        for p in ["a/keep", "a/secret/x", "b"] {
            std::fs::create_dir_all(d.join(p)).unwrap();
        }
        std::fs::write(d.join("a/file"), "x").unwrap();
        let out = punch_holes(vec![d.join("a"), d.join("b")], &[d.join("a/secret")]);
        assert_eq!(out, [d.join("a/file"), d.join("a/keep"), d.join("b")]);
        // A tree that is a hole, or inside one, goes whole.
        assert!(punch_holes(vec![d.join("a/secret/x")], &[d.join("a/secret")]).is_empty());
    }

    #[test]
    fn nested_paths_are_granted_once() {
        assert_eq!(
            dedup(vec!["/a/b".into(), "/a".into(), "/c".into(), "/a".into()]),
            [PathBuf::from("/a"), PathBuf::from("/c")]
        );
    }
}

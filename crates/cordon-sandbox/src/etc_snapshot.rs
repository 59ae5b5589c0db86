//! The snapshot of `/etc`, kept between runs.
//!
//! Every sandbox shows the small files of `/etc` a program needs (passwd, group, hosts,
//! resolv.conf, ld.so.cache, ...) as copies in its constructed root: a snapshot, never the
//! host's files themselves. Copying some twenty files at every start was a fifth of the
//! helper's set-up. Instead cordon keeps the snapshot in its own cache directory, one per
//! state of those files, and the sandbox binds it read-only at `/etc` (one mount); the
//! directories bound from the host (`/etc/ssl/certs`, ...) are bound on top as before.
//!
//! A snapshot is named by a hash of everything that went into it: each source's path, device,
//! inode, size, modification and change times (any write to a file changes its change time),
//! and the mount points made in it. A changed host file is a new name, so a new snapshot; an
//! old snapshot is never changed. Snapshots are built on the host, by cordon, in a temporary
//! directory whose files are synced before it is renamed into place: a crash leaves a
//! temporary directory (removed later), never a partial snapshot under a snapshot's name.
//!
//! A sandboxed program can neither see nor change the cache: it lies in cordon's home, which
//! every sandbox masks, and binds into it are refused. A run holds a shared lock on its
//! snapshot until it ends; a snapshot is deleted only under an exclusive lock, so never while
//! a sandbox shows it.

use std::fs::{File, Metadata};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cordon_sandbox_init::MountOp;
use rustix::fs::FlockOperation;

/// Bumped when the layout of a snapshot changes.
const FORMAT: u32 = 1;
/// Temporary build directories older than this are a crashed build's: removed.
const STALE_BUILD: std::time::Duration = std::time::Duration::from_secs(3600);

/// A shared lock on the snapshot a run shows: the snapshot is not deleted while it is held.
#[derive(Clone)]
pub struct SnapshotLease(#[allow(dead_code)] Arc<OwnedFd>);

impl std::fmt::Debug for SnapshotLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SnapshotLease")
    }
}

impl PartialEq for SnapshotLease {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SnapshotLease {}

/// A copied `/etc` file of the plan and what it was when planned (its `lstat`, or `stat`
/// when the name is a symlink).
pub(crate) struct Copied {
    /// The host file.
    pub src: PathBuf,
    /// Its metadata.
    pub meta: Metadata,
}

fn under_etc(path: &Path) -> bool {
    path.starts_with("/etc") && path != Path::new("/etc")
}

/// Replaces the `/etc` copies and symlinks of `ops` by a bind of a snapshot of them in
/// `cache` (built if missing) at `/etc`. Returns the lease that keeps the snapshot alive;
/// `ops` is unchanged when the cache cannot be used (the copies then happen in the sandbox,
/// as without a cache).
pub(crate) fn substitute(
    ops: &mut Vec<MountOp>,
    copied: &[Copied],
    cache: &Path,
) -> std::io::Result<SnapshotLease> {
    let mut content: Vec<Entry> = Vec::new();
    for op in ops.iter() {
        match op {
            MountOp::CopyFile { src, dst } if under_etc(dst) => {
                let meta = copied
                    .iter()
                    .find(|c| &c.src == src)
                    .map(|c| &c.meta)
                    .ok_or_else(|| std::io::Error::other("a copy without its metadata"))?;
                content.push(Entry::File {
                    src: src.clone(),
                    dst: dst.clone(),
                    meta: meta.clone(),
                });
            }
            MountOp::Symlink { dst, target } if under_etc(dst) => content.push(Entry::Symlink {
                dst: dst.clone(),
                target: target.clone(),
            }),
            _ => {}
        }
    }
    // Mount points of what stays mounted under /etc, unless another mount under /etc holds
    // them (a mask inside a bound directory).
    let staying: Vec<&MountOp> = ops
        .iter()
        .filter(|op| under_etc(op.dst()))
        .filter(|op| !matches!(op, MountOp::CopyFile { .. } | MountOp::Symlink { .. }))
        .collect();
    for op in &staying {
        let dst = op.dst();
        let held = staying.iter().any(|other| {
            matches!(
                other,
                MountOp::Bind { dir: true, .. } | MountOp::Overlay { .. } | MountOp::Layers { .. }
            ) && dst != other.dst()
                && dst.starts_with(other.dst())
        });
        if held {
            continue;
        }
        let dir = match op {
            MountOp::Bind { dir, .. } => *dir,
            MountOp::MaskFile { .. } => false,
            _ => true,
        };
        content.push(Entry::MountPoint {
            dst: dst.to_owned(),
            dir,
        });
    }
    if content.is_empty() {
        return Err(std::io::Error::other("nothing to snapshot"));
    }
    content.sort_by(|a, b| a.dst().cmp(b.dst()));
    content.dedup_by(|a, b| a.dst() == b.dst());

    let name = format!("etc-{}", key(&content));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(cache)?;
    // The lease first: once it is held, nobody deletes the snapshot; if it is not there yet
    // (or was deleted just before), it is built now.
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc_o_cloexec())
        .open(cache.join(format!("{name}.lock")))?;
    rustix::fs::flock(&lock, FlockOperation::LockShared)?;
    let dir = cache.join(&name);
    let meta = match dir.symlink_metadata() {
        Ok(m) if m.is_dir() => m,
        Ok(_) => return Err(std::io::Error::other("the snapshot is not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            build(cache, &dir, &content)?;
            prune(cache, &name);
            dir.symlink_metadata()?
        }
        Err(e) => return Err(e),
    };
    ops.retain(|op| {
        !(under_etc(op.dst()) && matches!(op, MountOp::CopyFile { .. } | MountOp::Symlink { .. }))
    });
    ops.push(MountOp::Bind {
        src: dir,
        dst: "/etc".into(),
        dir: true,
        rw: false,
        identity: cordon_sandbox_init::FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        },
    });
    ops.sort_by(|a, b| {
        a.dst()
            .cmp(b.dst())
            .then(a.layer_rank().cmp(&b.layer_rank()))
    });
    Ok(SnapshotLease(Arc::new(OwnedFd::from(lock))))
}

/// `O_CLOEXEC`, which std sets anyway (kept explicit: the lock must not reach the sandbox).
fn libc_o_cloexec() -> i32 {
    rustix::fs::OFlags::CLOEXEC.bits() as i32
}

/// One thing in a snapshot.
enum Entry {
    File {
        src: PathBuf,
        dst: PathBuf,
        meta: Metadata,
    },
    Symlink {
        dst: PathBuf,
        target: PathBuf,
    },
    MountPoint {
        dst: PathBuf,
        dir: bool,
    },
}

impl Entry {
    fn dst(&self) -> &Path {
        match self {
            Entry::File { dst, .. }
            | Entry::Symlink { dst, .. }
            | Entry::MountPoint { dst, .. } => dst,
        }
    }
}

/// A 128-bit hex digest of what a snapshot holds (two SipHash passes with fixed keys).
fn key(content: &[Entry]) -> String {
    let digest = |salt: u64| {
        #[allow(deprecated)]
        let mut h = std::hash::SipHasher::new_with_keys(salt, FORMAT.into());
        cordon_sandbox_init::HOSTNAME.hash(&mut h);
        for entry in content {
            match entry {
                Entry::File { src, dst, meta } => {
                    (0u8, src, dst, meta.dev(), meta.ino(), meta.len()).hash(&mut h);
                    (
                        meta.mtime(),
                        meta.mtime_nsec(),
                        meta.ctime(),
                        meta.ctime_nsec(),
                    )
                        .hash(&mut h);
                    (meta.mode(), meta.uid(), meta.gid()).hash(&mut h);
                }
                Entry::Symlink { dst, target } => (1u8, dst, target).hash(&mut h),
                Entry::MountPoint { dst, dir } => (2u8, dst, dir).hash(&mut h),
            }
        }
        h.finish()
    };
    format!(
        "{:016x}{:016x}",
        digest(0x636f_7264_6f6e_2d31),
        digest(0x6574_632d_736e_6170)
    )
}

/// Builds the snapshot `dir` from `content`: in a temporary directory, synced, then renamed.
fn build(cache: &Path, dir: &Path, content: &[Entry]) -> std::io::Result<()> {
    let tmp = cache.join(format!(
        "tmp-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    ));
    let result = fill(&tmp, content).and_then(|()| {
        File::open(&tmp)?.sync_all()?;
        match std::fs::rename(&tmp, dir) {
            Ok(()) => File::open(cache)?.sync_all(),
            // Another cordon built it meanwhile: theirs is the same.
            Err(_) if dir.is_dir() => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok(())
            }
            Err(e) => Err(e),
        }
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn fill(tmp: &Path, content: &[Entry]) -> std::io::Result<()> {
    let mut dirs = std::fs::DirBuilder::new();
    dirs.recursive(true).mode(0o755);
    std::fs::DirBuilder::new().mode(0o755).create(tmp)?;
    // The root of the snapshot becomes /etc: readable and searchable by everyone, as /etc.
    std::fs::set_permissions(tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let inside = |dst: &Path| tmp.join(dst.strip_prefix("/etc").unwrap_or(dst));
    for entry in content {
        let path = inside(entry.dst());
        if let Some(parent) = path.parent() {
            dirs.create(parent)?;
        }
        match entry {
            Entry::File { src, dst, .. } => {
                let mut data = std::fs::read(src)?;
                if dst == Path::new("/etc/hosts") {
                    data = cordon_sandbox_init::etc_hosts(data);
                }
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .open(&path)?;
                file.write_all(&data)?;
                file.sync_all()?;
            }
            Entry::Symlink { target, .. } => std::os::unix::fs::symlink(target, &path)?,
            Entry::MountPoint { dir: true, .. } => dirs.create(&path)?,
            Entry::MountPoint { dir: false, .. } => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .open(&path)?;
            }
        }
    }
    Ok(())
}

/// Removes the other snapshots nobody holds, and temporary directories of crashed builds.
fn prune(cache: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        if name.starts_with("tmp-") {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_BUILD));
            if old {
                let _ = std::fs::remove_dir_all(&path);
            }
            continue;
        }
        if !name.starts_with("etc-") || name.ends_with(".lock") || name == keep {
            continue;
        }
        let lock_path = cache.join(format!("{name}.lock"));
        let Ok(lock) = File::options().read(true).write(true).open(&lock_path) else {
            // No lock file: nobody can hold it (leases open it first); an orphan.
            let _ = std::fs::remove_dir_all(&path);
            continue;
        };
        if rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_dir_all(&path);
            let _ = std::fs::remove_file(&lock_path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copied(path: &Path) -> Copied {
        Copied {
            src: path.to_owned(),
            meta: path.symlink_metadata().unwrap(),
        }
    }

    #[test]
    fn copies_become_one_snapshot_bound_at_etc_and_a_changed_file_a_new_one() {
        let base = std::env::temp_dir().join(format!("cordon-etc-snapshot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let src = base.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let cache = base.join("cache");
        let passwd = src.join("passwd");
        let hosts = src.join("hosts");
        std::fs::write(&passwd, "root:x:0:0::/root:/bin/sh\n").unwrap();
        std::fs::write(&hosts, "127.0.0.1 localhost\n").unwrap();
        let plan = || {
            vec![
                MountOp::CopyFile {
                    src: passwd.clone(),
                    dst: "/etc/passwd".into(),
                },
                MountOp::CopyFile {
                    src: hosts.clone(),
                    dst: "/etc/hosts".into(),
                },
                MountOp::Symlink {
                    dst: "/etc/mtab".into(),
                    target: "../proc/self/mounts".into(),
                },
                MountOp::Bind {
                    src: "/usr/share".into(),
                    dst: "/etc/ssl/certs".into(),
                    dir: true,
                    rw: false,
                    identity: cordon_sandbox_init::FileIdentity { dev: 1, ino: 2 },
                },
                MountOp::Tmpfs {
                    dst: "/etc/ssl/certs/private".into(),
                    mode: 0,
                    ro: true,
                    size_bytes: None,
                    inodes: None,
                },
                MountOp::Proc,
            ]
        };
        let mut ops = plan();
        let lease = substitute(&mut ops, &[copied(&passwd), copied(&hosts)], &cache).unwrap();
        let dsts: Vec<&Path> = ops.iter().map(MountOp::dst).collect();
        assert_eq!(
            dsts,
            ["/etc", "/etc/ssl/certs", "/etc/ssl/certs/private", "/proc"].map(Path::new)
        );
        let MountOp::Bind {
            src: snapshot,
            rw: false,
            dir: true,
            ..
        } = &ops[0]
        else {
            panic!("{ops:?}");
        };
        assert_eq!(
            std::fs::read_to_string(snapshot.join("passwd")).unwrap(),
            "root:x:0:0::/root:/bin/sh\n"
        );
        let hosts_copy = std::fs::read_to_string(snapshot.join("hosts")).unwrap();
        assert!(
            hosts_copy.starts_with("127.0.0.1 localhost\n"),
            "{hosts_copy}"
        );
        assert!(
            hosts_copy.contains(cordon_sandbox_init::HOSTNAME),
            "{hosts_copy}"
        );
        assert_eq!(
            std::fs::read_link(snapshot.join("mtab")).unwrap(),
            Path::new("../proc/self/mounts")
        );
        // The mount point of the bind is there; the mask's is inside the bound directory.
        assert!(snapshot.join("ssl/certs").is_dir());
        assert!(!snapshot.join("ssl/certs/private").exists());

        // The same files again: the same snapshot.
        let mut again = plan();
        let _lease2 = substitute(&mut again, &[copied(&passwd), copied(&hosts)], &cache).unwrap();
        assert_eq!(again, ops);

        // A changed file: another snapshot; the first one stays while it is leased.
        std::fs::write(&passwd, "root:x:0:0::/root:/bin/bash\n").unwrap();
        let mut changed = plan();
        let lease3 = substitute(&mut changed, &[copied(&passwd), copied(&hosts)], &cache).unwrap();
        let MountOp::Bind { src: second, .. } = &changed[0] else {
            panic!("{changed:?}");
        };
        assert_ne!(second, snapshot);
        assert!(snapshot.is_dir(), "a leased snapshot was removed");
        assert_eq!(
            std::fs::read_to_string(second.join("passwd")).unwrap(),
            "root:x:0:0::/root:/bin/bash\n"
        );
        // Once nobody holds it, the next new snapshot removes it.
        drop((lease, _lease2));
        std::fs::write(&hosts, "127.0.0.1 localhost other\n").unwrap();
        let mut third = plan();
        let _lease4 = substitute(&mut third, &[copied(&passwd), copied(&hosts)], &cache).unwrap();
        assert!(!snapshot.exists(), "an unleased old snapshot stayed");
        assert!(second.is_dir(), "a leased snapshot was removed");
        drop(lease3);
        std::fs::remove_dir_all(&base).unwrap();
    }
}

//! The init plan: the data the policy side (`cordon-sandbox`) computes and the helper
//! executes. It crosses from one to the other as JSON in the helper's environment
//! ([`PLAN_ENV`]), so the helper parses no policy and probes nothing it can be told.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The first argument that makes a binary act as the sandbox helper
/// (`BINARY __sandbox-init -- PROGRAM ARGS...`).
pub const INIT_ARG: &str = "__sandbox-init";

/// The environment variable that carries the JSON plan to the helper.
pub const PLAN_ENV: &str = "__CORDON_SANDBOX_PLAN";

/// The environment variable that carries the build identity of the cordon that wrote the plan
/// (its [`HELPER_BUILD`]): a helper of another build refuses to run it.
pub const BUILD_ENV: &str = "__CORDON_SANDBOX_BUILD";

/// This build's identity: the version and a hash of the sources of the helper and the types
/// it shares with cordon (see `build.rs`).
pub const HELPER_BUILD: &str = env!("CORDON_HELPER_BUILD");

/// The environment variables that belong to the helper, never to the program.
pub const HELPER_ENV: [&str; 2] = [PLAN_ENV, BUILD_ENV];

/// Everything the helper needs, serialized into [`PLAN_ENV`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitPlan {
    /// Mount steps in order (parents before children, masks after what they mask).
    pub mounts: Vec<MountOp>,
    /// The program's working directory.
    pub workdir: PathBuf,
    /// Whether to unshare the network (loopback only).
    pub private_network: bool,
    /// Landlock rules, when Landlock is enforced.
    pub landlock: Option<LandlockPlan>,
    /// Whether to install the seccomp filter.
    pub seccomp: bool,
    /// Resource limits applied with `setrlimit` in the program's process.
    pub rlimits: Vec<Rlimit>,
    /// The cgroup to create, when memory or pids are limited by a cgroup.
    pub cgroup: Option<CgroupPlan>,
    /// The uid of the program inside (mapped to the same id outside).
    pub uid: u32,
    /// The gid of the program inside (mapped to the same id outside).
    pub gid: u32,
    /// Mount points made `noexec` once every mount is in place (`--allow-exec`): neither
    /// `execve` nor the dynamic loader's `mmap(PROT_EXEC)` can run a file from there.
    #[serde(default)]
    pub noexec: Vec<PathBuf>,
    /// Whether the program may not make memory executable other than by mapping a file
    /// (`--allow-exec` without `--allow-jit`): see the seccomp rules.
    #[serde(default)]
    pub deny_exec_memory: bool,
    /// How the program is isolated. In the `landlock` tier there is no namespace and no
    /// mount: `mounts` is empty, the helper runs the program as its own child, and Landlock
    /// (with `landlock.net_connect`) and seccomp (with `sockets`) confine it.
    #[serde(default)]
    pub tier: cordon_types::IsolationTier,
    /// The socket families the program may create, where no network namespace confines
    /// them (the `landlock` tier); `None`: any.
    #[serde(default)]
    pub sockets: Option<SocketFamilies>,
    /// With a filtering proxy (`--network allow=...`): the loopback port inside the private
    /// network namespace where PID 1 makes the proxy's listening socket, which it sends to
    /// cordon over [`cordon_types::CHILD_NETWORK_FD`] before the program starts.
    #[serde(default)]
    pub proxy_port: Option<u16>,
}

/// One mount step, executed after `pivot_root` into a fresh tmpfs; sources are host paths
/// (reached through the old root), destinations are paths in the new root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MountOp {
    /// Bind a host directory or file.
    Bind {
        /// Host path (canonical).
        src: PathBuf,
        /// Path inside.
        dst: PathBuf,
        /// Whether `src` is a directory.
        dir: bool,
        /// Whether it stays writable.
        rw: bool,
        /// What `src` was when the policy side checked it: the helper binds that object or
        /// refuses (a path swapped for a symlink in between is never followed).
        identity: FileIdentity,
    },
    /// A host directory seen through a private overlay: `lower` read-only underneath,
    /// `upper` (cordon's own directory) taking every write when `writable`, or on top of
    /// `lower` read-only otherwise. Where overlayfs cannot be mounted, `upper` alone is
    /// bound instead (an empty private directory: never the host's).
    Overlay {
        /// Path inside (the lower's own path).
        dst: PathBuf,
        /// Host directory underneath (canonical).
        lower: PathBuf,
        /// What `lower` was when the policy side checked it.
        lower_identity: FileIdentity,
        /// Host directory taking the writes (canonical).
        upper: PathBuf,
        /// Overlayfs's work directory, on the same file system as `upper` (canonical).
        work: PathBuf,
        /// Whether the program may write.
        writable: bool,
    },
    /// A copy-on-write tree (an overlay workspace, a build cache): overlayfs of the read-only
    /// `lowers` (topmost first) and, with `upper`, a private layer taking every write; without
    /// it, the layers read-only. Unlike [`MountOp::Overlay`] nothing weaker ever replaces it:
    /// where overlayfs cannot be mounted, the set-up fails.
    Layers {
        /// Path inside.
        dst: PathBuf,
        /// The read-only layers, topmost first (host paths, canonical), each as the policy
        /// side checked it.
        lowers: Vec<PinnedPath>,
        /// The writable layer, when the tree may be changed.
        upper: Option<UpperLayer>,
    },
    /// A fresh tmpfs.
    Tmpfs {
        /// Path inside.
        dst: PathBuf,
        /// Permission bits of its root.
        mode: u32,
        /// Whether it is read-only (a mask).
        ro: bool,
        /// Its size limit in bytes (`None`: the kernel's default, half of the RAM).
        #[serde(default)]
        size_bytes: Option<u64>,
        /// Its limit of files and directories.
        #[serde(default)]
        inodes: Option<u64>,
    },
    /// Hide a file by binding an empty regular file read-only over it (reads as empty, never
    /// as "permission denied").
    MaskFile {
        /// Path inside.
        dst: PathBuf,
    },
    /// A small host file copied into the constructed root (read-only with it): cheaper than
    /// a bind, and a snapshot is all a sandboxed program needs of `/etc/passwd` and the like.
    CopyFile {
        /// Host path (canonical).
        src: PathBuf,
        /// Path inside.
        dst: PathBuf,
    },
    /// A symbolic link in the constructed root.
    Symlink {
        /// Path inside.
        dst: PathBuf,
        /// The link text.
        target: PathBuf,
    },
    /// The minimal `/dev`.
    Dev {
        /// The size limit of its `/dev/shm`, in bytes.
        #[serde(default)]
        shm_size_bytes: Option<u64>,
    },
    /// A fresh `/proc` of the new PID namespace, with its dangerous parts read-only.
    Proc,
}

/// A host path and the object the policy side found there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedPath {
    /// Host path (canonical).
    pub path: PathBuf,
    /// What it was when the policy side checked it: the helper mounts that object or refuses.
    pub identity: FileIdentity,
}

/// The writable layer of a copy-on-write tree: overlayfs's `upperdir` and `workdir`, two
/// empty-at-first directories of cordon's own on the same file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpperLayer {
    /// Where the writes go (canonical host path).
    pub upper: PathBuf,
    /// Overlayfs's work directory (canonical host path, same file system as `upper`).
    pub work: PathBuf,
    /// Whether the layer is thrown away with its run (a candidate's build cache): mounted
    /// `volatile`, so overlayfs skips its syncs (one `fsync` per file copied up). After a
    /// crash such a layer cannot be trusted, which does not matter for a layer never kept;
    /// the kernel's mark of an earlier volatile mount is cleared before each mount.
    #[serde(default)]
    pub volatile: bool,
}

/// A file system object by device and inode number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl MountOp {
    /// The path inside the sandbox this step creates or covers.
    pub fn dst(&self) -> &Path {
        match self {
            Self::Bind { dst, .. }
            | Self::Overlay { dst, .. }
            | Self::Layers { dst, .. }
            | Self::Tmpfs { dst, .. }
            | Self::MaskFile { dst }
            | Self::CopyFile { dst, .. }
            | Self::Symlink { dst, .. } => dst,
            Self::Dev { .. } => Path::new("/dev"),
            Self::Proc => Path::new("/proc"),
        }
    }

    /// Whether this step hides something (a read-only empty tmpfs, an empty file over a file):
    /// at the same path, masks come after what they mask.
    pub fn is_mask(&self) -> bool {
        matches!(self, Self::MaskFile { .. } | Self::Tmpfs { ro: true, .. })
    }

    /// The order of steps at the same path: what is shown first, then what is layered over
    /// it (an overlay over a toolchain's read-only bind), then masks.
    pub fn layer_rank(&self) -> u8 {
        match self {
            Self::Overlay { .. } | Self::Layers { .. } => 1,
            _ if self.is_mask() => 2,
            _ => 0,
        }
    }
}

/// Landlock rules; paths are inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPlan {
    /// The ABI to enforce (the best the kernel offers).
    pub abi: u32,
    /// Readable trees (files and directories).
    pub read: Vec<PathBuf>,
    /// Readable and writable trees.
    pub write: Vec<PathBuf>,
    /// Device trees: files readable and writable, no creation.
    pub devices: Vec<PathBuf>,
    /// `None`: every readable or writable tree is executable. `Some`: only these files.
    pub exec_only: Option<Vec<PathBuf>>,
    /// Whether the program may run when the kernel enforces the ruleset only in part
    /// (`--allow-degraded landlock`); otherwise a partial enforcement refuses the run.
    #[serde(default)]
    pub allow_partial: bool,
    /// With `Some`, TCP is confined too (Landlock ABI 4 or later): no `bind`, and `connect`
    /// only to these ports (the landlock tier's proxy; empty: none).
    #[serde(default)]
    pub net_connect: Option<Vec<u16>>,
    /// Whether every directory may be listed (its names, not its files' contents): in the
    /// namespace tier, whose root holds only what the sandbox shows. The landlock tier's
    /// program sees the host's root, and lists only what it may read.
    #[serde(default)]
    pub list_all_dirs: bool,
}

/// The socket families a program may create (`socket(2)`; `socketpair` stays allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketFamilies {
    /// `AF_UNIX` sockets.
    pub unix: bool,
    /// `AF_INET`/`AF_INET6` stream (TCP) sockets; never datagram, raw or packet ones.
    pub tcp: bool,
}

/// A resource limited with `setrlimit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RlimitResource {
    /// `RLIMIT_CORE`: core dump size.
    Core,
    /// `RLIMIT_CPU`: CPU time in seconds.
    Cpu,
    /// `RLIMIT_FSIZE`: largest file written.
    FileSize,
    /// `RLIMIT_NOFILE`: open file descriptors.
    OpenFiles,
    /// `RLIMIT_AS`: address space.
    AddressSpace,
    /// `RLIMIT_NPROC`: processes of the user.
    Processes,
}

/// One `setrlimit` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimit {
    /// The resource.
    pub resource: RlimitResource,
    /// Soft limit.
    pub soft: u64,
    /// Hard limit.
    pub hard: u64,
}

/// The cgroup(s) the helper creates for the program's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "version", rename_all = "snake_case")]
pub enum CgroupPlan {
    /// A child of our own cgroup v2 group, with memory and pids controllers delegated.
    V2 {
        /// The parent directory (our own cgroup).
        parent: PathBuf,
        /// `memory.max`.
        memory_bytes: Option<u64>,
        /// `pids.max`.
        pids: Option<u64>,
    },
    /// Children of our own v1 `memory` and `pids` groups.
    V1 {
        /// Our own group in the memory hierarchy, when memory is limited.
        memory_parent: Option<PathBuf>,
        /// Our own group in the pids hierarchy, when pids are limited.
        pids_parent: Option<PathBuf>,
        /// `memory.limit_in_bytes`.
        memory_bytes: Option<u64>,
        /// `pids.max`.
        pids: Option<u64>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_round_trips_as_json() {
        let plan = InitPlan {
            mounts: vec![
                MountOp::Proc,
                MountOp::Tmpfs {
                    dst: "/tmp".into(),
                    mode: 0o1777,
                    ro: false,
                    size_bytes: Some(1 << 30),
                    inodes: Some(1 << 18),
                },
                MountOp::Bind {
                    src: "/usr".into(),
                    dst: "/usr".into(),
                    dir: true,
                    rw: false,
                    identity: FileIdentity { dev: 2049, ino: 2 },
                },
                MountOp::Dev {
                    shm_size_bytes: Some(1 << 28),
                },
            ],
            workdir: "/w".into(),
            private_network: true,
            landlock: Some(LandlockPlan {
                abi: 7,
                read: vec!["/usr".into()],
                write: vec!["/w".into()],
                devices: vec!["/dev".into()],
                exec_only: None,
                allow_partial: false,
                net_connect: None,
                list_all_dirs: true,
            }),
            seccomp: true,
            rlimits: vec![Rlimit {
                resource: RlimitResource::Core,
                soft: 0,
                hard: 0,
            }],
            cgroup: None,
            uid: 1000,
            gid: 1000,
            noexec: vec!["/tmp".into()],
            deny_exec_memory: true,
            tier: cordon_types::IsolationTier::Namespaces,
            sockets: None,
            proxy_port: Some(3128),
        };
        let text = serde_json::to_string(&plan).unwrap();
        assert!(text.contains(r#""resource":"core""#), "{text}");
        let back: InitPlan = serde_json::from_str(&text).unwrap();
        pretty_assertions::assert_eq!(plan, back);
    }
}

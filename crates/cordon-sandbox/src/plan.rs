//! Computing the init plan: a policy turned into the concrete steps the helper executes
//! (mounts, Landlock rules), on the host side. The plan's types live in
//! `cordon-sandbox-init`, which deserializes them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use cordon_sandbox_init::{FileIdentity, LandlockPlan, MountOp, PinnedPath, UpperLayer};

use crate::canonical_dirs::CanonicalDirs;
use crate::etc_snapshot::Copied;
use crate::policy::{Access, Degradation, SandboxPolicy};
use crate::secrets;

/// Where the sandboxed program finds its toolchains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toolchains {
    /// Host paths to bind read-only (existing).
    pub binds: Vec<PathBuf>,
    /// Environment variables that make them usable.
    pub env: Vec<(String, String)>,
}

/// Files of `/etc` that programs need and that hold no secret.
const ETC_ALLOWLIST: &[&str] = &[
    "/etc/alternatives",
    "/etc/bash.bashrc",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/gai.conf",
    "/etc/gitconfig",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/inputrc",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/passwd",
    "/etc/pki/tls/certs",
    "/etc/profile",
    "/etc/protocols",
    "/etc/resolv.conf",
    "/etc/services",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/timezone",
];

/// Prefixes of `/etc` entries holding toolchains' runtime configuration (no credentials).
const ETC_DIR_PREFIXES: &[&str] = &["java-", "perl", "python3", "fonts"];

/// Files of the `/etc` allowlist up to this size are copied rather than bound.
const COPY_MAX_BYTES: u64 = 1 << 20;

/// Top-level system directories (or merged-/usr symlinks) bound read-only.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Directories of programs, made `noexec` under `--allow-exec` (each its own mount) so that
/// the dynamic loader cannot map a program from there that the allowlist does not name.
const PROGRAM_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/libexec",
    "/usr/games",
    "/usr/local/games",
    "/bin",
    "/sbin",
];

/// Where shared libraries live: these mounts keep `exec` under `--allow-exec` (the allowed
/// programs map their libraries from there), and so do toolchain homes.
const LIBRARY_DIRS: &[&str] = &["/usr", "/lib", "/lib32", "/lib64", "/libx32"];

/// Where the private home directory lives inside.
pub const SANDBOX_HOME: &str = "/home/cordon";
/// The private temporary directory inside.
pub const SANDBOX_TMP: &str = "/tmp";
/// Where the namespace tier shows the policy's CA bundle ([`SandboxPolicy::ca_bundle`]).
pub const SANDBOX_CA_BUNDLE: &str = "/run/cordon/ca-bundle.pem";
/// Where an overlay workspace appears inside, whichever workspace it is: every build of a
/// commit sees the same absolute paths (a build cache made by one is valid for the next).
pub const SANDBOX_WORKSPACE: &str = "/home/cordon/work";

/// The toolchain homes present on the host, from its environment and home directory.
pub fn find_toolchains(
    home: Option<&Path>,
    host_env: &dyn Fn(&str) -> Option<String>,
) -> Toolchains {
    let mut t = Toolchains::default();
    let home_join = |rel: &str| home.map(|h| h.join(rel));
    let dir_of = |var: &str, rel: &str| host_env(var).map(PathBuf::from).or_else(|| home_join(rel));
    if let Some(rustup) = dir_of("RUSTUP_HOME", ".rustup")
        .and_then(|p| p.canonicalize().ok())
        .filter(|p| p.is_dir())
    {
        // The whole rustup home (toolchains, settings, hashes, download cache) holds no secret:
        // one bind instead of one per entry.
        if rustup.join("toolchains").is_dir() {
            t.env
                .push(("RUSTUP_HOME".into(), rustup.display().to_string()));
            t.binds.push(rustup);
        }
    }
    if let Some(cargo) = dir_of("CARGO_HOME", ".cargo")
        .and_then(|p| p.canonicalize().ok())
        .filter(|p| p.is_dir())
    {
        let before = t.binds.len();
        add_existing(&mut t.binds, &cargo, &["bin", "registry", "git"]);
        if t.binds.len() > before {
            t.env
                .push(("CARGO_HOME".into(), cargo.display().to_string()));
        }
    }
    if let Some(home) = home {
        add_existing(
            &mut t.binds,
            home,
            &[
                ".npm/_cacache",
                ".cache/pnpm",
                ".local/share/pnpm",
                ".nvm",
                ".m2/repository",
                ".gradle/caches",
                ".gradle/wrapper",
            ],
        );
        if home.join(".pyenv").is_dir() {
            add_existing(&mut t.binds, home, &[".pyenv"]);
            t.env.push((
                "PYENV_ROOT".into(),
                home.join(".pyenv").display().to_string(),
            ));
        }
    }
    let gomod = host_env("GOMODCACHE")
        .map(PathBuf::from)
        .or_else(|| host_env("GOPATH").map(|p| PathBuf::from(p).join("pkg/mod")))
        .or_else(|| home_join("go/pkg/mod"));
    if let Some(gomod) = gomod
        .and_then(|p| p.canonicalize().ok())
        .filter(|p| p.is_dir())
    {
        t.env
            .push(("GOMODCACHE".into(), gomod.display().to_string()));
        t.binds.push(gomod);
    }
    t
}

fn add_existing(out: &mut Vec<PathBuf>, base: &Path, rels: &[&str]) {
    for rel in rels {
        let p = base.join(rel);
        match p.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => out.extend(p.canonicalize().ok()),
            Ok(_) => out.push(p),
            Err(_) => {}
        }
    }
}

/// Turns a policy into mount steps. Paths in `policy` must be canonical and exist.
#[cfg(test)]
pub fn mount_ops(policy: &SandboxPolicy, toolchains: &[PathBuf]) -> Vec<MountOp> {
    plan_mounts(policy, toolchains).0
}

/// Turns a policy into mount steps, and says what the `/etc` files copied were when planned.
/// Paths in `policy` must be canonical and exist.
pub(crate) fn plan_mounts(
    policy: &SandboxPolicy,
    toolchains: &[PathBuf],
) -> (Vec<MountOp>, Vec<Copied>) {
    let mut ops = system_mounts();
    let (etc, copied) = etc_mounts();
    ops.extend(etc);
    ops.extend(private_mounts(policy));
    ops.extend(policy_mounts(policy, toolchains));
    let masks = secret_masks(policy, &ops);
    ops.extend(masks);
    // Parents before children; at the same path, what masks comes last.
    ops.sort_by(|a, b| {
        a.dst()
            .cmp(b.dst())
            .then(a.layer_rank().cmp(&b.layer_rank()))
    });
    (ops, copied)
}

/// The host's system directories, read-only (a symlink among them, such as `/lib` on a
/// merged-`/usr` system, as the same symlink).
fn system_mounts() -> Vec<MountOp> {
    let mut ops = Vec::new();
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match path.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = path.read_link() {
                    ops.push(MountOp::Symlink {
                        dst: path.into(),
                        target,
                    });
                }
            }
            Ok(m) if m.is_dir() => ops.push(bind_found(path, path, false, &m)),
            _ => {}
        }
    }
    ops
}

/// What the program sees of `/etc`: the allowlist and the toolchains' configuration
/// directories, small files copied (and said which, with what they were when planned),
/// the rest bound read-only; `/etc/mtab` as the link to `/proc/self/mounts`.
fn etc_mounts() -> (Vec<MountOp>, Vec<Copied>) {
    let mut canonical_dirs = CanonicalDirs::default();
    let mut ops = Vec::new();
    let mut copied = Vec::new();
    // Runtime configuration directories of toolchains (`/etc/java-17-openjdk`, `/etc/perl`,
    // `/etc/python3.11`, ...), found by prefix.
    let etc_dirs: Vec<PathBuf> = std::fs::read_dir("/etc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            ETC_DIR_PREFIXES.iter().any(|p| name.starts_with(p))
        })
        .map(|e| e.path())
        .collect();
    if Path::new("/etc/mtab").symlink_metadata().is_ok() {
        ops.push(MountOp::Symlink {
            dst: "/etc/mtab".into(),
            target: "../proc/self/mounts".into(),
        });
    }
    let allowlist = ETC_ALLOWLIST.iter().map(PathBuf::from).chain(etc_dirs);
    for path in allowlist {
        let path = path.as_path();
        // A name that is no symlink, in a directory reached through none, is its own
        // canonical path: one lstat says what it is (realpath would readlink every
        // component, then stat). Anything else is resolved.
        let found = match path.symlink_metadata() {
            Err(_) => None,
            Ok(m)
                if !m.file_type().is_symlink()
                    && path.parent().is_some_and(|d| canonical_dirs.contains(d)) =>
            {
                Some((path.to_owned(), m))
            }
            Ok(_) => path
                .canonicalize()
                .ok()
                .and_then(|src| src.metadata().ok().map(|m| (src, m))),
        };
        if let Some((src, m)) = found {
            if m.is_file() && m.len() <= COPY_MAX_BYTES {
                ops.push(MountOp::CopyFile {
                    src: src.clone(),
                    dst: path.into(),
                });
                copied.push(Copied { src, meta: m });
            } else {
                ops.push(bind_found(&src, path, false, &m));
            }
        }
    }
    (ops, copied)
}

/// The sandbox's own filesystems, sized by the policy's limits: `/dev` (with its `/dev/shm`),
/// `/proc`, and private tmpfs for `/tmp` and the home directory.
fn private_mounts(policy: &SandboxPolicy) -> Vec<MountOp> {
    let (tmp_bytes, home_bytes, shm_bytes) = policy.limits.tmpfs_sizes();
    vec![
        MountOp::Dev {
            shm_size_bytes: Some(shm_bytes),
        },
        MountOp::Proc,
        MountOp::Tmpfs {
            dst: SANDBOX_TMP.into(),
            mode: 0o1777,
            ro: false,
            size_bytes: Some(tmp_bytes),
            inodes: Some(tmpfs_inodes(tmp_bytes)),
        },
        MountOp::Tmpfs {
            dst: SANDBOX_HOME.into(),
            mode: 0o755,
            ro: false,
            size_bytes: Some(home_bytes),
            inodes: Some(tmpfs_inodes(home_bytes)),
        },
    ]
}

/// What the policy and the toolchains add: toolchain homes, the policy's binds, the working
/// directory, copy-on-write trees, protected git data, caches, replaced files.
fn policy_mounts(policy: &SandboxPolicy, toolchains: &[PathBuf]) -> Vec<MountOp> {
    let mut ops = Vec::new();
    // Toolchain homes and the policy's binds are canonical: one lstat says what each is.
    for tc in toolchains {
        ops.push(bind_canonical(tc, tc, false));
    }
    for b in &policy.binds {
        ops.push(bind_canonical(
            &b.path,
            &b.path,
            b.access == Access::ReadWrite,
        ));
    }
    // A working directory inside a copy-on-write tree is shown by the tree.
    if policy.tree_holding(&policy.workdir).is_none() {
        ops.push(bind(
            &policy.workdir,
            &policy.workdir,
            true,
            !policy.workdir_read_only,
        ));
    }
    for tree in &policy.trees {
        ops.push(layers(tree));
    }
    for git in protected_git_data(policy) {
        ops.push(bind_canonical(&git, &git, false));
    }
    for cache in &policy.caches {
        ops.push(overlay(cache));
    }
    for replacement in &policy.replacements {
        ops.push(bind(&replacement.with, &replacement.path, false, false));
    }
    ops
}

/// Masks for every secret that something visible in `ops` would expose: an empty read-only
/// tmpfs over a directory, an empty read-only file over a file. Hidden means absent or empty,
/// never unreadable: a mask reads as an empty directory (mode 0555) or an empty regular file,
/// so tools that walk the tree (test runners, `find`, `rg`) pass over it. The secrets are the known credential
/// files of the home directory, the policy's hidden paths and cordon's cache (unless a
/// hidden directory holds it), and where any of them that is a symlink points.
fn secret_masks(policy: &SandboxPolicy, ops: &[MountOp]) -> Vec<MountOp> {
    let visible: Vec<PathBuf> = ops
        .iter()
        .filter_map(|op| match op {
            MountOp::Bind { src, .. } => Some(src.clone()),
            MountOp::Overlay { lower, .. } => Some(lower.clone()),
            _ => None,
        })
        .collect();
    let mut secret_list = secrets::secret_paths(policy.host_home.as_deref());
    secret_list.extend(policy.hidden.iter().cloned());
    // cordon's cache is masked too, unless a hidden directory holding it (cordon's home)
    // already is (a mask inside a mask would have no mount point).
    secret_list.extend(
        policy
            .host_cache
            .iter()
            .filter(|cache| !policy.hidden.iter().any(|h| cache.starts_with(h)))
            .cloned(),
    );
    secret_list.sort();
    secret_list.dedup();
    // What each secret is (one lstat, none for what the home directory's listing lacks).
    let found = secret_metadata(&secret_list, policy.host_home.as_deref());
    // A secret that is a symlink is masked where it points, too (the home directory itself is
    // canonical already, so only the last component can be a link).
    let canon: Vec<PathBuf> = secret_list
        .iter()
        .zip(&found)
        .filter(|(_, m)| m.as_ref().is_some_and(|m| m.file_type().is_symlink()))
        .filter_map(|(s, _)| s.canonicalize().ok())
        .filter(|target| secret_list.binary_search(target).is_err())
        .collect();
    let mut secrets: Vec<(PathBuf, Option<std::fs::Metadata>)> =
        secret_list.into_iter().zip(found).collect();
    for target in canon {
        let meta = target.symlink_metadata().ok();
        secrets.push((target, meta));
    }
    secrets.sort_by(|a, b| a.0.cmp(&b.0));
    secrets.dedup_by(|a, b| a.0 == b.0);
    let paths: Vec<PathBuf> = secrets.iter().map(|(p, _)| p.clone()).collect();
    let mut masks = Vec::new();
    for secret in secrets::secrets_under(&paths, &visible) {
        let meta = secrets
            .binary_search_by(|(p, _)| p.cmp(secret))
            .ok()
            .and_then(|i| secrets[i].1.as_ref());
        match meta.ok_or(()) {
            Ok(m) if m.is_dir() => masks.push(MountOp::Tmpfs {
                dst: secret.clone(),
                mode: MASK_MODE,
                ro: true,
                size_bytes: Some(MASK_BYTES),
                inodes: Some(MASK_INODES),
            }),
            Ok(m) if m.is_file() => masks.push(MountOp::MaskFile {
                dst: secret.clone(),
            }),
            _ => {}
        }
    }
    masks
}

/// `lstat` of each of `secrets`, `None` for what does not exist. The home directory is read
/// once: a secret below it whose first name there the listing lacks does not exist, and is
/// not looked up (most of the credential files cordon knows of are absent on any one host).
fn secret_metadata(secrets: &[PathBuf], home: Option<&Path>) -> Vec<Option<std::fs::Metadata>> {
    // Only a listing read to its end without an error says what is absent (a read that
    // fails half-way would leave secrets unmasked): otherwise every secret is looked up.
    let listing: Option<std::collections::HashSet<std::ffi::OsString>> = home.and_then(|home| {
        std::fs::read_dir(home)
            .ok()?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()
            .ok()
    });
    secrets
        .iter()
        .map(|secret| {
            let absent = match (home, &listing) {
                (Some(home), Some(names)) => secret
                    .strip_prefix(home)
                    .ok()
                    .and_then(|rest| rest.components().next())
                    .is_some_and(|first| match first {
                        std::path::Component::Normal(name) => !names.contains(name),
                        _ => false,
                    }),
                _ => false,
            };
            if absent {
                None
            } else {
                secret.symlink_metadata().ok()
            }
        })
        .collect()
}

/// Confines execution to the `allowed` files (`--allow-exec`, canonical, with their
/// interpreters) beyond what Landlock does: Landlock checks `execve`, but the dynamic loader
/// run as a program (`ld.so /usr/bin/python3`) maps any readable file with
/// `mmap(PROT_EXEC)`. So every mount but the library directories and the toolchain homes
/// becomes `noexec` — the writable places (working directory, binds, `/tmp`, home,
/// `/dev/shm`, caches), the program directories (each bound as its own mount) and the user's
/// read-only binds — and each allowed file is bound over itself, executable. Adds those binds
/// to `ops` and returns the mount points to make `noexec`.
///
/// What stays: an ELF program kept in a library directory or a toolchain home (for example
/// `/usr/lib/git-core/git`) can still be started through the loader; Landlock still refuses
/// its `execve`.
pub fn confine_exec(
    ops: &mut Vec<MountOp>,
    allowed: &[PathBuf],
    toolchains: &[PathBuf],
) -> Vec<PathBuf> {
    let bound_dirs: Vec<PathBuf> = ops
        .iter()
        .filter_map(|op| match op {
            MountOp::Bind { dst, dir: true, .. } => Some(dst.clone()),
            _ => None,
        })
        .collect();
    let visible = |path: &Path| bound_dirs.iter().any(|d| path.starts_with(d));
    for dir in PROGRAM_DIRS {
        let path = Path::new(dir);
        let real_dir = path.symlink_metadata().is_ok_and(|m| m.is_dir());
        if real_dir && visible(path) && !bound_dirs.iter().any(|d| d == path) {
            ops.push(bind(path, path, true, false));
        }
    }
    for file in allowed {
        if visible(file) && !ops.iter().any(|op| op.dst() == file.as_path()) {
            ops.push(bind(file, file, false, false));
        }
    }
    let keeps_exec = |dst: &Path| {
        LIBRARY_DIRS.iter().any(|d| dst == Path::new(d))
            || (dst.starts_with("/usr/lib") || dst.starts_with("/usr/local/lib"))
            || toolchains.iter().any(|t| t == dst)
    };
    let mut noexec: Vec<PathBuf> = ops
        .iter()
        .filter_map(|op| match op {
            MountOp::Bind { dst, dir: true, .. } if !keeps_exec(dst) => Some(dst.clone()),
            MountOp::Tmpfs { dst, ro: false, .. }
            | MountOp::Overlay { dst, .. }
            | MountOp::Layers { dst, .. } => Some(dst.clone()),
            MountOp::Dev { .. } => Some(PathBuf::from("/dev/shm")),
            _ => None,
        })
        .collect();
    noexec.sort();
    noexec.dedup();
    ops.sort_by(|a, b| {
        a.dst()
            .cmp(b.dst())
            .then(a.layer_rank().cmp(&b.layer_rank()))
    });
    noexec
}

/// The git data (`.git` directories and worktrees' `.git` files) at the top of the writable
/// trees, which stay read-only: a program that wrote a hook or `core.fsmonitor` there, or
/// pointed a worktree's `.git` file at a repository it made, would run its code in the user's
/// next `git status`. A tree's `.git` bound read-write on its own (`--rw DIR/.git`) is left
/// writable; a `.git` that is a symlink cannot be covered by a mount and is not listed.
pub fn protected_git_data(policy: &SandboxPolicy) -> Vec<PathBuf> {
    let writable = policy
        .binds
        .iter()
        .filter(|b| b.access == Access::ReadWrite)
        .map(|b| b.path.as_path())
        .chain((!policy.workdir_read_only).then_some(policy.workdir.as_path()))
        // Inside a copy-on-write tree nothing is a host path (its `.git` is the caller's
        // read-only replacement).
        .filter(|tree| policy.tree_holding(tree).is_none());
    let mut out: Vec<PathBuf> = writable
        .map(|tree| tree.join(".git"))
        .filter(|git| {
            git.symlink_metadata()
                .is_ok_and(|m| m.is_dir() || m.is_file())
        })
        .filter(|git| !policy.binds.iter().any(|b| &b.path == git))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A masked directory: empty, readable, read-only (its mount is read-only too).
const MASK_MODE: u32 = 0o555;
/// A read-only empty mask needs no room.
const MASK_BYTES: u64 = 4096;
/// ... and almost no inodes.
const MASK_INODES: u64 = 16;

/// Files and directories a tmpfs of `bytes` may hold: one per 4 KiB (a tree of tiny files
/// fills it as surely as one big file), at least 1024.
fn tmpfs_inodes(bytes: u64) -> u64 {
    (bytes / 4096).max(1024)
}

/// The identity of an object no bind may use: its source could not be pinned.
pub const UNPINNED: FileIdentity = FileIdentity {
    dev: u64::MAX,
    ino: u64::MAX,
};

fn bind(src: &Path, dst: &Path, dir: bool, rw: bool) -> MountOp {
    // What the helper must find at `src` (canonical, so a symlink here means it was swapped
    // since it was resolved).
    MountOp::Bind {
        src: src.into(),
        dst: dst.into(),
        dir,
        rw,
        identity: pin(src),
    }
}

/// A bind of the canonical `src`, its kind and identity from one lstat (a source that is gone
/// or a symlink is [`UNPINNED`], which `prepare` refuses).
fn bind_canonical(src: &Path, dst: &Path, rw: bool) -> MountOp {
    match src.symlink_metadata() {
        Ok(m) => bind_found(src, dst, rw, &m),
        Err(_) => MountOp::Bind {
            src: src.into(),
            dst: dst.into(),
            dir: false,
            rw,
            identity: UNPINNED,
        },
    }
}

/// A bind of the canonical `src` whose lstat is `m`.
fn bind_found(src: &Path, dst: &Path, rw: bool, m: &std::fs::Metadata) -> MountOp {
    use std::os::unix::fs::MetadataExt;
    MountOp::Bind {
        src: src.into(),
        dst: dst.into(),
        dir: m.is_dir(),
        rw,
        identity: if m.file_type().is_symlink() {
            UNPINNED
        } else {
            FileIdentity {
                dev: m.dev(),
                ino: m.ino(),
            }
        },
    }
}

/// The object at `path` (canonical), or [`UNPINNED`] when it is gone or a symlink.
fn pin(path: &Path) -> FileIdentity {
    use std::os::unix::fs::MetadataExt;
    match path.symlink_metadata() {
        Ok(m) if !m.file_type().is_symlink() => FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
        },
        _ => UNPINNED,
    }
}

/// The private layer over a host cache (its directories made by `prepare`).
fn overlay(cache: &crate::policy::CacheLayer) -> MountOp {
    MountOp::Overlay {
        dst: cache.path.clone(),
        lower: cache.path.clone(),
        lower_identity: pin(&cache.path),
        upper: cache.layer.join("upper"),
        work: cache.layer.join("work"),
        writable: cache.writable,
    }
}

/// A copy-on-write tree (its layer's directories made by `prepare`).
fn layers(tree: &crate::policy::LayeredTree) -> MountOp {
    MountOp::Layers {
        dst: tree.at.clone(),
        lowers: tree
            .lowers
            .iter()
            .map(|path| PinnedPath {
                path: path.clone(),
                identity: pin(path),
            })
            .collect(),
        upper: tree.layer.as_ref().map(|layer| UpperLayer {
            upper: layer.join("upper"),
            work: layer.join("work"),
            volatile: tree.volatile,
        }),
    }
}

/// The first bind whose source could not be pinned (it vanished or became a symlink while
/// the plan was made).
pub fn unpinned(ops: &[MountOp]) -> Option<&Path> {
    ops.iter().find_map(|op| match op {
        MountOp::Bind { src, identity, .. } if *identity == UNPINNED => Some(src.as_path()),
        MountOp::Overlay {
            lower,
            lower_identity,
            ..
        } if *lower_identity == UNPINNED => Some(lower.as_path()),
        MountOp::Layers { lowers, .. } => lowers
            .iter()
            .find(|l| l.identity == UNPINNED)
            .map(|l| l.path.as_path()),
        _ => None,
    })
}

/// Landlock rules matching the mount steps.
pub fn landlock_plan(
    abi: u32,
    policy: &SandboxPolicy,
    ops: &[MountOp],
    exec_only: Option<Vec<PathBuf>>,
) -> LandlockPlan {
    let mut read = Vec::new();
    // `/dev/shm` is a private tmpfs: POSIX shared memory and semaphores are created there.
    let mut write = vec![
        PathBuf::from(SANDBOX_TMP),
        PathBuf::from(SANDBOX_HOME),
        PathBuf::from("/dev/shm"),
    ];
    let etc = Path::new("/etc");
    // `/etc` in the new root holds only the allowlisted copies and binds: one rule covers them.
    if ops.iter().any(|op| {
        matches!(op, MountOp::Bind { .. } | MountOp::CopyFile { .. }) && op.dst().starts_with(etc)
    }) {
        read.push(etc.to_owned());
    }
    for op in ops {
        match op {
            MountOp::Bind { dst, rw: false, .. } | MountOp::CopyFile { dst, .. }
                if !dst.starts_with(etc) =>
            {
                read.push(dst.clone());
            }
            MountOp::Bind { dst, rw: true, .. } => write.push(dst.clone()),
            MountOp::Overlay {
                dst,
                writable: true,
                ..
            } => write.push(dst.clone()),
            MountOp::Overlay { dst, .. } => read.push(dst.clone()),
            MountOp::Layers {
                dst,
                upper: Some(_),
                ..
            } => write.push(dst.clone()),
            MountOp::Layers { dst, .. } => read.push(dst.clone()),
            _ => {}
        }
    }
    read.push("/proc".into());
    LandlockPlan {
        abi,
        read,
        write,
        devices: vec!["/dev".into()],
        exec_only,
        allow_partial: policy.allows_degraded(Degradation::Landlock),
        net_connect: None,
        list_all_dirs: true,
    }
}

/// The files whose execution `--allow-exec` permits: the listed ones, the ELF interpreter
/// (dynamic loader) each names, and the interpreter of `#!` scripts.
pub fn exec_allowlist(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut queue: Vec<PathBuf> = paths.to_vec();
    while let Some(p) = queue.pop() {
        let canon = p.canonicalize()?;
        if out.contains(&canon) {
            continue;
        }
        let head = read_head(&canon)?;
        if let Some(interp) = elf_interpreter(&head).or_else(|| shebang_interpreter(&head)) {
            queue.push(interp);
        }
        out.push(canon);
    }
    out.sort();
    Ok(out)
}

fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(4096);
    std::fs::File::open(path)?
        .take(4096)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// The `PT_INTERP` path of a 64-bit little-endian ELF file, from its first bytes.
pub fn elf_interpreter(head: &[u8]) -> Option<PathBuf> {
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let phentsize = usize::from(u16_at(54)?);
    let phnum = usize::from(u16_at(56)?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(ph)? == 3 {
            let off = usize::try_from(u64_at(ph + 8)?).ok()?;
            let size = usize::try_from(u64_at(ph + 32)?).ok()?;
            let raw = head.get(off..off + size)?;
            let raw = raw.split(|b| *b == 0).next()?;
            return Some(PathBuf::from(OsStr::from_bytes(raw)));
        }
    }
    None
}

fn shebang_interpreter(head: &[u8]) -> Option<PathBuf> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let word = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(PathBuf::from(OsStr::from_bytes(word)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Bind;

    fn dsts(ops: &[MountOp]) -> Vec<&Path> {
        ops.iter().map(MountOp::dst).collect()
    }

    #[test]
    fn secrets_under_a_bound_home_are_masked_after_the_bind() {
        let home = std::env::temp_dir().join(format!("cordon-plan-{}", std::process::id()));
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".netrc"), "machine x password y").unwrap();
        let home = home.canonicalize().unwrap();
        let mut p = SandboxPolicy::new("/usr/share");
        p.host_home = Some(home.clone());
        p.binds.push(Bind {
            path: home.clone(),
            access: Access::ReadOnly,
        });
        let ops = mount_ops(&p, &[]);
        let bind_at = ops
            .iter()
            .position(|o| o.dst() == home && matches!(o, MountOp::Bind { .. }))
            .unwrap();
        let ssh_at = ops
            .iter()
            .position(|o| {
                *o == MountOp::Tmpfs {
                    dst: home.join(".ssh"),
                    mode: MASK_MODE,
                    ro: true,
                    size_bytes: Some(MASK_BYTES),
                    inodes: Some(MASK_INODES),
                }
            })
            .unwrap();
        let netrc_at = ops
            .iter()
            .position(|o| {
                *o == MountOp::MaskFile {
                    dst: home.join(".netrc"),
                }
            })
            .unwrap();
        assert!(bind_at < ssh_at && bind_at < netrc_at);
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn nested_and_linked_secrets_are_masked_and_absent_ones_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (home, elsewhere) = (root.join("home"), root.join("elsewhere"));
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        std::fs::create_dir_all(elsewhere.join("aws")).unwrap();
        // ~/.aws is a link to a directory outside the home, which the policy shows.
        std::os::unix::fs::symlink(elsewhere.join("aws"), home.join(".aws")).unwrap();
        let mut p = SandboxPolicy::new("/usr/share");
        p.host_home = Some(home.clone());
        for path in [&home, &elsewhere] {
            p.binds.push(Bind {
                path: path.clone(),
                access: Access::ReadOnly,
            });
        }
        let ops = mount_ops(&p, &[]);
        let masked: Vec<&Path> = ops
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    MountOp::Tmpfs {
                        mode: MASK_MODE,
                        ..
                    } | MountOp::MaskFile { .. }
                )
            })
            .map(MountOp::dst)
            .filter(|d| d.starts_with(&root))
            .collect();
        assert_eq!(
            masked,
            [
                elsewhere.join("aws").as_path(),
                home.join(".config/gh").as_path(),
            ],
            "{ops:#?}"
        );
    }

    #[test]
    fn ops_are_ordered_parents_first_and_never_expose_shadow() {
        let p = SandboxPolicy::new("/tmp");
        let ops = mount_ops(&p, &[]);
        let d = dsts(&ops);
        let mut sorted = d.clone();
        sorted.sort();
        assert_eq!(d, sorted);
        assert!(
            !ops.iter()
                .any(|o| matches!(o, MountOp::Bind { src, .. } if src.starts_with("/etc/shadow")))
        );
        // the private /tmp comes before a workdir inside it
        let tmp = ops
            .iter()
            .position(|o| matches!(o, MountOp::Tmpfs { dst, .. } if dst == Path::new("/tmp")))
            .unwrap();
        let work = ops
            .iter()
            .position(
                |o| matches!(o, MountOp::Bind { dst, rw: true, .. } if dst == Path::new("/tmp")),
            )
            .unwrap();
        assert!(tmp < work);
    }

    #[test]
    fn elf_interpreter_of_a_system_binary_is_the_loader() {
        let head = read_head(Path::new("/bin/sh")).unwrap();
        let interp = elf_interpreter(&head).unwrap();
        assert!(interp.to_string_lossy().contains("ld-linux"), "{interp:?}");
        let allowed = exec_allowlist(&[PathBuf::from("/bin/sh")]).unwrap();
        assert!(allowed.len() >= 2, "{allowed:?}");
    }

    #[test]
    fn shebang_interpreter_is_found() {
        assert_eq!(
            shebang_interpreter(b"#! /bin/sh -e\necho"),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(shebang_interpreter(b"echo"), None);
    }
}

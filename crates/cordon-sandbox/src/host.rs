//! What this host's kernel offers, probed cheaply (sysctls, one syscall each, through
//! `cordon_sandbox_init::probe`) and cached.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cordon_sandbox_init::probe;

/// The host facts `prepare` and `doctor` decide on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSupport {
    /// `None` when unprivileged user namespaces look usable; otherwise why not and the fix.
    pub userns_blocker: Option<(String, String)>,
    /// The Landlock ABI version (0: none).
    pub landlock_abi: u32,
    /// Whether seccomp filters are available.
    pub seccomp: bool,
    /// Whether `mount_setattr` (recursive read-only binds) exists.
    pub mount_setattr: bool,
    /// Cgroup facts.
    pub cgroup: CgroupSupport,
}

/// Where cordon could create cgroups for limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupSupport {
    /// The cgroup v2 mount point, if any.
    pub v2_mount: Option<PathBuf>,
    /// Our own v2 cgroup directory.
    pub v2_own: Option<PathBuf>,
    /// Controllers enabled for children of our own v2 cgroup (`cgroup.subtree_control`).
    pub v2_delegated: Vec<String>,
    /// Controllers available in our own v2 cgroup (`cgroup.controllers`).
    pub v2_controllers: Vec<String>,
    /// Our own group in the v1 memory hierarchy, when mounted and writable.
    pub v1_memory: Option<PathBuf>,
    /// Our own group in the v1 pids hierarchy, when mounted and writable.
    pub v1_pids: Option<PathBuf>,
    /// Whether a cgroup hierarchy is mounted with `favordynmods`. Without it the kernel makes
    /// every move of a process into a cgroup wait for an RCU grace period once the host has
    /// been quiet for a moment (the first move after a pause: 10-20 ms measured here, see
    /// docs/operations.md); with it, moves are fast and forks a little slower.
    pub favordynmods: bool,
}

impl CgroupSupport {
    /// Whether v2 has memory and pids delegated to our children.
    pub fn v2_usable(&self) -> bool {
        self.v2_own.as_deref().is_some_and(writable)
            && ["memory", "pids"]
                .iter()
                .all(|c| self.v2_delegated.iter().any(|d| d == c))
    }
}

/// The probed host, computed once per process.
pub fn host() -> &'static HostSupport {
    static HOST: OnceLock<HostSupport> = OnceLock::new();
    HOST.get_or_init(|| HostSupport {
        cgroup: cgroup_support(),
        ..host_without_cgroups().clone()
    })
}

/// The probed host without its cgroup facts (left empty): all a policy without memory or
/// pids limits needs. Computed once per process.
pub fn host_without_cgroups() -> &'static HostSupport {
    static HOST: OnceLock<HostSupport> = OnceLock::new();
    HOST.get_or_init(|| HostSupport {
        userns_blocker: userns_blocker(),
        landlock_abi: probe::landlock_abi(),
        seccomp: probe::seccomp_available(),
        mount_setattr: probe::mount_setattr_available(),
        cgroup: CgroupSupport::default(),
    })
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn userns_blocker() -> Option<(String, String)> {
    if read_trim("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Some((
            "user namespaces are disabled (user.max_user_namespaces = 0)".into(),
            "run `sysctl -w user.max_user_namespaces=15000` (persist it in /etc/sysctl.d/)".into(),
        ));
    }
    let root = rustix::process::geteuid().is_root();
    if !root {
        if read_trim("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
            return Some((
                "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
                    .into(),
                "run `sysctl -w kernel.unprivileged_userns_clone=1`".into(),
            ));
        }
        if read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref()
            == Some("1")
        {
            return Some((
                "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)".into(),
                "run `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or add an AppArmor profile granting `userns` to the cordon binary".into(),
            ));
        }
    }
    None
}

fn writable(path: &Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Reads the cgroup mounts and our own memberships.
pub fn cgroup_support() -> CgroupSupport {
    let mut out = CgroupSupport::default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let membership = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut v1_memory_mount = None;
    let mut v1_pids_mount = None;
    for line in mounts.lines() {
        let mut halves = line.splitn(2, " - ");
        let (Some(left), Some(right)) = (halves.next(), halves.next()) else {
            continue;
        };
        let mount_point = left.split(' ').nth(4).map(PathBuf::from);
        let mut rf = right.split(' ');
        let fstype = rf.next().unwrap_or("");
        let opts = rf.nth(1).unwrap_or("");
        if fstype.starts_with("cgroup") && opts.split(',').any(|o| o == "favordynmods") {
            out.favordynmods = true;
        }
        match fstype {
            "cgroup2" if out.v2_mount.is_none() => out.v2_mount = mount_point,
            "cgroup" => {
                if opts.split(',').any(|o| o == "memory") {
                    v1_memory_mount = mount_point;
                } else if opts.split(',').any(|o| o == "pids") {
                    v1_pids_mount = mount_point;
                }
            }
            _ => {}
        }
    }
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        if ctrls.is_empty() {
            if let Some(m) = &out.v2_mount {
                out.v2_own = Some(m.join(rel));
            }
        } else if ctrls.split(',').any(|c| c == "memory") {
            out.v1_memory = v1_memory_mount.as_ref().map(|m| m.join(rel));
        } else if ctrls.split(',').any(|c| c == "pids") {
            out.v1_pids = v1_pids_mount.as_ref().map(|m| m.join(rel));
        }
    }
    out.v1_memory = out.v1_memory.filter(|p| writable(p));
    out.v1_pids = out.v1_pids.filter(|p| writable(p));
    if let Some(own) = &out.v2_own {
        let words = |f: &str| {
            std::fs::read_to_string(own.join(f))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        out.v2_controllers = words("cgroup.controllers");
        out.v2_delegated = words("cgroup.subtree_control");
    }
    out
}

/// Whether this process runs inside a cordon sandbox (see
/// [`cordon_sandbox_init::inside_a_sandbox`]): there the landlock tier is used by default.
pub fn inside_cordon_sandbox() -> bool {
    cordon_sandbox_init::inside_a_sandbox()
}

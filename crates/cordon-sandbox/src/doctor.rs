//! `cordon doctor`: what this host offers and what `cordon run` will therefore enforce.

use std::path::PathBuf;

use cordon_types::Enforcement;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::host::{self, HostSupport};

/// The value of [`DoctorReport::schema`].
pub const DOCTOR_SCHEMA: &str = "cordon.doctor/v1";

cordon_types::schema_tag!(
    /// The `schema` tag of a doctor report: always `"cordon.doctor/v1"`.
    DoctorTag,
    "cordon.doctor/v1"
);

/// What this host can enforce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-revision" = 4))]
pub struct DoctorReport {
    /// Always `cordon.doctor/v1`.
    pub schema: DoctorTag,
    /// Whether `cordon run` can enforce its default policy here (in [`Self::tier`]).
    pub default_policy_ok: bool,
    /// The isolation tier `cordon run` uses here by default: `namespaces`, or `landlock`
    /// inside a cordon sandbox.
    pub tier: cordon_types::IsolationTier,
    /// Whether this process runs inside a cordon sandbox (recognised by its root mount).
    pub inside_cordon_sandbox: bool,
    /// The landlock tier (`--isolation landlock`): Landlock and seccomp without namespaces.
    pub landlock_tier: Check,
    /// User namespaces (required).
    pub user_namespaces: Check,
    /// Landlock (required unless `--allow-degraded landlock`).
    pub landlock: Check,
    /// The Landlock ABI version the kernel offers (0: none).
    pub landlock_abi: u32,
    /// Seccomp filters (required unless `--allow-degraded seccomp`).
    pub seccomp: Check,
    /// `mount_setattr`, which makes binds recursively read-only (required).
    pub mount_setattr: Check,
    /// Overlayfs inside a user namespace (overlay workspaces and warm build caches need it;
    /// without it workspaces are git worktrees).
    pub overlayfs_userns: Check,
    /// Cgroups for memory and pids limits.
    pub cgroup: CgroupReport,
    /// cordon needs no bubblewrap, setuid helper or daemon.
    pub bwrap_free: bool,
    /// The helper executable that builds each sandbox (`cordon-sandbox-init`, beside cordon).
    pub helper: Check,
    /// What `cordon run` will enforce.
    pub enforce: EnforcementPreview,
    /// How workspaces are made on this host (filled in by whoever knows `CORDON_HOME`: the
    /// probe mounts a real overlay of layers in its file system).
    #[serde(default)]
    pub workspaces: Option<WorkspacesReport>,
}

/// How workspaces are made on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspacesReport {
    /// The strategy of workspaces created without one: `overlay` or `git-worktree`.
    pub strategy: String,
    /// Whether overlay workspaces can be mounted here (layers in `CORDON_HOME`'s file system,
    /// in a user namespace, through the sandbox helper).
    pub overlay: Check,
}

/// One capability check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// Whether the host offers it.
    pub ok: bool,
    /// What was found.
    pub detail: String,
    /// How to get it, when missing.
    pub hint: Option<String>,
}

/// Cgroup facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CgroupReport {
    /// Where cgroup v2 is mounted.
    pub v2_mount: Option<String>,
    /// Controllers available in cordon's own v2 group.
    pub v2_controllers: Vec<String>,
    /// Controllers delegated to children of cordon's own v2 group.
    pub v2_delegated: Vec<String>,
    /// cordon's own group in the v1 memory hierarchy, when writable.
    pub v1_memory: Option<String>,
    /// cordon's own group in the v1 pids hierarchy, when writable.
    pub v1_pids: Option<String>,
    /// The summary check: can memory and pids be limited per tree.
    pub limits: Check,
    /// Whether a cgroup hierarchy is mounted with `favordynmods`, which keeps moving a run into
    /// its cgroups fast (without it the first move after a quiet moment waits for the kernel:
    /// 10-20 ms measured; docs/operations.md).
    #[serde(default)]
    pub favordynmods: bool,
}

/// What `cordon run` will enforce with its default policy plus limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnforcementPreview {
    /// Namespaces the program runs in.
    pub namespaces: Vec<String>,
    /// The Landlock ABI enforced, if any.
    pub landlock_abi: Option<u32>,
    /// Whether the seccomp filter is installed.
    pub seccomp: bool,
    /// How `--memory` is enforced.
    pub memory: Enforcement,
    /// How `--pids` is enforced.
    pub pids: Enforcement,
    /// How `--cpu-time` is enforced.
    pub cpu: Enforcement,
}

fn check(ok: bool, detail: impl Into<String>, hint: Option<&str>) -> Check {
    Check {
        ok,
        detail: detail.into(),
        hint: if ok { None } else { hint.map(str::to_owned) },
    }
}

/// Probes the host (including a real user-namespace and overlayfs attempt in a child).
pub fn doctor() -> DoctorReport {
    let h = host::host();
    let ns = cordon_sandbox_init::probe::namespaces();
    let overlay_ok = ns.overlayfs;
    let user_namespaces = match (&h.userns_blocker, ns.user_namespaces) {
        (Some((reason, hint)), _) => check(false, reason.clone(), Some(hint)),
        (None, Ok(())) => check(true, "user and mount namespaces can be created", None),
        (None, Err(userns_err)) => {
            let remedy =
                cordon_sandbox_init::probe::namespace_refusal_remedy().unwrap_or_else(|| {
                    "check user.max_user_namespaces, kernel.unprivileged_userns_clone, \
                 kernel.apparmor_restrict_unprivileged_userns, or the container's seccomp \
                 profile; or use --isolation landlock"
                        .into()
                });
            check(
                false,
                format!("creating a user namespace failed: {userns_err}"),
                Some(&remedy),
            )
        }
    };
    let inside = crate::host::inside_cordon_sandbox();
    let tier = if inside {
        cordon_types::IsolationTier::Landlock
    } else {
        cordon_types::IsolationTier::Namespaces
    };
    let landlock_tier = check(
        h.landlock_abi > 0 && h.seccomp,
        if h.landlock_abi > 0 && h.seccomp {
            format!(
                "Landlock ABI {} and seccomp: files, TCP{} and socket families confined; no \
                 private /proc, PID space, /tmp or loopback",
                h.landlock_abi,
                if h.landlock_abi >= 4 {
                    ""
                } else {
                    " (not: ABI 4 needed)"
                }
            )
        } else {
            "needs Landlock and seccomp".into()
        },
        Some("boot with Landlock (`lsm=landlock,...`) and seccomp filters"),
    );
    let landlock = check(
        h.landlock_abi > 0,
        if h.landlock_abi > 0 {
            format!("ABI {}", h.landlock_abi)
        } else {
            "not available".into()
        },
        Some(
            "boot with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y, `lsm=landlock,...`), or run with --allow-degraded landlock",
        ),
    );
    let seccomp = check(
        h.seccomp,
        if h.seccomp {
            "filters available"
        } else {
            "not available"
        },
        Some("use a kernel with CONFIG_SECCOMP_FILTER, or run with --allow-degraded seccomp"),
    );
    let mount_setattr = check(
        h.mount_setattr,
        if h.mount_setattr {
            "available"
        } else {
            "missing"
        },
        Some("Linux 5.12 or later is needed"),
    );
    let overlayfs_userns = check(
        overlay_ok,
        if overlay_ok {
            "overlayfs mounts inside a user namespace"
        } else {
            "overlayfs cannot be mounted inside a user namespace"
        },
        Some(
            "Linux 5.11 or later with overlayfs; without it workspaces are git worktrees (slower to make, no warm build caches)",
        ),
    );
    let helper = match crate::helper::helper_executable() {
        Ok(path) => check(true, path.display().to_string(), None),
        Err(e) => check(false, e.to_string(), e.hint.as_deref()),
    };
    let cgroup = cgroup_report(h);
    let default_policy_ok = helper.ok
        && match tier {
            cordon_types::IsolationTier::Namespaces => {
                user_namespaces.ok && landlock.ok && seccomp.ok && mount_setattr.ok
            }
            cordon_types::IsolationTier::Landlock => landlock_tier.ok,
        };
    let (memory, pids) = if h.cgroup.v2_usable() {
        (Enforcement::CgroupV2, Enforcement::CgroupV2)
    } else {
        let v1 = |p: &Option<PathBuf>| {
            if p.is_some() {
                Enforcement::CgroupV1
            } else {
                Enforcement::None
            }
        };
        (v1(&h.cgroup.v1_memory), v1(&h.cgroup.v1_pids))
    };
    DoctorReport {
        schema: DoctorTag,
        default_policy_ok,
        tier,
        inside_cordon_sandbox: inside,
        landlock_tier,
        user_namespaces,
        landlock,
        landlock_abi: h.landlock_abi,
        seccomp,
        mount_setattr,
        overlayfs_userns,
        cgroup,
        bwrap_free: true,
        helper,
        enforce: EnforcementPreview {
            namespaces: match tier {
                cordon_types::IsolationTier::Namespaces => {
                    ["user", "mount", "pid", "ipc", "uts", "cgroup", "net"]
                        .map(String::from)
                        .to_vec()
                }
                cordon_types::IsolationTier::Landlock => Vec::new(),
            },
            landlock_abi: (h.landlock_abi > 0).then_some(h.landlock_abi),
            seccomp: h.seccomp,
            memory,
            pids,
            cpu: Enforcement::Rlimit,
        },
        workspaces: None,
    }
}

fn cgroup_report(h: &HostSupport) -> CgroupReport {
    let c = &h.cgroup;
    let show = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    let detail = if c.v2_usable() {
        "cgroup v2 with memory and pids delegated".to_string()
    } else if c.v1_memory.is_some() && c.v1_pids.is_some() {
        "cgroup v1 memory and pids hierarchies are writable".to_string()
    } else {
        "no writable cgroup with memory and pids controllers".to_string()
    };
    let ok = c.v2_usable() || (c.v1_memory.is_some() && c.v1_pids.is_some());
    CgroupReport {
        v2_mount: show(&c.v2_mount),
        v2_controllers: c.v2_controllers.clone(),
        v2_delegated: c.v2_delegated.clone(),
        v1_memory: show(&c.v1_memory),
        v1_pids: show(&c.v1_pids),
        limits: check(ok, detail, Some(&cgroup_hint())),
        favordynmods: c.favordynmods,
    }
}

/// How to get writable memory and pids controllers here: a delegated systemd scope where a
/// systemd user manager runs (a desktop session), else the general advice.
fn cgroup_hint() -> String {
    let uid = rustix::process::getuid().as_raw();
    let user_manager = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")))
        .join("systemd/private")
        .exists();
    let general = "make cgroup v1 memory and pids writable, or run cordon in a cgroup v2 group \
                   whose cgroup.subtree_control enables memory and pids; without them \
                   --memory/--pids need --allow-degraded cgroup (per-process rlimits)";
    if user_manager {
        format!(
            "run cordon in a scope systemd delegates to you: `systemd-run --user --scope -p \
             Delegate=yes cordon run ...`; or {general}"
        )
    } else {
        general.to_owned()
    }
}

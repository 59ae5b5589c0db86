//! Which isolation tier a run gets, and what the landlock tier needs of the host.

use cordon_types::IsolationTier;

use crate::error::{SandboxError, SandboxErrorKind};
use crate::host::{HostSupport, inside_cordon_sandbox};
use crate::policy::{Degradation, SandboxPolicy};

/// The tier `policy` gets on this host: the one it names; else the landlock tier inside a
/// cordon sandbox (which holds the namespaces already, and refuses new ones); else the
/// landlock tier where user namespaces are known to be unusable and the policy accepts it
/// ([`Degradation::Namespaces`]); else the namespace tier.
pub(crate) fn resolve(policy: &SandboxPolicy, host: &HostSupport) -> IsolationTier {
    if let Some(tier) = policy.isolation {
        return tier;
    }
    if inside_cordon_sandbox() {
        return IsolationTier::Landlock;
    }
    if policy.allows_degraded(Degradation::Namespaces) && !namespaces_usable(host) {
        return IsolationTier::Landlock;
    }
    IsolationTier::Namespaces
}

/// The tier `policy` gets on this host (see [`resolve`]): the landlock tier where the policy
/// names it, inside a cordon sandbox, or where user namespaces cannot be made and the policy
/// accepts it; else the namespace tier.
pub fn tier_for(policy: &SandboxPolicy) -> IsolationTier {
    resolve(policy, crate::host::host_without_cgroups())
}

/// Whether user namespaces can be made here: nothing in the host's settings refuses them
/// and a real attempt (in a child, once per process) succeeds.
fn namespaces_usable(host: &HostSupport) -> bool {
    static PROBED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    host.userns_blocker.is_none()
        && *PROBED.get_or_init(|| {
            cordon_sandbox_init::probe::namespaces()
                .user_namespaces
                .is_ok()
        })
}

/// What the landlock tier cannot do without: Landlock (it is the whole file confinement) and
/// seccomp (the socket families), each unless the policy gives it up explicitly.
pub(crate) fn check_host(host: &HostSupport, policy: &SandboxPolicy) -> Result<(), SandboxError> {
    if host.landlock_abi == 0 {
        return Err(SandboxError::new(
            SandboxErrorKind::Unenforceable {
                what: "the landlock tier",
                reason: "the kernel has no Landlock, which confines the files in this tier".into(),
            },
            Some(
                "boot with Landlock enabled (`lsm=landlock,...`), or run where user namespaces \
                 can be made"
                    .into(),
            ),
        ));
    }
    if !host.seccomp && !policy.allows_degraded(Degradation::Seccomp) {
        return Err(SandboxError::new(
            SandboxErrorKind::Unenforceable {
                what: "seccomp",
                reason: "the kernel has no seccomp filters".into(),
            },
            Some("use a kernel built with CONFIG_SECCOMP_FILTER".into()),
        ));
    }
    Ok(())
}

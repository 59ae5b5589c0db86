//! Dropping every capability of the program's process, through rustix's safe wrappers.

use rustix::io::Errno;
use rustix::thread::{CapabilitySet, CapabilitySets};

use crate::error::Setup;

/// Empties the bounding, ambient, effective, permitted and inheritable sets.
///
/// The bounding set is emptied bit by bit up to the first capability the kernel does not know
/// (`EINVAL`), so capabilities newer than rustix's named ones are dropped too. A process that
/// holds no capability at all (the landlock tier's program, in a sandbox or a container) may
/// not change its bounding set (`EPERM`, for want of `CAP_SETPCAP`), and need not: with
/// `no_new_privs`, set before, nothing it executes can gain one.
pub fn drop_all() -> Setup<()> {
    for cap in 0..64u32 {
        match rustix::thread::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(
            1 << cap,
        )) {
            Ok(()) => {}
            Err(Errno::INVAL) => break,
            Err(Errno::PERM) if holds_none() => break,
            Err(e) => {
                return Err(format!("drop capability {cap} from the bounding set: {e}").into());
            }
        }
    }
    rustix::thread::clear_ambient_capability_set()
        .map_err(|e| format!("clear ambient capabilities: {e}"))?;
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none)
        .map_err(|e| format!("drop all capabilities: {e}").into())
}

/// Whether this process has no capability in any of its sets.
fn holds_none() -> bool {
    rustix::thread::capabilities(None).is_ok_and(|sets| {
        sets.effective.is_empty() && sets.permitted.is_empty() && sets.inheritable.is_empty()
    })
}

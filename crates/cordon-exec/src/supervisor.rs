//! The report a supervisor (the sandbox helper) sends about the program it ran.

use std::os::fd::{AsFd, OwnedFd};

use cordon_types::{ChildReport, LimitKind, ResourceUsage};

use crate::classify::Ending;
use crate::signals::signal_name;

/// Largest child report accepted from a supervisor.
pub(crate) const MAX_REPORT_BYTES: usize = 64 * 1024;

/// Reads what the report pipe `fd_slot` has into `bytes` (up to [`MAX_REPORT_BYTES`]);
/// closes it at its end.
pub(crate) fn read_report(fd_slot: &mut Option<OwnedFd>, bytes: &mut Vec<u8>, buf: &mut [u8]) {
    let Some(fd) = fd_slot else { return };
    match rustix::io::read(fd.as_fd(), &mut *buf) {
        Ok(0) => *fd_slot = None,
        Ok(n) => {
            let room = MAX_REPORT_BYTES.saturating_sub(bytes.len());
            bytes.extend_from_slice(&buf[..n.min(room)]);
        }
        Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
        Err(_) => *fd_slot = None,
    }
}

pub(crate) fn parse_report(
    bytes: &[u8],
    supervisor_ending: &Ending,
) -> Result<ChildReport, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        let how = match supervisor_ending {
            Ending::Exited(code) => format!("exited with code {code}"),
            Ending::Signaled(sig) => format!("was killed by {}", signal_name(*sig)),
            Ending::NotStarted { reason, .. } => reason.clone(),
        };
        return Err(format!(
            "the sandbox supervisor {how} without reporting the program's status"
        ));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| format!("the sandbox supervisor sent an unreadable report: {e}"))
}

pub(crate) fn apply_report(
    child: &ChildReport,
    ending: &mut Ending,
    resource: &mut ResourceUsage,
    limits_hit: &mut Vec<LimitKind>,
) {
    if let Some(reason) = &child.setup_error {
        *ending = Ending::NotStarted {
            reason: reason.clone(),
            exit_code: child.setup_exit_code.unwrap_or(125),
        };
        return;
    }
    match (child.exit_code, child.signal) {
        (_, Some(sig)) => *ending = Ending::Signaled(sig),
        (Some(code), None) => *ending = Ending::Exited(code),
        (None, None) => {}
    }
    if let Some(usage) = child.rusage {
        resource.max_rss_bytes = Some(usage.max_rss_bytes);
        resource.cpu_user_ms = Some(usage.user_us / 1000);
        resource.cpu_sys_ms = Some(usage.sys_us / 1000);
    }
    resource.tree_peak_memory_bytes = child.tree_peak_memory_bytes;
    for limit in &child.limits_hit {
        if !limits_hit.contains(limit) {
            limits_hit.push(*limit);
        }
    }
}

//! Ctrl-C, SIGTERM and SIGHUP to cordon end the running program's tree; the result is still
//! printed and recorded.

use std::sync::Arc;

use anyhow::Context;
use cordon_exec::CancelHandle;

/// A cancellation handle that SIGINT, SIGTERM and SIGHUP trigger.
pub(crate) fn cancel_on_signals() -> anyhow::Result<Arc<CancelHandle>> {
    let cancel = Arc::new(CancelHandle::new().context("cannot set up cancellation")?);
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let handle = Arc::clone(&cancel);
        // SAFETY: the handler only stores an integer and writes one byte to a pipe, both
        // async-signal-safe.
        unsafe {
            signal_hook::low_level::register(signal, move || handle.cancel_from_signal(signal))
        }
        .with_context(|| format!("cannot install a handler for signal {signal}"))?;
    }
    Ok(cancel)
}

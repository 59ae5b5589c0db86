//! Moving bytes both ways between the program and its destination, within the run's byte
//! budget and idle timeout, until both sides are done or the proxy stops.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;

use cordon_types::NetworkLimit;
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::server::Shared;

/// Bytes moved by one connection.
#[derive(Debug, Default, Clone, Copy)]
pub struct Moved {
    /// From the program to the destination.
    pub up: u64,
    /// From the destination to the program.
    pub down: u64,
}

/// The run's byte budget.
pub(crate) struct Budget<'a, 'env> {
    pub(crate) shared: &'a Shared<'env>,
}

impl Budget<'_, '_> {
    /// Takes up to `n` bytes from the budget and returns how many it granted; fewer than
    /// `n` means the budget is spent (the limit is recorded): what was granted may still
    /// move, then the connection ends.
    pub(crate) fn take(&self, n: usize) -> usize {
        let max = self.shared.settings.max_bytes;
        let bytes = &self.shared.bytes;
        let mut used = bytes.load(Ordering::Relaxed);
        loop {
            let grant = (n as u64).min(max.saturating_sub(used));
            match bytes.compare_exchange_weak(
                used,
                used + grant,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if grant < n as u64 {
                        self.shared.limit(NetworkLimit::Bytes);
                    }
                    return grant as usize;
                }
                Err(now) => used = now,
            }
        }
    }
}

/// Relays until both directions ended, the budget ran out, nothing moved for the idle
/// timeout, or the proxy stops.
pub(crate) fn relay(
    budget: &Budget<'_, '_>,
    client: &TcpStream,
    upstream: &TcpStream,
    moved: &mut Moved,
) {
    let idle = budget.shared.settings.idle_timeout;
    let timeout = Timespec {
        tv_sec: idle.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: idle.subsec_nanos().into(),
    };
    let stop = &budget.shared.stop;
    let mut up_open = true;
    let mut down_open = true;
    let mut buf = vec![0u8; 64 * 1024];
    while up_open || down_open {
        let none = PollFlags::empty();
        let mut fds = [
            PollFd::new(client, if up_open { PollFlags::IN } else { none }),
            PollFd::new(upstream, if down_open { PollFlags::IN } else { none }),
            PollFd::new(stop, PollFlags::IN),
        ];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => break,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
        }
        if !fds[2].revents().is_empty() {
            break;
        }
        let ready = [!fds[0].revents().is_empty(), !fds[1].revents().is_empty()];
        if up_open && ready[0] {
            match pump(budget, client, upstream, &mut buf) {
                Some(0) => {
                    up_open = false;
                    let _ = upstream.shutdown(Shutdown::Write);
                }
                Some(n) => moved.up += n,
                None => break,
            }
        }
        if down_open && ready[1] {
            match pump(budget, upstream, client, &mut buf) {
                Some(0) => {
                    down_open = false;
                    let _ = client.shutdown(Shutdown::Write);
                }
                Some(n) => moved.down += n,
                None => break,
            }
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
}

/// Moves one chunk: `Some(0)` at the end of the stream, `None` when the connection must end
/// (an error, or the budget is spent).
fn pump(
    budget: &Budget<'_, '_>,
    mut from: &TcpStream,
    mut to: &TcpStream,
    buf: &mut [u8],
) -> Option<u64> {
    let n = loop {
        match from.read(buf) {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    };
    if n == 0 {
        return Some(0);
    }
    let granted = budget.take(n);
    to.write_all(&buf[..granted]).ok()?;
    (granted == n).then_some(n as u64)
}

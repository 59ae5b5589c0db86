//! Forwarding cordon's standard input to the program through a pipe, so that a terminal
//! behind cordon never becomes the program's: it cannot change the terminal's modes (echo,
//! signals), read keystrokes while in the background, or fake input.

use std::os::fd::{AsFd, OwnedFd};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, poll};
use rustix::pipe::{PipeFlags, pipe_with};

/// How long the forwarder waits before trying again while cordon is in the background of
/// its terminal (reading would fail with EIO, SIGTTIN being ignored).
const BACKGROUND_RETRY: Duration = Duration::from_millis(100);

/// A running forwarder: the program reads `program_end`; dropping the forwarder stops it.
pub(crate) struct Forwarder {
    /// The end the program reads (given to the child, then dropped here).
    pub(crate) program_end: Option<OwnedFd>,
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

/// Whether descriptor 0 of this process is a terminal.
pub(crate) fn stdin_is_terminal() -> bool {
    rustix::termios::isatty(std::io::stdin().as_fd())
}

impl Forwarder {
    /// Starts copying cordon's descriptor 0 into a new pipe.
    pub(crate) fn start() -> std::io::Result<Forwarder> {
        let (program_end, ours) = pipe_with(PipeFlags::CLOEXEC)?;
        let mut forwarder = Self::start_into(ours, None)?;
        forwarder.program_end = Some(program_end);
        Ok(forwarder)
    }

    /// Starts copying cordon's descriptor 0 into `ours` (a pipe, or a pseudo-terminal's
    /// primary side), until the input ends or the forwarder is dropped. At the end of the
    /// input, `end_with` is written last (a terminal's end-of-file character: its reader then
    /// reads end of file, as from a closed pipe).
    pub(crate) fn start_into(ours: OwnedFd, end_with: Option<u8>) -> std::io::Result<Forwarder> {
        let (stop_r, stop_w) = pipe_with(PipeFlags::CLOEXEC)?;
        rustix::io::ioctl_fionbio(&ours, true)?;
        ignore_background_read_signal();
        let thread = std::thread::Builder::new()
            .name("cordon-stdin".into())
            .spawn(move || forward(&ours, &stop_r, end_with))?;
        Ok(Forwarder {
            program_end: None,
            stop: Some(stop_w),
            thread: Some(thread),
        })
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        // Closing the stop pipe wakes the thread's poll; it then closes the program's pipe.
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A background job reading its terminal gets SIGTTIN, which would stop cordon (and with it
/// the supervision of the run). Ignored, the read fails with EIO instead and is retried.
/// The program gets the default disposition back before it starts (`child_setup`).
fn ignore_background_read_signal() {
    // SAFETY: installing SIG_IGN for SIGTTIN has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGTTIN, libc::SIG_IGN);
    }
}

fn forward(out: &OwnedFd, stop: &OwnedFd, end_with: Option<u8>) {
    let input = std::io::stdin();
    let input = input.as_fd();
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut ended = false;
    loop {
        if ended && pending.is_empty() {
            return;
        }
        let mut fds = vec![PollFd::new(stop, PollFlags::IN)];
        if pending.is_empty() {
            fds.push(PollFd::new(&input, PollFlags::IN));
        } else {
            fds.push(PollFd::new(out, PollFlags::OUT));
        }
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        }
        if !fds[0].revents().is_empty() {
            return;
        }
        let wake = fds[1].revents();
        drop(fds);
        if wake.is_empty() {
            continue;
        }
        if pending.is_empty() {
            match rustix::io::read(input, &mut buf) {
                // End of input: closing our end gives the program end of file (a terminal
                // needs its end-of-file character first).
                Ok(0) => match end_with {
                    Some(byte) if !ended => {
                        ended = true;
                        pending.push(byte);
                    }
                    _ => return,
                },
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                // In the background of the terminal: wait until in front again.
                Err(rustix::io::Errno::IO) => std::thread::sleep(BACKGROUND_RETRY),
                Err(_) => return,
            }
        } else {
            match rustix::io::write(out, &pending) {
                Ok(n) => {
                    pending.drain(..n);
                }
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                // The program closed its input.
                Err(_) => return,
            }
        }
    }
}

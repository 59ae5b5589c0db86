//! What a person sees: live output passthrough and a one-line summary.

use std::os::fd::BorrowedFd;

use cordon_exec::{OutputSink, Stream};
use cordon_types::{RunResult, RunStatus};

/// Passes the program's output through to cordon's own stdout/stderr as it arrives.
/// A closed destination (EPIPE) stops the passthrough for that stream; capture goes on.
pub(crate) struct Passthrough {
    open: [bool; 2],
}

impl Passthrough {
    pub(crate) fn new() -> Self {
        Passthrough { open: [true; 2] }
    }
}

impl OutputSink for Passthrough {
    fn write(&mut self, stream: Stream, mut bytes: &[u8]) {
        let (index, raw) = match stream {
            Stream::Stdout => (0, 1),
            Stream::Stderr => (1, 2),
        };
        if !self.open[index] {
            return;
        }
        // SAFETY: fds 1 and 2 stay open for the life of the process.
        let fd = unsafe { BorrowedFd::borrow_raw(raw) };
        while !bytes.is_empty() {
            match rustix_write(fd, bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.open[index] = false;
                    return;
                }
            }
        }
    }

    fn wants_more(&self, stream: Stream) -> bool {
        self.open[index(stream)]
    }
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

fn rustix_write(fd: BorrowedFd<'_>, bytes: &[u8]) -> std::io::Result<usize> {
    // SAFETY: `bytes` is a valid buffer of `bytes.len()` bytes for the duration of the call.
    let n = unsafe {
        libc::write(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            bytes.as_ptr().cast(),
            bytes.len(),
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A line for stderr when the run did not simply pass: what happened, what cordon did.
pub(crate) fn summary_line(result: &RunResult) -> Option<String> {
    let mut parts = Vec::new();
    if result.status != RunStatus::Pass
        && let Some(failure) = &result.failure
    {
        parts.push(failure.reason.clone());
    }
    if result.leaked.processes_killed > 0 {
        parts.push(format!(
            "killed {} leftover process{}",
            result.leaked.processes_killed,
            if result.leaked.processes_killed == 1 {
                ""
            } else {
                "es"
            }
        ));
    }
    if result.leaked.output_held_open {
        parts.push("a leftover process held the output open".to_owned());
    }
    for (name, out) in [("stdout", &result.stdout), ("stderr", &result.stderr)] {
        if out.truncated {
            parts.push(format!(
                "{name}: {} bytes, {} dropped from the result",
                out.bytes_total, out.omitted_bytes
            ));
        }
    }
    (!parts.is_empty()).then(|| format!("cordon: {}", parts.join("; ")))
}

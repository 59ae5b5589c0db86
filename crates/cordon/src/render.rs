//! What a person sees: live output passthrough and a one-line summary.

use std::os::fd::{AsFd, OwnedFd};

use cordon_exec::{OutputSink, Stream};
use cordon_types::{RunResult, RunStatus};

/// Passes the program's output through to cordon's own stdout/stderr as it arrives.
/// A closed destination (EPIPE) stops the passthrough for that stream; capture goes on.
pub(crate) struct Passthrough {
    open: [bool; 2],
    fds: [Option<OwnedFd>; 2],
}

impl Passthrough {
    pub(crate) fn new() -> Self {
        // Raw writes, past std's line buffering: output appears as the program writes it.
        let fds = [
            std::io::stdout().as_fd().try_clone_to_owned().ok(),
            std::io::stderr().as_fd().try_clone_to_owned().ok(),
        ];
        Passthrough {
            open: [fds[0].is_some(), fds[1].is_some()],
            fds,
        }
    }
}

impl OutputSink for Passthrough {
    fn write(&mut self, stream: Stream, mut bytes: &[u8]) {
        let index = index(stream);
        let (true, Some(fd)) = (self.open[index], &self.fds[index]) else {
            return;
        };
        while !bytes.is_empty() {
            match rustix::io::write(fd, bytes).map_err(std::io::Error::from) {
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

//! What a person sees: live output passthrough and a one-line summary.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use cordon_exec::{OutputSink, Stream};
use cordon_types::{RunResult, RunStatus};

/// Bytes a stream may have queued for the terminal before the executor pauses reading it.
const QUEUE_LIMIT: usize = 1 << 20;

/// Passes the program's output through to cordon's own stdout/stderr as it arrives.
///
/// Writing never blocks the executor: each stream has a writer thread and a bounded queue.
/// When the terminal (or pipe) behind cordon stops reading, the queue fills, the executor
/// pauses reading that stream (the program blocks on its pipe, as it would writing to the
/// terminal itself), and timeouts and kills still happen on time. A closed destination
/// (EPIPE) stops the passthrough for that stream; capture goes on.
///
/// A stream's writer thread starts with its first output: a program that prints nothing (or
/// only on one stream) costs no thread.
pub(crate) struct Passthrough {
    lanes: [LazyLane; 2],
}

/// A lane not started yet (its destination kept), started, or unavailable.
enum LazyLane {
    Idle(OwnedFd),
    Started(Lane),
    Unavailable,
}

impl LazyLane {
    fn new(fd: std::io::Result<OwnedFd>) -> Self {
        fd.map_or(LazyLane::Unavailable, LazyLane::Idle)
    }

    /// The lane, started now if it was not yet.
    fn start(&mut self) -> Option<&Lane> {
        if matches!(self, LazyLane::Idle(_)) {
            let LazyLane::Idle(fd) = std::mem::replace(self, LazyLane::Unavailable) else {
                unreachable!("checked above");
            };
            if let Some(lane) = Lane::start(fd) {
                *self = LazyLane::Started(lane);
            }
        }
        self.started()
    }

    fn started(&self) -> Option<&Lane> {
        match self {
            LazyLane::Started(lane) => Some(lane),
            LazyLane::Idle(_) | LazyLane::Unavailable => None,
        }
    }
}

/// One stream's queue and writer thread.
struct Lane {
    shared: Arc<(Mutex<LaneState>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct LaneState {
    chunks: VecDeque<Vec<u8>>,
    queued: usize,
    /// No more input: write what is queued, then stop.
    closed: bool,
    /// The destination refused a write (EPIPE and the like).
    broken: bool,
}

impl Lane {
    fn start(fd: OwnedFd) -> Option<Lane> {
        let shared = Arc::new((Mutex::new(LaneState::default()), Condvar::new()));
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("cordon-passthrough".into())
            .spawn(move || write_loop(&fd, &theirs))
            .ok()?;
        Some(Lane {
            shared,
            thread: Some(thread),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, bytes: &[u8]) {
        let mut state = self.state();
        if state.broken || state.closed {
            return;
        }
        state.queued += bytes.len();
        state.chunks.push_back(bytes.to_vec());
        drop(state);
        self.shared.1.notify_one();
    }

    /// Writes out what is queued, then stops the thread.
    fn finish(&mut self) {
        self.state().closed = true;
        self.shared.1.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn write_loop(fd: &OwnedFd, shared: &(Mutex<LaneState>, Condvar)) {
    let (lock, wake) = shared;
    loop {
        let chunk = {
            let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(chunk) = state.chunks.pop_front() {
                    break chunk;
                }
                if state.closed {
                    return;
                }
                state = wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        };
        let mut bytes = &chunk[..];
        while !bytes.is_empty() {
            match rustix::io::write(fd, bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
                    state.broken = true;
                    state.chunks.clear();
                    state.queued = 0;
                    return;
                }
            }
        }
        let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
        state.queued = state.queued.saturating_sub(chunk.len());
    }
}

impl Passthrough {
    pub(crate) fn new() -> Self {
        // Raw writes, past std's line buffering: output appears as the program writes it.
        Passthrough {
            lanes: [
                LazyLane::new(std::io::stdout().as_fd().try_clone_to_owned()),
                LazyLane::new(std::io::stderr().as_fd().try_clone_to_owned()),
            ],
        }
    }

    /// Waits until everything queued is written (or the destination refused it).
    pub(crate) fn finish(&mut self) {
        for lane in &mut self.lanes {
            if let LazyLane::Started(lane) = lane {
                lane.finish();
            }
        }
    }
}

impl Drop for Passthrough {
    fn drop(&mut self) {
        self.finish();
    }
}

impl OutputSink for Passthrough {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        if let Some(lane) = self.lanes[index(stream)].start() {
            lane.push(bytes);
        }
    }

    fn wants_more(&self, stream: Stream) -> bool {
        match &self.lanes[index(stream)] {
            LazyLane::Idle(_) => true,
            LazyLane::Started(lane) => !lane.state().broken,
            LazyLane::Unavailable => false,
        }
    }

    fn accepts_more(&self, stream: Stream) -> bool {
        self.lanes[index(stream)]
            .started()
            .is_none_or(|lane| lane.state().queued < QUEUE_LIMIT)
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
        parts.push(cordon_types::text::for_terminal_line(&failure.reason));
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

/// Prints a JSON document, pretty, with a final newline.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<(), crate::exit::CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

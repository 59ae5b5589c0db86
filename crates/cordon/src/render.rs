//! What a person sees: live output passthrough and a one-line summary.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cordon_exec::{CancelHandle, OutputSink, Stream};
use cordon_types::{RunResult, RunStatus};

use crate::terminal_guard::TerminalGuard;

/// Bytes a stream may have queued for the terminal before the executor pauses reading it.
const QUEUE_LIMIT: usize = 1 << 20;
/// How often a wait for the output to be written looks at the clock and at cancellation.
const FINISH_POLL: Duration = Duration::from_millis(20);

/// Passes the program's output through to cordon's own stdout/stderr as it arrives.
///
/// Writing never blocks the executor: each stream has a writer thread and a bounded queue.
/// When the terminal (or pipe) behind cordon stops reading, the queue fills, the executor
/// pauses reading that stream (the program blocks on its pipe, as it would writing to the
/// terminal itself), and timeouts and kills still happen on time. A closed destination
/// (EPIPE) stops the passthrough for that stream; capture goes on. Once the run has ended,
/// [`Passthrough::finish`] waits for what is queued to be written only until the run's
/// deadline (or a termination signal): what a reader never takes is dropped and counted.
///
/// On a terminal, output goes through a [`TerminalGuard`] (colours and line editing pass,
/// titles, clipboard writes, queries and mode switches do not) unless it is raw.
///
/// A stream's writer thread starts with its first output: a program that prints nothing (or
/// only on one stream) costs no thread.
pub(crate) struct Passthrough {
    lanes: [LazyLane; 2],
    guards: [Option<TerminalGuard>; 2],
    scratch: Vec<u8>,
}

/// What ends a wait for the output early: a cancellation (SIGINT, SIGTERM, SIGHUP), after
/// its grace period.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cancel<'a> {
    /// The run's cancellation.
    pub handle: &'a CancelHandle,
    /// How long the output may still take once it fired.
    pub grace: Duration,
}

/// Bytes of each stream that were never written because nobody took them in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Undelivered {
    /// Of stdout.
    pub stdout: u64,
    /// Of stderr.
    pub stderr: u64,
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
    /// The writer thread has stopped.
    done: bool,
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
        self.shared.1.notify_all();
    }

    /// Writes out what is queued until `until`, or until the grace period of a cancellation
    /// (one that came before the call counts from the call); returns how many bytes were left
    /// unwritten then (the writer thread, blocked on a destination nobody reads, is left
    /// behind: it ends with the process).
    fn finish(&mut self, mut until: Instant, cancel: Option<Cancel<'_>>) -> u64 {
        let mut cancel = cancel;
        let mut state = self.state();
        state.closed = true;
        self.shared.1.notify_all();
        loop {
            if state.done {
                drop(state);
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
                return 0;
            }
            let now = Instant::now();
            if let Some(Cancel { handle, grace }) = cancel
                && handle.is_cancelled()
            {
                until = until.min(now + grace);
                cancel = None;
            }
            if now >= until {
                let left = state.queued as u64;
                state.chunks.clear();
                return left;
            }
            let wait = FINISH_POLL.min(until - now);
            state = self
                .shared
                .1
                .wait_timeout(state, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

fn write_loop(fd: &OwnedFd, shared: &(Mutex<LaneState>, Condvar)) {
    let (lock, wake) = shared;
    let stop = || {
        lock.lock().unwrap_or_else(|e| e.into_inner()).done = true;
        wake.notify_all();
    };
    loop {
        let chunk = {
            let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(chunk) = state.chunks.pop_front() {
                    break chunk;
                }
                if state.closed {
                    drop(state);
                    stop();
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
                    drop(state);
                    stop();
                    return;
                }
            }
        }
        let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
        state.queued = state.queued.saturating_sub(chunk.len());
        drop(state);
        wake.notify_all();
    }
}

impl Passthrough {
    /// A passthrough to cordon's own stdout and stderr; `raw` passes escape sequences to a
    /// terminal as they are.
    pub(crate) fn new(raw: bool) -> Self {
        // Raw writes, past std's line buffering: output appears as the program writes it.
        let out = std::io::stdout().as_fd().try_clone_to_owned();
        let err = std::io::stderr().as_fd().try_clone_to_owned();
        let guard = |fd: &std::io::Result<OwnedFd>| {
            let terminal = fd.as_ref().is_ok_and(rustix::termios::isatty);
            (terminal && !raw).then(TerminalGuard::new)
        };
        Passthrough {
            guards: [guard(&out), guard(&err)],
            lanes: [LazyLane::new(out), LazyLane::new(err)],
            scratch: Vec::new(),
        }
    }

    /// A passthrough that sends both of the program's streams to cordon's stderr: for
    /// commands whose stdout says something else (`session push` prints the session's id).
    pub(crate) fn to_stderr(raw: bool) -> Self {
        let err = || std::io::stderr().as_fd().try_clone_to_owned();
        let (out, err) = (err(), err());
        let terminal = err.as_ref().is_ok_and(rustix::termios::isatty) && !raw;
        Passthrough {
            guards: [
                terminal.then(TerminalGuard::new),
                terminal.then(TerminalGuard::new),
            ],
            lanes: [LazyLane::new(out), LazyLane::new(err)],
            scratch: Vec::new(),
        }
    }

    /// Queues cordon's own `bytes` (a JSON result, a summary line) on `stream`, unfiltered.
    pub(crate) fn print(&mut self, stream: Stream, bytes: &[u8]) {
        if let Some(lane) = self.lanes[index(stream)].start() {
            lane.push(bytes);
        }
    }

    /// [`Passthrough::finish`] for one stream; returns the bytes left unwritten.
    pub(crate) fn finish_stream(
        &mut self,
        stream: Stream,
        until: Instant,
        cancel: Option<Cancel<'_>>,
    ) -> u64 {
        let lane = &mut self.lanes[index(stream)];
        // Finished once: a lane left behind is not waited for again.
        match std::mem::replace(lane, LazyLane::Unavailable) {
            LazyLane::Started(mut lane) => lane.finish(until, cancel),
            LazyLane::Idle(_) | LazyLane::Unavailable => 0,
        }
    }

    /// Waits until everything queued is written, the destination refused it, `until` passed
    /// or `cancel`'s grace period passed; returns what was left unwritten.
    pub(crate) fn finish(&mut self, until: Instant, cancel: Option<Cancel<'_>>) -> Undelivered {
        Undelivered {
            stdout: self.finish_stream(Stream::Stdout, until, cancel),
            stderr: self.finish_stream(Stream::Stderr, until, cancel),
        }
    }
}

impl Drop for Passthrough {
    fn drop(&mut self) {
        // Only an early return gets here unfinished: what is queued gets a moment.
        self.finish(Instant::now() + Duration::from_secs(1), None);
    }
}

impl OutputSink for Passthrough {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        let i = index(stream);
        let Some(lane) = self.lanes[i].start() else {
            return;
        };
        match &mut self.guards[i] {
            Some(guard) => {
                self.scratch.clear();
                guard.filter(bytes, &mut self.scratch);
                if !self.scratch.is_empty() {
                    lane.push(&self.scratch);
                }
            }
            None => lane.push(bytes),
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
        if out.undelivered_bytes > 0 {
            parts.push(format!(
                "{name}: {} bytes not passed through (nobody read them before the run's deadline)",
                out.undelivered_bytes
            ));
        }
        if out.truncated {
            parts.push(format!(
                "{name}: {} bytes, {} dropped from the result",
                out.bytes_total, out.omitted_bytes
            ));
        }
    }
    (!parts.is_empty()).then(|| format!("cordon: {}", parts.join("; ")))
}

/// A command line as one line of a table: arguments joined by spaces, an argument that holds
/// whitespace (a newline of `sh -c` included) or nothing quoted as a JSON string, escape
/// sequences and controls dropped: no command can break the table it is shown in.
pub(crate) fn command_line<S: AsRef<str>>(args: &[S]) -> String {
    let joined = args
        .iter()
        .map(|a| {
            let a = a.as_ref();
            if a.is_empty() || a.contains(char::is_whitespace) {
                serde_json::Value::from(a).to_string()
            } else {
                a.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    cordon_types::text::for_terminal_line(&joined)
}

/// Prints a JSON document, pretty, with a final newline.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<(), crate::exit::CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_stays_on_one_line() {
        assert_eq!(
            command_line(&["sh", "-c", "echo a\necho b", ""]),
            "sh -c \"echo a\\necho b\" \"\""
        );
        assert_eq!(command_line(&["printf", "\u{1b}[2Jx"]), "printf x");
    }
}

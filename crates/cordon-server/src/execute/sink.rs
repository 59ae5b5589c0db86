//! A job's live log: output (already redacted by the runner) and stage events written to the
//! job's event log as they arrive, fenced by the attempt: once the store refuses a write (the
//! job's lease went to another attempt), the attempt's process tree is ended and nothing more
//! is written.

use cordon_exec::{CancelHandle, OutputSink, Stream};
use cordon_store::{JobId, Store};

use super::Attempt;

/// The most output one attempt writes to its live log (the store); past it, one notice, then
/// nothing more — the result still keeps the output's head and tail.
pub const MAX_LIVE_LOG_BYTES: usize = 8 << 20;

/// Writes a job's live output to its event log as it arrives.
pub(crate) struct EventSink<'a> {
    store: &'a Store,
    job: &'a JobId,
    attempt: u32,
    cancel: &'a CancelHandle,
    fenced: bool,
    logged: usize,
    stage: Option<String>,
    pending: Vec<(Stream, Vec<u8>)>,
    pending_bytes: usize,
}

impl<'a> EventSink<'a> {
    /// The live log of one attempt.
    pub(crate) fn new(attempt: &'a Attempt<'a>) -> Self {
        EventSink {
            store: &attempt.service.store,
            job: &attempt.job.id,
            attempt: attempt.job.attempt,
            cancel: attempt.cancel,
            fenced: false,
            logged: 0,
            stage: None,
            pending: Vec::new(),
            pending_bytes: 0,
        }
    }

    /// Appends one event unless the attempt is fenced out.
    fn append(&mut self, kind: &str, data: &serde_json::Value) {
        if self.fenced {
            return;
        }
        match self
            .store
            .append_attempt_event(self.job, self.attempt, kind, data)
        {
            Ok(Some(_)) => {}
            Ok(None) => {
                eprintln!(
                    "cordon: job {} attempt {}: the store refuses its writes (the job is no \
                     longer this attempt's); ending its process tree",
                    self.job, self.attempt
                );
                self.fenced = true;
                self.cancel.cancel();
            }
            Err(error) => eprintln!("cordon: job {}: output lost: {error}", self.job),
        }
    }

    fn push(&mut self, stream: Stream, bytes: &[u8]) {
        match self.pending.last_mut() {
            Some((s, buf)) if *s == stream => buf.extend_from_slice(bytes),
            _ => self.pending.push((stream, bytes.to_vec())),
        }
        self.pending_bytes += bytes.len();
        // Written at once: a live log must not hold back the last line of a quiet program
        // (the executor hands over output as it reads it, so writes are already batched).
        self.flush();
    }

    pub(crate) fn flush(&mut self) {
        for (stream, bytes) in std::mem::take(&mut self.pending) {
            if self.logged > MAX_LIVE_LOG_BYTES {
                continue;
            }
            let room = MAX_LIVE_LOG_BYTES - self.logged;
            let kept = &bytes[..bytes.len().min(room)];
            self.logged += kept.len();
            if !kept.is_empty() {
                let data = serde_json::json!({
                    "stage": self.stage,
                    "stream": match stream { Stream::Stdout => "stdout", Stream::Stderr => "stderr" },
                    "text": String::from_utf8_lossy(kept),
                });
                self.append("output", &data);
            }
            if kept.len() < bytes.len() {
                // Once: `logged` passes the bound, so nothing more is written.
                self.logged = MAX_LIVE_LOG_BYTES + 1;
                let notice = serde_json::json!({
                    "stage": self.stage,
                    "stream": "stderr",
                    "text": format!(
                        "\n[cordon: the live log stops here, at {} MiB; the job's result keeps \
                         the head and tail of its output]\n",
                        MAX_LIVE_LOG_BYTES >> 20
                    ),
                });
                self.append("output", &notice);
            }
        }
        self.pending_bytes = 0;
    }

    pub(crate) fn event(&mut self, kind: &str, data: serde_json::Value) {
        self.flush();
        self.append(kind, &data);
    }
}

impl OutputSink for EventSink<'_> {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        self.push(stream, bytes);
    }
}

impl cordon_verify::VerifyObserver for EventSink<'_> {
    fn stage_started(&mut self, index: usize, stage: &cordon_verify::StageConfig) {
        self.stage = Some(stage.name.clone());
        self.event(
            "stage",
            serde_json::json!({"index": index, "stage": stage.name, "status": "running"}),
        );
    }

    fn output(&mut self, stage: &str, stream: Stream, bytes: &[u8]) {
        // Parallel stages' output interleaves: each piece names its own stage (`push` writes
        // it at once).
        let running = self.stage.replace(stage.to_owned());
        self.push(stream, bytes);
        self.stage = running;
    }

    fn stage_finished(&mut self, index: usize, result: &cordon_types::StageResult) {
        self.event(
            "stage",
            serde_json::json!({
                "index": index,
                "stage": result.name,
                "status": result.status,
                "duration_ms": result.duration_ms,
            }),
        );
        self.stage = None;
    }
}

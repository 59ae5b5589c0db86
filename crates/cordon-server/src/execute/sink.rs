//! A job's live log: output (already redacted by the runner) and stage events written to the
//! job's event log as they arrive.

use cordon_exec::{OutputSink, Stream};
use cordon_store::{JobId, Store};

/// Writes a job's live output to its event log as it arrives.
pub(crate) struct EventSink<'a> {
    store: &'a Store,
    job: &'a JobId,
    stage: Option<String>,
    pending: Vec<(Stream, Vec<u8>)>,
    pending_bytes: usize,
}

impl<'a> EventSink<'a> {
    pub(crate) fn new(store: &'a Store, job: &'a JobId) -> Self {
        EventSink {
            store,
            job,
            stage: None,
            pending: Vec::new(),
            pending_bytes: 0,
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
            let data = serde_json::json!({
                "stage": self.stage,
                "stream": match stream { Stream::Stdout => "stdout", Stream::Stderr => "stderr" },
                "text": String::from_utf8_lossy(&bytes),
            });
            if let Err(error) = self.store.append_job_event(self.job, "output", &data) {
                eprintln!("cordon serve: job {}: output lost: {error}", self.job);
            }
        }
        self.pending_bytes = 0;
    }

    pub(crate) fn event(&mut self, kind: &str, data: serde_json::Value) {
        self.flush();
        if let Err(error) = self.store.append_job_event(self.job, kind, &data) {
            eprintln!(
                "cordon serve: job {}: cannot log an event: {error}",
                self.job
            );
        }
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

    fn output(&mut self, _stage: &str, stream: Stream, bytes: &[u8]) {
        self.push(stream, bytes);
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

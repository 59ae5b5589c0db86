//! Recording runs in the store: the run's row, its transcript while it runs, its document.

use std::path::Path;

use anyhow::Context;
use cordon_exec::{OutputSink, Stream};
use cordon_store::{NewRun, RunId, RunKind, RunState, StageRecord, Store, TranscriptWriter};
use cordon_types::StageResult;

/// One run being recorded. Output must already be redacted: the store keeps what it gets.
pub(crate) struct Recorder {
    store: Store,
    id: RunId,
    writer: Option<TranscriptWriter>,
}

impl Recorder {
    /// Opens the store, marks runs whose cordon died as interrupted, and begins a run.
    pub(crate) fn begin(
        kind: RunKind,
        repo: Option<&Path>,
        command: &[String],
        transcript_limit: u64,
    ) -> anyhow::Result<Self> {
        let store = Store::open_default().map_err(|e| {
            let hint = e.hint();
            let err = anyhow::Error::new(e);
            match hint {
                Some(hint) => err.context(format!("hint: {hint} (or pass --no-record)")),
                None => err.context("hint: pass --no-record to run without recording"),
            }
        })?;
        store
            .mark_interrupted()
            .context("cannot reconcile the run history")?;
        let id = store
            .begin_run(&NewRun {
                kind,
                repo: repo.map(|p| {
                    p.canonicalize()
                        .unwrap_or_else(|_| p.to_owned())
                        .display()
                        .to_string()
                }),
                command: serde_json::json!(command),
            })
            .context("cannot record the run")?;
        let writer = store
            .transcript(&id)
            .context("cannot record the transcript")?;
        writer.set_limit(transcript_limit);
        Ok(Recorder {
            store,
            id,
            writer: Some(writer),
        })
    }

    /// The run's id (`r-…`), for `cordon runs`.
    pub(crate) fn id(&self) -> &str {
        self.id.as_str()
    }

    /// Appends output of `stage` (or of the run itself) to the transcript.
    pub(crate) fn write(&self, stage: Option<&str>, stream: Stream, bytes: &[u8]) {
        if let Some(writer) = &self.writer {
            writer.write(stage, stream, bytes);
        }
    }

    /// Records a finished stage.
    pub(crate) fn stage(&self, index: usize, result: &StageResult) {
        let document = serde_json::to_value(result).unwrap_or(serde_json::Value::Null);
        if let Err(e) = self.store.record_stage(
            &self.id,
            &StageRecord {
                index: index as u32,
                name: result.name.clone(),
                status: result.status,
                document,
            },
        ) {
            eprintln!("cordon: warning: cannot record stage {}: {e}", result.name);
        }
    }

    /// Flushes the transcript and stores the final document.
    pub(crate) fn finish(
        mut self,
        state: RunState,
        document: &impl serde::Serialize,
    ) -> anyhow::Result<()> {
        if let Some(writer) = self.writer.take() {
            let stats = writer.finish().context("cannot finish the transcript")?;
            if stats.bytes_over_limit > 0 {
                eprintln!(
                    "cordon: {} bytes of output past --transcript-limit were not recorded; the transcript marks where",
                    stats.bytes_over_limit
                );
            }
            let slow = stats.bytes_lost - stats.bytes_over_limit;
            if slow > 0 {
                eprintln!(
                    "cordon: warning: {slow} bytes of output could not be recorded (the store was too slow); the transcript marks where"
                );
            }
        }
        let document = serde_json::to_value(document)?;
        self.store
            .finish_run(&self.id, state, Some(&document))
            .context("cannot record the run's result")?;
        Ok(())
    }
}

/// Sends output to an optional sink (the terminal) and to the transcript.
pub(crate) struct Tee<'a, 'b> {
    pub(crate) first: Option<&'a mut (dyn OutputSink + 'b)>,
    pub(crate) recorder: Option<&'a Recorder>,
}

impl OutputSink for Tee<'_, '_> {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        if let Some(first) = self.first.as_deref_mut() {
            first.write(stream, bytes);
        }
        if let Some(recorder) = self.recorder {
            recorder.write(None, stream, bytes);
        }
    }

    fn wants_more(&self, stream: Stream) -> bool {
        self.first
            .as_deref()
            .is_none_or(|first| first.wants_more(stream))
    }
}

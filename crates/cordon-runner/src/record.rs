//! Recording runs: what the run path needs of a recording ([`RunRecorder`]), and the
//! recording in the run history ([`Recorder`]: the run's row, its transcript while it runs,
//! its stages, its final document).

use std::path::Path;

use cordon_exec::Stream;
pub use cordon_store::TranscriptStats;
use cordon_store::{NewRun, RunId, RunKind, RunState, StageRecord, Store, StoreError};
use cordon_types::StageResult;

/// Where a run's output is recorded while the program runs. The run path ([`crate::run`])
/// gives it every byte of output, already redacted, from the thread that supervises the
/// program, and names the recording in the result (`run_id`). [`Recorder`] records in the run
/// history (the store: SQLite, or PostgreSQL in a build with it).
pub trait RunRecorder: Sync {
    /// The id of the recording, given to the result as its `run_id` (`r-…` in the run
    /// history).
    fn id(&self) -> &str;

    /// Appends redacted output of `stage` (`None`: the run itself) to the transcript. Must
    /// not block on storage: the program's output waits while it runs.
    fn write(&self, stage: Option<&str>, stream: Stream, bytes: &[u8]);
}

/// Recording failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {operation}")]
pub struct RecordError {
    operation: &'static str,
    #[source]
    source: StoreError,
}

impl RecordError {
    fn new(operation: &'static str, source: StoreError) -> Self {
        RecordError { operation, source }
    }

    /// How to fix it: the store's own hint, or to run without recording.
    pub fn hint(&self) -> String {
        match self.source.hint() {
            Some(hint) => format!("{hint} (or pass --no-record)"),
            None => "pass --no-record to run without recording".to_owned(),
        }
    }
}

/// One run being recorded. Output must already be redacted: the store keeps what it gets
/// (the run path redacts before anything reaches it).
pub struct Recorder {
    store: Store,
    id: RunId,
    writer: Option<cordon_store::TranscriptWriter>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Opens the default store for recording (see [`Recorder::open`]) and begins a run of `kind` in `repo` with the (redacted) `command`; at most `transcript_limit`
    /// bytes of output are kept.
    pub fn begin(
        kind: RunKind,
        repo: Option<&Path>,
        command: &[String],
        transcript_limit: u64,
    ) -> Result<Self, RecordError> {
        Self::begin_in(kind, repo, None, command, transcript_limit)
    }

    /// [`Recorder::begin`] for a run made in a session: the record carries the session's id
    /// (`cordon runs list --session ID`).
    pub fn begin_in(
        kind: RunKind,
        repo: Option<&Path>,
        session: Option<&str>,
        command: &[String],
        transcript_limit: u64,
    ) -> Result<Self, RecordError> {
        Self::begin_on(
            Self::open()?,
            kind,
            repo,
            session,
            command,
            transcript_limit,
        )
    }

    /// Opens the default store for recording ([`Store::open_for_recording`]: on SQLite, runs
    /// go to its run log and readers mark runs whose cordon died as interrupted; elsewhere this
    /// marks them now): the part of [`Recorder::begin`] that needs nothing of the run, so a
    /// caller may do it while it prepares the run, then [`Recorder::begin_on`] the store it
    /// returns.
    pub fn open() -> Result<Store, RecordError> {
        let store = Store::open_default_for_recording()
            .map_err(|e| RecordError::new("open the run history", e))?;
        if !store.defers_runs() {
            store
                .mark_interrupted()
                .map_err(|e| RecordError::new("reconcile the run history", e))?;
        }
        Ok(store)
    }

    /// [`Recorder::begin_in`] on a store [`Recorder::open`] opened.
    pub fn begin_on(
        store: Store,
        kind: RunKind,
        repo: Option<&Path>,
        session: Option<&str>,
        command: &[String],
        transcript_limit: u64,
    ) -> Result<Self, RecordError> {
        let id = store
            .begin_run(&NewRun {
                kind,
                repo: repo.map(|p| {
                    p.canonicalize()
                        .unwrap_or_else(|_| p.to_owned())
                        .display()
                        .to_string()
                }),
                session: session.map(str::to_owned),
                command: serde_json::json!(command),
            })
            .map_err(|e| RecordError::new("record the run", e))?;
        let writer = store
            .transcript(&id)
            .map_err(|e| RecordError::new("record the transcript", e))?;
        writer.set_limit(transcript_limit);
        Ok(Recorder {
            store,
            id,
            writer: Some(writer),
        })
    }

    /// The run's id (`r-…`), for `cordon runs`.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// Appends output of `stage` (or of the run itself) to the transcript.
    pub fn write(&self, stage: Option<&str>, stream: Stream, bytes: &[u8]) {
        if let Some(writer) = &self.writer {
            writer.write(stage, stream, bytes);
        }
    }

    /// Records a finished stage.
    pub fn stage(&self, index: usize, result: &StageResult) -> Result<(), RecordError> {
        let document = serde_json::to_value(result).unwrap_or(serde_json::Value::Null);
        self.store
            .record_stage(
                &self.id,
                &StageRecord {
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    name: result.name.clone(),
                    status: result.status,
                    document,
                },
            )
            .map_err(|e| RecordError::new("record a stage", e))?;
        Ok(())
    }

    /// Flushes the transcript and stores the final document; returns what became of the
    /// transcript (see [`transcript_notes`]).
    pub fn finish(
        mut self,
        state: RunState,
        document: &impl serde::Serialize,
    ) -> Result<TranscriptStats, RecordError> {
        let stats = match self.writer.take() {
            Some(writer) => writer
                .finish()
                .map_err(|e| RecordError::new("finish the transcript", e))?,
            None => TranscriptStats::default(),
        };
        let document = serde_json::to_value(document).unwrap_or(serde_json::Value::Null);
        self.store
            .finish_run(&self.id, state, Some(&document))
            .map_err(|e| RecordError::new("record the run's result", e))?;
        Ok(stats)
    }

    /// [`Recorder::finish`] for a process that exits right after it: the store's connections
    /// are left for the exit to close. Closing an SQLite connection only tears down memory
    /// (its parsed schema, caches) and releases locks — the kernel does both at exit — while
    /// everything recorded is already committed (a store is built to be left this way: it is
    /// what a killed process leaves). Saves a tenth of what recording costs a short run
    /// (BENCHMARKS.md, "Recording"). Not for a long-lived process: it keeps the connections.
    pub fn finish_before_exit(
        self,
        state: RunState,
        document: &impl serde::Serialize,
    ) -> Result<TranscriptStats, RecordError> {
        let store = self.store.clone();
        let finished = self.finish(state, document);
        std::mem::forget(store);
        finished
    }
}

impl RunRecorder for Recorder {
    fn id(&self) -> &str {
        Recorder::id(self)
    }

    fn write(&self, stage: Option<&str>, stream: Stream, bytes: &[u8]) {
        Recorder::write(self, stage, stream, bytes);
    }
}

/// What to tell the user about a finished transcript: output past the limit, output lost
/// because the store was too slow.
pub fn transcript_notes(stats: &TranscriptStats) -> Vec<String> {
    let mut notes = Vec::new();
    if stats.bytes_over_limit > 0 {
        notes.push(format!(
            "{} bytes of output past --transcript-limit were not recorded; the transcript marks where",
            stats.bytes_over_limit
        ));
    }
    let slow = stats.bytes_lost.saturating_sub(stats.bytes_over_limit);
    if slow > 0 {
        notes.push(format!(
            "warning: {slow} bytes of output could not be recorded (the store was too slow); the transcript marks where"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::{Hooks, Isolation, RunRequest, TranscriptTarget};

    /// One write of the run path: its stage, stream and bytes.
    type Written = (Option<String>, Stream, Vec<u8>);

    /// A recording kept in memory: what the run path wrote, in order.
    struct Memory(Mutex<Vec<Written>>);

    impl RunRecorder for Memory {
        fn id(&self) -> &str {
            "r-memory"
        }

        fn write(&self, stage: Option<&str>, stream: Stream, bytes: &[u8]) {
            let mut chunks = self.0.lock().unwrap();
            chunks.push((stage.map(str::to_owned), stream, bytes.to_vec()));
        }
    }

    #[test]
    fn the_run_path_records_redacted_output_to_any_recorder_and_names_it_in_the_result() {
        let dir = tempfile::tempdir().unwrap();
        let mut request = RunRequest::new(
            ["sh", "-c", "echo token=hunter2-is-secret; echo done >&2"],
            dir.path(),
        );
        request.isolation = Isolation::Unsandboxed;
        // Redacted from the output whether or not the program was given it.
        request.secret_values = vec![("API_TOKEN".into(), "hunter2-is-secret".into())];
        let memory = Memory(Mutex::new(Vec::new()));
        let hooks = Hooks {
            transcript: Some(TranscriptTarget {
                recorder: &memory,
                stage: Some("test"),
            }),
            ..Hooks::default()
        };
        let ran = crate::run(&request, hooks).expect("the run was supervised");
        assert_eq!(ran.result.run_id.as_deref(), Some("r-memory"));
        let recorded = memory.0.into_inner().unwrap();
        let joined = |wanted: Stream| -> Vec<u8> {
            recorded
                .iter()
                .filter(|(stage, stream, _)| *stream == wanted && stage.as_deref() == Some("test"))
                .flat_map(|(_, _, bytes)| bytes.iter().copied())
                .collect()
        };
        assert_eq!(
            (
                String::from_utf8(joined(Stream::Stdout)).unwrap(),
                String::from_utf8(joined(Stream::Stderr)).unwrap()
            ),
            (
                "token=[REDACTED:API_TOKEN]\n".to_owned(),
                "done\n".to_owned()
            )
        );
    }
}

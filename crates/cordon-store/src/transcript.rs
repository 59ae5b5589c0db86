//! [`TranscriptWriter`]: appends a run's output to the store while the program runs.
//!
//! `write` only appends to an in-memory batch under a mutex — it never waits for the
//! database — so the executor may call it from its poll loop. A background thread, started by
//! the first write, writes the batch every [`FLUSH_INTERVAL`] or as soon as [`FLUSH_BYTES`] are
//! waiting, one transaction per batch, so a crash loses at most about the last flush interval.
//! `finish` writes what is left itself, on the caller's thread, and never waits for the
//! background thread unless it is in the middle of a write: a run that printed little (or
//! nothing) pays no thread hand-off at its end — on a busy machine, waking another thread
//! and joining it costs milliseconds of scheduling delay. Consecutive writes to
//! the same (stage, stream) coalesce into one chunk of up to [`MAX_CHUNK`] bytes. Memory is
//! bounded by [`MAX_BUFFERED`]: when the database falls that far behind, further bytes are
//! dropped and a `lost` marker chunk records how many, where they would have been.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::backend::{EncodedChunk, EncodedData, TranscriptCursor};
use crate::error::StoreError;
use crate::model::{RunId, Stream};
use crate::store::{Store, now_ms};

/// How often the background thread writes what is waiting.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(250);
/// Waiting bytes that trigger a write before the interval ends.
pub const FLUSH_BYTES: usize = 256 * 1024;
/// The largest chunk consecutive writes coalesce into.
pub const MAX_CHUNK: usize = 64 * 1024;
/// The most bytes held in memory (waiting and being written) before bytes are dropped.
pub const MAX_BUFFERED: usize = 16 * 1024 * 1024;
/// How many times `finish` tries its final write.
const FINAL_ATTEMPTS: u32 = 3;

/// Appends to one run's transcript in the background. Create it with
/// [`Store::transcript`]; end it with [`TranscriptWriter::finish`] (dropping it also flushes,
/// but swallows errors). One writer per run at a time.
#[derive(Debug)]
pub struct TranscriptWriter {
    shared: Arc<Shared>,
    store: Store,
    run: RunId,
    /// Whether `finish` (or drop) already ran.
    finished: bool,
}

/// What [`TranscriptWriter::finish`] reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TranscriptStats {
    /// Bytes stored.
    pub bytes_written: u64,
    /// Bytes dropped because the store could not keep up (each gap has a `lost` chunk).
    pub bytes_lost: u64,
    /// Bytes not stored because the transcript reached its size limit (also marked by `lost`
    /// chunks); included in `bytes_lost`.
    pub bytes_over_limit: u64,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the background thread (enough waiting, or closing).
    wake: Condvar,
    /// Signals that the background thread finished a write.
    written: Condvar,
}

#[derive(Debug)]
struct State {
    pending: Vec<Pending>,
    /// Bytes waiting in `pending` plus bytes being written by the thread.
    buffered: usize,
    /// Bytes waiting in `pending` only.
    waiting: usize,
    next_seq: u64,
    offsets: HashMap<(Option<String>, Stream), u64>,
    closing: bool,
    /// Whether the background thread was started (by the first write).
    started: bool,
    /// Whether the background thread is writing a batch now.
    writing: bool,
    stats: TranscriptStats,
    /// Most bytes of data this transcript keeps (`None`: no limit).
    limit: Option<u64>,
    /// Bytes of data accepted so far.
    accepted: u64,
}

#[derive(Debug)]
struct Pending {
    seq: u64,
    stage: Option<String>,
    stream: Stream,
    offset: u64,
    at_ms: i64,
    body: PendingBody,
}

#[derive(Debug)]
enum PendingBody {
    Data(Vec<u8>),
    Lost(u64),
}

impl PendingBody {
    fn memory(&self) -> usize {
        match self {
            PendingBody::Data(bytes) => bytes.len(),
            PendingBody::Lost(_) => 0,
        }
    }
}

impl TranscriptWriter {
    pub(crate) fn start(store: Store, run: RunId, cursor: TranscriptCursor) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: Vec::new(),
                buffered: 0,
                waiting: 0,
                next_seq: cursor.next_seq,
                offsets: cursor.offsets.into_iter().collect(),
                closing: false,
                started: false,
                writing: false,
                stats: TranscriptStats::default(),
                limit: None,
                accepted: 0,
            }),
            wake: Condvar::new(),
            written: Condvar::new(),
        });
        Self {
            shared,
            store,
            run,
            finished: false,
        }
    }

    /// Starts the background thread (once). Without it (the system refused a thread), what
    /// is written waits in memory, within [`MAX_BUFFERED`], for `finish`.
    fn start_thread(&self, state: &mut State) {
        if state.started {
            return;
        }
        state.started = true;
        let shared = Arc::clone(&self.shared);
        let store = self.store.clone();
        let run = self.run.clone();
        // Detached: it ends by itself once the writer closes.
        let _detached = std::thread::Builder::new()
            .name("cordon-transcript".to_owned())
            .spawn(move || flush_loop(&shared, &store, &run));
    }

    /// Keeps at most `bytes` of output in this transcript; what comes after is counted and
    /// marked by `lost` chunks (so a flood cannot fill the disk).
    pub fn set_limit(&self, bytes: u64) {
        lock(&self.shared.state).limit = Some(bytes);
    }

    /// Appends `bytes` (already redacted) written by `stage` (`None` for `cordon run`) to
    /// `stream`. Never waits for the database.
    pub fn write(&self, stage: Option<&str>, stream: Stream, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut state = lock(&self.shared.state);
        // A write that crosses the limit keeps the part that fits.
        if let Some(limit) = state.limit {
            let room = limit.saturating_sub(state.accepted);
            if room > 0 && bytes.len() as u64 > room {
                drop(state);
                let (head, rest) = bytes.split_at(room as usize);
                self.write(stage, stream, head);
                self.write(stage, stream, rest);
                return;
            }
        }
        let key = (stage.map(str::to_owned), stream);
        let offset = *state.offsets.get(&key).unwrap_or(&0);
        state.offsets.insert(key, offset + bytes.len() as u64);
        // One oversized write into an empty buffer is still kept.
        let over_limit = state
            .limit
            .is_some_and(|limit| state.accepted + bytes.len() as u64 > limit);
        let over_budget =
            over_limit || (state.buffered > 0 && state.buffered + bytes.len() > MAX_BUFFERED);
        if over_budget {
            state.stats.bytes_lost += bytes.len() as u64;
            if over_limit {
                state.stats.bytes_over_limit += bytes.len() as u64;
            }
        } else {
            state.accepted += bytes.len() as u64;
        }
        // Coalesce with the last chunk when it continues the same (stage, stream).
        if let Some(last) = state.pending.last_mut()
            && last.stage.as_deref() == stage
            && last.stream == stream
        {
            match &mut last.body {
                PendingBody::Lost(lost) if over_budget => {
                    *lost += bytes.len() as u64;
                    return;
                }
                PendingBody::Data(data)
                    if !over_budget && data.len() + bytes.len() <= MAX_CHUNK =>
                {
                    data.extend_from_slice(bytes);
                    state.buffered += bytes.len();
                    state.waiting += bytes.len();
                    self.nudge(&state);
                    return;
                }
                PendingBody::Lost(_) | PendingBody::Data(_) => {}
            }
        }
        let body = if over_budget {
            PendingBody::Lost(bytes.len() as u64)
        } else {
            PendingBody::Data(bytes.to_vec())
        };
        state.buffered += body.memory();
        state.waiting += body.memory();
        self.start_thread(&mut state);
        let seq = state.next_seq;
        state.next_seq += 1;
        state.pending.push(Pending {
            seq,
            stage: stage.map(str::to_owned),
            stream,
            offset,
            at_ms: now_ms(),
            body,
        });
        self.nudge(&state);
    }

    /// Wakes the thread early when enough is waiting.
    fn nudge(&self, state: &State) {
        if state.waiting >= FLUSH_BYTES {
            self.shared.wake.notify_one();
        }
    }

    /// Writes everything still waiting (on this thread) and stops the background thread.
    /// Fails when some of the transcript could not be written.
    pub fn finish(mut self) -> Result<TranscriptStats, StoreError> {
        self.close()
    }

    fn close(&mut self) -> Result<TranscriptStats, StoreError> {
        self.finished = true;
        let batch = {
            let mut state = lock(&self.shared.state);
            state.closing = true;
            self.shared.wake.notify_one();
            // A batch the thread is writing must be stored before the run is finished.
            while state.writing {
                state = self
                    .shared
                    .written
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            state.waiting = 0;
            std::mem::take(&mut state.pending)
        };
        if !batch.is_empty() {
            let encoded: Vec<EncodedChunk> = batch.iter().map(encode).collect();
            let mut attempt = 1;
            loop {
                match self.store.append_chunks(&self.run, &encoded) {
                    Ok(()) => break,
                    Err(error) if attempt >= FINAL_ATTEMPTS => return Err(error),
                    Err(_) => attempt += 1,
                }
            }
            let written: usize = batch.iter().map(|p| p.body.memory()).sum();
            let mut state = lock(&self.shared.state);
            state.buffered -= written;
            state.stats.bytes_written += written as u64;
        }
        Ok(lock(&self.shared.state).stats)
    }
}

impl Drop for TranscriptWriter {
    fn drop(&mut self) {
        if !self.finished {
            // Errors cannot be reported from here; `finish` reports them.
            let _ = self.close();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The background thread: waits for the interval, a full batch or the close, then writes.
/// A failed batch goes back to the front of the queue (still counted in `buffered`, so the
/// memory bound holds) for the next round or for `finish`. Once the writer closes, the
/// thread ends at once: `finish` writes the rest.
fn flush_loop(shared: &Shared, store: &Store, run: &RunId) {
    loop {
        let deadline = Instant::now() + FLUSH_INTERVAL;
        let batch = {
            let mut state = lock(&shared.state);
            while !state.closing && state.waiting < FLUSH_BYTES {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                state = shared
                    .wake
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            if state.closing {
                return;
            }
            if state.pending.is_empty() {
                continue;
            }
            state.waiting = 0;
            state.writing = true;
            std::mem::take(&mut state.pending)
        };
        let encoded: Vec<EncodedChunk> = batch.iter().map(encode).collect();
        let stored = store.append_chunks(run, &encoded).is_ok();
        let mut state = lock(&shared.state);
        if stored {
            let written: usize = batch.iter().map(|p| p.body.memory()).sum();
            state.buffered -= written;
            state.stats.bytes_written += written as u64;
        } else {
            // Keep the order: the failed batch goes before what arrived meanwhile.
            let mut again = batch;
            again.append(&mut state.pending);
            state.pending = again;
        }
        state.writing = false;
        shared.written.notify_all();
    }
}

fn encode(pending: &Pending) -> EncodedChunk {
    EncodedChunk {
        seq: pending.seq,
        stage: pending.stage.clone(),
        stream: pending.stream,
        offset: pending.offset,
        at_ms: pending.at_ms,
        data: match &pending.body {
            PendingBody::Data(bytes) => EncodedData::encode(bytes),
            PendingBody::Lost(bytes) => EncodedData::Lost(*bytes),
        },
    }
}

//! [`TranscriptWriter`]: appends a run's output to the store while the program runs.
//!
//! `write` only appends to an in-memory batch under a mutex — it never waits for the
//! database — so the executor may call it from its poll loop. A background thread writes the
//! batch every [`FLUSH_INTERVAL`] or as soon as [`FLUSH_BYTES`] are waiting, one transaction
//! per batch, so a crash loses at most about the last flush interval. Consecutive writes to
//! the same (stage, stream) coalesce into one chunk of up to [`MAX_CHUNK`] bytes. Memory is
//! bounded by [`MAX_BUFFERED`]: when the database falls that far behind, further bytes are
//! dropped and a `lost` marker chunk records how many, where they would have been.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{EncodedChunk, EncodedData, TranscriptCursor};
use crate::error::{StoreError, StoreErrorKind};
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
/// How many times a failing write is tried once the writer is finishing.
const FINAL_ATTEMPTS: u32 = 3;

/// Appends to one run's transcript in the background. Create it with
/// [`Store::transcript`]; end it with [`TranscriptWriter::finish`] (dropping it also flushes,
/// but swallows errors). One writer per run at a time.
#[derive(Debug)]
pub struct TranscriptWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<(), StoreError>>>,
    location: String,
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
    wake: Condvar,
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
                stats: TranscriptStats::default(),
                limit: None,
                accepted: 0,
            }),
            wake: Condvar::new(),
        });
        let location = store.location().to_owned();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("cordon-transcript".to_owned())
            .spawn(move || flush_loop(&thread_shared, &store, &run));
        match thread {
            Ok(thread) => Self {
                shared,
                thread: Some(thread),
                location,
            },
            Err(_) => Self {
                // Without a thread nothing is written; `finish` reports it.
                shared,
                thread: None,
                location,
            },
        }
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

    /// Writes everything still waiting and stops the background thread. Fails when some
    /// of the transcript could not be written.
    pub fn finish(mut self) -> Result<TranscriptStats, StoreError> {
        self.close()
    }

    fn close(&mut self) -> Result<TranscriptStats, StoreError> {
        lock(&self.shared.state).closing = true;
        self.shared.wake.notify_one();
        let outcome = match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| Err(gone(&self.location))),
            None => Err(gone(&self.location)),
        };
        outcome.map(|()| lock(&self.shared.state).stats)
    }
}

impl Drop for TranscriptWriter {
    fn drop(&mut self) {
        if self.thread.is_some() {
            // Errors cannot be reported from here; `finish` reports them.
            let _ = self.close();
        }
    }
}

fn gone(location: &str) -> StoreError {
    StoreError::new(location, "write a transcript", StoreErrorKind::WriterGone)
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The background thread: waits for the interval, a full batch or the close, then writes.
fn flush_loop(shared: &Shared, store: &Store, run: &RunId) -> Result<(), StoreError> {
    let mut failures = 0u32;
    let mut retry: Vec<Pending> = Vec::new();
    loop {
        let deadline = Instant::now() + FLUSH_INTERVAL;
        let (mut batch, closing) = {
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
            state.waiting = 0;
            (std::mem::take(&mut state.pending), state.closing)
        };
        if !retry.is_empty() {
            retry.append(&mut batch);
            batch = std::mem::take(&mut retry);
        }
        if batch.is_empty() {
            if closing {
                return Ok(());
            }
            continue;
        }
        let encoded: Vec<EncodedChunk> = batch.iter().map(encode).collect();
        match store.append_chunks(run, &encoded) {
            Ok(()) => {
                failures = 0;
                let written: usize = batch.iter().map(|p| p.body.memory()).sum();
                let mut state = lock(&shared.state);
                state.buffered -= written;
                state.stats.bytes_written += written as u64;
            }
            Err(error) => {
                failures += 1;
                if closing && failures >= FINAL_ATTEMPTS {
                    return Err(error);
                }
                // Keep the batch (still counted in `buffered`) and try again next round.
                retry = batch;
            }
        }
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

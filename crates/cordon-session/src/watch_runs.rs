//! The programs the review watcher runs: one reviewer's review ([`review_once`]), a run in
//! the session ([`in_session`]) and the recorded run through the one run path ([`launch`]).

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cordon_exec::{OutputSink, ReadyProbe, Stream};
use cordon_runner::{Hooks, Ran, Recorder, RunRequest};

use crate::error::{SessionError, SessionErrorKind};
use crate::exec::Access;
use crate::record::{ItemOrigin, ReviewItem};
use crate::review_items::{Line, LineSink, REVIEW_COMPLETE};
use crate::sessions::Session;
use crate::watch_events::{ReviewEventKind, ReviewerCompletion};

/// Bytes of each run's output kept in its transcript.
const TRANSCRIPT_LIMIT: u64 = 64 << 20;
/// Bad lines reported one by one per run; the rest are counted.
pub(crate) const MAX_LINE_WARNINGS: usize = 10;

/// Lines of a failed run's standard error kept in its events.
const STDERR_LINES: usize = 5;
/// The most characters of one such line.
const STDERR_LINE_CHARS: usize = 300;

/// The last lines of a run's standard error (redacted, as everything in its result is), for
/// the events that say why it failed.
pub(crate) fn stderr_tail(result: &cordon_types::RunResult) -> Vec<String> {
    let text = format!("{}{}", result.stderr.head, result.stderr.tail);
    let mut lines: Vec<String> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .rev()
        .take(STDERR_LINES)
        .map(|l| match l.char_indices().nth(STDERR_LINE_CHARS) {
            Some((at, _)) => format!("{}…", &l[..at]),
            None => l.to_owned(),
        })
        .collect();
    lines.reverse();
    if lines.is_empty()
        && let Some(failure) = &result.failure
    {
        lines.push(failure.reason.clone());
    }
    lines
}

/// What one program run did.
pub(crate) struct Launched {
    /// Its result.
    pub(crate) ran: Ran,
    /// Its run in the run history, when recorded.
    pub(crate) run_id: Option<String>,
}

/// One reviewer's review: its items go to the pending queue as it prints them. Returns its
/// run id in the run history, when recorded.
pub(crate) fn review_once(
    session: &Session,
    repo: &Path,
    record: bool,
    index: usize,
    command: &str,
    request: RunRequest,
    events: &std::sync::mpsc::Sender<ReviewEventKind>,
) -> Option<String> {
    let complete = Arc::new(AtomicBool::new(false));
    let marker = complete.clone();
    let warn = |message: String| {
        let _ = events.send(ReviewEventKind::Warning { message });
    };
    let mut bad = 0usize;
    let batch = RefCell::new(Vec::new());
    let parser = LineSink::new(ItemOrigin::Reviewer, |line| match line {
        Line::Item(mut item) => {
            if item.body.contains(REVIEW_COMPLETE) {
                marker.store(true, Ordering::SeqCst);
                if item.body.replace(REVIEW_COMPLETE, "").trim().is_empty() {
                    return;
                }
            }
            // A reviewer's ids live in their own space: an agent cannot claim (and so
            // silence) an id the source will bring.
            item.id = format!("reviewer-{}:{}", index + 1, item.id);
            batch.borrow_mut().push(item);
        }
        Line::State(_) => warn(format!(
            "reviewer {}: a state line was ignored (only the source says it)",
            index + 1
        )),
        Line::Bad(why) => {
            bad += 1;
            if bad <= MAX_LINE_WARNINGS {
                warn(format!("reviewer {}: a line was ignored: {why}", index + 1));
            }
        }
    });
    // Once the pending queue is full, a reviewer's further items are dropped unread (a
    // flood costs no more state writes).
    let mut full_seen = false;
    let mut flush = |items: Vec<ReviewItem>| {
        if full_seen {
            return;
        }
        match session.add_items(items) {
            Ok((ids, full)) => {
                if full > 0 {
                    full_seen = true;
                    warn(format!(
                        "reviewer {}: the pending queue is full; its further items are dropped",
                        index + 1
                    ));
                }
                if !ids.is_empty() {
                    let _ = events.send(ReviewEventKind::Items {
                        origin: ItemOrigin::Reviewer,
                        ids,
                    });
                }
            }
            Err(e) => warn(format!("reviewer {}: items were not kept: {e}", index + 1)),
        }
    };
    let mut sink = ReviewerSink {
        parser,
        batch: &batch,
        flush: &mut flush,
    };
    let mut probe = MarkerProbe(complete.clone());
    let launched = in_session(
        session,
        repo,
        record,
        Access::ReadOnly,
        Duration::ZERO,
        request,
        &mut sink,
        Some(&mut probe),
    );
    sink.finish();
    match launched {
        Ok(l) => {
            let exit_code = l.ran.exit_code;
            let completion = if l.ran.ready || complete.load(Ordering::SeqCst) {
                ReviewerCompletion::Marker
            } else if l.ran.result.status == cordon_types::RunStatus::Timeout {
                ReviewerCompletion::TimedOut
            } else if exit_code == 0 {
                ReviewerCompletion::Exited
            } else {
                ReviewerCompletion::Crashed
            };
            let failed = matches!(
                completion,
                ReviewerCompletion::TimedOut | ReviewerCompletion::Crashed
            );
            if failed {
                warn(format!(
                    "reviewer {} {} (exit {exit_code}); the round goes on with what it posted",
                    index + 1,
                    completion
                ));
            }
            let _ = events.send(ReviewEventKind::Reviewer {
                command: command.to_owned(),
                run_id: l.run_id.clone(),
                exit_code,
                completion,
                stderr_tail: if failed {
                    stderr_tail(&l.ran.result)
                } else {
                    Vec::new()
                },
            });
            l.run_id
        }
        Err(e) => {
            warn(format!("reviewer {} could not run: {e}", index + 1));
            let _ = events.send(ReviewEventKind::Reviewer {
                command: command.to_owned(),
                run_id: None,
                exit_code: 125,
                completion: ReviewerCompletion::Crashed,
                stderr_tail: vec![e.to_string()],
            });
            None
        }
    }
}

/// A reviewer's output: lines parsed as they come; the items of each chunk of output go to
/// the pending queue together (one state write per chunk, not per line).
struct ReviewerSink<'a, F: FnMut(Line)> {
    parser: LineSink<F>,
    batch: &'a RefCell<Vec<ReviewItem>>,
    flush: &'a mut dyn FnMut(Vec<ReviewItem>),
}

impl<F: FnMut(Line)> ReviewerSink<'_, F> {
    fn send(&mut self) {
        let items = std::mem::take(&mut *self.batch.borrow_mut());
        if !items.is_empty() {
            (self.flush)(items);
        }
    }

    /// Takes a last line without a newline, and sends what is left.
    fn finish(self) {
        let parser = self.parser;
        parser.finish();
        let items = std::mem::take(&mut *self.batch.borrow_mut());
        if !items.is_empty() {
            (self.flush)(items);
        }
    }
}

impl<F: FnMut(Line)> OutputSink for ReviewerSink<'_, F> {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        self.parser.write(stream, bytes);
        self.send();
    }
}

/// Ends a reviewer's run once it printed the completion marker.
struct MarkerProbe(Arc<AtomicBool>);

impl ReadyProbe for MarkerProbe {
    fn is_ready(&mut self, _root_pid: i32) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A sink that keeps nothing (the transcript has the output).
pub(crate) struct Discard;

impl OutputSink for Discard {
    fn write(&mut self, _stream: Stream, _bytes: &[u8]) {}
}

/// Runs `request` in the session (entered in its record as a run) with `access`.
#[expect(clippy::too_many_arguments, reason = "one private call path")]
pub(crate) fn in_session(
    session: &Session,
    repo: &Path,
    record: bool,
    access: Access,
    wait: Duration,
    mut request: RunRequest,
    sink: &mut dyn OutputSink,
    ready: Option<&mut dyn ReadyProbe>,
) -> Result<Launched, SessionError> {
    let lease = session.begin_exec(access, wait)?;
    lease.apply(&mut request);
    let command: Vec<String> = request
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let id = session.id().to_string();
    let launched = launch(repo, Some(&id), record, &request, sink, ready);
    let (run_id, exit) = match &launched {
        Ok(l) => (l.run_id.clone(), Some(l.ran.exit_code)),
        Err(_) => (None, Some(125)),
    };
    lease.finish(run_id, command, exit)?;
    launched
}

/// Runs `request` through the one run path, recorded (under `repo`, and the session) when
/// `record`.
pub(crate) fn launch(
    repo: &Path,
    session: Option<&str>,
    record: bool,
    request: &RunRequest,
    sink: &mut dyn OutputSink,
    ready: Option<&mut dyn ReadyProbe>,
) -> Result<Launched, SessionError> {
    let prepared = cordon_runner::prepare(request)?;
    let recorder = if record {
        Some(
            Recorder::begin_in(
                cordon_store::RunKind::Watch,
                Some(repo),
                session,
                prepared.shown_command(),
                TRANSCRIPT_LIMIT,
            )
            .map_err(|e| SessionError::new(SessionErrorKind::Record(Box::new(e))))?,
        )
    } else {
        None
    };
    let run_id = recorder.as_ref().map(|r| r.id().to_owned());
    let hooks = Hooks {
        sink: Some(&mut *sink),
        cancel: None,
        ready: match ready {
            Some(probe) => Some(probe as &mut dyn ReadyProbe),
            None => None,
        },
        transcript: recorder
            .as_ref()
            .map(|recorder| cordon_runner::TranscriptTarget {
                recorder,
                stage: None,
            }),
        network_notice: None,
    };
    match prepared.run(hooks) {
        Ok(ran) => {
            if let Some(recorder) = recorder {
                let _ =
                    recorder.finish(cordon_store::RunState::from(ran.result.status), &ran.result);
            }
            Ok(Launched { ran, run_id })
        }
        Err(e) => {
            if let Some(recorder) = recorder {
                let document = serde_json::json!({ "error": e.to_string() });
                let _ = recorder.finish(cordon_store::RunState::Error, &document);
            }
            Err(e.into())
        }
    }
}

//! The review watcher: [`Session::watch`] feeds review comments to a fixer in rounds, with
//! backoff polling between them, until the change is merged or closed, a round limit is
//! reached, or nobody acts for the idle timeout.
//!
//! Everything it must not lose lives in the session's state file ([`ReviewState`]), changed
//! under the state lock and written atomically: the pending items (with their bodies), the
//! handled and failed ids, the round that runs, the backoff, the last progress. So `kill -9`
//! of the watcher at any moment loses nothing: the next watcher runs a round that was
//! running again with the same items, and an item of a completed round is never given to
//! the fixer again.
//!
//! ```text
//! loop:
//!   session ended under us           -> end (session_ended)
//!   a round was running              -> run it again, same items
//!   reviews due (start, after a round) -> reviewers (read-only), their items pending at once
//!   items pending                    -> round limit reached? end (max_rounds, exit 1)
//!                                       else a round: the fixer (writable) on them
//!   poll the source                  -> merged/closed: remove the session, end
//!                                       new items: backoff reset, go on
//!   idle past the timeout            -> --on-timeout, remove the session, end
//!   wait the backoff (a poke wakes at once), doubling up to the maximum
//! ```

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use cordon_exec::{OutputSink, ReadyProbe};
use cordon_runner::{Bounds, Isolation, RunRequest, SandboxOptions};
use cordon_sandbox::Bind;
use cordon_workspace::ProcessIdentity;

use crate::error::{SessionError, SessionErrorKind};
use crate::exec::Access;
use crate::record::{
    self, EndReason, FixerFailure, ItemOrigin, MAX_ITEM_TRIES, ReviewItem, ReviewPhase,
    ReviewRound, ReviewState, SessionStatus, WatcherInfo,
};
use crate::review_items::{Line, LineSink, MAX_BODY_BYTES, SourceState, cut};
use crate::sessions::Session;
use crate::watch_events::{ReviewEvent, ReviewEventKind, ReviewEventTag, WatchEndReason};
use crate::watch_runs::{
    Discard, Launched, MAX_LINE_WARNINGS, in_session, launch, review_once, stderr_tail,
};
use crate::watch_settings::WatchSettings;
use cordon_workspace::state::FileLock;

/// The most items pending at once; more wait (the source's) or are dropped (a reviewer's),
/// with a warning.
pub const MAX_PENDING: usize = 1000;
/// How often a waiting watcher looks for a poke.
const POKE_CHECK: Duration = Duration::from_millis(25);
/// How long the watcher waits for the session's writer before the fixer runs.
const WRITER_WAIT: Duration = Duration::from_secs(600);
/// How long the removal at the end waits for what runs in the session.
const REMOVE_WAIT: Duration = Duration::from_secs(30);

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Session {
    /// Watches the session until the change is merged or closed (the session is removed),
    /// a round limit is reached (the session is kept) or the idle timeout runs out
    /// (`on_timeout` runs, the session is removed). Reviewers and the fixer run sandboxed
    /// with `agents`; `on_event` sees every event as it happens. One watcher per session:
    /// a live one makes a second fail with [`SessionErrorKind::WatcherBusy`].
    ///
    /// ```no_run
    /// use cordon_runner::SandboxOptions;
    /// use cordon_session::{Sessions, WatchSettings};
    ///
    /// # fn main() -> Result<(), cordon_session::SessionError> {
    /// let session = Sessions::from_env()?.open_str("abcd2345")?;
    /// let mut settings = WatchSettings::new("./comments.sh", "./fix.sh", "/path/to/project");
    /// settings.reviewers.push("./ai-review.sh".to_owned());
    /// let end = session.watch(settings, SandboxOptions::default(), &mut |event| {
    ///     println!("{}", serde_json::to_string(event).unwrap_or_default());
    /// })?;
    /// std::process::exit(end.exit_code().into());
    /// # }
    /// ```
    pub fn watch(
        &self,
        settings: WatchSettings,
        agents: SandboxOptions,
        on_event: &mut dyn FnMut(&ReviewEvent),
    ) -> Result<WatchEndReason, SessionError> {
        self.active_record()?;
        // A secret that is not there would only fail later, run after run: refused now.
        for (option, names) in [
            ("--secret", &settings.secrets),
            ("--agent-secret", &settings.agent_secrets),
        ] {
            if let Some(name) = names.iter().find(|n| std::env::var_os(n).is_none()) {
                return Err(SessionError::new(SessionErrorKind::MissingSecret {
                    option,
                    name: name.clone(),
                })
                .with_id(&self.id));
            }
        }
        let path = self.sessions.layout.watcher_lock(&self.id);
        let Some(_lock) = FileLock::try_acquire(&path)? else {
            let pid = self.record()?.review.watcher.map_or(0, |w| w.pid);
            return Err(SessionError::new(SessionErrorKind::WatcherBusy { pid }).with_id(&self.id));
        };
        let me = ProcessIdentity::current();
        let mut resumed = false;
        let rec = self.update_review(|review, _| {
            resumed = review.current_round.is_some() || review.phase == ReviewPhase::Reviewing;
            if review.settings.is_none() || review.phase == ReviewPhase::Idle {
                review.reviews_due = true;
            }
            review.last_progress.get_or_insert_with(record::now_text);
            review.watcher = Some(WatcherInfo {
                pid: me.pid,
                start_time: me.start_time,
                since: record::now_text(),
            });
            review.settings = Some(settings.clone());
            if review.phase == ReviewPhase::Idle || review.phase == ReviewPhase::Done {
                review.phase = ReviewPhase::Polling;
            }
        })?;
        let mut watch = Watcher {
            session: self,
            repo: rec.repo.clone(),
            settings,
            agents,
            on_event,
            pokes: rec.review.pokes,
        };
        watch.emit(ReviewEventKind::Started {
            resumed,
            rounds: rec.rounds,
            pending: rec.review.pending.len(),
        });
        watch.run()
    }

    /// Asks the watcher to poll at once and resets its backoff; with `comment`, adds it as a
    /// review item (it waits in the state when no watcher runs). Returns the item's id.
    pub fn poke(&self, comment: Option<&str>) -> Result<Option<String>, SessionError> {
        let mut id = None;
        self.update_review(|review, _| {
            review.pokes += 1;
            review.backoff_ms = None;
            if let Some(text) = comment {
                let item_id = format!("poke-{}", review.pokes);
                review.pending.push(ReviewItem {
                    id: item_id.clone(),
                    body: cut(text.to_owned(), MAX_BODY_BYTES),
                    author: None,
                    url: None,
                    origin: ItemOrigin::Poke,
                    tries: 0,
                });
                review.last_progress = Some(record::now_text());
                id = Some(item_id);
            }
        })?;
        Ok(id)
    }

    /// Adds the items not seen before (pending, handled or failed) to the pending queue, as
    /// long as it holds fewer than [`MAX_PENDING`] items; returns the ids added and how many
    /// new items found the queue full (they are not remembered: a source brings them again).
    /// New items reset the backoff and count as progress.
    pub(crate) fn add_items(
        &self,
        items: Vec<ReviewItem>,
    ) -> Result<(Vec<String>, usize), SessionError> {
        if items.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let mut added = Vec::new();
        let mut full = 0;
        self.update_review(|review, _| {
            let mut seen: HashSet<String> = review
                .handled
                .iter()
                .chain(&review.failed)
                .chain(review.pending.iter().map(|i| &i.id))
                .cloned()
                .collect();
            for item in items {
                if seen.contains(&item.id) {
                    continue;
                }
                if review.pending.len() >= MAX_PENDING {
                    full += 1;
                    continue;
                }
                seen.insert(item.id.clone());
                added.push(item.id.clone());
                review.pending.push(item);
            }
            if !added.is_empty() {
                review.backoff_ms = None;
                review.last_progress = Some(record::now_text());
            }
        })?;
        Ok((added, full))
    }
}

struct Watcher<'a> {
    session: &'a Session,
    repo: PathBuf,
    settings: WatchSettings,
    agents: SandboxOptions,
    on_event: &'a mut dyn FnMut(&ReviewEvent),
    pokes: u64,
}

impl Watcher<'_> {
    fn emit(&mut self, event: ReviewEventKind) {
        let now = SystemTime::now();
        (self.on_event)(&ReviewEvent {
            schema: ReviewEventTag,
            session: self.session.id.clone(),
            at: humantime::format_rfc3339_millis(now).to_string(),
            at_ms: now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, millis),
            event,
        });
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.emit(ReviewEventKind::Warning {
            message: message.into(),
        });
    }

    fn run(&mut self) -> Result<WatchEndReason, SessionError> {
        loop {
            let rec = self.session.record()?;
            if rec.state != SessionStatus::Active {
                return self.end(WatchEndReason::SessionEnded);
            }
            let review = &rec.review;
            if review.current_round.is_some() {
                if self.round()? == RoundOutcome::Misconfigured {
                    return self.end(WatchEndReason::FixerMisconfigured);
                }
                continue;
            }
            if review.reviews_due {
                if !self.settings.reviewers.is_empty() {
                    self.reviews(rec.rounds + 1)?;
                }
                self.session.update_review(|r, _| r.reviews_due = false)?;
                continue;
            }
            if !review.pending.is_empty() {
                if rec.rounds >= self.settings.max_rounds {
                    return self.end(WatchEndReason::MaxRounds);
                }
                if self.round()? == RoundOutcome::Misconfigured {
                    return self.end(WatchEndReason::FixerMisconfigured);
                }
                continue;
            }
            let (state, new) = self.poll()?;
            match state {
                Some(SourceState::Merged) => return self.end(WatchEndReason::Merged),
                Some(SourceState::Closed) => return self.end(WatchEndReason::Closed),
                Some(SourceState::Open) | None => {}
            }
            if new > 0 {
                continue;
            }
            let rec = self.session.record()?;
            if !rec.review.pending.is_empty() {
                continue;
            }
            let idle_timeout = Duration::from_millis(self.settings.idle_timeout_ms);
            let idle = idle_for(&rec.review);
            if idle >= idle_timeout {
                return self.end(WatchEndReason::IdleTimeout);
            }
            // The next delay is read and stored under the state's lock: a poke between a read
            // of `rec` and the write would otherwise have its reset of the backoff overwritten.
            let backoff = self.settings.backoff();
            let mut delay = Duration::ZERO;
            self.session.update_review(|r, _| {
                delay = backoff.next(r.backoff_ms.map(Duration::from_millis));
                r.backoff_ms = Some(millis(delay));
            })?;
            let delay = delay.min(idle_timeout - idle);
            self.emit(ReviewEventKind::Backoff {
                delay_ms: millis(delay),
            });
            self.wait(delay)?;
        }
    }

    /// Sleeps `delay`, or until a poke (or the session's end).
    fn wait(&mut self, delay: Duration) -> Result<(), SessionError> {
        // A delay past what the clock can count is a wait that only a poke or the end stops.
        let deadline = Instant::now().checked_add(delay);
        loop {
            let rec = self.session.record()?;
            if rec.review.pokes != self.pokes {
                self.pokes = rec.review.pokes;
                self.emit(ReviewEventKind::Poke);
                return Ok(());
            }
            let now = Instant::now();
            let left = deadline.map_or(POKE_CHECK, |d| d.saturating_duration_since(now));
            if left.is_zero() || rec.state != SessionStatus::Active {
                return Ok(());
            }
            std::thread::sleep(POKE_CHECK.min(left));
        }
    }

    fn end(&mut self, reason: WatchEndReason) -> Result<WatchEndReason, SessionError> {
        if reason == WatchEndReason::IdleTimeout
            && let Some(command) = self.settings.on_timeout.clone()
        {
            let mut request = self.trusted_request(&command);
            request
                .env
                .push(("CORDON_REVIEW_END".to_owned(), "idle_timeout".to_owned()));
            request.env.push((
                "CORDON_IDLE_TIMEOUT_S".to_owned(),
                (self.settings.idle_timeout_ms / 1000).to_string(),
            ));
            match self.launch(&request, &mut Discard, None) {
                Ok(l) if l.ran.exit_code == 0 => {}
                Ok(l) => self.warn(format!("--on-timeout exited {}", l.ran.exit_code)),
                Err(e) => self.warn(format!("--on-timeout could not run: {e}")),
            }
        }
        if self.session.record()?.state == SessionStatus::Active {
            self.session.update_review(|r, _| {
                r.phase = ReviewPhase::Done;
                r.watcher = None;
            })?;
        }
        let ending = match reason {
            WatchEndReason::Merged => Some(EndReason::Merged),
            WatchEndReason::Closed => Some(EndReason::Closed),
            WatchEndReason::IdleTimeout => Some(EndReason::Idle),
            WatchEndReason::MaxRounds
            | WatchEndReason::SessionEnded
            | WatchEndReason::FixerMisconfigured => None,
        };
        // The session's commits not yet pulled are kept on the host before it ends.
        let kept = match ending {
            Some(ending) => {
                self.session
                    .end_after_stopping(ending, true, REMOVE_WAIT, &|| false)?
                    .kept
            }
            None => None,
        };
        self.emit(ReviewEventKind::Ended {
            reason,
            exit_code: reason.exit_code(),
            kept,
        });
        Ok(reason)
    }

    /// A request for the operator's trusted commands (source, on-timeout): outside the
    /// session's sandbox, with the bounds of `cordon run` and the named secrets.
    fn trusted_request(&self, command: &str) -> RunRequest {
        let mut request = RunRequest::new(["/bin/sh", "-c", command], &self.settings.cwd);
        request.isolation = Isolation::Unsandboxed;
        request.secrets = self.settings.secrets.clone();
        request.bounds = Bounds {
            timeout: Duration::from_millis(self.settings.source_timeout_ms),
            ..Bounds::default()
        };
        request
            .env
            .push(("CORDON_SESSION_ID".to_owned(), self.session.id.to_string()));
        request
    }

    /// Runs the source; returns the state it reported and how many new items it brought.
    fn poll(&mut self) -> Result<(Option<SourceState>, usize), SessionError> {
        self.session
            .update_review(|r, _| r.phase = ReviewPhase::Polling)?;
        let request = self.trusted_request(&self.settings.source);
        let mut lines = Vec::new();
        let mut sink = LineSink::new(ItemOrigin::Source, |l| lines.push(l));
        let launched = self.launch(&request, &mut sink, None);
        sink.finish();
        let launched = match launched {
            Ok(launched) => launched,
            Err(e) => {
                self.warn(format!("the source could not run: {e}"));
                self.emit(ReviewEventKind::Poll {
                    run_id: None,
                    exit_code: 125,
                    new_items: 0,
                    state: None,
                    stderr_tail: vec![e.to_string()],
                });
                return Ok((None, 0));
            }
        };
        let exit_code = launched.ran.exit_code;
        let (items, state) = self.sort_lines(lines, "the source");
        // A state from a source that failed is not trusted (merged/closed remove the session).
        let state = if exit_code == 0 { state } else { None };
        let failure = if exit_code == 0 {
            Vec::new()
        } else {
            self.warn(format!(
                "the source exited {exit_code}; its items are taken, its state is not"
            ));
            stderr_tail(&launched.ran.result)
        };
        let (new, full) = self.session.add_items(items)?;
        if full > 0 {
            self.warn(format!(
                "the pending queue is full ({MAX_PENDING} items): {full} new item(s) of the source wait for a later poll"
            ));
        }
        self.emit(ReviewEventKind::Poll {
            run_id: launched.run_id,
            exit_code,
            new_items: new.len(),
            state,
            stderr_tail: failure,
        });
        let count = new.len();
        if !new.is_empty() {
            self.emit(ReviewEventKind::Items {
                origin: ItemOrigin::Source,
                ids: new,
            });
        }
        Ok((state, count))
    }

    /// Splits parsed lines into items (duplicates in one run taken once) and the last state,
    /// warning about bad lines.
    fn sort_lines(
        &mut self,
        lines: Vec<Line>,
        who: &str,
    ) -> (Vec<ReviewItem>, Option<SourceState>) {
        let mut items = Vec::new();
        let mut state = None;
        let mut bad = 0;
        for line in lines {
            match line {
                Line::Item(item) => items.push(item),
                Line::State(s) => state = Some(s),
                Line::Bad(why) => {
                    bad += 1;
                    if bad <= MAX_LINE_WARNINGS {
                        self.warn(format!("{who}: a line was ignored: {why}"));
                    }
                }
            }
        }
        if bad > MAX_LINE_WARNINGS {
            self.warn(format!(
                "{who}: {} more lines were ignored",
                bad - MAX_LINE_WARNINGS
            ));
        }
        (items, state)
    }

    /// Runs `request` through the one run path, recorded when the settings say so.
    fn launch(
        &self,
        request: &RunRequest,
        sink: &mut dyn OutputSink,
        ready: Option<&mut dyn ReadyProbe>,
    ) -> Result<Launched, SessionError> {
        let id = self.session.id().to_string();
        launch(
            &self.repo,
            Some(&id),
            self.settings.record,
            request,
            sink,
            ready,
        )
    }

    /// A request for an agent (reviewer, fixer) in the session.
    fn agent_request(&self, command: &str, round: u32, timeout_ms: u64) -> RunRequest {
        let mut request = RunRequest::new(["/bin/sh", "-c", command], "");
        request.isolation = Isolation::Sandboxed(self.agents.clone());
        request.secrets = self.settings.agent_secrets.clone();
        request.bounds = Bounds {
            timeout: Duration::from_millis(timeout_ms),
            ..Bounds::default()
        };
        request
            .env
            .push(("CORDON_SESSION_ID".to_owned(), self.session.id.to_string()));
        request
            .env
            .push(("CORDON_REVIEW_ROUND".to_owned(), round.to_string()));
        request
    }

    /// Runs every reviewer at once, read-only; the items they print go to the pending
    /// queue as they come.
    fn reviews(&mut self, round: u32) -> Result<(), SessionError> {
        self.session
            .update_review(|r, _| r.phase = ReviewPhase::Reviewing)?;
        let (tx, rx) = std::sync::mpsc::channel::<ReviewEventKind>();
        let jobs: Vec<(usize, String, RunRequest)> = self
            .settings
            .reviewers
            .iter()
            .enumerate()
            .map(|(index, command)| {
                let request = self.agent_request(command, round, self.settings.reviewer_timeout_ms);
                (index, command.clone(), request)
            })
            .collect();
        let session = self.session;
        let mut run_ids = Vec::new();
        let repo = self.repo.clone();
        let record = self.settings.record;
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for (index, command, request) in jobs {
                let tx = tx.clone();
                let repo = &repo;
                handles.push(scope.spawn(move || {
                    review_once(session, repo, record, index, &command, request, &tx)
                }));
            }
            drop(tx);
            for event in rx {
                self.emit(event);
            }
            for handle in handles {
                if let Ok(Some(run_id)) = handle.join() {
                    run_ids.push(run_id);
                }
            }
        });
        if !run_ids.is_empty() {
            self.session
                .update_review(|r, _| r.reviewer_runs.extend(run_ids))?;
        }
        Ok(())
    }

    /// Runs the round that is recorded as running, or starts one with every pending item.
    fn round(&mut self) -> Result<RoundOutcome, SessionError> {
        let mut current = None;
        let mut resumed = false;
        let rec = self.session.update_review(|review, rounds| {
            if let Some(round) = &review.current_round {
                resumed = true;
                current = Some(round.clone());
            } else {
                *rounds += 1;
                let round = ReviewRound {
                    number: *rounds,
                    items: review.pending.iter().map(|i| i.id.clone()).collect(),
                    started_at: record::now_text(),
                    finished_at: None,
                    fixer_run_id: None,
                    exit_code: None,
                    handled: Vec::new(),
                    dropped: Vec::new(),
                    reviewer_run_ids: std::mem::take(&mut review.reviewer_runs),
                };
                review.current_round = Some(round.clone());
                current = Some(round);
            }
            review.phase = ReviewPhase::Round;
            review.last_progress = Some(record::now_text());
        })?;
        let Some(round) = current else {
            return Ok(RoundOutcome::Done);
        };
        let items: Vec<&ReviewItem> = rec
            .review
            .pending
            .iter()
            .filter(|i| round.items.contains(&i.id))
            .collect();
        self.emit(ReviewEventKind::RoundStarted {
            round: round.number,
            items: round.items.clone(),
            resumed,
        });
        let launched = self.fix(&round, &items);
        let (exit_code, run_id, failure) = match &launched {
            Ok(l) if l.ran.exit_code == 0 => (0, l.run_id.clone(), None),
            Ok(l) => (
                l.ran.exit_code,
                l.run_id.clone(),
                Some(FixerFailure {
                    exit_code: l.ran.exit_code,
                    stderr_tail: stderr_tail(&l.ran.result),
                    duration_ms: l.ran.result.duration_ms,
                }),
            ),
            Err(e) => {
                self.warn(format!("the fixer could not run: {e}"));
                let failure = FixerFailure {
                    exit_code: 125,
                    stderr_tail: vec![e.to_string()],
                    duration_ms: 0,
                };
                (125, None, Some(failure))
            }
        };
        let misconfigured = failure.as_ref().is_some_and(|f| {
            f.duration_ms < FAST_FAILURE_MS
                && rec.review.last_fixer_failure.as_ref().is_some_and(|last| {
                    last.duration_ms < FAST_FAILURE_MS
                        && last.exit_code == f.exit_code
                        && last.stderr_tail == f.stderr_tail
                })
        });
        let mut finished = round.clone();
        let mut retry = Vec::new();
        self.session.update_review(|review, _| {
            let ids: HashSet<&String> = round.items.iter().collect();
            if exit_code == 0 {
                review.pending.retain(|i| !ids.contains(&i.id));
                finished.handled = round.items.clone();
                review.handled.extend(round.items.iter().cloned());
            } else {
                for item in review.pending.iter_mut().filter(|i| ids.contains(&i.id)) {
                    item.tries += 1;
                    if item.tries >= MAX_ITEM_TRIES {
                        finished.dropped.push(item.id.clone());
                    } else {
                        retry.push(item.id.clone());
                    }
                }
                let dropped: HashSet<&String> = finished.dropped.iter().collect();
                review.pending.retain(|i| !dropped.contains(&i.id));
                review.failed.extend(finished.dropped.iter().cloned());
            }
            finished.finished_at = Some(record::now_text());
            finished.fixer_run_id = run_id.clone();
            finished.exit_code = Some(exit_code);
            review.history.push(finished.clone());
            review.last_fixer_failure = failure.clone();
            review.current_round = None;
            review.phase = ReviewPhase::Polling;
            review.reviews_due = true;
            review.last_progress = Some(record::now_text());
        })?;
        self.emit(ReviewEventKind::RoundFinished {
            round: round.number,
            run_id,
            exit_code,
            handled: finished.handled,
            retry,
            dropped: finished.dropped,
            stderr_tail: failure.map(|f| f.stderr_tail).unwrap_or_default(),
        });
        Ok(if misconfigured {
            RoundOutcome::Misconfigured
        } else {
            RoundOutcome::Done
        })
    }

    /// Runs the fixer on `items`: writable, the items as a JSON array in the file named by
    /// `$CORDON_REVIEW_ITEMS` (a private directory bound read-only) and on standard input.
    fn fix(&self, round: &ReviewRound, items: &[&ReviewItem]) -> Result<Launched, SessionError> {
        // Under cordon's own state (masked in the sandbox but for this bind), removed after
        // the round or, if this watcher is killed, by the next cordon.
        let dir = cordon_runner::RunFiles::make("review")
            .map_err(|e| SessionError::io(self.session.sessions.home().join("run"), e))?;
        let file = dir.path().join("items.json");
        let json =
            serde_json::to_vec(items).map_err(|e| SessionError::new(SessionErrorKind::State(e)))?;
        std::fs::write(&file, json).map_err(|e| SessionError::io(&file, e))?;
        let script = format!("exec < \"$CORDON_REVIEW_ITEMS\"\n{}", self.settings.fixer);
        let mut request = self.agent_request(&script, round.number, self.settings.fixer_timeout_ms);
        request
            .env
            .push(("CORDON_REVIEW_ITEMS".to_owned(), file.display().to_string()));
        if let Isolation::Sandboxed(options) = &mut request.isolation {
            options.binds.push(Bind {
                path: dir.path().to_owned(),
                access: cordon_sandbox::Access::ReadOnly,
            });
        }
        in_session(
            self.session,
            &self.repo,
            self.settings.record,
            Access::Write,
            WRITER_WAIT,
            request,
            &mut Discard,
            None,
        )
    }
}

/// A fixer that fails faster than this twice alike is misconfigured, in milliseconds.
const FAST_FAILURE_MS: u64 = 1000;

/// How a round ended for the watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoundOutcome {
    /// It ran (the fixer's outcome is in the state).
    Done,
    /// The fixer failed the same way at once as in the round before: end the watch.
    Misconfigured,
}

/// How long the watch has seen no progress (no new item, no round).
fn idle_for(review: &ReviewState) -> Duration {
    review
        .last_progress
        .as_deref()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default()
}

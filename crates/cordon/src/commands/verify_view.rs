//! `cordon verify`'s live view on stderr: what is verified, then a line per stage as it starts
//! and ends. On a terminal each running stage is a spinner showing its last output line;
//! without one (CI, a log), a heartbeat line every `--heartbeat` (30 s) for each stage still
//! running, with its elapsed time and last output line, so that a long build is never silent.
//! `--verbose` streams every stage's output live, each line prefixed with the stage's name.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cordon_exec::Stream;
use cordon_types::{StageResult, StageStatus};
use cordon_verify::{Plan, StageConfig, VerifyObserver};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How the view behaves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ViewSettings {
    /// Stream each stage's output, line by line, prefixed with its name.
    pub(crate) verbose: bool,
    /// How often a running stage says it is still running, without a terminal.
    pub(crate) heartbeat: Duration,
}

/// A running stage, as the heartbeat and the spinner show it.
struct Running {
    name: String,
    category: &'static str,
    started: Instant,
    /// When its last heartbeat line was printed (or it started).
    reported: Instant,
    /// Its last non-empty line of output.
    last_line: Option<String>,
}

/// What the heartbeat thread shares with the view.
#[derive(Default)]
struct Shared {
    running: BTreeMap<usize, Running>,
    done: bool,
}

/// The live view (see the module documentation).
pub(crate) struct VerifyView {
    settings: ViewSettings,
    multi: Option<MultiProgress>,
    bars: Vec<Option<ProgressBar>>,
    indices: BTreeMap<String, usize>,
    /// Each stage's output not yet ended by a newline, per stream.
    partial: BTreeMap<(usize, bool), Vec<u8>>,
    shared: Arc<(Mutex<Shared>, Condvar)>,
    heartbeat: Option<std::thread::JoinHandle<()>>,
}

impl VerifyView {
    /// A view on stderr: spinners on a terminal (unless `CI` is set), plain lines otherwise.
    pub(crate) fn new(settings: ViewSettings) -> Self {
        let tty = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        let shared: Arc<(Mutex<Shared>, Condvar)> = Arc::default();
        let heartbeat = (!tty).then(|| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || heartbeat(&shared, settings.heartbeat))
        });
        VerifyView {
            settings,
            multi: tty.then(MultiProgress::new),
            bars: Vec::new(),
            indices: BTreeMap::new(),
            partial: BTreeMap::new(),
            shared,
            heartbeat,
        }
    }

    /// Ends the view: the spinners cleared, the heartbeat stopped.
    pub(crate) fn finish(&mut self) {
        if let Some(multi) = &self.multi {
            let _ = multi.clear();
        }
        self.stop_heartbeat();
    }

    fn stop_heartbeat(&mut self) {
        {
            let (lock, wake) = &*self.shared;
            lock.lock().unwrap_or_else(|e| e.into_inner()).done = true;
            wake.notify_all();
        }
        if let Some(thread) = self.heartbeat.take() {
            let _ = thread.join();
        }
    }

    /// Prints one line on stderr, above the spinners when there are some.
    fn line(&self, line: String) {
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(line);
            }
            None => eprintln!("{line}"),
        }
    }

    /// A complete line of stage `index`'s output: the stage's last line, and with
    /// `--verbose` printed with its name.
    fn output_line(&mut self, index: usize, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = shown(text.trim_end_matches(['\r', '\n']));
        if text.trim().is_empty() {
            return;
        }
        let name = {
            let (lock, _) = &*self.shared;
            let mut shared = lock.lock().unwrap_or_else(|e| e.into_inner());
            let Some(running) = shared.running.get_mut(&index) else {
                return;
            };
            running.last_line = Some(text.clone());
            running.name.clone()
        };
        if self.settings.verbose {
            self.line(format!("[{name}] {text}"));
        } else if let Some(Some(bar)) = self.bars.get(index) {
            bar.set_message(format!("{name}: {}", last_line_cut(&text)));
        }
    }
}

impl Drop for VerifyView {
    fn drop(&mut self) {
        self.stop_heartbeat();
    }
}

/// The heartbeat thread: every `every`, a line for each stage running that long since it
/// started or last said so. Wakes when the view ends.
fn heartbeat(shared: &(Mutex<Shared>, Condvar), every: Duration) {
    let (lock, wake) = shared;
    let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if state.done {
            return;
        }
        let now = Instant::now();
        let next = state
            .running
            .values()
            .map(|r| r.reported + every)
            .min()
            .unwrap_or(now + every);
        if next > now {
            state = wake
                .wait_timeout(state, next - now)
                .map(|(s, _)| s)
                .unwrap_or_else(|e| e.into_inner().0);
            continue;
        }
        for running in state.running.values_mut() {
            if running.reported + every <= now {
                running.reported = now;
                eprintln!(
                    "… {} ({}) still running, {}{}",
                    running.name,
                    running.category,
                    elapsed(running.started.elapsed()),
                    running
                        .last_line
                        .as_deref()
                        .map(|l| format!(": {}", last_line_cut(l)))
                        .unwrap_or_else(|| ", no output yet".into())
                );
            }
        }
    }
}

/// `0.7s`, `42s`, `10m 3s`.
fn elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..10 => format!("{:.1}s", d.as_secs_f64()),
        10..60 => format!("{secs}s"),
        _ => format!("{}m {}s", secs / 60, secs % 60),
    }
}

/// A line of output short enough for one line of status.
fn last_line_cut(line: &str) -> String {
    const MOST: usize = 160;
    let line = line.trim();
    if line.chars().count() <= MOST {
        return line.to_owned();
    }
    let cut: String = line.chars().take(MOST).collect();
    format!("{cut}…")
}

fn mark(status: StageStatus) -> &'static str {
    match status {
        StageStatus::Pass => "✓ pass",
        StageStatus::Fail => "✗ fail",
        StageStatus::Timeout => "✗ timeout",
        StageStatus::Error => "! error",
        StageStatus::Skipped => "- skipped",
    }
}

impl VerifyObserver for VerifyView {
    fn planned(&mut self, plan: &Plan) {
        self.bars = vec![None; plan.stages.len()];
        self.indices = plan
            .stages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.stage.name.clone(), i))
            .collect();
        // The first line says what is verified.
        self.line(format!(
            "cordon verify: {} — {} stage(s)",
            plan.subject
                .as_ref()
                .map_or_else(|| "?".to_owned(), |s| shown(&s.summary)),
            plan.stages.len()
        ));
    }

    fn stage_started(&mut self, index: usize, stage: &StageConfig) {
        let now = Instant::now();
        {
            let (lock, wake) = &*self.shared;
            let mut shared = lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.running.insert(
                index,
                Running {
                    name: shown(&stage.name),
                    category: stage.category.as_str(),
                    started: now,
                    reported: now,
                    last_line: None,
                },
            );
            wake.notify_all();
        }
        match &self.multi {
            Some(multi) => {
                let bar = multi.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_message(format!(
                    "{} ({})",
                    shown(&stage.name),
                    stage.category.as_str()
                ));
                bar.enable_steady_tick(Duration::from_millis(100));
                if let Some(slot) = self.bars.get_mut(index) {
                    *slot = Some(bar);
                }
            }
            None => eprintln!("▶ {} ({}) ...", shown(&stage.name), stage.category.as_str()),
        }
    }

    fn output(&mut self, stage: &str, stream: Stream, bytes: &[u8]) {
        let Some(&index) = self.indices.get(stage) else {
            return;
        };
        let key = (index, matches!(stream, Stream::Stderr));
        let mut pending = self.partial.remove(&key).unwrap_or_default();
        pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
            let line = pending[start..start + end].to_vec();
            self.output_line(index, &line);
            start += end + 1;
        }
        pending.drain(..start);
        // A line without an end is kept for the next bytes, up to a bound.
        if pending.len() > 64 * 1024 {
            self.output_line(index, &pending);
            pending.clear();
        }
        if !pending.is_empty() {
            self.partial.insert(key, pending);
        }
    }

    fn stage_finished(&mut self, index: usize, result: &StageResult) {
        for stderr in [false, true] {
            if let Some(rest) = self.partial.remove(&(index, stderr)) {
                self.output_line(index, &rest);
            }
        }
        {
            let (lock, _) = &*self.shared;
            lock.lock()
                .unwrap_or_else(|e| e.into_inner())
                .running
                .remove(&index);
        }
        let line = format!(
            "{} {} ({:.1}s){}",
            mark(result.status),
            shown(&result.name),
            result.duration_ms as f64 / 1000.0,
            result
                .failure
                .as_ref()
                .map(|f| format!(": {}", shown(&f.reason)))
                .or_else(|| result
                    .skip_reason
                    .as_ref()
                    .map(|r| format!(": {}", shown(r))))
                .unwrap_or_default()
        );
        match self.bars.get_mut(index).and_then(Option::take) {
            Some(bar) => bar.finish_with_message(line),
            None => self.line(line),
        }
        // One line per connection the stage's network proxy refused (the report lists them).
        let denied = result.network.iter().flat_map(|n| &n.denied);
        for d in denied {
            self.line(format!(
                "  network: denied {} — {}",
                shown(&cordon_proxy::describe(d)),
                shown(&d.reason)
            ));
        }
    }
}

/// Untrusted text (stage names, reasons, output lines) as one inert terminal line.
fn shown(text: &str) -> String {
    cordon_types::text::for_terminal_line(text)
}

//! Where a verification's time goes: one [`Phase`] per step (resolving the ref, the working
//! tree's snapshot, the workspace, the plan, the patch, the caches, each stage, each baseline
//! run, keeping the cache, removing the workspace), in the report's `timeline`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use cordon_types::Phase;

/// The phases of one verification, measured from its start. Shared by the stages' threads.
#[derive(Debug)]
pub(crate) struct Timeline {
    start: Instant,
    /// Each phase with the order it started in.
    phases: Mutex<Vec<(u64, Phase)>>,
    started: AtomicU64,
}

impl Timeline {
    /// A timeline starting now.
    pub(crate) fn new() -> Timeline {
        Timeline::since(Instant::now())
    }

    /// A timeline starting at `start`.
    pub(crate) fn since(start: Instant) -> Timeline {
        Timeline {
            start,
            phases: Mutex::new(Vec::new()),
            started: AtomicU64::new(0),
        }
    }

    /// Starts phase `phase` (of `stage`, for stage and baseline phases): it is recorded when
    /// the returned span ends or is dropped.
    pub(crate) fn span(&self, phase: &str, stage: Option<&str>) -> Span<'_> {
        Span {
            timeline: self,
            phase: phase.to_owned(),
            stage: stage.map(str::to_owned),
            started: Instant::now(),
            seq: self.started.fetch_add(1, Ordering::Relaxed),
            done: false,
        }
    }

    /// Runs `f` as phase `phase`.
    pub(crate) fn time<T>(&self, phase: &str, f: impl FnOnce() -> T) -> T {
        let _span = self.span(phase, None);
        f()
    }

    /// The phases so far, in the order they started.
    pub(crate) fn phases(&self) -> Vec<Phase> {
        let mut phases = self
            .phases
            .lock()
            .map(|p| p.clone())
            .unwrap_or_else(|e| e.into_inner().clone());
        phases.sort_by_key(|(seq, _)| *seq);
        phases.into_iter().map(|(_, phase)| phase).collect()
    }
}

/// A phase being measured.
pub(crate) struct Span<'a> {
    timeline: &'a Timeline,
    phase: String,
    stage: Option<String>,
    started: Instant,
    seq: u64,
    done: bool,
}

impl Span<'_> {
    /// Ends the phase now.
    pub(crate) fn end(mut self) {
        self.record();
    }

    fn record(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let phase = Phase {
            phase: std::mem::take(&mut self.phase),
            stage: self.stage.take(),
            start_ms: self.started.duration_since(self.timeline.start).as_millis() as u64,
            duration_ms: self.started.elapsed().as_millis() as u64,
        };
        let mut phases = match self.timeline.phases.lock() {
            Ok(phases) => phases,
            Err(e) => e.into_inner(),
        };
        phases.push((self.seq, phase));
    }
}

impl Drop for Span<'_> {
    fn drop(&mut self) {
        self.record();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_listed_in_the_order_they_started() {
        let timeline = Timeline::new();
        let outer = timeline.span("stage", Some("test"));
        timeline.time("baseline", || ());
        outer.end();
        let names: Vec<(String, Option<String>)> = timeline
            .phases()
            .into_iter()
            .map(|p| (p.phase, p.stage))
            .collect();
        assert_eq!(
            names,
            [
                ("stage".to_owned(), Some("test".to_owned())),
                ("baseline".to_owned(), None)
            ]
        );
    }
}

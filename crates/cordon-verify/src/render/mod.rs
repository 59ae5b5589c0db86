//! Renderings of a run report: JUnit XML (for CI test reporters), Markdown (for a pull-request
//! comment) and the terminal summary. Each shows the actionable lines — a failed stage's
//! findings (the failing test, `file:line`), or the end of whichever stream holds text — with
//! ANSI escapes stripped and the workspace's paths rewritten to the repository's.

mod junit;
mod markdown;
mod terminal;
mod text;

#[cfg(test)]
mod tests;

pub use junit::junit;
pub use markdown::markdown;
pub use terminal::terminal_summary;

use cordon_types::StageResult;

/// One line about a stage: why it failed or was skipped, else its test counts.
pub fn stage_note(stage: &StageResult) -> String {
    stage
        .failure
        .as_ref()
        .map(|f| f.reason.clone())
        .or_else(|| stage.skip_reason.clone())
        .or_else(|| {
            stage.tests.map(|t| {
                format!(
                    "{} passed, {} failed, {} ignored",
                    t.passed, t.failed, t.ignored
                )
            })
        })
        .map(|note| text::clean(&note))
        .unwrap_or_default()
}

//! `runs_show`, `runs_logs` and the `cordon://runs/<id>` resources: the run history, as
//! `cordon runs` reads it, limited to runs about a repository the agent may open.

use std::ops::ControlFlow;

use cordon_store::{ChunkBody, ChunkFilter, RunFilter, RunId, RunRecord, Stream};

use super::Local;
use crate::failure::ToolFailure;
use crate::inputs::{IdInput, LogEnd, RunsLogsInput, StreamName};
use crate::outputs::{RunLogs, RunLogsTag};
use crate::server::{Call, RunEntry, ToolOutput};

/// The default bytes of a transcript `runs_logs` returns.
const DEFAULT_LOG_BYTES: usize = 64 << 10;

/// The most bytes of a transcript `runs_logs` returns.
const MAX_LOG_BYTES: usize = 1 << 20;

/// How many recent runs the resources list.
const RECENT_RUNS: u32 = 50;

impl Local {
    /// Run `id`, when it is about a place the agent may open (any other is "not found").
    pub(super) fn visible_run(&self, id: &str, call: &Call) -> Result<RunRecord, ToolFailure> {
        let unknown = || ToolFailure::not_found(format!("no run {id} this server may show"));
        let run_id: RunId = id.parse().map_err(|_| unknown())?;
        self.store.mark_interrupted()?;
        let record = self.store.get_run(&run_id)?.ok_or_else(unknown)?;
        if !self.sees(
            record.run.repo.as_deref(),
            record.run.session.as_deref(),
            call,
        ) {
            return Err(unknown());
        }
        Ok(record)
    }

    pub(super) fn runs_show(&self, input: IdInput, call: &Call) -> Result<ToolOutput, ToolFailure> {
        let record = self.visible_run(&input.id, call)?;
        let summary = format!(
            "run {} {} ({} stage(s)){}",
            record.run.id,
            record.run.status,
            record.stages.len(),
            record
                .run
                .duration_ms
                .map(|ms| format!(" in {ms} ms"))
                .unwrap_or_default()
        );
        Ok(ToolOutput::of(&record, summary))
    }

    pub(super) fn runs_logs(
        &self,
        input: RunsLogsInput,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        let record = self.visible_run(&input.id, call)?;
        let id: RunId = input
            .id
            .parse()
            .map_err(|_| ToolFailure::not_found(format!("no run {}", input.id)))?;
        let max = input
            .max_bytes
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(DEFAULT_LOG_BYTES)
            .min(MAX_LOG_BYTES);
        let filter = ChunkFilter {
            stage: input.stage.clone(),
            stream: input.stream.map(|s| match s {
                StreamName::Stdout => Stream::Stdout,
                StreamName::Stderr => Stream::Stderr,
            }),
        };
        let mut kept: Vec<u8> = Vec::new();
        let (mut bytes, mut lost) = (0u64, 0u64);
        let _fed = self
            .store
            .for_each_chunk(&id, &filter, None, &mut |chunk| {
                match chunk.body {
                    ChunkBody::Data(data) => {
                        bytes += u64::try_from(data.len()).unwrap_or(u64::MAX);
                        match input.from {
                            LogEnd::Head if kept.len() < max => {
                                let room = max - kept.len();
                                kept.extend_from_slice(&data[..data.len().min(room)]);
                            }
                            LogEnd::Head => {}
                            LogEnd::Tail => {
                                kept.extend_from_slice(&data);
                                if kept.len() > 2 * max {
                                    kept.drain(..kept.len() - max);
                                }
                            }
                        }
                    }
                    ChunkBody::Lost { bytes: missing } => lost += missing,
                }
                ControlFlow::Continue(())
            })?;
        if kept.len() > max {
            kept.drain(..kept.len() - max);
        }
        let logs = RunLogs {
            schema: RunLogsTag,
            run_id: record.run.id.to_string(),
            truncated: u64::try_from(kept.len()).unwrap_or(u64::MAX) < bytes,
            text: String::from_utf8_lossy(&kept).into_owned(),
            bytes,
            lost_bytes: lost,
        };
        let summary = format!(
            "{} of {} bytes of run {}'s output{}:\n{}",
            kept.len(),
            bytes,
            logs.run_id,
            match (logs.truncated, input.from) {
                (false, _) => "",
                (true, LogEnd::Head) => " (its head)",
                (true, LogEnd::Tail) => " (its tail)",
            },
            logs.text
        );
        Ok(ToolOutput::of(&logs, summary))
    }

    /// Whether the agent may see a run about `repo`, made in `session`: a session's runs
    /// through the session's repository, others through their own.
    fn sees(&self, repo: Option<&str>, session: Option<&str>, call: &Call) -> bool {
        match session {
            Some(id) => self.open_session(id, call).is_ok(),
            None => repo.is_some_and(|r| self.bounds.allows(std::path::Path::new(r), call.roots())),
        }
    }

    /// The recent runs about places the agent may open, newest first.
    pub(super) fn recent(&self, call: &Call) -> Result<Vec<RunEntry>, ToolFailure> {
        self.store.mark_interrupted()?;
        let runs = self.store.list_runs(&RunFilter {
            limit: RECENT_RUNS,
            ..RunFilter::default()
        })?;
        Ok(runs
            .into_iter()
            .filter(|run| self.sees(run.repo.as_deref(), run.session.as_deref(), call))
            .map(|run| RunEntry {
                id: run.id.to_string(),
                description: format!(
                    "{} {}: {}",
                    run.kind.as_str(),
                    run.status,
                    command_text(&run.command)
                ),
            })
            .collect())
    }
}

/// A recorded command (a JSON array of strings) as one line.
fn command_text(command: &serde_json::Value) -> String {
    match command {
        serde_json::Value::Array(parts) => parts
            .iter()
            .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

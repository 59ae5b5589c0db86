//! Runs, stages and transcript chunks on SQLite.

use rusqlite::{Connection, Row};

use crate::backend::{Backend, EncodedChunk, TranscriptCursor};
use crate::error::StoreErrorKind;
use crate::model::{
    Chunk, ChunkFilter, NewRun, RunFilter, RunId, RunRecord, RunRecordTag, RunState, RunSummary,
    StageRecord, Stream,
};
use crate::owner::Owner;
use crate::rows::{
    RawChunk, decode_chunk, kind_filter, kind_str, parse_id, parse_json, parse_kind, parse_state,
    parse_stream, role_str, stage_status, to_i64, to_u64,
};
use crate::runlog::Entry;
use crate::sqlite::{SqliteBackend, optional};

/// Applies one record of the run log (every kind applies idempotently: ingesting a record
/// twice changes nothing, and records of a run the database does not hold are dropped).
pub(crate) fn apply_entry(tx: &Connection, entry: &Entry) -> Result<(), StoreErrorKind> {
    match entry {
        Entry::Begin {
            id,
            run,
            owner,
            started_at_ms,
        } => {
            insert_run(tx, id, run, owner, *started_at_ms)?;
        }
        Entry::Stage { id, stage } => {
            record_stage(tx, id, stage)?;
        }
        Entry::Chunks { id, chunks } => insert_chunks(tx, id, chunks, true)?,
        Entry::Finish {
            id,
            state,
            document,
            finished_at_ms,
        } => {
            let document = document.as_ref().map(|(s, d)| (s.as_str(), d.as_str()));
            finish_run(tx, id, *state, document, *finished_at_ms)?;
        }
    }
    Ok(())
}

fn insert_run(
    c: &Connection,
    id: &RunId,
    run: &NewRun,
    owner: &Owner,
    started_at_ms: i64,
) -> Result<bool, StoreErrorKind> {
    let changed = c
        .prepare_cached(
            "INSERT INTO runs (id, kind, status, repo, command, started_at_ms, owner_pid, \
             owner_start_time, owner_boot_id, host, session, role) \
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(rusqlite::params![
            id.as_str(),
            kind_str(run.kind),
            run.repo.as_deref(),
            run.command.to_string(),
            started_at_ms,
            owner.pid,
            owner.start_time,
            owner.boot_id.as_deref(),
            &owner.host,
            run.session.as_deref(),
            role_str(run.kind),
        ])?;
    Ok(changed == 1)
}

fn record_stage(c: &Connection, id: &RunId, stage: &StageRecord) -> Result<bool, StoreErrorKind> {
    let changed = c
        .prepare_cached(
            "INSERT INTO stages (run_id, idx, name, status, document) \
             SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?1) \
             ON CONFLICT (run_id, idx) DO UPDATE SET name = excluded.name, \
             status = excluded.status, document = excluded.document",
        )?
        .execute((
            id.as_str(),
            i64::from(stage.index),
            &stage.name,
            stage_status(stage),
            stage.document.to_string(),
        ))?;
    Ok(changed == 1)
}

fn finish_run(
    c: &Connection,
    id: &RunId,
    state: RunState,
    document: Option<(&str, &str)>,
    finished_at_ms: i64,
) -> Result<bool, StoreErrorKind> {
    let changed = c
        .prepare_cached(
            "UPDATE runs SET status = ?2, finished_at_ms = ?3, \
             duration_ms = MAX(0, ?3 - started_at_ms), document_schema = ?4, \
             document = ?5 WHERE id = ?1",
        )?
        .execute((
            id.as_str(),
            state.as_str(),
            finished_at_ms,
            document.map(|d| d.0),
            document.map(|d| d.1),
        ))?;
    Ok(changed == 1)
}

/// Inserts chunks; `from_log`: skipping those of a run the database does not hold and those
/// already there (a record ingested twice).
fn insert_chunks(
    c: &Connection,
    id: &RunId,
    chunks: &[EncodedChunk],
    from_log: bool,
) -> Result<(), StoreErrorKind> {
    let mut insert = c.prepare_cached(if from_log {
        "INSERT INTO transcript_chunks (run_id, seq, stage, stream, offset, at_ms, \
         encoding, raw_len, data) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 \
         WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?1) ON CONFLICT (run_id, seq) DO NOTHING"
    } else {
        "INSERT INTO transcript_chunks (run_id, seq, stage, stream, offset, at_ms, \
         encoding, raw_len, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
    })?;
    for chunk in chunks {
        let (encoding, raw_len, data) = chunk.data.columns();
        insert.execute(rusqlite::params![
            id.as_str(),
            to_i64(chunk.seq),
            chunk.stage.as_deref(),
            chunk.stream.as_str(),
            to_i64(chunk.offset),
            chunk.at_ms,
            encoding,
            to_i64(raw_len),
            data,
        ])?;
    }
    Ok(())
}

impl Backend for SqliteBackend {
    fn insert_run(
        &self,
        id: &RunId,
        run: &NewRun,
        owner: &Owner,
        started_at_ms: i64,
    ) -> Result<bool, StoreErrorKind> {
        if let Some(log) = self.deferred_log() {
            // Ids are 50 random bits: a clash is not checked here (ingesting keeps the first).
            let record = log.encode(&Entry::Begin {
                id: id.clone(),
                run: run.clone(),
                owner: owner.clone(),
                started_at_ms,
            })?;
            self.append_logged(log, &record)?;
            self.note_logged(id);
            return Ok(true);
        }
        self.ingest_runlog()?;
        self.with(|c| insert_run(c, id, run, owner, started_at_ms))
    }

    fn record_stage(&self, id: &RunId, stage: &StageRecord) -> Result<bool, StoreErrorKind> {
        if let Some(log) = self.log_of(id) {
            let record = log.encode(&Entry::Stage {
                id: id.clone(),
                stage: stage.clone(),
            })?;
            self.append_logged(log, &record)?;
            return Ok(true);
        }
        self.ingest_runlog()?;
        self.with(|c| record_stage(c, id, stage))
    }

    fn finish_run(
        &self,
        id: &RunId,
        state: RunState,
        document: Option<(&str, &serde_json::Value)>,
        finished_at_ms: i64,
    ) -> Result<bool, StoreErrorKind> {
        if let Some(log) = self.log_of(id) {
            // Not moved into the database here even when the log is large: the process is
            // about to exit, and the next reader (or recorder) does it.
            log.append(&log.encode_finish(id, state, document, finished_at_ms)?)?;
            return Ok(true);
        }
        self.ingest_runlog()?;
        let document = document.map(|(s, d)| (s, d.to_string()));
        let document = document.as_ref().map(|(s, d)| (*s, d.as_str()));
        self.with(|c| finish_run(c, id, state, document, finished_at_ms))
    }

    fn transcript_cursor(&self, id: &RunId) -> Result<TranscriptCursor, StoreErrorKind> {
        self.ingest_runlog()?;
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT stage, stream, MAX(offset + raw_len), MAX(seq) FROM transcript_chunks \
                 WHERE run_id = ?1 GROUP BY stage, stream",
            )?;
            let mut rows = statement.query([id.as_str()])?;
            let mut cursor = TranscriptCursor::default();
            while let Some(row) = rows.next()? {
                let stage: Option<String> = row.get(0)?;
                let stream = parse_stream(&row.get::<_, String>(1)?)?;
                let next: i64 = row.get(2)?;
                let last_seq: i64 = row.get(3)?;
                cursor.offsets.push(((stage, stream), to_u64(next)));
                cursor.next_seq = cursor.next_seq.max(to_u64(last_seq) + 1);
            }
            Ok(cursor)
        })
    }

    fn append_chunks(&self, id: &RunId, chunks: &[EncodedChunk]) -> Result<(), StoreErrorKind> {
        if let Some(log) = self.log_of(id) {
            let record = log.encode(&Entry::Chunks {
                id: id.clone(),
                chunks: chunks.to_vec(),
            })?;
            self.append_logged(log, &record)?;
            return Ok(());
        }
        self.ingest_runlog()?;
        self.write(|tx| insert_chunks(tx, id, chunks, false))
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreErrorKind> {
        self.ingest_runlog_for_read()?;
        self.with(|c| {
            let mut statement = c.prepare_cached(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM runs WHERE (?1 IS NULL OR status = ?1) \
                 AND (?2 IS NULL OR repo = ?2) AND (?4 IS NULL OR session = ?4) \
                 AND (?5 IS NULL OR kind = ?5) AND (?6 IS NULL OR COALESCE(role, '') = ?6) \
                 ORDER BY started_at_ms DESC, rowid DESC LIMIT ?3"
            ))?;
            let (kind, role) = kind_filter(filter.kind);
            let mut rows = statement.query((
                filter.status.map(RunState::as_str),
                filter.repo.as_deref(),
                i64::from(filter.limit),
                filter.session.as_deref(),
                kind,
                role,
            ))?;
            let mut runs = Vec::new();
            while let Some(row) = rows.next()? {
                runs.push(summary_from_row(row)?);
            }
            Ok(runs)
        })
    }

    fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreErrorKind> {
        self.ingest_runlog_for_read()?;
        self.with(|c| {
            let found = optional(
                c.prepare_cached(&format!(
                    "SELECT {SUMMARY_COLUMNS}, document_schema, document FROM runs WHERE id = ?1"
                ))?
                .query_row([id.as_str()], |row| {
                    Ok((
                        summary_from_row(row),
                        row.get::<_, Option<String>>("document_schema")?,
                        row.get::<_, Option<String>>("document")?,
                    ))
                }),
            )?;
            let Some((run, document_schema, document)) = found else {
                return Ok(None);
            };
            let document = document
                .map(|text| parse_json(&text, "document"))
                .transpose()?;
            let mut statement = c.prepare_cached(
                "SELECT idx, name, status, document FROM stages WHERE run_id = ?1 ORDER BY idx",
            )?;
            let mut rows = statement.query([id.as_str()])?;
            let mut stages = Vec::new();
            while let Some(row) = rows.next()? {
                let status: String = row.get(2)?;
                stages.push(StageRecord {
                    index: u32::try_from(row.get::<_, i64>(0)?).unwrap_or(u32::MAX),
                    name: row.get(1)?,
                    status: serde_json::from_value(serde_json::Value::String(status.clone()))
                        .map_err(|_| StoreErrorKind::Corrupt {
                            what: format!("stage status {status:?}"),
                        })?,
                    document: parse_json(&row.get::<_, String>(3)?, "stage document")?,
                });
            }
            Ok(Some(RunRecord {
                schema: RunRecordTag,
                run: run?,
                stages,
                document_schema,
                document,
            }))
        })
    }

    fn read_chunks(
        &self,
        id: &RunId,
        filter: &ChunkFilter,
        after_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<Chunk>, StoreErrorKind> {
        self.ingest_runlog_for_read()?;
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT seq, stage, stream, offset, at_ms, encoding, raw_len, data \
                 FROM transcript_chunks WHERE run_id = ?1 AND seq > ?2 \
                 AND (?3 IS NULL OR stage = ?3) AND (?4 IS NULL OR stream = ?4) \
                 ORDER BY seq LIMIT ?5",
            )?;
            let mut rows = statement.query((
                id.as_str(),
                after_seq.map_or(-1, to_i64),
                filter.stage.as_deref(),
                filter.stream.map(Stream::as_str),
                i64::from(limit),
            ))?;
            let mut chunks = Vec::new();
            while let Some(row) = rows.next()? {
                chunks.push(decode_chunk(RawChunk {
                    seq: row.get(0)?,
                    stage: row.get(1)?,
                    stream: row.get(2)?,
                    offset: row.get(3)?,
                    at_ms: row.get(4)?,
                    encoding: row.get(5)?,
                    raw_len: row.get(6)?,
                    data: row.get(7)?,
                })?);
            }
            Ok(chunks)
        })
    }

    fn run_owner(&self, id: &RunId) -> Result<Option<(RunState, Owner)>, StoreErrorKind> {
        self.ingest_runlog_for_read()?;
        self.with(|c| {
            let found = optional(
                c.prepare_cached(
                    "SELECT status, owner_pid, owner_start_time, owner_boot_id, host FROM runs \
                     WHERE id = ?1",
                )?
                .query_row([id.as_str()], |row| {
                    Ok((row.get::<_, String>(0)?, owner_from_row(row)?))
                }),
            )?;
            found
                .map(|(status, owner)| Ok((parse_state(&status)?, owner)))
                .transpose()
        })
    }

    fn running_runs(&self, host: &str) -> Result<Vec<(RunId, Owner)>, StoreErrorKind> {
        self.ingest_runlog_for_read()?;
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT id, owner_pid, owner_start_time, owner_boot_id, host FROM runs \
                 WHERE status = 'running' AND host = ?1",
            )?;
            let mut rows = statement.query([host])?;
            let mut running = Vec::new();
            while let Some(row) = rows.next()? {
                running.push((parse_id(&row.get::<_, String>(0)?)?, owner_from_row(row)?));
            }
            Ok(running)
        })
    }

    fn interrupt(&self, id: &RunId) -> Result<bool, StoreErrorKind> {
        self.ingest_runlog_for_read()?;
        self.with(|c| {
            let changed = c
                .prepare_cached(
                    "UPDATE runs SET status = 'interrupted', \
                     finished_at_ms = COALESCE((SELECT MAX(at_ms) FROM transcript_chunks \
                                                WHERE run_id = runs.id), started_at_ms), \
                     duration_ms = MAX(0, COALESCE((SELECT MAX(at_ms) FROM transcript_chunks \
                                    WHERE run_id = runs.id), started_at_ms) - started_at_ms) \
                     WHERE id = ?1 AND status = 'running'",
                )?
                .execute([id.as_str()])?;
            Ok(changed == 1)
        })
    }

    fn delete_started_before(&self, cutoff_ms: i64) -> Result<u64, StoreErrorKind> {
        self.ingest_runlog()?;
        self.write(|tx| {
            // Chunks and stages go with their runs (ON DELETE CASCADE); running runs are kept.
            let deleted = tx
                .prepare_cached(
                    "DELETE FROM runs WHERE started_at_ms < ?1 AND status != 'running'",
                )?
                .execute([cutoff_ms])?;
            Ok(deleted as u64)
        })
    }
}

/// The columns of [`RunSummary`], in [`summary_from_row`]'s order.
pub(crate) const SUMMARY_COLUMNS: &str = "id, kind, status, repo, session, command, \
                               started_at_ms, finished_at_ms, duration_ms, host, owner_pid, role";

fn summary_from_row(row: &Row<'_>) -> Result<RunSummary, StoreErrorKind> {
    Ok(RunSummary {
        id: parse_id(&row.get::<_, String>(0)?)?,
        kind: parse_kind(
            &row.get::<_, String>(1)?,
            row.get::<_, Option<String>>(11)?.as_deref(),
        )?,
        status: parse_state(&row.get::<_, String>(2)?)?,
        repo: row.get(3)?,
        session: row.get(4)?,
        command: parse_json(&row.get::<_, String>(5)?, "command")?,
        started_at_ms: row.get(6)?,
        finished_at_ms: row.get(7)?,
        duration_ms: row.get(8)?,
        host: row.get(9)?,
        owner_pid: row.get(10)?,
    })
}

fn owner_from_row(row: &Row<'_>) -> rusqlite::Result<Owner> {
    Ok(Owner {
        pid: row.get("owner_pid")?,
        start_time: row.get("owner_start_time")?,
        boot_id: row.get("owner_boot_id")?,
        host: row.get("host")?,
    })
}

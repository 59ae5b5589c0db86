//! Runs, stages and transcript chunks on PostgreSQL.

use sqlx::postgres::PgRow;

use crate::backend::{Backend, EncodedChunk, TranscriptCursor};
use crate::error::StoreErrorKind;
use crate::model::{
    Chunk, ChunkFilter, NewRun, RunFilter, RunId, RunRecord, RunRecordTag, RunState, RunSummary,
    StageRecord, Stream,
};
use crate::owner::Owner;
use crate::postgres::{PostgresBackend, get};
use crate::rows::{
    RawChunk, decode_chunk, kind_filter, kind_str, parse_id, parse_json, parse_kind, parse_state,
    parse_stream, role_str, stage_status, to_i64, to_u64,
};

const SUMMARY_COLUMNS: &str = "id, kind, status, repo, session, command, started_at_ms, \
                               finished_at_ms, duration_ms, host, owner_pid, role";

fn summary_from_row(row: &PgRow) -> Result<RunSummary, StoreErrorKind> {
    Ok(RunSummary {
        id: parse_id(&get::<String>(row, 0)?)?,
        kind: parse_kind(
            &get::<String>(row, 1)?,
            get::<Option<String>>(row, 11)?.as_deref(),
        )?,
        status: parse_state(&get::<String>(row, 2)?)?,
        repo: get(row, 3)?,
        session: get(row, 4)?,
        command: parse_json(&get::<String>(row, 5)?, "command")?,
        started_at_ms: get(row, 6)?,
        finished_at_ms: get(row, 7)?,
        duration_ms: get(row, 8)?,
        host: get(row, 9)?,
        owner_pid: get(row, 10)?,
    })
}

fn owner_from_row(row: &PgRow, first: usize) -> Result<Owner, StoreErrorKind> {
    Ok(Owner {
        pid: get(row, first)?,
        start_time: get(row, first + 1)?,
        boot_id: get(row, first + 2)?,
        host: get(row, first + 3)?,
    })
}

impl Backend for PostgresBackend {
    fn insert_run(
        &self,
        id: &RunId,
        run: &NewRun,
        owner: &Owner,
        started_at_ms: i64,
    ) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query(
                "INSERT INTO runs (id, kind, status, repo, command, started_at_ms, owner_pid, \
                 owner_start_time, owner_boot_id, host, session, role) \
                 VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(id.as_str())
            .bind(kind_str(run.kind))
            .bind(run.repo.as_deref())
            .bind(run.command.to_string())
            .bind(started_at_ms)
            .bind(owner.pid)
            .bind(owner.start_time)
            .bind(owner.boot_id.as_deref())
            .bind(&owner.host)
            .bind(run.session.as_deref())
            .bind(role_str(run.kind))
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    fn record_stage(&self, id: &RunId, stage: &StageRecord) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query(
                "INSERT INTO stages (run_id, idx, name, status, document) \
                 SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1) \
                 ON CONFLICT (run_id, idx) DO UPDATE SET name = excluded.name, \
                 status = excluded.status, document = excluded.document",
            )
            .bind(id.as_str())
            .bind(i64::from(stage.index))
            .bind(&stage.name)
            .bind(stage_status(stage))
            .bind(stage.document.to_string())
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    fn finish_run(
        &self,
        id: &RunId,
        state: RunState,
        document: Option<(&str, &serde_json::Value)>,
        finished_at_ms: i64,
    ) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query(
                "UPDATE runs SET status = $2, finished_at_ms = $3, \
                 duration_ms = GREATEST(0, $3 - started_at_ms), document_schema = $4, \
                 document = $5 WHERE id = $1",
            )
            .bind(id.as_str())
            .bind(state.as_str())
            .bind(finished_at_ms)
            .bind(document.map(|d| d.0))
            .bind(document.map(|d| d.1.to_string()))
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    fn transcript_cursor(&self, id: &RunId) -> Result<TranscriptCursor, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(
                "SELECT stage, stream, MAX(\"offset\" + raw_len), MAX(seq) \
                 FROM transcript_chunks WHERE run_id = $1 GROUP BY stage, stream",
            )
            .bind(id.as_str())
            .fetch_all(&self.pool)
            .await?;
            let mut cursor = TranscriptCursor::default();
            for row in &rows {
                let stage: Option<String> = get(row, 0)?;
                let stream = parse_stream(&get::<String>(row, 1)?)?;
                let next: i64 = get(row, 2)?;
                let last_seq: i64 = get(row, 3)?;
                cursor.offsets.push(((stage, stream), to_u64(next)));
                cursor.next_seq = cursor.next_seq.max(to_u64(last_seq) + 1);
            }
            Ok(cursor)
        })
    }

    fn append_chunks(&self, id: &RunId, chunks: &[EncodedChunk]) -> Result<(), StoreErrorKind> {
        self.run(async {
            let mut tx = self.pool.begin().await?;
            for chunk in chunks {
                let (encoding, raw_len, data) = chunk.data.columns();
                sqlx::query(
                    "INSERT INTO transcript_chunks (run_id, seq, stage, stream, \"offset\", \
                     at_ms, encoding, raw_len, data) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(id.as_str())
                .bind(to_i64(chunk.seq))
                .bind(chunk.stage.as_deref())
                .bind(chunk.stream.as_str())
                .bind(to_i64(chunk.offset))
                .bind(chunk.at_ms)
                .bind(encoding)
                .bind(to_i64(raw_len))
                .bind(data)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM runs WHERE ($1::text IS NULL OR status = $1) \
                 AND ($2::text IS NULL OR repo = $2) AND ($4::text IS NULL OR session = $4) \
                 AND ($5::text IS NULL OR kind = $5) \
                 AND ($6::text IS NULL OR COALESCE(role, '') = $6) \
                 ORDER BY started_at_ms DESC, seq DESC LIMIT $3"
            ))
            .bind(filter.status.map(RunState::as_str))
            .bind(filter.repo.as_deref())
            .bind(i64::from(filter.limit))
            .bind(filter.session.as_deref())
            .bind(kind_filter(filter.kind).0)
            .bind(kind_filter(filter.kind).1)
            .fetch_all(&self.pool)
            .await?;
            rows.iter().map(summary_from_row).collect()
        })
    }

    fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreErrorKind> {
        self.run(async {
            let Some(row) = sqlx::query(&format!(
                "SELECT {SUMMARY_COLUMNS}, document_schema, document FROM runs WHERE id = $1"
            ))
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?
            else {
                return Ok(None);
            };
            let run = summary_from_row(&row)?;
            // After the summary's twelve columns (0..=11).
            let document_schema: Option<String> = get(&row, 12)?;
            let document = get::<Option<String>>(&row, 13)?
                .map(|text| parse_json(&text, "document"))
                .transpose()?;
            let stage_rows = sqlx::query(
                "SELECT idx, name, status, document FROM stages WHERE run_id = $1 ORDER BY idx",
            )
            .bind(id.as_str())
            .fetch_all(&self.pool)
            .await?;
            let mut stages = Vec::with_capacity(stage_rows.len());
            for row in &stage_rows {
                let status: String = get(row, 2)?;
                stages.push(StageRecord {
                    index: u32::try_from(get::<i64>(row, 0)?).unwrap_or(u32::MAX),
                    name: get(row, 1)?,
                    status: serde_json::from_value(serde_json::Value::String(status.clone()))
                        .map_err(|_| StoreErrorKind::Corrupt {
                            what: format!("stage status {status:?}"),
                        })?,
                    document: parse_json(&get::<String>(row, 3)?, "stage document")?,
                });
            }
            Ok(Some(RunRecord {
                schema: RunRecordTag,
                run,
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
        self.run(async {
            let rows = sqlx::query(
                "SELECT seq, stage, stream, \"offset\", at_ms, encoding, raw_len, data \
                 FROM transcript_chunks WHERE run_id = $1 AND seq > $2 \
                 AND ($3::text IS NULL OR stage = $3) AND ($4::text IS NULL OR stream = $4) \
                 ORDER BY seq LIMIT $5",
            )
            .bind(id.as_str())
            .bind(after_seq.map_or(-1, to_i64))
            .bind(filter.stage.as_deref())
            .bind(filter.stream.map(Stream::as_str))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|row| {
                    decode_chunk(RawChunk {
                        seq: get(row, 0)?,
                        stage: get(row, 1)?,
                        stream: get(row, 2)?,
                        offset: get(row, 3)?,
                        at_ms: get(row, 4)?,
                        encoding: get(row, 5)?,
                        raw_len: get(row, 6)?,
                        data: get(row, 7)?,
                    })
                })
                .collect()
        })
    }

    fn run_owner(&self, id: &RunId) -> Result<Option<(RunState, Owner)>, StoreErrorKind> {
        self.run(async {
            let row = sqlx::query(
                "SELECT status, owner_pid, owner_start_time, owner_boot_id, host FROM runs \
                 WHERE id = $1",
            )
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
            row.map(|row| {
                Ok((
                    parse_state(&get::<String>(&row, 0)?)?,
                    owner_from_row(&row, 1)?,
                ))
            })
            .transpose()
        })
    }

    fn running_runs(&self, host: &str) -> Result<Vec<(RunId, Owner)>, StoreErrorKind> {
        self.run(async {
            let rows = sqlx::query(
                "SELECT id, owner_pid, owner_start_time, owner_boot_id, host FROM runs \
                 WHERE status = 'running' AND host = $1",
            )
            .bind(host)
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|row| Ok((parse_id(&get::<String>(row, 0)?)?, owner_from_row(row, 1)?)))
                .collect()
        })
    }

    fn interrupt(&self, id: &RunId) -> Result<bool, StoreErrorKind> {
        self.run(async {
            let done = sqlx::query(
                "UPDATE runs SET status = 'interrupted', \
                 finished_at_ms = COALESCE((SELECT MAX(at_ms) FROM transcript_chunks \
                                            WHERE run_id = runs.id), started_at_ms), \
                 duration_ms = GREATEST(0, COALESCE((SELECT MAX(at_ms) FROM transcript_chunks \
                                WHERE run_id = runs.id), started_at_ms) - started_at_ms) \
                 WHERE id = $1 AND status = 'running'",
            )
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    fn delete_started_before(&self, cutoff_ms: i64) -> Result<u64, StoreErrorKind> {
        self.run(async {
            let done =
                sqlx::query("DELETE FROM runs WHERE started_at_ms < $1 AND status != 'running'")
                    .bind(cutoff_ms)
                    .execute(&self.pool)
                    .await?;
            Ok(done.rows_affected())
        })
    }
}

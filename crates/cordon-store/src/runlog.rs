//! The run log: an append-only file next to an SQLite store where short-lived recorders
//! (`cordon run`, `cordon verify`) write their runs instead of opening the database.
//!
//! Opening SQLite, parsing its schema, rebuilding the WAL index and committing four small
//! transactions cost a recorded `cordon run` about 1.5 ms (BENCHMARKS.md, "Recording"); two
//! appends to this file cost a few system calls. Every reader of the run history moves what the
//! log holds into the database first ([`crate::sqlite::SqliteBackend::ingest_runlog`]), so a
//! reader always sees every run recorded before it read.
//!
//! **Crash safety** is the same as the database's with `synchronous=NORMAL`: an appended
//! record is in the kernel's page cache when `append` returns, so it survives the crash of the
//! process (a power loss may lose the last records). A run whose recorder died is marked
//! `interrupted` by the next reader, as before.
//!
//! **Format.** Records follow each other: `MAGIC` (4 bytes), the body's length (u32, little
//! endian), its CRC-32C (u32), the body. The body is a tag byte, the length of a JSON part
//! (u32), the JSON part, and (for transcript chunks) the chunks' bytes. A process killed in the
//! middle of a large `write` leaves a torn record, possibly followed by other processes'
//! records: the reader skips to the next `MAGIC` whose record checks out, and a run whose
//! records were lost that way keeps what arrived (its chunks without a run are dropped).
//!
//! **Locking.** Appenders hold a shared `flock` while they write one record with one `write`
//! (`O_APPEND`, so concurrent records never interleave); the ingester holds it exclusively
//! while it reads the log, commits its records in one transaction and truncates the log. So no
//! record is appended between the read and the truncation. A mutex does the same between
//! threads of one process (they share one open file, on which `flock` would only convert the
//! lock). Ingesting twice is harmless (every record applies idempotently), so a crash between
//! the commit and the truncation loses and duplicates nothing.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::backend::{EncodedChunk, EncodedData};
use crate::error::StoreErrorKind;
use crate::model::{NewRun, RunId, RunKind, RunState, StageRecord, Stream};
use crate::owner::Owner;

/// What every record starts with (`CRL` and the format's version, 1).
const MAGIC: [u8; 4] = *b"CRL1";
/// Bytes before a record's body: magic, length, checksum.
const HEADER: usize = 12;
/// The largest body a reader accepts; anything claiming more is corruption. Records are a
/// transcript batch at most (a few MiB).
const MAX_BODY: usize = 256 * 1024 * 1024;
/// Once an append leaves the log this large, the recorder moves it into the database itself,
/// so the log stays small (and an ingest's memory bounded) even when nobody reads the history.
pub(crate) const INGEST_AT_BYTES: u64 = 1024 * 1024;

const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// The log file of the store at `database`: `<database>-runlog`.
pub(crate) fn path_for(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push("-runlog");
    PathBuf::from(name)
}

/// An open run log.
#[derive(Debug)]
pub(crate) struct RunLog {
    path: PathBuf,
    file: Mutex<File>,
}

/// One record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    /// A run began (`insert_run`).
    Begin {
        id: RunId,
        run: NewRun,
        owner: Owner,
        started_at_ms: i64,
    },
    /// A stage ended (`record_stage`).
    Stage { id: RunId, stage: StageRecord },
    /// Transcript chunks (`append_chunks`).
    Chunks {
        id: RunId,
        chunks: Vec<EncodedChunk>,
    },
    /// The run ended (`finish_run`); its document as (schema, JSON text).
    Finish {
        id: RunId,
        state: RunState,
        document: Option<(String, String)>,
        finished_at_ms: i64,
    },
}

impl RunLog {
    /// Opens the log at `path`; with `create`, creates it (mode 0600) when missing, else
    /// `None` when it is missing. Never follows a symbolic link.
    pub(crate) fn open(path: &Path, create: bool) -> Result<Option<Self>, StoreErrorKind> {
        use std::os::unix::fs::OpenOptionsExt;
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(create)
            .mode(0o600)
            .custom_flags(libc_o_nofollow())
            .open(path);
        match opened {
            Ok(file) => Ok(Some(Self {
                path: path.to_owned(),
                file: Mutex::new(file),
            })),
            Err(error) if !create && error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreErrorKind::File {
                path: path.to_owned(),
                source,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, File> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn io_error(&self, source: std::io::Error) -> StoreErrorKind {
        StoreErrorKind::File {
            path: self.path.clone(),
            source,
        }
    }

    /// Appends one record made by [`encode`] (one `write`, under a shared lock); returns the
    /// log's size after it.
    pub(crate) fn append(&self, record: &[u8]) -> Result<u64, StoreErrorKind> {
        let file = self.lock();
        file.lock_shared().map_err(|e| self.io_error(e))?;
        let written = (&*file).write(record);
        let size = file.metadata().map(|m| m.len());
        let _ = file.unlock();
        match written {
            Ok(n) if n == record.len() => {}
            // A short append (the disk is full) leaves a torn record the reader skips.
            Ok(_) => {
                return Err(self.io_error(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "short write to the run log",
                )));
            }
            Err(error) => return Err(self.io_error(error)),
        }
        size.map_err(|e| self.io_error(e))
    }

    /// Whether the log holds nothing (one `fstat`).
    pub(crate) fn is_empty(&self) -> Result<bool, StoreErrorKind> {
        let file = self.lock();
        Ok(file.metadata().map_err(|e| self.io_error(e))?.len() == 0)
    }

    /// Reads the whole log under the exclusive lock and hands its records, in order, to
    /// `apply`; when every call succeeds, empties the log. Returns how many records there were.
    /// (The log stays small: recorders move it into the database once it holds
    /// [`INGEST_AT_BYTES`].)
    pub(crate) fn drain(
        &self,
        apply: impl FnOnce(&mut dyn Iterator<Item = Entry>) -> Result<(), StoreErrorKind>,
    ) -> Result<usize, StoreErrorKind> {
        let mut file = self.lock();
        file.lock().map_err(|e| self.io_error(e))?;
        let result = (|| {
            let mut bytes = Vec::new();
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.read_to_end(&mut bytes))
                .map_err(|e| self.io_error(e))?;
            if bytes.is_empty() {
                return Ok(0);
            }
            let mut records = Records {
                bytes: &bytes,
                at: 0,
                count: 0,
            };
            apply(&mut records)?;
            let count = records.count;
            file.set_len(0).map_err(|e| self.io_error(e))?;
            Ok(count)
        })();
        let _ = file.unlock();
        result
    }
}

/// The records of a log's bytes that check out, in order, skipping torn and corrupt
/// stretches.
pub(crate) struct Records<'a> {
    bytes: &'a [u8],
    at: usize,
    count: usize,
}

impl Iterator for Records<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        while self.at < self.bytes.len() {
            if let Some((entry, used)) = decode_one(&self.bytes[self.at..]) {
                self.at += used;
                self.count += 1;
                return Some(entry);
            }
            // Not a record here: on to the next place that starts like one.
            self.at = self.bytes[self.at + 1..]
                .windows(MAGIC.len())
                .position(|w| w == MAGIC)
                .map_or(self.bytes.len(), |p| self.at + 1 + p);
        }
        None
    }
}

fn libc_o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The JSON part of each kind of record.
#[derive(Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Meta {
    Begin {
        id: RunId,
        kind: RunKind,
        repo: Option<String>,
        session: Option<String>,
        command: serde_json::Value,
        started_at_ms: i64,
        pid: i64,
        start_time: Option<i64>,
        boot_id: Option<String>,
        host: String,
    },
    Stage {
        id: RunId,
        index: u32,
        name: String,
        status: cordon_types::StageStatus,
        document: serde_json::Value,
    },
    Chunks {
        id: RunId,
        chunks: Vec<ChunkMeta>,
    },
    /// The document's JSON text, when there is one, follows the JSON part.
    Finish {
        id: RunId,
        state: RunState,
        schema: Option<String>,
        finished_at_ms: i64,
    },
}

/// A chunk's columns; its bytes follow the JSON part, in order.
#[derive(Serialize, Deserialize)]
struct ChunkMeta {
    seq: u64,
    stage: Option<String>,
    stream: Stream,
    offset: u64,
    at_ms: i64,
    /// `lz4`, `raw` or `lost`.
    encoding: String,
    /// Bytes before compression (`lost`: bytes lost).
    raw_len: u64,
    /// Bytes of data that follow.
    len: usize,
}

/// The bytes of `entry`'s record.
pub(crate) fn encode(entry: &Entry) -> Result<Vec<u8>, StoreErrorKind> {
    let mut blob: Vec<u8> = Vec::new();
    let meta = match entry {
        Entry::Begin {
            id,
            run,
            owner,
            started_at_ms,
        } => Meta::Begin {
            id: id.clone(),
            kind: run.kind,
            repo: run.repo.clone(),
            session: run.session.clone(),
            command: run.command.clone(),
            started_at_ms: *started_at_ms,
            pid: owner.pid,
            start_time: owner.start_time,
            boot_id: owner.boot_id.clone(),
            host: owner.host.clone(),
        },
        Entry::Stage { id, stage } => Meta::Stage {
            id: id.clone(),
            index: stage.index,
            name: stage.name.clone(),
            status: stage.status,
            document: stage.document.clone(),
        },
        Entry::Chunks { id, chunks } => Meta::Chunks {
            id: id.clone(),
            chunks: chunks
                .iter()
                .map(|chunk| {
                    let (encoding, raw_len, data) = chunk.data.columns();
                    blob.extend_from_slice(data);
                    ChunkMeta {
                        seq: chunk.seq,
                        stage: chunk.stage.clone(),
                        stream: chunk.stream,
                        offset: chunk.offset,
                        at_ms: chunk.at_ms,
                        encoding: encoding.to_owned(),
                        raw_len,
                        len: data.len(),
                    }
                })
                .collect(),
        },
        Entry::Finish {
            id,
            state,
            document,
            finished_at_ms,
        } => {
            if let Some((_, text)) = document {
                blob.extend_from_slice(text.as_bytes());
            }
            Meta::Finish {
                id: id.clone(),
                state: *state,
                schema: document.as_ref().map(|d| d.0.clone()),
                finished_at_ms: *finished_at_ms,
            }
        }
    };
    record_of(&meta, |record| {
        record.extend_from_slice(&blob);
        Ok(())
    })
}

/// The bytes of the record of a run's end, its document serialized straight into the record
/// (a document may carry a megabyte of captured output: no intermediate copy of it).
pub(crate) fn encode_finish(
    id: &RunId,
    state: RunState,
    document: Option<(&str, &serde_json::Value)>,
    finished_at_ms: i64,
) -> Result<Vec<u8>, StoreErrorKind> {
    let meta = Meta::Finish {
        id: id.clone(),
        state,
        schema: document.map(|d| d.0.to_owned()),
        finished_at_ms,
    };
    record_of(&meta, |record| {
        if let Some((_, value)) = document {
            serde_json::to_writer(record, value).map_err(|e| StoreErrorKind::Corrupt {
                what: format!("run document: {e}"),
            })?;
        }
        Ok(())
    })
}

/// A record: the header, the tag, `meta` as JSON, then what `blob` appends; the length and
/// checksum filled in last.
fn record_of(
    meta: &Meta,
    blob: impl FnOnce(&mut Vec<u8>) -> Result<(), StoreErrorKind>,
) -> Result<Vec<u8>, StoreErrorKind> {
    let json = serde_json::to_vec(meta).map_err(|e| StoreErrorKind::Corrupt {
        what: format!("run log record: {e}"),
    })?;
    let mut record = Vec::with_capacity(HEADER + 5 + json.len());
    record.extend_from_slice(&MAGIC);
    record.extend_from_slice(&[0; 8]);
    record.push(1);
    record.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_le_bytes());
    record.extend_from_slice(&json);
    blob(&mut record)?;
    let body_len = record.len() - HEADER;
    if body_len > MAX_BODY {
        return Err(StoreErrorKind::Corrupt {
            what: format!("run log record of {body_len} bytes"),
        });
    }
    let crc = CRC.checksum(&record[HEADER..]);
    record[4..8].copy_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_le_bytes());
    record[8..12].copy_from_slice(&crc.to_le_bytes());
    Ok(record)
}

/// The record at the start of `bytes` and its length, or `None` when none checks out there.
fn decode_one(bytes: &[u8]) -> Option<(Entry, usize)> {
    if bytes.len() < HEADER || bytes[..4] != MAGIC {
        return None;
    }
    let body_len = usize::try_from(u32::from_le_bytes(bytes[4..8].try_into().ok()?)).ok()?;
    let crc = u32::from_le_bytes(bytes[8..12].try_into().ok()?);
    if body_len > MAX_BODY || bytes.len() - HEADER < body_len {
        return None;
    }
    let body = &bytes[HEADER..HEADER + body_len];
    if CRC.checksum(body) != crc || body.len() < 5 || body[0] != 1 {
        return None;
    }
    let json_len = usize::try_from(u32::from_le_bytes(body[1..5].try_into().ok()?)).ok()?;
    let json = body.get(5..5 + json_len)?;
    let blob = &body[5 + json_len..];
    let entry = match serde_json::from_slice::<Meta>(json).ok()? {
        Meta::Begin {
            id,
            kind,
            repo,
            session,
            command,
            started_at_ms,
            pid,
            start_time,
            boot_id,
            host,
        } => Entry::Begin {
            id,
            run: NewRun {
                kind,
                repo,
                session,
                command,
            },
            owner: Owner {
                pid,
                start_time,
                boot_id,
                host,
            },
            started_at_ms,
        },
        Meta::Stage {
            id,
            index,
            name,
            status,
            document,
        } => Entry::Stage {
            id,
            stage: StageRecord {
                index,
                name,
                status,
                document,
            },
        },
        Meta::Chunks { id, chunks } => {
            let mut rest = blob;
            let mut decoded = Vec::with_capacity(chunks.len());
            for meta in chunks {
                let data = rest.get(..meta.len)?;
                rest = &rest[meta.len..];
                let data = match meta.encoding.as_str() {
                    "lz4" => EncodedData::Lz4 {
                        raw_len: meta.raw_len,
                        bytes: data.to_vec(),
                    },
                    "raw" => EncodedData::Raw(data.to_vec()),
                    "lost" => EncodedData::Lost(meta.raw_len),
                    _ => return None,
                };
                decoded.push(EncodedChunk {
                    seq: meta.seq,
                    stage: meta.stage,
                    stream: meta.stream,
                    offset: meta.offset,
                    at_ms: meta.at_ms,
                    data,
                });
            }
            if !rest.is_empty() {
                return None;
            }
            Entry::Chunks {
                id,
                chunks: decoded,
            }
        }
        Meta::Finish {
            id,
            state,
            schema,
            finished_at_ms,
        } => {
            let document = match schema {
                Some(schema) => Some((schema, String::from_utf8(blob.to_vec()).ok()?)),
                None if blob.is_empty() => None,
                None => return None,
            };
            Entry::Finish {
                id,
                state,
                document,
                finished_at_ms,
            }
        }
    };
    Some((entry, HEADER + body_len))
}

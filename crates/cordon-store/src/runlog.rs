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
//! endian), a MAC of the body (HMAC-SHA-256, first 16 bytes), the body. The body is a tag byte,
//! the length of a JSON part (u32), the JSON part, and (for transcript chunks and documents)
//! the raw bytes. A process killed in the middle of a large `write` (or a full disk) leaves a
//! torn record, possibly followed by other processes' records: the reader skips to the next
//! `MAGIC` whose record authenticates, and a run whose records were lost that way keeps what
//! arrived (its chunks without a run are dropped). The MAC's key is a random file next to the
//! log (`-runlog.key`, mode 0600) that sandboxed programs never see: a program that prints
//! bytes shaped like records (they land verbatim in the log as its transcript) cannot make
//! the reader accept them after a torn record, as a checksum would. A record that
//! authenticates but that this build cannot read (a newer cordon's) stops the ingest with an
//! error and stays in the log. The log and its key must be regular files of this user with one
//! link each; anything else (a FIFO, a link to another file) is refused, naming the file.
//!
//! **Locking.** Appenders hold a shared `flock` while they write one record with one `write`
//! (`O_APPEND`, so concurrent records never interleave); the ingester takes the database's
//! write lock first, then the `flock` exclusively while it reads the log, commits its records
//! and truncates the log. So no record is appended between the read and the truncation, and
//! appenders never wait for the database. A mutex does the same between
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
/// Bytes of a record's MAC.
const MAC_LEN: usize = 16;
/// Bytes before a record's body: magic, length, MAC.
const HEADER: usize = 8 + MAC_LEN;
/// The largest body a reader accepts; anything claiming more is corruption. The largest
/// records are a transcript batch (at most the writer's 16 MiB buffer) and a run's document
/// (its captured output, JSON-escaped).
const MAX_BODY: usize = 64 * 1024 * 1024;
/// The largest log a reader reads: recorders move it into the database at 1 MiB, so a log
/// this large is not cordon's; the reader refuses it, naming the file.
const MAX_LOG: u64 = 1024 * 1024 * 1024;
/// Bytes of the MAC key.
const KEY_LEN: usize = 32;
/// Once an append leaves the log this large, the recorder moves it into the database itself,
/// so the log stays small (and an ingest's memory bounded) even when nobody reads the history.
pub(crate) const INGEST_AT_BYTES: u64 = 1024 * 1024;

type Mac = hmac::Hmac<sha2::Sha256>;

/// The log file of the store at `database`: `<database>-runlog`.
pub(crate) fn path_for(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push("-runlog");
    PathBuf::from(name)
}

/// The MAC key's file for the log at `log`: `<log>.key`.
fn key_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// An open run log.
pub(crate) struct RunLog {
    path: PathBuf,
    file: Mutex<File>,
    key: [u8; KEY_LEN],
}

impl std::fmt::Debug for RunLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLog")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Releases a `flock` when dropped (also when a panic unwinds through the holder).
struct Unlock<'a>(&'a File);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Opens `path` (creating it, mode 0600, when `create`), refusing anything but a regular file
/// of this user with one link; `None` when it is missing and not to be created.
fn open_private(path: &Path, create: bool, append: bool) -> Result<Option<File>, StoreErrorKind> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let fail = |source| StoreErrorKind::File {
        path: path.to_owned(),
        source,
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .append(append)
        .create(create)
        .mode(0o600)
        .custom_flags(libc_flags())
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(error) if !create && error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(fail(source)),
    };
    let meta = file.metadata().map_err(fail)?;
    let why = if !meta.file_type().is_file() {
        Some("is not a regular file")
    } else if meta.nlink() != 1 {
        Some("has more than one link")
    } else if meta.uid() != rustix::process::geteuid().as_raw() {
        Some("belongs to another user")
    } else {
        None
    };
    match why {
        Some(why) => Err(fail(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("cordon's run log {why}: move it away"),
        ))),
        None => Ok(Some(file)),
    }
}

/// The log's MAC key: read, or (with `create`) made when missing.
fn load_key(log: &Path, create: bool) -> Result<Option<[u8; KEY_LEN]>, StoreErrorKind> {
    let path = key_path(log);
    let fail = |source| StoreErrorKind::File {
        path: path.clone(),
        source,
    };
    if create && !path.exists() {
        // Written aside, then renamed into place without replacing: a concurrent opener sees
        // either no key or a whole one.
        use std::os::unix::fs::OpenOptionsExt;
        // Unique to this attempt: threads of one process (a watcher's reviewers) may make the
        // key at the same moment.
        static ATTEMPT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let attempt = ATTEMPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let aside = path.with_extension(format!("key.{}.{attempt}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_flags())
            .open(&aside)
            .map_err(fail)?;
        let mut key = [0u8; KEY_LEN];
        let made = getrandom::fill(&mut key)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|()| file.write_all(&key))
            .and_then(|()| file.sync_all())
            .and_then(|()| {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &aside,
                    rustix::fs::CWD,
                    &path,
                    rustix::fs::RenameFlags::NOREPLACE,
                )
                .map_err(std::io::Error::from)
            });
        let _ = std::fs::remove_file(&aside);
        match made {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(fail(source)),
        }
    }
    let Some(mut file) = open_private(&path, false, false)? else {
        return Ok(None);
    };
    let mut key = [0u8; KEY_LEN];
    let mut extra = [0u8; 1];
    file.read_exact(&mut key).map_err(fail)?;
    if file.read(&mut extra).map_err(fail)? != 0 {
        return Err(fail(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the run log's key is longer than a key: move it away",
        )));
    }
    Ok(Some(key))
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
    /// Opens the log at `path` and its key; with `create`, creates them (mode 0600) when
    /// missing, else `None` when either is missing. Never follows a symbolic link; refuses
    /// anything but regular files of this user with one link.
    pub(crate) fn open(path: &Path, create: bool) -> Result<Option<Self>, StoreErrorKind> {
        let Some(key) = load_key(path, create)? else {
            return Ok(None);
        };
        let Some(file) = open_private(path, create, true)? else {
            return Ok(None);
        };
        Ok(Some(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
            key,
        }))
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
        let unlock = Unlock(&file);
        let written = (&*file).write(record);
        let size = file.metadata().map(|m| m.len());
        drop(unlock);
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
    /// `apply`; when `apply` succeeds (it commits them), empties the log. Returns how many
    /// records there were. (The log stays small: recorders move it into the database once it
    /// holds [`INGEST_AT_BYTES`].)
    pub(crate) fn drain(
        &self,
        apply: impl FnOnce(&mut dyn Iterator<Item = Entry>) -> Result<(), StoreErrorKind>,
    ) -> Result<usize, StoreErrorKind> {
        let file = self.lock();
        file.lock().map_err(|e| self.io_error(e))?;
        let _unlock = Unlock(&file);
        let size = file.metadata().map_err(|e| self.io_error(e))?.len();
        if size > MAX_LOG {
            return Err(self.io_error(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the run log holds {size} bytes, more than cordon ever writes there: \
                     move it away"
                ),
            )));
        }
        let mut bytes = Vec::new();
        (&*file)
            .seek(SeekFrom::Start(0))
            .and_then(|_| (&*file).read_to_end(&mut bytes))
            .map_err(|e| self.io_error(e))?;
        if bytes.is_empty() {
            return Ok(0);
        }
        let mut records = Records {
            bytes: &bytes,
            key: &self.key,
            at: 0,
            count: 0,
            budget: bytes.len().saturating_mul(2).max(MAX_BODY),
            resyncing: false,
            unreadable: false,
        };
        apply(&mut records)?;
        if records.unreadable {
            // `apply` stopped at it; nothing after it was applied either, and the log is kept.
            return Err(StoreErrorKind::Corrupt {
                what: format!(
                    "{}: a record this cordon cannot read (written by a newer cordon?); \
                     read the history with that cordon",
                    self.path.display()
                ),
            });
        }
        let count = records.count;
        file.set_len(0).map_err(|e| self.io_error(e))?;
        Ok(count)
    }
}

/// The records of a log's bytes that authenticate, in order, skipping torn and corrupt
/// stretches. Looking for the next record after a bad stretch costs a MAC over each candidate
/// `MAGIC`'s claimed body; that work is bounded by `budget` (a hostile log cannot make an
/// ingest take quadratic time), after which the rest is dropped as garbage.
pub(crate) struct Records<'a> {
    bytes: &'a [u8],
    key: &'a [u8; KEY_LEN],
    at: usize,
    count: usize,
    budget: usize,
    resyncing: bool,
    /// Stopped at a record that authenticates but cannot be read.
    unreadable: bool,
}

impl Iterator for Records<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        while self.at < self.bytes.len() && !self.unreadable {
            match decode_one(
                &self.bytes[self.at..],
                self.key,
                &mut self.budget,
                self.resyncing,
            ) {
                Decoded::Entry(entry, used) => {
                    self.at += used;
                    self.count += 1;
                    self.resyncing = false;
                    return Some(entry);
                }
                Decoded::Unreadable => {
                    self.unreadable = true;
                    return None;
                }
                Decoded::OutOfBudget => {
                    self.at = self.bytes.len();
                    return None;
                }
                Decoded::Invalid => {
                    // Not a record here: on to the next place that starts like one.
                    self.resyncing = true;
                    self.at = self.bytes[self.at + 1..]
                        .windows(MAGIC.len())
                        .position(|w| w == MAGIC)
                        .map_or(self.bytes.len(), |p| self.at + 1 + p);
                }
            }
        }
        None
    }
}

/// `O_NOFOLLOW | O_NONBLOCK`: never a symbolic link, and never a wait on a FIFO (which is
/// then refused as not a regular file).
fn libc_flags() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32
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

impl RunLog {
    /// The bytes of `entry`'s record.
    pub(crate) fn encode(&self, entry: &Entry) -> Result<Vec<u8>, StoreErrorKind> {
        encode(entry, &self.key)
    }

    /// The bytes of the record of a run's end (see [`encode_finish`]).
    pub(crate) fn encode_finish(
        &self,
        id: &RunId,
        state: RunState,
        document: Option<(&str, &serde_json::Value)>,
        finished_at_ms: i64,
    ) -> Result<Vec<u8>, StoreErrorKind> {
        encode_finish(id, state, document, finished_at_ms, &self.key)
    }
}

/// The bytes of `entry`'s record.
fn encode(entry: &Entry, key: &[u8; KEY_LEN]) -> Result<Vec<u8>, StoreErrorKind> {
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
    record_of(&meta, key, |record| {
        record.extend_from_slice(&blob);
        Ok(())
    })
}

/// The bytes of the record of a run's end, its document serialized straight into the record
/// (a document may carry a megabyte of captured output: no intermediate copy of it).
fn encode_finish(
    id: &RunId,
    state: RunState,
    document: Option<(&str, &serde_json::Value)>,
    finished_at_ms: i64,
    key: &[u8; KEY_LEN],
) -> Result<Vec<u8>, StoreErrorKind> {
    let meta = Meta::Finish {
        id: id.clone(),
        state,
        schema: document.map(|d| d.0.to_owned()),
        finished_at_ms,
    };
    record_of(&meta, key, |record| {
        if let Some((_, value)) = document {
            serde_json::to_writer(record, value).map_err(|e| StoreErrorKind::Corrupt {
                what: format!("run document: {e}"),
            })?;
        }
        Ok(())
    })
}

/// The MAC of a record's body.
fn mac_of(key: &[u8; KEY_LEN], body: &[u8]) -> [u8; MAC_LEN] {
    use hmac::Mac as _;
    let mut mac = Mac::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body);
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; MAC_LEN];
    out.copy_from_slice(&full[..MAC_LEN]);
    out
}

/// A record: the header, the tag, `meta` as JSON, then what `blob` appends; the length and
/// MAC filled in last.
fn record_of(
    meta: &Meta,
    key: &[u8; KEY_LEN],
    blob: impl FnOnce(&mut Vec<u8>) -> Result<(), StoreErrorKind>,
) -> Result<Vec<u8>, StoreErrorKind> {
    let json = serde_json::to_vec(meta).map_err(|e| StoreErrorKind::Corrupt {
        what: format!("run log record: {e}"),
    })?;
    let mut record = Vec::with_capacity(HEADER + 5 + json.len());
    record.extend_from_slice(&MAGIC);
    record.extend_from_slice(&[0; 4 + MAC_LEN]);
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
    let mac = mac_of(key, &record[HEADER..]);
    record[4..8].copy_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_le_bytes());
    record[8..HEADER].copy_from_slice(&mac);
    Ok(record)
}

/// What the bytes at a position hold.
enum Decoded {
    /// A record, and its length.
    Entry(Entry, usize),
    /// No record (torn, corrupt, or forged).
    Invalid,
    /// A record that authenticates but this build cannot read.
    Unreadable,
    /// Looking further would exceed the resynchronisation budget.
    OutOfBudget,
}

/// The record at the start of `bytes`. While `resyncing`, the MAC's work is charged to
/// `budget`.
fn decode_one(bytes: &[u8], key: &[u8; KEY_LEN], budget: &mut usize, resyncing: bool) -> Decoded {
    if bytes.len() < HEADER || bytes[..4] != MAGIC {
        return Decoded::Invalid;
    }
    let Ok(body_len) =
        usize::try_from(u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]))
    else {
        return Decoded::Invalid;
    };
    if body_len > MAX_BODY || bytes.len() - HEADER < body_len {
        return Decoded::Invalid;
    }
    if resyncing {
        if *budget < body_len {
            return Decoded::OutOfBudget;
        }
        *budget -= body_len;
    }
    let body = &bytes[HEADER..HEADER + body_len];
    let expected = mac_of(key, body);
    if !constant_time_eq(&expected, &bytes[8..HEADER]) {
        return Decoded::Invalid;
    }
    match parse_body(body) {
        Some(entry) => Decoded::Entry(entry, HEADER + body_len),
        None => Decoded::Unreadable,
    }
}

/// Compares MACs without an early exit.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The entry an authenticated body holds, or `None` when this build cannot read it.
fn parse_body(body: &[u8]) -> Option<Entry> {
    if body.len() < 5 || body[0] != 1 {
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
    Some(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_log() -> (tempfile::TempDir, RunLog) {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = RunLog::open(&dir.path().join("cordon.db-runlog"), true)
            .expect("open")
            .expect("created");
        (dir, log)
    }

    fn raw_append(log: &RunLog, bytes: &[u8]) {
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log.path)
            .expect("open")
            .write_all(bytes)
            .expect("append");
    }

    #[test]
    fn a_record_that_authenticates_but_cannot_be_read_stops_the_ingest_and_stays() {
        let (_dir, log) = temp_log();
        let id: RunId = "r-aaaaaaaaaa".parse().expect("id");
        let good = log
            .encode_finish(&id, RunState::Pass, None, 1)
            .expect("encode");
        log.append(&good).expect("append");
        // A record of a later format (tag 2), authenticated with the log's key.
        let body = [2u8, 0, 0, 0, 0];
        let mut record = MAGIC.to_vec();
        record.extend_from_slice(&(body.len() as u32).to_le_bytes());
        record.extend_from_slice(&mac_of(&log.key, &body));
        record.extend_from_slice(&body);
        log.append(&record).expect("append");
        let before = std::fs::read(&log.path).expect("read");
        let mut seen = 0;
        let error = log
            .drain(|records| {
                seen = records.count();
                Ok(())
            })
            .expect_err("refused");
        assert!(error.to_string().contains("cannot read"), "{error}");
        assert_eq!(seen, 1, "the record before it was read");
        assert_eq!(
            std::fs::read(&log.path).expect("read"),
            before,
            "the log is kept"
        );
    }

    #[test]
    fn a_hostile_log_costs_bounded_work_and_is_emptied() {
        let (_dir, log) = temp_log();
        // 64 Ki headers, each claiming a body that reaches far into the file: without a
        // budget, each costs a MAC over up to 1.5 MiB (about 100 GB in all).
        let total = 64 * 1024 * HEADER;
        let mut bytes = Vec::with_capacity(total);
        while bytes.len() < total {
            bytes.extend_from_slice(&MAGIC);
            bytes.extend_from_slice(&((total / 2) as u32).to_le_bytes());
            bytes.extend_from_slice(&[0u8; MAC_LEN]);
        }
        raw_append(&log, &bytes);
        let id: RunId = "r-bbbbbbbbbb".parse().expect("id");
        log.append(
            &log.encode_finish(&id, RunState::Pass, None, 1)
                .expect("encode"),
        )
        .expect("append");
        let started = std::time::Instant::now();
        let count = log
            .drain(|records| {
                records.for_each(drop);
                Ok(())
            })
            .expect("drained");
        // A generous bound that only a quadratic scan exceeds (it takes hours here).
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        assert!(count <= 1);
        assert_eq!(std::fs::metadata(&log.path).expect("stat").len(), 0);
    }

    #[test]
    fn every_kind_of_record_round_trips() {
        let (_dir, log) = temp_log();
        let id: RunId = "r-cccccccccc".parse().expect("id");
        let entries = vec![
            Entry::Begin {
                id: id.clone(),
                run: NewRun {
                    kind: RunKind::Verify,
                    repo: Some("/src".into()),
                    session: Some("s-1".into()),
                    command: serde_json::json!(["cordon", "verify"]),
                },
                owner: Owner {
                    pid: 7,
                    start_time: Some(9),
                    boot_id: Some("boot".into()),
                    host: "here".into(),
                },
                started_at_ms: 11,
            },
            Entry::Stage {
                id: id.clone(),
                stage: StageRecord {
                    index: 2,
                    name: "test".into(),
                    status: cordon_types::StageStatus::Fail,
                    document: serde_json::json!({"exit_code": 1}),
                },
            },
            Entry::Chunks {
                id: id.clone(),
                chunks: vec![
                    EncodedChunk {
                        seq: 0,
                        stage: Some("test".into()),
                        stream: Stream::Stderr,
                        offset: 0,
                        at_ms: 12,
                        data: EncodedData::encode(&[b'x'; 1000]),
                    },
                    EncodedChunk {
                        seq: 1,
                        stage: None,
                        stream: Stream::Stdout,
                        offset: 1000,
                        at_ms: 13,
                        data: EncodedData::Lost(77),
                    },
                ],
            },
        ];
        for entry in &entries {
            log.append(&log.encode(entry).expect("encode"))
                .expect("append");
        }
        let document = serde_json::json!({"schema": "s/v1", "out": "\u{0}CRL1"});
        log.append(
            &log.encode_finish(&id, RunState::Fail, Some(("s/v1", &document)), 14)
                .expect("encode"),
        )
        .expect("append");
        let mut read = Vec::new();
        log.drain(|records| {
            read.extend(records);
            Ok(())
        })
        .expect("drain");
        assert_eq!(&read[..3], &entries[..]);
        assert_eq!(
            read[3],
            Entry::Finish {
                id,
                state: RunState::Fail,
                document: Some(("s/v1".into(), document.to_string())),
                finished_at_ms: 14,
            }
        );
    }
}

-- cordon store, PostgreSQL, version 1: runs, their stages, and their transcripts.
-- Everything stored here was redacted by the caller before it reached the store.

CREATE TABLE runs (
    id               TEXT PRIMARY KEY NOT NULL,           -- r- + 10 base32 characters
    seq              BIGINT GENERATED ALWAYS AS IDENTITY, -- insertion order (ties of time)
    kind             TEXT NOT NULL CHECK (kind IN ('run', 'verify')),
    status           TEXT NOT NULL CHECK (status IN ('running', 'pass', 'fail', 'timeout',
                                                     'error', 'cancelled', 'interrupted')),
    repo             TEXT,                                -- canonical path, if any
    command          TEXT NOT NULL,                       -- JSON
    started_at_ms    BIGINT NOT NULL,                     -- Unix epoch, milliseconds
    finished_at_ms   BIGINT,
    duration_ms      BIGINT,
    owner_pid        BIGINT NOT NULL,
    owner_start_time BIGINT,                              -- /proc/<pid>/stat field 22
    owner_boot_id    TEXT,                                -- /proc/sys/kernel/random/boot_id
    host             TEXT NOT NULL,
    document_schema  TEXT,                                -- e.g. cordon.run-result/v1
    document         TEXT                                 -- JSON, stored as given
);
CREATE INDEX runs_by_start ON runs (started_at_ms);
CREATE INDEX runs_by_status ON runs (status, started_at_ms);

CREATE TABLE stages (
    run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    idx      BIGINT NOT NULL,
    name     TEXT NOT NULL,
    status   TEXT NOT NULL,
    document TEXT NOT NULL,                               -- JSON, stored as given
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE transcript_chunks (
    run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,                             -- order within the run, from 0
    stage    TEXT,                                        -- NULL for cordon run
    stream   TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    "offset" BIGINT NOT NULL,                             -- byte offset in (stage, stream)
    at_ms    BIGINT NOT NULL,                             -- when received, Unix epoch ms
    encoding TEXT NOT NULL CHECK (encoding IN ('lz4', 'raw', 'lost')),
    raw_len  BIGINT NOT NULL,                             -- bytes before compression (lost: bytes lost)
    data     BYTEA NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- cordon store, SQLite, version 5: what operators see of the job service — the workers and
-- their heartbeats, each attempt's own log, re-runs, token names and last use, and webhook
-- deliveries with every try.

ALTER TABLE jobs ADD COLUMN rerun_of TEXT;                -- the job this one re-runs
ALTER TABLE job_events ADD COLUMN attempt INTEGER;        -- the attempt that wrote it
ALTER TABLE api_tokens ADD COLUMN name TEXT;              -- what the operator called it
ALTER TABLE api_tokens ADD COLUMN last_used_at_ms INTEGER; -- to the minute

-- Events of a version-4 store belong to the attempt the job was at when they were read.
UPDATE job_events SET attempt = (SELECT attempt FROM jobs WHERE jobs.id = job_events.job_id);
CREATE INDEX job_events_by_attempt ON job_events (job_id, attempt, seq);

-- The processes that run jobs: registered at start, heartbeats while they live, removed when
-- they stop cleanly (a row whose heartbeat is older than its lease is a lost worker).
CREATE TABLE workers (
    name            TEXT PRIMARY KEY NOT NULL,
    host            TEXT NOT NULL,
    version         TEXT NOT NULL,
    pid             INTEGER NOT NULL,
    slots           INTEGER NOT NULL,
    lease_ms        INTEGER NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    heartbeat_at_ms INTEGER NOT NULL,
    draining        INTEGER NOT NULL DEFAULT 0
);

-- One row per webhook and job end: the job document to send (the same bytes on every try)
-- and where the delivery stands.
CREATE TABLE webhook_deliveries (
    id                 TEXT PRIMARY KEY NOT NULL,         -- d- + 10 base32 characters
    job_id             TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    project            TEXT NOT NULL,
    url                TEXT NOT NULL,
    secret             TEXT NOT NULL,                     -- the secret's name, never its value
    body               TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    tries              INTEGER NOT NULL DEFAULT 0,
    max_tries          INTEGER NOT NULL,
    next_at_ms         INTEGER NOT NULL,
    locked_until_ms    INTEGER,
    created_at_ms      INTEGER NOT NULL,
    finished_at_ms     INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_at_ms);
CREATE INDEX webhook_deliveries_by_job ON webhook_deliveries (job_id);

-- Every try of a delivery: when, what the receiver answered (or why there was no answer).
CREATE TABLE webhook_tries (
    delivery_id  TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    try          INTEGER NOT NULL,
    at_ms        INTEGER NOT NULL,
    duration_ms  INTEGER NOT NULL,
    status       INTEGER,                                 -- the HTTP status, if one came
    error        TEXT,                                    -- why it failed, if it did
    PRIMARY KEY (delivery_id, try)
);

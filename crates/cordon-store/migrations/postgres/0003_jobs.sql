-- cordon store, PostgreSQL, version 3: the job service's queue, attempts, live events, tokens
-- and audit trail. Inputs hold secret *names* only; events hold redacted output only.

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY NOT NULL,           -- j- + 10 base32 characters
    seq              BIGINT GENERATED ALWAYS AS IDENTITY, -- submission order (ties of time)
    project          TEXT NOT NULL,
    type             TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed',
                                                    'cancelled', 'interrupted')),
    priority         BIGINT NOT NULL DEFAULT 0,          -- higher first, within a project
    attempt          BIGINT NOT NULL DEFAULT 0,          -- attempts started so far
    max_attempts     BIGINT NOT NULL,
    timeout_ms       BIGINT NOT NULL,
    idempotency_key  TEXT,
    inputs           TEXT NOT NULL,                       -- JSON, as submitted (validated)
    result           TEXT,                                -- JSON: the type's output document
    failure          TEXT,                                -- JSON: {category, reason}
    cancel_requested BIGINT NOT NULL DEFAULT 0,
    created_at_ms    BIGINT NOT NULL,
    not_before_ms    BIGINT NOT NULL,                    -- a retry waits for its backoff
    started_at_ms    BIGINT,
    finished_at_ms   BIGINT,
    submitted_by     TEXT NOT NULL                        -- the token id
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (project, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_by_state ON jobs (state, project, priority DESC, created_at_ms);
CREATE INDEX jobs_by_project ON jobs (project, created_at_ms);

-- One row per attempt: the queue's ledger, the budgets' source and the fence of late writes.
CREATE TABLE job_attempts (
    job_id         TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt        BIGINT NOT NULL,
    project        TEXT NOT NULL,
    started_at_ms  BIGINT NOT NULL,
    finished_at_ms BIGINT,
    outcome        TEXT,                                  -- the job state it ended in, or 'retry'
    failure        TEXT,                                  -- JSON
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX job_attempts_by_project ON job_attempts (project, started_at_ms);

-- What a job's live log shows, in order: state changes, stage events, redacted output.
CREATE TABLE job_events (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq    BIGINT NOT NULL,                              -- from 1
    at_ms  BIGINT NOT NULL,
    kind   TEXT NOT NULL,                                 -- state | stage | output | result
    data   TEXT NOT NULL,                                 -- JSON
    PRIMARY KEY (job_id, seq)
);

CREATE TABLE api_tokens (
    id            TEXT PRIMARY KEY NOT NULL,              -- t- + 10 base32 characters
    hash          TEXT NOT NULL UNIQUE,                   -- SHA-256 of the secret, hex
    project       TEXT NOT NULL,
    scopes        TEXT NOT NULL,                          -- comma-separated
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT,
    revoked_at_ms BIGINT
);

CREATE TABLE audit (
    seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms   BIGINT NOT NULL,
    actor   TEXT NOT NULL,                                -- a token id, or 'cli'
    action  TEXT NOT NULL,
    target  TEXT NOT NULL,
    detail  TEXT NOT NULL                                 -- JSON
);

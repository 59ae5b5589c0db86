-- cordon store, PostgreSQL, version 2: a run made in a session names it.
ALTER TABLE runs ADD COLUMN session TEXT;                 -- the session's id, if any
CREATE INDEX runs_by_session ON runs (session, started_at_ms);

-- cordon store, PostgreSQL, version 7: a job may hold several of the concurrency limits' slots at
-- once (a session.compare of N candidates runs up to N verifications side by side): the
-- claim counts slots, not jobs, and the wall-clock budget charges an attempt's time once per
-- slot it held.

ALTER TABLE jobs ADD COLUMN slots BIGINT NOT NULL DEFAULT 1;

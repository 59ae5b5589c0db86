-- cordon store, PostgreSQL, version 4: jobs held by named workers under leases (many workers,
-- possibly on many machines, share one store), and the CPU time of each attempt.

ALTER TABLE jobs ADD COLUMN worker TEXT;                  -- who runs it (running jobs)
ALTER TABLE jobs ADD COLUMN lease_expires_at_ms BIGINT;  -- its lease; past it, reclaimed
ALTER TABLE job_attempts ADD COLUMN worker TEXT;          -- who ran this attempt
ALTER TABLE job_attempts ADD COLUMN cpu_ms BIGINT;       -- its CPU time, when measured

-- A job a version-3 store left running belonged to a single server without leases: it is
-- reclaimed like any expired lease (the next claim, or the restart's recovery).
UPDATE jobs SET lease_expires_at_ms = 0 WHERE state = 'running';

CREATE INDEX jobs_by_lease ON jobs (state, lease_expires_at_ms);
CREATE INDEX jobs_by_worker ON jobs (worker, state);
CREATE INDEX job_attempts_by_finish ON job_attempts (finished_at_ms);

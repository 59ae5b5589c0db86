-- cordon store, PostgreSQL, version 5: a run of the review watcher (its source polls,
-- reviewers, fixer) says so, so that `cordon runs list --kind` can tell them from the user's
-- own runs.
ALTER TABLE runs ADD COLUMN role TEXT;                    -- 'watch', or NULL

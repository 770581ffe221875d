-- 0008_run_log: how every run the site took part in ended. crff_run keeps
-- only the current run (and one in training), since publishing a run
-- deletes the others; this log keeps one row per run for as long as the
-- file lives.
--
-- status is completed (the run's results were published), refused (the
-- site refused the run before it sent anything computed from its rows, or
-- the coordinator refused the site) or failed (the run stopped for any
-- other reason: a site or the coordinator aborted it, a protocol error, a
-- numerical failure). reason says why, in the daemon's words, for refused
-- and failed runs; it names counts and rules, never row values.
CREATE TABLE crff_run_log (
    run      TEXT NOT NULL PRIMARY KEY,
    status   TEXT NOT NULL CHECK (status IN ('completed', 'refused', 'failed')),
    reason   TEXT,
    ended_at TEXT NOT NULL
);

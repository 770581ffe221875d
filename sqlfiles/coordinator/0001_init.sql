-- 0001_init: the coordinator's own SQLite file: its resumable state and a
-- log of runs.
--
-- The tables are created IF NOT EXISTS because coordinator files written
-- before this file had a schema version already hold them; opening such a
-- file applies this migration and records which of the later ones its
-- columns show it has (coordstore's adoption of a file without a version).

-- The schema version: one row per migration applied, as in a site's file.
CREATE TABLE IF NOT EXISTS crff_schema_version (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
);

-- The state of the run in progress, saved at each checkpoint.
CREATE TABLE IF NOT EXISTS crff_coordinator_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    run        TEXT NOT NULL,
    step       INTEGER NOT NULL,
    state      BLOB NOT NULL,      -- federation.EncodeState (JSON)
    saved_at   TEXT NOT NULL
);

-- One row per finished run: global_ate and global_se are the run's global
-- estimate and its spread (see 0002_aipw for what they hold since).
CREATE TABLE IF NOT EXISTS crff_coordinator_runs (
    run          TEXT PRIMARY KEY,
    finished_at  TEXT NOT NULL,
    global_ate   REAL NOT NULL,
    global_se    REAL,
    rows         INTEGER NOT NULL
);

-- How every run the coordinator started ended: status is completed,
-- refused (a site refused the run, or the coordinator refused a site) or
-- failed (any other reason: a silent site, a protocol error, a numerical
-- failure); reason says why for the latter two, naming sites and rules.
CREATE TABLE IF NOT EXISTS crff_coordinator_run_log (
    run      TEXT PRIMARY KEY,
    status   TEXT NOT NULL CHECK (status IN ('completed', 'refused', 'failed')),
    reason   TEXT,
    ended_at TEXT NOT NULL
);

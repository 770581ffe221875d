-- The coordinator's own SQLite file: its resumable state and a log of runs.
CREATE TABLE IF NOT EXISTS crff_coordinator_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    run        TEXT NOT NULL,
    step       INTEGER NOT NULL,
    state      BLOB NOT NULL,      -- federation.EncodeState (JSON)
    saved_at   TEXT NOT NULL
);
-- One row per finished run: global_ate is the AIPW estimate over every
-- site's rows with its standard error global_se and 95% interval
-- global_lower..global_upper; plugin_ate is the mean CausalRFF CATE. Rows
-- of files written before the AIPW estimate hold the plug-in ATE in
-- global_ate, a global_se that was not a standard error, and NULL in the
-- newer columns (see OpenStateDB).
CREATE TABLE IF NOT EXISTS crff_coordinator_runs (
    run          TEXT PRIMARY KEY,
    finished_at  TEXT NOT NULL,
    global_ate   REAL NOT NULL,
    global_se    REAL,
    rows         INTEGER NOT NULL,
    global_lower REAL,
    global_upper REAL,
    plugin_ate   REAL
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

-- The coordinator's own SQLite file: its resumable state and a log of runs.
CREATE TABLE IF NOT EXISTS crff_coordinator_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    run        TEXT NOT NULL,
    step       INTEGER NOT NULL,
    state      BLOB NOT NULL,      -- federation.EncodeState (JSON)
    saved_at   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS crff_coordinator_runs (
    run          TEXT PRIMARY KEY,
    finished_at  TEXT NOT NULL,
    global_ate   REAL NOT NULL,
    global_se    REAL,
    rows         INTEGER NOT NULL
);

-- 0001_init: crffd's own objects in a site file.
--
-- Every name starts with crff_. Nothing here reads or changes the user's
-- tables. Times are text in RFC 3339 UTC with milliseconds
-- (2026-01-02T15:04:05.000Z), which SQLite's date functions understand.
-- Row ids are stored without a declared type, so that an integer id stays an
-- integer and a text id stays a text, as in the user's table.

-- The schema version: one row per migration applied.
CREATE TABLE crff_schema_version (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
);

-- Training runs. A run is 'training' while its model is fitted and becomes
-- 'current' when its results are written; at most one run is current, and
-- publishing a run deletes every other run with everything that refers to it.
-- layout is JSON: the table, the columns read and the type of each covariate.
CREATE TABLE crff_run (
    run          TEXT NOT NULL PRIMARY KEY,
    state        TEXT NOT NULL CHECK (state IN ('training', 'current')),
    layout       TEXT NOT NULL CHECK (json_valid(layout)),
    started_at   TEXT NOT NULL,
    published_at TEXT
);
CREATE UNIQUE INDEX crff_run_one_current ON crff_run (state) WHERE state = 'current';

-- Model state: per run and model (propensity, outcome, latent), the round of
-- the last update and the site's effective weights and shared scalars as
-- named tensors. shape is a JSON array of dimensions; value holds the
-- float64 values in row-major order, 8 bytes each, little-endian.
CREATE TABLE crff_model (
    run      TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    model    TEXT NOT NULL,
    round    INTEGER NOT NULL CHECK (round >= 0),
    saved_at TEXT NOT NULL,
    PRIMARY KEY (run, model)
);
CREATE TABLE crff_model_tensor (
    run   TEXT NOT NULL,
    model TEXT NOT NULL,
    name  TEXT NOT NULL,
    shape TEXT NOT NULL CHECK (json_valid(shape)),
    value BLOB NOT NULL,
    PRIMARY KEY (run, model, name),
    FOREIGN KEY (run, model) REFERENCES crff_model (run, model) ON DELETE CASCADE
);

-- The CATE of every scored row of the current run: the mean of the sampled
-- effects, their standard deviation, their 2.5% and 97.5% quantiles, the
-- predicted outcomes under control and treatment, and the propensity.
CREATE TABLE crff_cate (
    row_id     NOT NULL PRIMARY KEY,
    cate       REAL NOT NULL,
    sd         REAL NOT NULL CHECK (sd >= 0),
    lower      REAL NOT NULL,
    upper      REAL NOT NULL CHECK (lower <= upper),
    y0         REAL NOT NULL,
    y1         REAL NOT NULL,
    propensity REAL NOT NULL CHECK (propensity BETWEEN 0 AND 1),
    run        TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    scored_at  TEXT NOT NULL
);

-- The average treatment effect of the current run: over this site's rows
-- (scope 'local') and over every site of the federation (scope 'global').
-- se is NULL when unknown.
CREATE TABLE crff_ate (
    scope       TEXT NOT NULL PRIMARY KEY CHECK (scope IN ('local', 'global')),
    ate         REAL NOT NULL,
    se          REAL CHECK (se >= 0),
    n           INTEGER NOT NULL CHECK (n > 0),
    run         TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    computed_at TEXT NOT NULL
);

-- The learned transfer factors λ from this site to each peer, per model.
CREATE TABLE crff_transfer (
    peer   TEXT NOT NULL,
    model  TEXT NOT NULL,
    lambda REAL NOT NULL CHECK (lambda BETWEEN 0 AND 1),
    run    TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    PRIMARY KEY (peer, model)
);

-- Rows left out of the current run by on_invalid: skip, one line per fault.
-- row_id is the id as stored (NULL when the id itself is NULL).
CREATE TABLE crff_rejected (
    row_id,
    column_name TEXT NOT NULL,
    reason      TEXT NOT NULL,
    run         TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    rejected_at TEXT NOT NULL
);
CREATE INDEX crff_rejected_row_id ON crff_rejected (row_id);

-- Every message envelope this site sent or received: what left the site, as
-- names and shapes, never values. tensors is a JSON array of
-- {"name": ..., "shape": [...]}; digest is the hex SHA-256 of the payload.
-- The log is append-only: an UPDATE is refused.
CREATE TABLE crff_audit (
    id        INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('sent', 'received')),
    peer      TEXT NOT NULL,
    kind      TEXT NOT NULL,
    run       TEXT NOT NULL,
    model     TEXT NOT NULL,
    round     INTEGER NOT NULL,
    tensors   TEXT NOT NULL CHECK (json_valid(tensors)),
    bytes     INTEGER NOT NULL CHECK (bytes >= 0),
    digest    TEXT NOT NULL
);
CREATE TRIGGER crff_audit_append_only BEFORE UPDATE ON crff_audit
BEGIN
    SELECT RAISE(ABORT, 'crff_audit is append-only');
END;

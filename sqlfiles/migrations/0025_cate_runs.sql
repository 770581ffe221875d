-- 0025_cate_runs: crff_cate becomes a view of the current run's rows of
-- crff_cate_rows, so that a run's CATEs can be written in many small
-- transactions before it is published, and the old run's deleted in many
-- small transactions after. Publishing a run is then one small
-- transaction (crff_run's state), and a reader sees the old run's rows or
-- the new run's, whole, while neither crffd nor the user's own writers
-- wait for a write of every row at once.
--
-- crff_cate_rows keeps the rows of any run: the current one, one being
-- written, and, until they are deleted, runs published over. Only the
-- current run's are crff_cate. Its primary key leads with the run, so
-- that one run's rows are one range of the table, written and deleted
-- range by range. It refers to no run (the old run is deleted from
-- crff_run when the new one is published, before its rows are).
CREATE TABLE crff_cate_rows (
    run         TEXT NOT NULL,
    row_id      NOT NULL,
    cate        REAL NOT NULL,
    latent_sd   REAL NOT NULL CHECK (latent_sd >= 0),
    latent_q025 REAL NOT NULL,
    latent_q975 REAL NOT NULL CHECK (latent_q025 <= latent_q975),
    y0          REAL NOT NULL,
    y1          REAL NOT NULL,
    propensity  REAL NOT NULL CHECK (propensity BETWEEN 0 AND 1),
    scored_at   TEXT NOT NULL,
    latent_cate REAL,
    se          REAL CHECK (se >= 0),
    lower       REAL,
    upper       REAL CHECK (upper >= lower),
    x_digest    BLOB CHECK (x_digest IS NULL OR length(x_digest) = 32),
    raw_cate    REAL,
    psi         REAL,
    psi_clipped INTEGER
        CHECK (psi_clipped IS NULL AND psi IS NULL OR psi IS NOT NULL AND psi_clipped IN (0, 1)),
    PRIMARY KEY (run, row_id)
) WITHOUT ROWID;

INSERT INTO crff_cate_rows (run, row_id, cate, latent_sd, latent_q025, latent_q975, y0, y1, propensity, scored_at,
                            latent_cate, se, lower, upper, x_digest, raw_cate, psi, psi_clipped)
SELECT run, row_id, cate, latent_sd, latent_q025, latent_q975, y0, y1, propensity, scored_at,
       latent_cate, se, lower, upper, x_digest, raw_cate, psi, psi_clipped
FROM crff_cate;

DROP TABLE crff_cate;

-- The columns in crff_cate's order before this migration, so that a
-- user's SELECT * reads the same columns as before.
CREATE VIEW crff_cate AS
SELECT row_id, cate, latent_sd, latent_q025, latent_q975, y0, y1, propensity, run, scored_at,
       latent_cate, se, lower, upper, x_digest, raw_cate, psi, psi_clipped
FROM crff_cate_rows
WHERE run = (SELECT run FROM crff_run WHERE state = 'current');

-- 0004_run_rows: the rows of every federated run the site took part in, as
-- row id and a SHA-256 digest of the values it trained on (covariates,
-- treatment and outcome). A long-lived site compares the rows of a new run
-- with those of every earlier one before it sends anything computed from
-- them: two runs whose rows differ by a few records would let the
-- difference of their sums name those records. The digests never leave the
-- site, so they are not keyed.
--
-- Runs here outlive crff_run: publishing a run deletes the earlier runs'
-- results but not their rows here, since what those runs sent is still
-- known to the coordinator. Deleting a run's rows here drops it from the
-- comparison.
CREATE TABLE crff_run_rows (
    run    TEXT NOT NULL,
    row_id NOT NULL,
    digest BLOB NOT NULL CHECK (length(digest) = 32),
    PRIMARY KEY (run, row_id)
) WITHOUT ROWID;

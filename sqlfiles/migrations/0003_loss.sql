-- 0003_loss: the training loss of each model per round, so that a report
-- can draw how training converged. loss is the objective the site computed
-- on its own rows at that round (J^(s)); it holds no row values. A run's
-- losses go with the run.
CREATE TABLE crff_loss (
    run   TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    model TEXT NOT NULL,
    round INTEGER NOT NULL CHECK (round >= 0),
    loss  REAL NOT NULL,
    PRIMARY KEY (run, model, round)
);

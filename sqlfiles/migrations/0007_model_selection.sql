-- 0007_model_selection: crff_model_selection lists the candidates of the
-- current run's model selection (model.estimator: auto), one row each.
--
-- loss is the candidate's mean doubly robust loss (ψ − τ̂(x))² over the
-- validation rows held out of training (n of them), se its standard
-- error; diff is the mean paired difference of the loss from the
-- reference candidate (negative: better) and diff_se its standard error.
-- chosen is 1 for the candidate whose CATE fills crff_cate. The table is
-- empty after a run without selection.
CREATE TABLE crff_model_selection (
    candidate   TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('latent', 'outcome', 'tlearner', 'dr')),
    kernel      TEXT,
    ridge       REAL CHECK (ridge > 0),
    loss        REAL NOT NULL,
    se          REAL NOT NULL CHECK (se >= 0),
    diff        REAL NOT NULL,
    diff_se     REAL NOT NULL CHECK (diff_se >= 0),
    chosen      INTEGER NOT NULL CHECK (chosen IN (0, 1)),
    n           INTEGER NOT NULL CHECK (n > 0),
    run         TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    computed_at TEXT NOT NULL
);

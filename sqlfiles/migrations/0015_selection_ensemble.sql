-- 0015_selection_ensemble: model selection chooses an ensemble. Its row
-- (kind 'ensemble', candidate 'ensemble') is the chosen one; member is 1
-- for the candidates it averages, those whose mean paired loss difference
-- from the candidate of least loss is within model.selection_z standard
-- errors. The ensemble's loss is that of the members' mean CATE before
-- its shift (the validation rows chose the members, so it flatters the
-- ensemble); its se and diff_se are NULL, since they would need fourth
-- moments of the residuals that sites do not send, and shift is the
-- constant added to the mean to re-centre it on the doubly robust ATE
-- (package selection documents the rule). SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt.
CREATE TABLE crff_model_selection_new (
    candidate   TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('latent', 'outcome', 'tlearner', 'dr', 'ensemble')),
    kernel      TEXT,
    ridge       REAL CHECK (ridge > 0),
    loss        REAL NOT NULL,
    se          REAL CHECK (se >= 0),
    diff        REAL NOT NULL,
    diff_se     REAL CHECK (diff_se >= 0),
    chosen      INTEGER NOT NULL CHECK (chosen IN (0, 1)),
    member      INTEGER NOT NULL DEFAULT 0 CHECK (member IN (0, 1)),
    shift       REAL,
    n           INTEGER NOT NULL CHECK (n > 0),
    run         TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    computed_at TEXT NOT NULL,
    CHECK (CASE WHEN kind = 'ensemble' THEN se IS NULL AND diff_se IS NULL AND shift IS NOT NULL
                ELSE se IS NOT NULL AND diff_se IS NOT NULL AND shift IS NULL END)
);
INSERT INTO crff_model_selection_new (candidate, kind, kernel, ridge, loss, se, diff, diff_se, chosen, member, n, run, computed_at)
    SELECT candidate, kind, kernel, ridge, loss, se, diff, diff_se, chosen, 0, n, run, computed_at FROM crff_model_selection;
DROP TABLE crff_model_selection;
ALTER TABLE crff_model_selection_new RENAME TO crff_model_selection;

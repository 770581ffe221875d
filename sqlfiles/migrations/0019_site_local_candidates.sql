-- 0019_site_local_candidates: a choice per site (model.selection_by_site)
-- adds the candidates 'site-tlearner' and 'site-dr', a T-learner and a
-- DR-learner solved from the site's own training rows alone, whose
-- regressions never leave the site. SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt as 0015 left it, with the two kinds.
CREATE TABLE crff_model_selection_new (
    candidate   TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('latent', 'outcome', 'tlearner', 'dr', 'site-tlearner', 'site-dr', 'ensemble')),
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
INSERT INTO crff_model_selection_new (candidate, kind, kernel, ridge, loss, se, diff, diff_se, chosen, member, shift, n, run, computed_at)
    SELECT candidate, kind, kernel, ridge, loss, se, diff, diff_se, chosen, member, shift, n, run, computed_at FROM crff_model_selection;
DROP TABLE crff_model_selection;
ALTER TABLE crff_model_selection_new RENAME TO crff_model_selection;

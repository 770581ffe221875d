-- 0022_whatif: what-if rows (issue 34). crff_whatif itself is created
-- when crffd knows the site's layout (the first published run): an integer
-- id and the run's covariate columns, which users fill with patients who
-- are not in the table. crff_whatif_cate holds each what-if row's CATE
-- under the current run, with its 95% interval (as crff_cate's), run and
-- scored_at; or, for a row crffd cannot score (a covariate missing, not a
-- number, or a binary covariate other than 0 or 1), NULL figures and the
-- error. digest identifies the covariate values that were scored, so that
-- an edited row is scored again; a deleted row's result is deleted.
CREATE TABLE crff_whatif_cate (
    id        INTEGER PRIMARY KEY,
    cate      REAL,
    lower     REAL,
    upper     REAL,
    run       TEXT NOT NULL,
    scored_at TEXT NOT NULL,
    error     TEXT,
    digest    TEXT NOT NULL,
    CHECK ((cate IS NULL) = (error IS NOT NULL))
);

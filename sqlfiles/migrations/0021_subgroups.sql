-- 0021_subgroups: subgroup effects asked in SQL (issue 34).
--
-- crff_subgroup is the users' table: one row per subgroup, its name and a
-- boolean SQL predicate over the columns of the site's own table (for
-- example age >= 65 AND sex = 1). crffd checks each predicate before use
-- (package subgroup: the site table's columns, literals, operators and a
-- short list of functions; no subquery, other table, schema, comment,
-- parameter or semicolon). A user may create the table beforehand with
-- these columns; crffd keeps it.
--
-- crff_gate holds each subgroup's effect, recomputed after every run and
-- every rescoring: scope 'local', over this site's scored rows that the
-- predicate selects and that have an AIPW score ψ. n, treated and control
-- count them; estimate is the AIPW group average treatment effect, the mean
-- ψ, with its standard error sd(ψ)/√n and 95% interval lower..upper;
-- plugin is the mean of the chosen estimator's CATEs before calibration
-- (crff_cate.raw_cate) over the same rows. A group with fewer than the
-- site's federation.min_arm_rows rows in either arm, a refused predicate
-- and one SQLite cannot run get NULL counts and figures, and reason says
-- why; the other subgroups are still computed. run is the run whose ψ
-- they are.
CREATE TABLE IF NOT EXISTS crff_subgroup (
    name      TEXT PRIMARY KEY,
    predicate TEXT NOT NULL
);
CREATE TABLE crff_gate (
    scope       TEXT NOT NULL CHECK (scope IN ('local', 'global')),
    subgroup    TEXT NOT NULL,
    n           INTEGER CHECK (n >= 0),
    treated     INTEGER CHECK (treated >= 0),
    control     INTEGER CHECK (control >= 0),
    estimate    REAL,
    se          REAL CHECK (se >= 0),
    lower       REAL,
    upper       REAL,
    plugin      REAL,
    reason      TEXT,
    run         TEXT NOT NULL,
    computed_at TEXT NOT NULL,
    PRIMARY KEY (scope, subgroup),
    CHECK ((estimate IS NULL) = (reason IS NOT NULL))
);

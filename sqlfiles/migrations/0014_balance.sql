-- 0014_balance: the diagnostics of crffd check (which crffd fit runs too)
-- before any estimate: one crff_check row per scope, local (this site's
-- rows) or global (every site's rows of the latest federated run, pooled by
-- the coordinator from the sites' sums), and one crff_check_covariate row
-- per covariate and scope. See package balance for the definitions: smd is
-- the standardised mean difference (treated − control over the pooled
-- unweighted standard deviation), smd_weighted the same after weighting by
-- a logistic propensity (1/e for treated rows, 1/(1−e) for controls). An
-- smd is NULL when the covariate separates the arms (its standard deviation
-- within both arms is 0 and the means differ). missing counts the NULL
-- fields of the column in the table (NULL for a global row). outside_*
-- count the rows of each arm whose propensity is outside [0.01, 0.99]
-- (package positivity's bounds). rank orders
-- the covariates by |smd|, 1 the most imbalanced.
CREATE TABLE crff_check (
    scope       TEXT PRIMARY KEY CHECK (scope IN ('local', 'global')),
    checked_at  TEXT NOT NULL,
    run         TEXT,
    sites       INTEGER NOT NULL CHECK (sites >= 1),
    treated     INTEGER NOT NULL CHECK (treated >= 0),
    control     INTEGER NOT NULL CHECK (control >= 0),
    left_out    INTEGER,
    ess_treated REAL,
    ess_control REAL,
    outside_treated INTEGER NOT NULL CHECK (outside_treated >= 0),
    outside_control INTEGER NOT NULL CHECK (outside_control >= 0),
    verdict     TEXT NOT NULL CHECK (verdict IN ('good', 'limited', 'poor')),
    reasons     TEXT,
    advice      TEXT NOT NULL
);

CREATE TABLE crff_check_covariate (
    scope                 TEXT NOT NULL REFERENCES crff_check (scope) ON DELETE CASCADE,
    position              INTEGER NOT NULL CHECK (position >= 0),
    rank                  INTEGER NOT NULL CHECK (rank >= 1),
    covariate             TEXT NOT NULL,
    type                  TEXT NOT NULL CHECK (type IN ('continuous', 'binary')),
    missing               INTEGER,
    mean_treated          REAL,
    mean_control          REAL,
    sd                    REAL,
    smd                   REAL,
    mean_treated_weighted REAL,
    mean_control_weighted REAL,
    smd_weighted          REAL,
    PRIMARY KEY (scope, position)
);

-- crff_balance: one row per covariate and scope, most imbalanced first,
-- with the scope's arm counts, effective sample sizes and overlap verdict.
-- imbalanced is 1 when |smd| > 0.1 (or smd is NULL), before weighting;
-- imbalanced_weighted the same after it.
CREATE VIEW crff_balance AS
SELECT c.scope, c.rank, c.covariate, c.type, c.missing,
       c.mean_treated, c.mean_control, c.smd,
       c.mean_treated_weighted, c.mean_control_weighted, c.smd_weighted,
       CASE WHEN c.smd IS NULL OR abs(c.smd) > 0.1 THEN 1 ELSE 0 END AS imbalanced,
       CASE WHEN c.smd_weighted IS NULL OR abs(c.smd_weighted) > 0.1 THEN 1 ELSE 0 END AS imbalanced_weighted,
       k.treated, k.control, k.ess_treated, k.ess_control, k.verdict, k.checked_at
FROM crff_check_covariate AS c
JOIN crff_check AS k ON k.scope = c.scope
ORDER BY c.scope DESC, c.rank;

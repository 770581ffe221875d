-- 0005_ate_estimators: crff_ate holds one row per scope and estimator.
--
-- estimator 'aipw' is the doubly robust, cross-fitted estimate: se is its
-- influence-function standard error and lower..upper its 95% interval;
-- clipped counts the rows whose propensity was clipped to [0.01, 0.99].
-- estimator 'plugin' is the mean of the CausalRFF CATEs (the paper's
-- estimate); it has no standard error, so se, lower, upper and clipped are
-- NULL.
--
-- The se of earlier files was the spread of the CATEs over the rows divided
-- by √n, which is not a standard error of the ATE: their rows become
-- 'plugin' rows with se NULL.
CREATE TABLE crff_ate_v5 (
    scope       TEXT NOT NULL CHECK (scope IN ('local', 'global')),
    estimator   TEXT NOT NULL CHECK (estimator IN ('aipw', 'plugin')),
    ate         REAL NOT NULL,
    se          REAL CHECK (se >= 0),
    lower       REAL,
    upper       REAL CHECK (upper >= lower),
    n           INTEGER NOT NULL CHECK (n > 0),
    clipped     INTEGER CHECK (clipped >= 0),
    run         TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    computed_at TEXT NOT NULL,
    PRIMARY KEY (scope, estimator)
);
INSERT INTO crff_ate_v5 (scope, estimator, ate, n, run, computed_at)
    SELECT scope, 'plugin', ate, n, run, computed_at FROM crff_ate;
DROP TABLE crff_ate;
ALTER TABLE crff_ate_v5 RENAME TO crff_ate;

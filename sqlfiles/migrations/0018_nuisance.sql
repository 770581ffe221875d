-- 0018_nuisance: crff_nuisance says how the current run chose the
-- nuisance models of its AIPW scores ψ (the super learner of
-- estimator.CrossFit), one row per model and learner.
--
-- model is the propensity or the outcome. learner names a candidate
-- ('glm': logistic regression and per-arm least squares on the
-- covariates; 'rff': CausalRFF's random-feature models), or 'stack', their
-- combination. weight is the learner's share of the stack (NULL on the
-- stack's own row); loss is the mean cross-validated loss over the n rows
-- cross-fitted: log loss for the propensity, squared error of the
-- observed arm's mean for the outcome (log loss for a binary outcome). The
-- weights were chosen on those same losses, so the stack's is optimistic.
-- The table is empty after a run whose ψ came from other models (a site
-- that releases its ATE with noise uses its private models).
CREATE TABLE crff_nuisance (
    model       TEXT NOT NULL CHECK (model IN ('propensity', 'outcome')),
    learner     TEXT NOT NULL,
    weight      REAL CHECK (weight IS NULL AND learner = 'stack' OR weight BETWEEN 0 AND 1),
    loss        REAL NOT NULL,
    n           INTEGER NOT NULL CHECK (n > 0),
    run         TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    computed_at TEXT NOT NULL,
    PRIMARY KEY (model, learner)
);

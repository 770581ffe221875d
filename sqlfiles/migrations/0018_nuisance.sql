-- 0018_nuisance: crff_nuisance says how the current run chose the
-- nuisance models of its AIPW scores ψ (the super learner of
-- estimator.CrossFit), one row per model and learner.
--
-- model is the propensity, or the outcome mean of the control arm (mu0)
-- or of the treated arm (mu1), each chosen on its own arm's rows. learner
-- names a candidate
-- ('glm': logistic regression and per-arm least squares on the
-- covariates; 'rff': CausalRFF's random-feature models), or 'stack', their
-- combination. weight is the learner's share of the stack (NULL on the
-- stack's own row); loss is the mean cross-validated loss over the n rows
-- it is taken on (every cross-fitted row for the propensity, the arm's
-- rows for mu0 and mu1): log loss for the propensity, squared error for an
-- outcome mean (log loss for a binary outcome). The
-- weights were chosen on those same losses, so the stack's is optimistic.
-- The table is empty after a run whose ψ came from other models (a site
-- that releases its ATE with noise uses its private models).
CREATE TABLE crff_nuisance (
    model       TEXT NOT NULL CHECK (model IN ('propensity', 'mu0', 'mu1')),
    learner     TEXT NOT NULL,
    weight      REAL CHECK (weight IS NULL AND learner = 'stack' OR weight BETWEEN 0 AND 1),
    loss        REAL NOT NULL,
    n           INTEGER NOT NULL CHECK (n > 0),
    run         TEXT NOT NULL REFERENCES crff_run (run) ON DELETE CASCADE,
    computed_at TEXT NOT NULL,
    PRIMARY KEY (model, learner)
);

-- 0024_heterogeneity: is the heterogeneity real, and whom to treat
-- (issue 35; package heterogeneity).
--
-- Every figure is computed from the AIPW scores ψ of the rows held out of
-- the CATE's training by model selection (model.validation_share), with the
-- chosen estimator's CATE before calibration (crff_cate.raw_cate) as τ̂:
-- τ̂ was not trained on them. A run without model selection trains τ̂ on
-- every row and writes none of these rows. A federated site writes its
-- own (scope 'local') from its own held-out rows and sends none of it. estimate, se and the 95%
-- interval lower..upper are normal; n counts the rows.
--
-- crff_heterogeneity, one row per statistic:
--   blp_ate, blp_het  the best linear predictor (Chernozhukov et al.), ψ on
--                     [1, τ̂ − τ̄] with HC1 errors: the ATE, and the loading
--                     on τ̂ (1: calibrated, 0: no heterogeneity captured);
--                     p_value of blp_het is one-sided, H0: loading ≤ 0.
--   gates_1..gates_5  the AIPW effect in each fifth of τ̂, lowest first;
--   gates_top_minus_bottom  the fifth minus the first.
--   autoc, qini       grf's RATE of the ranking by τ̂ (∫TOC, ∫q·TOC),
--                     standard errors holding the ranking fixed.
--   toc_10..toc_90    the TOC at 10%, …, 90% of rows: the mean ψ of the
--                     top q of τ̂ minus the mean of all.
-- crff_clan: each covariate's mean in the top and the bottom fifth of τ̂,
-- and their difference with Welch's standard error.
-- crff_policy: for a rule (cate_lower_above_0: treat when crff_cate.lower
-- > 0; cate_above_T: when τ̂ > T), the share of rows it treats, its AIPW
-- value mean(Γ0 + π·ψ) (Γ0 the control arm's score), and its gains over
-- treating no one, mean(π·ψ), and over treating everyone,
-- −mean((1 − π)·ψ), each with its standard error and interval.
CREATE TABLE crff_heterogeneity (
    scope       TEXT NOT NULL CHECK (scope IN ('local', 'global')),
    statistic   TEXT NOT NULL,
    estimate    REAL NOT NULL,
    se          REAL NOT NULL CHECK (se >= 0),
    lower       REAL NOT NULL,
    upper       REAL NOT NULL CHECK (upper >= lower),
    p_value     REAL CHECK (p_value BETWEEN 0 AND 1),
    n           INTEGER NOT NULL CHECK (n >= 0),
    run         TEXT NOT NULL,
    computed_at TEXT NOT NULL,
    PRIMARY KEY (scope, statistic)
);
CREATE TABLE crff_clan (
    scope         TEXT NOT NULL CHECK (scope IN ('local', 'global')),
    covariate     TEXT NOT NULL,
    top           REAL NOT NULL,
    top_se        REAL NOT NULL CHECK (top_se >= 0),
    bottom        REAL NOT NULL,
    bottom_se     REAL NOT NULL CHECK (bottom_se >= 0),
    difference    REAL NOT NULL,
    difference_se REAL NOT NULL CHECK (difference_se >= 0),
    lower         REAL NOT NULL,
    upper         REAL NOT NULL CHECK (upper >= lower),
    n_top         INTEGER NOT NULL CHECK (n_top >= 0),
    n_bottom      INTEGER NOT NULL CHECK (n_bottom >= 0),
    run           TEXT NOT NULL,
    computed_at   TEXT NOT NULL,
    PRIMARY KEY (scope, covariate)
);
CREATE TABLE crff_policy (
    scope            TEXT NOT NULL CHECK (scope IN ('local', 'global')),
    policy           TEXT NOT NULL,
    treats           REAL NOT NULL CHECK (treats BETWEEN 0 AND 1),
    value            REAL NOT NULL,
    value_se         REAL NOT NULL CHECK (value_se >= 0),
    value_lower      REAL NOT NULL,
    value_upper      REAL NOT NULL,
    gain_none        REAL NOT NULL,
    gain_none_se     REAL NOT NULL CHECK (gain_none_se >= 0),
    gain_none_lower  REAL NOT NULL,
    gain_none_upper  REAL NOT NULL,
    gain_all         REAL NOT NULL,
    gain_all_se      REAL NOT NULL CHECK (gain_all_se >= 0),
    gain_all_lower   REAL NOT NULL,
    gain_all_upper   REAL NOT NULL,
    n                INTEGER NOT NULL CHECK (n >= 0),
    run              TEXT NOT NULL,
    computed_at      TEXT NOT NULL,
    PRIMARY KEY (scope, policy)
);

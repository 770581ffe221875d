-- 0006_cate_intervals: crff_cate tells the reported CATE and its interval
-- apart from the CausalRFF model's own figures.
--
-- cate is the reported CATE: the CausalRFF CATE with a doubly robust
-- calibration (package inference, Calibration), se its standard error and
-- lower..upper its 95% interval for the CATE τ(x) = E[y(1) − y(0) | x], whose
-- coverage crffd eval measures. latent_cate is the paper's CATE, the mean of
-- the sampled effects ŷ1 − ŷ0 over the latent z, and latent_sd, latent_q025
-- and latent_q975 the standard deviation and 2.5% and 97.5% quantiles of
-- those samples with the fitted weights held fixed: a spread over z, not an
-- uncertainty interval.
--
-- Rows scored before this migration had only the latent figures, which
-- their sd, lower and upper were: they keep cate = latent_cate and get
-- NULL se, lower and upper.
ALTER TABLE crff_cate RENAME COLUMN sd TO latent_sd;
ALTER TABLE crff_cate RENAME COLUMN lower TO latent_q025;
ALTER TABLE crff_cate RENAME COLUMN upper TO latent_q975;
ALTER TABLE crff_cate ADD COLUMN latent_cate REAL;
UPDATE crff_cate SET latent_cate = cate;
ALTER TABLE crff_cate ADD COLUMN se REAL CHECK (se >= 0);
ALTER TABLE crff_cate ADD COLUMN lower REAL;
ALTER TABLE crff_cate ADD COLUMN upper REAL CHECK (upper >= lower);

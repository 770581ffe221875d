-- 0013_ate_private: private is 1 when rows of a differentially private
-- site went into the estimate (privacy.epsilon): for a local ATE, this
-- site's; for a global one, any site's of the run. The AIPW standard error
-- and interval of such a row are computed as if no noise had been added:
-- they do not cover the privacy noise, and over replicates they fall well
-- short of 95% (README, "Accuracy against ε"). Read them as the spread of
-- the scores, not as a confidence interval.
ALTER TABLE crff_ate ADD COLUMN private INTEGER NOT NULL DEFAULT 0 CHECK (private IN (0, 1));

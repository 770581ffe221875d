-- 0010_cate_scores: what crffd site needs to recompute the local ATEs of
-- crff_ate as rows are added, edited and deleted. raw_cate is the chosen
-- estimator's CATE before calibration (the plug-in ATE is its mean); psi is
-- the row's AIPW score ψ (the AIPW ATE is its mean), NULL when the row's
-- treatment or outcome is missing, and psi_clipped whether the propensity
-- in ψ was clipped to [0.01, 0.99]. All three are NULL in CATEs written
-- before this migration, whose local ATEs are then left as the run wrote
-- them.
ALTER TABLE crff_cate ADD COLUMN raw_cate REAL;
ALTER TABLE crff_cate ADD COLUMN psi REAL;
ALTER TABLE crff_cate ADD COLUMN psi_clipped INTEGER
    CHECK (psi_clipped IS NULL AND psi IS NULL OR psi IS NOT NULL AND psi_clipped IN (0, 1));

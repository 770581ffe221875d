-- 0020_selection_site_scores: under a choice per site
-- (model.selection_by_site), how this site's own choice came about. Each
-- candidate's paired loss difference from the site's best candidate (the
-- row with site_diff 0): site_diff ± site_diff_se pooled across sites by
-- random effects, which chose the site's members (member = 1 within
-- model.selection_z standard errors), and own_diff ± own_diff_se of this
-- site's own held-out rows alone; the pooling shrank own_diff towards the
-- other sites' differences by as much as they differ. All four are NULL
-- without a choice per site and on the ensemble's row; own_diff is NULL
-- at a site that held no rows out or noises its model selection.
ALTER TABLE crff_model_selection ADD COLUMN site_diff REAL;
ALTER TABLE crff_model_selection ADD COLUMN site_diff_se REAL CHECK (site_diff_se >= 0);
ALTER TABLE crff_model_selection ADD COLUMN own_diff REAL;
ALTER TABLE crff_model_selection ADD COLUMN own_diff_se REAL CHECK (own_diff_se >= 0);

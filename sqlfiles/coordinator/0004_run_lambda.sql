-- 0004_run_lambda: the learned transfer factors of each model, as a JSON
-- object of model name to matrix (row s: how much site s borrowed from
-- each site); NULL in runs recorded before it was kept.
ALTER TABLE crff_coordinator_runs ADD COLUMN lambda TEXT;

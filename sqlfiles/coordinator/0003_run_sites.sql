-- 0003_run_sites: the sites a run covered, as a JSON array; NULL in runs
-- recorded before coordinator.min_sites, which covered every configured
-- site.
ALTER TABLE crff_coordinator_runs ADD COLUMN sites TEXT;

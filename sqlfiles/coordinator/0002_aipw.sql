-- 0002_aipw: a finished run's global AIPW estimate. Since this migration
-- global_ate is the AIPW estimate over every site's rows with its standard
-- error global_se and 95% interval global_lower..global_upper, and
-- plugin_ate the mean CausalRFF CATE. Rows recorded before hold the plug-in
-- ATE in global_ate, a global_se that was not a standard error, and NULL in
-- these columns.
ALTER TABLE crff_coordinator_runs ADD COLUMN global_lower REAL;
ALTER TABLE crff_coordinator_runs ADD COLUMN global_upper REAL;
ALTER TABLE crff_coordinator_runs ADD COLUMN plugin_ate REAL;

INSERT OR REPLACE INTO crff_coordinator_runs (run, finished_at, global_ate, global_se, global_lower, global_upper, plugin_ate, rows, sites, lambda)
VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?, ?, ?, ?, ?, ?, ?, ?);

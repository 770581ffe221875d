// Package site is a site's daemon: it keeps the site file's effects up
// to date with the stored model, and, when the site belongs to a
// federation, takes part in the federation's training runs.
//
// Run polls the site's table every Config.PollInterval and scores, with
// the stored model of the current run and without retraining, the rows
// that have none: rows deleted since lose their CATE, rows whose
// covariates were edited are scored again, and the local ATEs are
// recomputed over the rows the table holds. A poll of an unchanged file
// costs two small queries. With Config.Federation set, Run instead
// answers the coordinator run after run (package federation), training
// each run on the table as it is when the run begins, refusing a run
// whose rows differ too little from an earlier run's, rejoining a run it
// took part in before a restart, and publishing each run's results in
// the site file through package pipeline; between runs it goes on
// scoring new rows with the latest run's model.
//
// A run that fails or is refused is logged and recorded in crff_run_log,
// and the site waits for the next. Run stops only when its context ends,
// after one pass with Config.Once, or for a failure no later run mends;
// such errors carry the exit status of package daemon.
package site

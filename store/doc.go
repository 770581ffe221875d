// Package store is everything crffd does with a site's SQLite file: opening
// it, reading and validating the site's records through the configured
// table or view, and writing model state, results and the audit log into
// crffd's own crff_ tables, where users query them with any SQLite client.
//
// # Opening
//
// [Open] checks that the file is an SQLite database ([ErrNotSQLite]),
// switches it to WAL mode, so that users can read while crffd writes, sets
// the busy timeout ([Options.BusyTimeout]; a lock held longer is
// [ErrLocked]) and foreign keys, and applies the schema migrations of
// package github.com/crffd/crffd/sql that the file lacks, recording the
// version in crff_schema_version. A file written by a newer crffd is refused
// ([ErrSchemaTooNew]). crffd never changes the user's tables: every object
// it creates is named crff_…, and reads go through read-only connections.
// The only writes to other tables are the ones a user asks for, with
// [Site.ImportCSV] and [Site.CreateTable].
//
// # Records
//
// A [Source] (decoded by viper from the site configuration) names the table
// or view and its columns. [Site.ReadRecords] resolves it into a [Layout]
// (the exact columns and the type of each covariate) and returns the rows as
// [Records], ready for the estimator. Every fault has its own
// [ValidationError], naming the file, table, column and the first offending
// row ids, and wrapping a sentinel error such as [ErrNull] or
// [ErrTreatment]. With on_invalid: skip the bad rows are left out and listed
// as [Rejection]s instead. Errors never carry a record's values, only ids.
//
// # Runs and results
//
// A training run is recorded with [Site.BeginRun], its model state saved
// with [Site.SaveModel], and its results published with
// [Site.WriteResults], which replaces the previous run's results: a
// reader in another process sees the old results or the new ones, never a
// mix, and a crash leaves one or the other. The CATEs, one row per scored
// row, are written in transactions of a bounded size under the new run
// (crff_cate_rows) before one small transaction makes it current, and
// the old run's deleted the same way after, so that neither crffd nor the
// user's own writers wait long for the file's write lock. Rows added to the
// user's table later are read with [Site.UnscoredRows] and their scores
// added with [Site.AppendScores].
//
// The crff_ objects users query:
//
//	crff_cate          a view of the current run's rows of crff_cate_rows: row_id, cate,
//	                   latent_sd, latent_q025, latent_q975, y0, y1, propensity, run,
//	                   scored_at, latent_cate, se, lower, upper, x_digest, raw_cate, psi,
//	                   psi_clipped
//	crff_ate           scope ('local' or 'global'), estimator ('aipw' or 'plugin'), ate, se, lower, upper, n, clipped, run, computed_at, sites, private
//	crff_transfer      peer, model, lambda, run
//	crff_rejected      row_id, column_name, reason, run, rejected_at
//	crff_model_selection candidate, kind, kernel, ridge, loss, se, diff, diff_se, chosen,
//	                   member, shift, n, run, computed_at, site_diff, site_diff_se,
//	                   own_diff, own_diff_se: the candidates of the run's model
//	                   selection, and the ensemble chosen from them
//	crff_nuisance      model, learner, weight, loss, n, run, computed_at: the super
//	                   learner's choice of the AIPW's propensity and outcome models
//	crff_audit         id, at, direction, peer, kind, run, model, round, tensors, bytes, digest
//	crff_cate_records  a view: every column of the user's table, then its CATE columns
//	crff_overlap       a view: bucket, lower, upper, treated, control, extreme, share; scored
//	                   rows per propensity bucket and arm, extreme for [0, 0.01) and [0.99, 1]
//	crff_positivity    a view: treated, control, outside, outside_share, warning; the
//	                   verdict by the rules of package positivity (warning NULL when they hold)
//	crff_loss          run, model, round, loss: the site's loss per round ([Site.AppendLoss])
//	crff_run_rows      run, row_id, digest: the rows of every federated run the site took
//	                   part in, as SHA-256 of their values ([Site.JoinRun])
//	crff_run_log       run, status ('completed', 'refused' or 'failed'), reason, ended_at:
//	                   how every federated run the site took part in ended ([Site.LogRun])
//
// and crffd's own bookkeeping: crff_schema_version, crff_run (runs, with
// their layout as JSON), crff_model and crff_model_tensor (model state:
// named tensors, values as little-endian float64 BLOBs).
//
// # Logging
//
// The store logs with log/slog to [Options.Logger], under the keys path,
// run, rows, rejected, table, columns, from and to; never a record's value.
// [Site.WriteResults] logs a warning with the keys path, run, treated,
// control and outside when the published scores fail a rule of package
// positivity (an arm below the soft minimum, or more than 5% of the
// propensities outside [0.01, 0.99]); its message says which, as
// crff_positivity does.
package store

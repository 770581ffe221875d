// Package dataset reads, writes and slices tables in the IHDP layout, the
// CSV format of the IHDP benchmark (Hill 2011, as distributed with CEVAE) that
// the CausalRFF paper and crffd use for every data set with known
// counterfactuals.
//
// # Layout
//
// A file has no header. Every row holds the same number of comma-separated
// numbers, at least six:
//
//	column 1   w           treatment, 0 or 1
//	column 2   y_factual   observed outcome y(w)
//	column 3   y_cfactual  counterfactual outcome y(1-w) (ground truth)
//	column 4   mu0         noiseless outcome under w=0 (ground truth)
//	column 5   mu1         noiseless outcome under w=1 (ground truth)
//	column 6…  x1, x2, …   covariates
//
// The IHDP files have 747 rows and 25 covariates, but any positive number of
// rows and covariates is accepted. Values must be finite: NaN and ±Inf are
// rejected, as are a treatment other than 0 or 1, rows of differing length and
// files without rows. Errors name the file and the 1-based row and column. No
// row is ever skipped silently; blank lines are not rows and are ignored.
//
// # Sources and splits
//
// A federated experiment cuts a table into sources, equal consecutive blocks of
// rows ([Table.Sources]), and each source into training, test and validation
// rows, again consecutive ([Table.Split]). For IHDP the paper uses three
// sources of 249 rows, each split 50/100/99.
//
// # Covariate types
//
// [InferSchema] marks a covariate binary when every one of its values is 0 or
// 1, and continuous otherwise. In the IHDP files x14 is coded 1/2 rather than
// 0/1, so it is reported as continuous; that is the expected result of the
// rule, not an error. Callers who prefer the CEVAE convention (x14-1, a
// Bernoulli column) recode it themselves before inferring the schema.
package dataset

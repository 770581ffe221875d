// Package records holds the rows of one site as a model sees them, and the
// schema every site of a federation shares.
//
// Data is a covariate matrix with a treatment and an outcome per row;
// Schema says which covariates, and whether the outcome, are 0/1. Moments
// summarise rows for standardisation without any row value, and RowKeys
// names each row by its content, so that a differentially private draw
// keyed by it follows the row wherever the row sits.
//
// Packages that read rows (dataset, store) produce Data and Schema, and
// packages that fit or score models (estimator, selection, federation)
// consume them, so this is the package both sides import: it depends on
// nothing of crffd, and on gonum only for the matrix type. It checks no
// rows against a schema; the estimator validates the rows it is given.
package records

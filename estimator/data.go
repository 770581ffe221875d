package estimator

import "gonum.org/v1/gonum/mat"

// Data holds the rows of one site that a model is trained or scored on.
// Row i of X, W[i] and Y[i] describe the same record.
type Data struct {
	X *mat.Dense // n×dx covariates, in Schema order
	W []float64  // n treatments, each 0 or 1
	Y []float64  // n outcomes: real, or 0/1 when Schema.BinaryOutcome
}

// Rows returns the number of rows n.
func (d *Data) Rows() int { return len(d.W) }

// Schema describes the columns shared by every site of a federation.
type Schema struct {
	Binary        []bool // per covariate: true for a Bernoulli column, false for a continuous one
	BinaryOutcome bool   // the outcome is 0/1 rather than real
}

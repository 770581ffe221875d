package estimator

import (
	"errors"
	"math"
)

// SqrtPEHE returns √(mean((τ̂_i − τ_i)²)), the root of the precision in
// estimation of heterogeneous effects, for estimated and true CATEs.
func SqrtPEHE(est, truth []float64) (float64, error) {
	if len(est) != len(truth) || len(est) == 0 {
		return 0, errors.New("estimator: SqrtPEHE needs equal, non-empty lengths")
	}
	var s float64
	for i, e := range est {
		d := e - truth[i]
		s += d * d
	}
	return math.Sqrt(s / float64(len(est))), nil
}

// ATEError returns |mean τ̂ − mean τ|.
func ATEError(est, truth []float64) (float64, error) {
	if len(est) != len(truth) || len(est) == 0 {
		return 0, errors.New("estimator: ATEError needs equal, non-empty lengths")
	}
	var d float64
	for i, e := range est {
		d += e - truth[i]
	}
	return math.Abs(d / float64(len(est))), nil
}

// GlobalATE returns Σ_s n_s·ATE_s / Σ_s n_s, the federation's ATE from the
// sites' local ATEs and row counts.
func GlobalATE(ates []float64, rows []int) (float64, error) {
	if len(ates) != len(rows) || len(ates) == 0 {
		return 0, errors.New("estimator: GlobalATE needs one row count per ATE")
	}
	var num, den float64
	for s, a := range ates {
		if rows[s] < 0 {
			return 0, errors.New("estimator: negative row count")
		}
		num += float64(rows[s]) * a
		den += float64(rows[s])
	}
	if den == 0 {
		return 0, errors.New("estimator: GlobalATE of no rows")
	}
	return num / den, nil
}

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

// FactualSSE returns the sum of squared errors of the factual predictions,
// Σ_i (y_i − ŷ_{w_i,i})², of effects e estimated for data's rows, and the
// number of rows. It is the validation figure by which DefaultConfig was
// chosen; pool several sites' sums before taking a root.
func FactualSSE(e *Effects, data *Data) (sse float64, n int, err error) {
	if e == nil || data == nil || len(e.Y0) != len(data.W) || len(e.Y1) != len(data.W) || len(data.Y) != len(data.W) {
		return 0, 0, errors.New("estimator: FactualSSE needs effects of exactly data's rows")
	}
	for i, w := range data.W {
		pred := e.Y0[i]
		if w == 1 {
			pred = e.Y1[i]
		}
		sse += (data.Y[i] - pred) * (data.Y[i] - pred)
	}
	return sse, len(data.W), nil
}

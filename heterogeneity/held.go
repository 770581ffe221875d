package heterogeneity

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/inference"
)

// RuleLowerAbove0 names the rule that treats where the calibrated CATE's
// lower bound is above 0 (Held.LowerAbove0), the one policy a site always
// evaluates and a federation pools.
const RuleLowerAbove0 = "cate_lower_above_0"

// Held are the rows the statistics are computed from, those τ̂ was not
// trained on: their scores ψ and control-arm scores Γ0, τ̂ before
// calibration, their covariates, and the lower bounds of the calibrated
// CATE's intervals (τ̂ itself without a calibration).
type Held struct {
	PSI, Control, CATE, Lower []float64
	X                         *mat.Dense
}

// PickHeld returns the rows at positions rows of psi, gamma0, cate and x,
// with their lower bounds under cal (nil: none).
func PickHeld(rows []int, psi, gamma0, cate []float64, x mat.Matrix, cal *inference.Calibration) (*Held, error) {
	n := len(rows)
	_, d := x.Dims()
	h := &Held{PSI: make([]float64, n), Control: make([]float64, n), CATE: make([]float64, n), X: mat.NewDense(n, d, nil)}
	for j, i := range rows {
		if i < 0 || i >= len(psi) || i >= len(gamma0) || i >= len(cate) {
			return nil, fmt.Errorf("%w: held-out row %d of %d", ErrInput, i, len(psi))
		}
		h.PSI[j], h.Control[j], h.CATE[j] = psi[i], gamma0[i], cate[i]
		for k := range d {
			h.X.Set(j, k, x.At(i, k))
		}
	}
	h.Lower = h.CATE
	if cal != nil && n > 0 {
		var err error
		if _, _, h.Lower, _, err = cal.Interval(h.CATE, h.X); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// LowerAbove0 is the rule RuleLowerAbove0 on each row.
func (h *Held) LowerAbove0() []bool {
	treat := make([]bool, len(h.Lower))
	for j, l := range h.Lower {
		treat[j] = l > 0
	}
	return treat
}

// BLPSums are the rows' BLPSums about their mean τ̂.
func (h *Held) BLPSums() (BLPSums, error) {
	var mean float64
	for _, c := range h.CATE {
		mean += c / float64(len(h.CATE))
	}
	return NewBLPSums(h.PSI, h.CATE, mean)
}

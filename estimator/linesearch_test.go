package estimator

import (
	"errors"
	"testing"
)

// TestLineSearchFailureIsAnError drives L-BFGS with a gradient of the wrong
// sign, so that no step along the search direction decreases f: the fit
// must end with ErrLineSearch, not report its starting point as converged.
// Smooth functions with their true gradients converge without error, even
// at a tolerance the objective cannot resolve, where the line search
// fails at a point that has converged.
func TestLineSearchFailureIsAnError(t *testing.T) {
	bowl := func(x []float64, sign float64) (float64, []float64) {
		return x[0]*x[0] + 3*x[1]*x[1], []float64{sign * 2 * x[0], sign * 6 * x[1]}
	}
	quartic := func(x []float64, sign float64) (float64, []float64) {
		return x[0]*x[0]*x[0]*x[0] + x[1]*x[1] + 1, []float64{sign * 4 * x[0] * x[0] * x[0], sign * 2 * x[1]}
	}
	for _, tc := range []struct {
		name string
		f    func(x []float64, sign float64) (float64, []float64)
		sign float64
		tol  float64
		want error
	}{
		{"bowl, true gradient", bowl, 1, 1e-9, nil},
		// At tolerance 0 gonum's Moré–Thuente search ends with
		// "linesearch: failed to converge" at x ≈ 0, where the largest
		// gradient element is about 1e-34: converged, not failed.
		{"quartic, true gradient, tolerance 0", quartic, 1, 0, nil},
		{"bowl, gradient of the wrong sign", bowl, -1, 1e-9, ErrLineSearch},
	} {
		l := newLBFGS([]float64{1, -2}, 5, 1000, tc.tol)
		var err error
		done := false
		for i := 0; i < 1000 && !done; i++ {
			done, err = l.tell(tc.f(l.point(), tc.sign))
		}
		if !done || !errors.Is(err, tc.want) {
			t.Errorf("%s: done %v, error %v; want %v", tc.name, done, err, tc.want)
		}
	}
}

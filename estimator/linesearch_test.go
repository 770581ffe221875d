package estimator

import (
	"errors"
	"testing"
)

// TestLineSearchFailureIsAnError drives L-BFGS with a gradient of the wrong
// sign, so that no step along the search direction decreases f: the fit
// must end with ErrLineSearch, not report its starting point as converged.
// A smooth bowl with its true gradient converges without error.
func TestLineSearchFailureIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		sign float64
		want error
	}{{"true gradient", 1, nil}, {"gradient of the wrong sign", -1, ErrLineSearch}} {
		l := newLBFGS([]float64{1, -2}, 5, 200, 1e-9)
		var err error
		done := false
		for i := 0; i < 200 && !done; i++ {
			x := l.point()
			f := x[0]*x[0] + 3*x[1]*x[1]
			done, err = l.tell(f, []float64{tc.sign * 2 * x[0], tc.sign * 6 * x[1]})
		}
		if !done || !errors.Is(err, tc.want) {
			t.Errorf("%s: done %v, error %v; want %v", tc.name, done, err, tc.want)
		}
	}
}

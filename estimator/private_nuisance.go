package estimator

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/glm"
	"github.com/crffd/crffd/inference"
)

// PrivateNuisanceClip is how many of the run's standard deviations a
// continuous covariate may lie from the run's mean in the private
// nuisance's sums (NuisanceStats); a value beyond is clipped to it.
const PrivateNuisanceClip = 3

// privateRows maps the rows of data into [−1, 1] for the private
// nuisance's sums: a continuous covariate standardised by the run's
// scaler, clipped to ±PrivateNuisanceClip and divided by it; a binary one
// to 2x − 1, clipped; the outcome from its public bound [lo, hi] to
// 2(y − lo)/(hi − lo) − 1, clipped.
func (s *Setup) privateRows(data *Data, lo, hi float64) (*mat.Dense, []float64, error) {
	if data == nil || data.X == nil {
		return nil, nil, errors.New("estimator: nil data")
	}
	if !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil, nil, fmt.Errorf("estimator: the outcome's bound [%v, %v] is not a finite range", lo, hi)
	}
	n, dx := data.X.Dims()
	if dx != len(s.Schema.Binary) {
		return nil, nil, fmt.Errorf("estimator: %d covariates, want %d", dx, len(s.Schema.Binary))
	}
	v := mat.NewDense(n, dx, nil)
	t := make([]float64, n)
	for i := range n {
		in, out := data.X.RawRowView(i), v.RawRowView(i)
		for j, x := range in {
			// Clipped whatever the column's type: the sensitivity
			// must hold for any value a row holds.
			z := 2*x - 1
			if !s.Schema.Binary[j] {
				z = (x - s.Scaler.Mean[j]) / s.Scaler.Scale[j] / PrivateNuisanceClip
			}
			out[j] = math.Max(-1, math.Min(1, z))
		}
		t[i] = math.Max(-1, math.Min(1, 2*(data.Y[i]-lo)/(hi-lo)-1))
	}
	return v, t, nil
}

// NuisanceStats returns the sufficient statistics of the private nuisance
// models of data's rows (glm.Accumulate), whose outcome has the public
// bound [lo, hi] ([0, 1] for a binary one). Released with Gaussian noise
// of glm.Sensitivity(covariates) times a noise multiplier, they are
// differentially private, and so is every prediction fitted from them.
func (s *Setup) NuisanceStats(data *Data, lo, hi float64) (glm.Stats, error) {
	v, t, err := s.privateRows(data, lo, hi)
	if err != nil {
		return glm.Stats{}, err
	}
	return glm.Accumulate(v, data.W, t)
}

// PrivateNuisance returns the nuisances of data's rows predicted by p,
// fitted (glm.FitPrivate) from NuisanceStats of the same bound: the
// propensity, and each arm's mean outcome in the outcome's own units.
func (s *Setup) PrivateNuisance(p *glm.Private, data *Data, lo, hi float64) (inference.Nuisance, error) {
	v, _, err := s.privateRows(data, lo, hi)
	if err != nil {
		return inference.Nuisance{}, err
	}
	e, mu0, mu1, err := p.Predict(v)
	if err != nil {
		return inference.Nuisance{}, err
	}
	back := func(t []float64) {
		for i, x := range t {
			t[i] = lo + (x+1)*(hi-lo)/2
		}
	}
	back(mu0)
	back(mu1)
	return inference.Nuisance{Propensity: e, Mu0: mu0, Mu1: mu1}, nil
}

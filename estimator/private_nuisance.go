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
// nuisance's sums: a continuous covariate, and a continuous outcome,
// standardised by the run's scaler, clipped to ±PrivateNuisanceClip and
// divided by it; a binary one to 2x − 1, clipped. The run's scaler is
// public (pooled from the sites' released moments), and it spreads the
// values over the range where a public bound, often ten times wider than
// the values' spread, would squeeze them into a tenth of it, and the
// noise with them.
func (s *Setup) privateRows(data *Data) (*mat.Dense, []float64, error) {
	if data == nil || data.X == nil {
		return nil, nil, errors.New("estimator: nil data")
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
			out[j] = clampUnit(z)
		}
		t[i] = clampUnit(s.nuisanceTarget(data.Y[i]))
	}
	return v, t, nil
}

// nuisanceTarget maps an outcome onto the private nuisance's scale,
// before clipping.
func (s *Setup) nuisanceTarget(y float64) float64 {
	if s.Schema.BinaryOutcome {
		return 2*y - 1
	}
	return (y - s.Scaler.YMean) / s.Scaler.YSD / PrivateNuisanceClip
}

// clampUnit clamps x to [−1, 1].
func clampUnit(x float64) float64 { return math.Max(-1, math.Min(1, x)) }

// NuisanceStats returns the sufficient statistics of the private nuisance
// models of data's rows (glm.Accumulate). Released with Gaussian noise of
// glm.Sensitivity(covariates) times a noise multiplier, they are
// differentially private, and so is every prediction fitted from them.
func (s *Setup) NuisanceStats(data *Data) (glm.Stats, error) {
	v, t, err := s.privateRows(data)
	if err != nil {
		return glm.Stats{}, err
	}
	return glm.Accumulate(v, data.W, t)
}

// PrivateNuisance returns the nuisances of data's rows predicted by p,
// fitted (glm.FitPrivate) from NuisanceStats: the propensity, and each
// arm's mean outcome in the outcome's own units.
func (s *Setup) PrivateNuisance(p *glm.Private, data *Data) (inference.Nuisance, error) {
	v, _, err := s.privateRows(data)
	if err != nil {
		return inference.Nuisance{}, err
	}
	e, mu0, mu1, err := p.Predict(v)
	if err != nil {
		return inference.Nuisance{}, err
	}
	back := func(t []float64) {
		for i, x := range t {
			if s.Schema.BinaryOutcome {
				t[i] = (x + 1) / 2
			} else {
				t[i] = s.Scaler.YMean + x*PrivateNuisanceClip*s.Scaler.YSD
			}
		}
	}
	back(mu0)
	back(mu1)
	return inference.Nuisance{Propensity: e, Mu0: mu0, Mu1: mu1}, nil
}

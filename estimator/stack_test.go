package estimator

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/inference"
)

// TestStackWeighsTheBetterLearner: of a learner that predicts the truth
// and one that adds noise, the stack puts (nearly) all weight on the
// first, for the propensity and for the outcome, continuous and binary;
// its loss is never above either learner's; and its weights sum to one.
func TestStackWeighsTheBetterLearner(t *testing.T) {
	for _, binary := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(3, 4))
		n := 2000
		d := &Data{X: mat.NewDense(n, 1, nil), W: make([]float64, n), Y: make([]float64, n)}
		truth := inference.Nuisance{Propensity: make([]float64, n), Mu0: make([]float64, n), Mu1: make([]float64, n)}
		noisy := inference.Nuisance{Propensity: make([]float64, n), Mu0: make([]float64, n), Mu1: make([]float64, n)}
		for i := range n {
			x := rng.NormFloat64()
			e := 1 / (1 + math.Exp(-x))
			truth.Propensity[i] = e
			noisy.Propensity[i] = 1 / (1 + math.Exp(-x-1.5*rng.NormFloat64()))
			if rng.Float64() < e {
				d.W[i] = 1
			}
			truth.Mu0[i], truth.Mu1[i] = x, x+1
			if binary {
				truth.Mu0[i], truth.Mu1[i] = 1/(1+math.Exp(-x)), 1/(1+math.Exp(-x-1))
			}
			mu := truth.Mu0[i]
			if d.W[i] == 1 {
				mu = truth.Mu1[i]
			}
			if binary {
				noisy.Mu0[i] = 1 / (1 + math.Exp(-x-1.5*rng.NormFloat64()))
				noisy.Mu1[i] = 1 / (1 + math.Exp(-x-1-1.5*rng.NormFloat64()))
				if rng.Float64() < mu {
					d.Y[i] = 1
				}
			} else {
				noisy.Mu0[i], noisy.Mu1[i] = truth.Mu0[i]+rng.NormFloat64(), truth.Mu1[i]+rng.NormFloat64()
				d.Y[i] = mu + 0.5*rng.NormFloat64()
			}
		}
		// The noisy learner first: the choice must not favour the order.
		got, err := stack(d, binary, []string{"noisy", "truth"}, []inference.Nuisance{noisy, truth})
		if err != nil {
			t.Fatal(err)
		}
		st := got.Stack
		if st.PropensityWeights[1] < 0.85 || st.OutcomeWeights[1] < 0.85 {
			t.Errorf("binary %v: weights of the true learner %.2f (propensity), %.2f (outcome); want at least 0.85", binary, st.PropensityWeights[1], st.OutcomeWeights[1])
		}
		for _, l := range [][]float64{st.PropensityLoss, st.OutcomeLoss} {
			if l[2] > l[0] || l[2] > l[1] {
				t.Errorf("binary %v: stack's loss %v above a learner's (%v)", binary, l[2], l[:2])
			}
		}
		for _, w := range [][]float64{st.PropensityWeights, st.OutcomeWeights} {
			if math.Abs(w[0]+w[1]-1) > 1e-12 || w[0] < 0 || w[1] < 0 {
				t.Errorf("binary %v: weights %v", binary, w)
			}
		}
		a := st.OutcomeWeights[0]
		if want := a*noisy.Mu1[7] + (1-a)*truth.Mu1[7]; got.Mu1[7] != want {
			t.Errorf("binary %v: stacked μ̂1 %v, want %v", binary, got.Mu1[7], want)
		}
	}
	if _, err := stack(&Data{}, false, []string{"one"}, []inference.Nuisance{{}}); err == nil {
		t.Error("stacking one learner succeeded")
	}
}

package estimator

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
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
		got, err := stack(d, binary, []string{"noisy", "truth"}, []inference.Nuisance{noisy, truth}, nil)
		if err != nil {
			t.Fatal(err)
		}
		st := got.Stack
		for _, name := range []string{inference.StackPropensity, inference.StackMu0, inference.StackMu1} {
			m := st.Model(name)
			if m == nil {
				t.Fatalf("binary %v: no %s in the stack %+v", binary, name, st)
			}
			if m.Weights[1] < 0.85 {
				t.Errorf("binary %v: %s: weight of the true learner %.2f; want at least 0.85", binary, name, m.Weights[1])
			}
			if m.Loss[2] > m.Loss[0] || m.Loss[2] > m.Loss[1] {
				t.Errorf("binary %v: %s: stack's loss %v above a learner's (%v)", binary, name, m.Loss[2], m.Loss[:2])
			}
			if math.Abs(m.Weights[0]+m.Weights[1]-1) > 1e-12 || m.Weights[0] < 0 || m.Weights[1] < 0 {
				t.Errorf("binary %v: %s: weights %v", binary, name, m.Weights)
			}
		}
		// Each arm's outcome is chosen on its own rows.
		var treated int
		for _, w := range d.W {
			treated += int(w)
		}
		if st.Model(inference.StackMu1).N != treated || st.Model(inference.StackMu0).N != n-treated || st.Model(inference.StackPropensity).N != n {
			t.Errorf("binary %v: rows of the losses %+v; %d treated of %d", binary, st.Models, treated, n)
		}
		a := st.Model(inference.StackMu1).Weights[0]
		if want := a*noisy.Mu1[7] + (1-a)*truth.Mu1[7]; got.Mu1[7] != want {
			t.Errorf("binary %v: stacked μ̂1 %v, want %v", binary, got.Mu1[7], want)
		}
	}
	if _, err := stack(&Data{}, false, []string{"one"}, []inference.Nuisance{{}}, nil); err == nil {
		t.Error("stacking one learner succeeded")
	}
}

// TestNuisanceStackKeepsTheCombination: the stack a run keeps predicts new
// rows as the weighted GLM and random-feature learners, gives the same
// numbers after a JSON round trip (as modelstore saves it), and without a
// stack the model's own nuisances are used.
func TestNuisanceStackKeepsTheCombination(t *testing.T) {
	ctx := context.Background()
	schema := Schema{Binary: []bool{false, false}}
	d := toyData(rand.New(rand.NewPCG(8, 9)), 150, schema, 0)
	fresh := toyData(rand.New(rand.NewPCG(10, 11)), 40, schema, 0)
	m, err := Fit(ctx, []*Data{d}, schema, GaussianSpectral{}, nuisanceConfig())
	if err != nil {
		t.Fatal(err)
	}
	cv, err := CrossFit(ctx, m.Setup, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := m.Setup.FitNuisanceStack(ctx, d, cv.Stack)
	if err != nil {
		t.Fatal(err)
	}
	if ns.PropensityWeight != cv.Stack.Model(inference.StackPropensity).Weights[0] || ns.MuWeight[0] != cv.Stack.Model(inference.StackMu0).Weights[0] ||
		ns.MuWeight[1] != cv.Stack.Model(inference.StackMu1).Weights[0] {
		t.Errorf("stack weights %v, %v; CrossFit chose %+v", ns.PropensityWeight, ns.MuWeight, cv.Stack.Models)
	}
	got, err := m.StackNuisance(0, fresh, ns)
	if err != nil {
		t.Fatal(err)
	}
	rff, err := m.Nuisance(0, fresh)
	if err != nil {
		t.Fatal(err)
	}
	lin, err := ns.predict(fresh.X)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Mu1 {
		want := ns.MuWeight[1]*lin.Mu1[i] + (1-ns.MuWeight[1])*rff.Mu1[i]
		wantE := ns.PropensityWeight*lin.Propensity[i] + (1-ns.PropensityWeight)*rff.Propensity[i]
		if math.Abs(got.Mu1[i]-want) > 1e-12 || math.Abs(got.Propensity[i]-wantE) > 1e-12 {
			t.Fatalf("row %d: μ̂1 %v, ê %v; want %v, %v", i, got.Mu1[i], got.Propensity[i], want, wantE)
		}
	}
	// eval's held-out path: the same super learner, fitted on d.
	held, err := m.StackedNuisance(ctx, 0, d, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(held.Mu1, got.Mu1) || !slices.Equal(held.Propensity, got.Propensity) || held.Stack == nil {
		t.Error("StackedNuisance differs from the stack CrossFit and FitNuisanceStack give")
	}
	b, err := json.Marshal(ns)
	if err != nil {
		t.Fatal(err)
	}
	var back NuisanceStack
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again, err := m.StackNuisance(0, fresh, &back)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Mu0, got.Mu0) || !slices.Equal(again.Propensity, got.Propensity) {
		t.Error("the stack's predictions changed in a JSON round trip")
	}
	own, err := m.StackNuisance(0, fresh, nil)
	if err != nil || !slices.Equal(own.Mu0, rff.Mu0) {
		t.Errorf("without a stack: %v", err)
	}
	for name, damaged := range map[string]NuisanceStack{
		"no propensity":    {Outcome: back.Outcome},
		"weight above one": {Propensity: back.Propensity, Outcome: back.Outcome, MuWeight: [2]float64{0, 1.5}},
	} {
		if _, err := m.StackNuisance(0, fresh, &damaged); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := m.Setup.FitNuisanceStack(ctx, d, &inference.Stack{Learners: []string{"rff"}}); err == nil {
		t.Error("a stack without the GLM learner was fitted")
	}
}

// TestCrossFitNearlyOneArm: a site whose rows are nearly all treated
// leaves folds whose training rows hold no control; the super learner
// still cross-fits (the GLM learner's propensity is the shrunk share
// there, and its control outcome the mean of every row). A site of the
// paper's design with Δ = 4 had 973 treated rows of 1000.
func TestCrossFitNearlyOneArm(t *testing.T) {
	ctx := context.Background()
	schema := Schema{Binary: []bool{false, false}}
	for _, controls := range []int{1, 0} {
		d := toyData(rand.New(rand.NewPCG(12, 13)), 100, schema, 0)
		for i := range d.W {
			d.W[i] = 1
		}
		for i := range controls {
			d.W[10+i] = 0
		}
		m, err := Fit(ctx, []*Data{d}, schema, GaussianSpectral{}, nuisanceConfig())
		if err != nil {
			t.Fatal(err)
		}
		nu, err := CrossFit(ctx, m.Setup, 0, d)
		if err != nil {
			t.Fatalf("%d controls: %v", controls, err)
		}
		for i, e := range nu.Propensity {
			if !(e > 0.5 && e < 1) || math.IsNaN(nu.Mu0[i]) || math.IsNaN(nu.Mu1[i]) {
				t.Fatalf("%d controls, row %d: propensity %v, means %v, %v", controls, i, e, nu.Mu0[i], nu.Mu1[i])
			}
		}
	}
}

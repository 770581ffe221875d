package estimator

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/glm"
	"github.com/crffd/crffd/inference"
)

// nuisanceConfig is a small, fast configuration for the nuisance tests.
func nuisanceConfig() Config {
	cfg := DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples, cfg.Workers = 30, 2, 60, 5, 1
	cfg.LearningRate = 0.05
	return cfg
}

// TestNuisanceUnits checks Nuisance against the models' own outputs: the
// propensity that Effects reports, and outcome means mapped to the
// outcome's units, as a probability for a binary outcome and as the
// log-normal mean exp(m + s²/2) for a log-modelled one.
func TestNuisanceUnits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		binary bool
		log    bool
	}{{"continuous", false, false}, {"binary", true, false}, {"log", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			schema := Schema{Binary: []bool{false, true}, BinaryOutcome: tc.binary}
			d := toyData(rand.New(rand.NewPCG(3, 4)), 120, schema, 0)
			cfg := nuisanceConfig()
			if tc.log {
				for i := range d.Y {
					d.Y[i] = math.Exp(d.Y[i] / 2)
				}
				cfg.LogOutcome = LogAlways
			}
			m, err := Fit(ctx, []*Data{d}, schema, GaussianSpectral{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if m.Setup.LogY() != tc.log {
				t.Fatalf("LogY() = %v, want %v", m.Setup.LogY(), tc.log)
			}
			nu, err := m.Nuisance(0, d)
			if err != nil {
				t.Fatal(err)
			}
			eff, err := m.Effects(ctx, 0, d)
			if err != nil {
				t.Fatal(err)
			}
			_, raw0, raw1 := m.nuisanceModelUnits(0, d.X)
			c, sc := m.Setup.yLoc()
			s := m.outcomeSD() * sc
			for i := range d.W {
				if nu.Propensity[i] != eff.Propensity[i] {
					t.Fatalf("row %d: propensity %v, Effects %v", i, nu.Propensity[i], eff.Propensity[i])
				}
				var want0, want1 float64
				switch {
				case tc.binary:
					want0, want1 = 1/(1+math.Exp(-raw0[i])), 1/(1+math.Exp(-raw1[i]))
				case tc.log:
					want0, want1 = math.Exp(c+sc*raw0[i]+s*s/2), math.Exp(c+sc*raw1[i]+s*s/2)
				default:
					want0, want1 = c+sc*raw0[i], c+sc*raw1[i]
				}
				if math.Abs(nu.Mu0[i]-want0) > 1e-12*math.Max(1, math.Abs(want0)) || math.Abs(nu.Mu1[i]-want1) > 1e-12*math.Max(1, math.Abs(want1)) {
					t.Fatalf("row %d: means %v, %v; want %v, %v", i, nu.Mu0[i], nu.Mu1[i], want0, want1)
				}
				if tc.binary && (nu.Mu0[i] < 0 || nu.Mu0[i] > 1 || nu.Mu1[i] < 0 || nu.Mu1[i] > 1) {
					t.Fatalf("row %d: binary means %v, %v outside [0, 1]", i, nu.Mu0[i], nu.Mu1[i])
				}
			}
			if tc.log && !(s > 0.05) {
				t.Errorf("log-scale noise %v: the log-normal term is not exercised", s)
			}
			oc, err := m.OutcomeCATE(0, d)
			if err != nil {
				t.Fatal(err)
			}
			for i := range oc {
				if oc[i] != nu.Mu1[i]-nu.Mu0[i] {
					t.Fatalf("row %d: outcome CATE %v, want μ̂1 − μ̂0 = %v", i, oc[i], nu.Mu1[i]-nu.Mu0[i])
				}
			}
			if tc.log {
				// Rows agreed on elsewhere may hold an outcome the log
				// cannot take: refused by name, not trained on as NaN.
				bad := d.Subset([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
				bad.Y[3] = -1
				if _, err := CrossFit(ctx, m.Setup, 0, bad); err == nil || !strings.Contains(err.Error(), "row 3: outcome -1 is not positive") {
					t.Errorf("CrossFit of a negative outcome under log y: %v", err)
				}
				if _, err := NewSite(0, bad, m.Setup); err == nil || !strings.Contains(err.Error(), "row 3: outcome -1 is not positive") {
					t.Errorf("NewSite of a negative outcome under log y: %v", err)
				}
			}
		})
	}
}

// TestCrossFitOwnRow checks that a row's cross-fitted predictions come
// from models that did not see it: changing a row's outcome changes each
// learner's predictions of other rows but never its own, and moves the
// row's stacked prediction only when it moves the stack's weights.
func TestCrossFitOwnRow(t *testing.T) {
	ctx := context.Background()
	schema := Schema{Binary: []bool{false, false}}
	d := toyData(rand.New(rand.NewPCG(5, 6)), 100, schema, 0)
	cfg := nuisanceConfig()
	m, err := Fit(ctx, []*Data{d}, schema, GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	before, err := CrossFit(ctx, m.Setup, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	again, err := CrossFit(ctx, m.Setup, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	changed := &Data{X: mat.DenseCopyOf(d.X), W: append([]float64(nil), d.W...), Y: append([]float64(nil), d.Y...)}
	const row = 17
	changed.Y[row] += 25
	changed.W[row] = d.W[row]
	after, err := CrossFit(ctx, m.Setup, 0, changed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.W {
		if before.Mu0[i] != again.Mu0[i] || before.Propensity[i] != again.Propensity[i] {
			t.Fatalf("row %d: CrossFit is not deterministic", i)
		}
	}
	sameWeights := slices.Equal(before.Stack.Model(inference.StackMu0).Weights, after.Stack.Model(inference.StackMu0).Weights) &&
		slices.Equal(before.Stack.Model(inference.StackMu1).Weights, after.Stack.Model(inference.StackMu1).Weights)
	if sameWeights && (before.Mu0[row] != after.Mu0[row] || before.Mu1[row] != after.Mu1[row]) {
		t.Errorf("row %d's own outcome moved its prediction under the same weights: %v → %v", row, before.Mu0[row], after.Mu0[row])
	}
	learners, err := crossFitLearners(ctx, m.Setup, 0, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	changedLearners, err := crossFitLearners(ctx, m.Setup, 0, changed, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for c := range learners {
		for i := range d.W {
			if learners[c].Mu0[i] != changedLearners[c].Mu0[i] || learners[c].Mu1[i] != changedLearners[c].Mu1[i] {
				moved++
				if i == row {
					t.Errorf("learner %d: row %d's own outcome moved its prediction: %v → %v", c, row, learners[c].Mu0[i], changedLearners[c].Mu0[i])
				}
			}
		}
	}
	// Four of the five fold models of each learner trained on the changed row.
	if moved < 120 {
		t.Errorf("only %d rows' predictions moved with row %d's outcome; want those of the other four folds", moved, row)
	}
	bad := cfg
	bad.Folds = 1
	if err := bad.validate(); err == nil {
		t.Error("Folds = 1 validated")
	}
	tiny := &Data{X: mat.NewDense(1, 2, []float64{1, 2}), W: []float64{1}, Y: []float64{3}}
	if _, err := CrossFit(ctx, m.Setup, 0, tiny); err == nil {
		t.Error("cross-fitting one row succeeded")
	}
}

// TestCrossFitExcept: rows held out of a cross-fit train no model and
// choose no stack weight, so that changing their outcomes (treatments
// kept) leaves every row's nuisances, theirs included, bit for bit as they
// were; another row's outcome moves other rows' predictions. With no row
// held, it is CrossFit; held rows not ascending are refused.
func TestCrossFitExcept(t *testing.T) {
	ctx := context.Background()
	schema := Schema{Binary: []bool{false, false}}
	d := toyData(rand.New(rand.NewPCG(5, 6)), 120, schema, 0)
	m, err := Fit(ctx, []*Data{d}, schema, GaussianSpectral{}, nuisanceConfig())
	if err != nil {
		t.Fatal(err)
	}
	held := []int{3, 10, 11, 40, 77, 90, 101, 119}
	before, err := CrossFitExcept(ctx, m.Setup, 0, d, held)
	if err != nil {
		t.Fatal(err)
	}
	changed := &Data{X: mat.DenseCopyOf(d.X), W: slices.Clone(d.W), Y: slices.Clone(d.Y)}
	for _, i := range held {
		changed.Y[i] += 40 * float64(i%3-1)
		changed.X.Set(i, 1, 9)
	}
	after, err := CrossFitExcept(ctx, m.Setup, 0, changed, held)
	if err != nil {
		t.Fatal(err)
	}
	isHeld := map[int]bool{}
	for _, i := range held {
		isHeld[i] = true
	}
	for i := range d.W {
		if isHeld[i] {
			continue // its covariates changed, and with them its predictions
		}
		if before.Propensity[i] != after.Propensity[i] || before.Mu0[i] != after.Mu0[i] || before.Mu1[i] != after.Mu1[i] {
			t.Fatalf("row %d's nuisances moved with the held rows", i)
		}
	}
	for _, name := range []string{inference.StackPropensity, inference.StackMu0, inference.StackMu1} {
		b, a := before.Stack.Model(name), after.Stack.Model(name)
		if !slices.Equal(b.Weights, a.Weights) || b.N != a.N || b.N >= 120 {
			t.Errorf("%s: weights %v over %d rows, then %v over %d", name, b.Weights, b.N, a.Weights, a.N)
		}
	}
	// A row that is not held trains four of the five folds' models.
	other := &Data{X: d.X, W: d.W, Y: slices.Clone(d.Y)}
	other.Y[5] += 25
	moved, err := CrossFitExcept(ctx, m.Setup, 0, other, held)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range d.W {
		if moved.Mu0[i] != before.Mu0[i] || moved.Mu1[i] != before.Mu1[i] {
			n++
		}
	}
	if n < 60 {
		t.Errorf("row 5's outcome moved %d rows' predictions; want those of four folds", n)
	}

	all, err := CrossFit(ctx, m.Setup, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	none, err := CrossFitExcept(ctx, m.Setup, 0, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all.Mu0, none.Mu0) || !slices.Equal(all.Propensity, none.Propensity) {
		t.Error("CrossFitExcept with no row held is not CrossFit")
	}
	for _, bad := range [][]int{{4, 3}, {-1}, {120}, {7, 7}} {
		if _, err := CrossFitExcept(ctx, m.Setup, 0, d, bad); err == nil || !strings.Contains(err.Error(), "ascending") {
			t.Errorf("held %v: %v", bad, err)
		}
	}
}

// TestNuisanceChunks: the nuisance predictions of a row do not depend on
// the rows predicted with it, so predicting more rows than one chunk at
// once (FeatureChunk) gives each row what predicting it alone does.
func TestNuisanceChunks(t *testing.T) {
	ctx := context.Background()
	schema := Schema{Binary: []bool{false, false}}
	rng := rand.New(rand.NewPCG(7, 8))
	m, err := Fit(ctx, []*Data{toyData(rng, 60, schema, 0)}, schema, GaussianSpectral{}, nuisanceConfig())
	if err != nil {
		t.Fatal(err)
	}
	d := toyData(rng, FeatureChunk+5, schema, 0)
	all, err := m.Nuisance(0, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, FeatureChunk - 1, FeatureChunk, FeatureChunk + 4} {
		one := &Data{X: mat.NewDense(1, 2, slices.Clone(d.X.RawRowView(i))), W: d.W[i : i+1], Y: d.Y[i : i+1]}
		nu, err := m.Nuisance(0, one)
		if err != nil {
			t.Fatal(err)
		}
		if nu.Propensity[0] != all.Propensity[i] || nu.Mu0[0] != all.Mu0[i] || nu.Mu1[0] != all.Mu1[i] {
			t.Errorf("row %d: alone %v %v %v, among %d rows %v %v %v", i, nu.Propensity[0], nu.Mu0[0], nu.Mu1[0],
				len(d.W), all.Propensity[i], all.Mu0[i], all.Mu1[i])
		}
	}
}

// TestRowsReadInPlace: a Site and the GLM learner built from rows picked
// in place are, bit for bit, those built from a copy of the rows.
func TestRowsReadInPlace(t *testing.T) {
	ctx := context.Background()
	schema := Schema{Binary: []bool{false, false}}
	d := toyData(rand.New(rand.NewPCG(9, 10)), 90, schema, 0)
	m, err := Fit(ctx, []*Data{d}, schema, GaussianSpectral{}, nuisanceConfig())
	if err != nil {
		t.Fatal(err)
	}
	rows := []int{1, 2, 5, 8, 13, 21, 34, 40, 41, 42, 55, 60, 61, 77, 89}
	copied, err := NewSite(0, d.Subset(rows), m.Setup)
	if err != nil {
		t.Fatal(err)
	}
	inPlace, err := newSite(0, d, rows, m.Setup)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(copied.x, inPlace.x) || !slices.Equal(copied.w, inPlace.w) || !slices.Equal(copied.y, inPlace.y) ||
		!slices.Equal(copied.pos, inPlace.pos) || copied.n0 != inPlace.n0 || copied.n != inPlace.n {
		t.Error("the Site of rows picked in place differs from the Site of their copy")
	}
	a, err := m.Setup.fitGLM(ctx, d.Subset(rows), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Setup.fitGLM(ctx, d, rows)
	if err != nil {
		t.Fatal(err)
	}
	for k, pair := range [][2]*glm.Model{{a.Propensity, b.Propensity}, {a.Outcome[0], b.Outcome[0]}, {a.Outcome[1], b.Outcome[1]}} {
		if !slices.Equal(pair[0].Beta, pair[1].Beta) || !slices.Equal(pair[0].Mean, pair[1].Mean) || !slices.Equal(pair[0].Scale, pair[1].Scale) {
			t.Errorf("GLM %d of rows picked in place differs from that of their copy", k)
		}
	}
	if a.LogVar != b.LogVar {
		t.Errorf("log variances %v and %v", a.LogVar, b.LogVar)
	}
	if _, err := newSite(0, d, []int{}, m.Setup); err == nil {
		t.Error("a Site of no rows was made")
	}

	// Under mini-batches the Site of picked rows holds no copy and reads
	// each batch from d: the same rounds as the Site of their copy.
	bs := *m.Setup
	bs.Config.BatchSize = 4
	copied, err = NewSite(0, d.Subset(rows), &bs)
	if err != nil {
		t.Fatal(err)
	}
	inPlace, err = NewSiteRows(0, d, rows, &bs)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range Kinds {
		in := randomInput(newLayout(kind, &bs), rand.New(rand.NewPCG(3, uint64(kind))))
		for r := range 5 {
			in.Round, in.Noise = r, uint64(r)
			a, err := copied.Compute(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := inPlace.Compute(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if a.Loss != b.Loss {
				t.Errorf("%v round %d: loss %v in place, %v of the copy", kind, r, b.Loss, a.Loss)
			}
			for name, g := range a.Grads {
				if !mat.Equal(g, b.Grads[name]) {
					t.Errorf("%v round %d: gradient %s differs", kind, r, name)
				}
			}
		}
	}
	if inPlace.x != nil {
		t.Error("the Site of mini-batches of picked rows holds a copy of them")
	}
}

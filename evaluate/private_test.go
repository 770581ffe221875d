package evaluate

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
)

// TestPrivateModes: --epsilon repeats each transfer mode per ε, leaves the
// other modes alone, and the labels parse back.
func TestPrivateModes(t *testing.T) {
	p := Plan{Modes: []string{"learned", "tlearner", "full"}, Epsilons: []float64{1, 4, math.Inf(1)}}
	want := []string{"learned ε=1", "learned ε=4", "learned", "tlearner", "full ε=1", "full ε=4", "full"}
	if got := p.privateModes(); !slices.Equal(got, want) {
		t.Errorf("privateModes = %q, want %q", got, want)
	}
	for _, c := range []struct {
		label, mode string
		eps         float64
	}{{"learned ε=4", "learned", 4}, {"none ε=0.5", "none", 0.5}, {"learned", "learned", math.Inf(1)}} {
		if m, e := modeEpsilon(c.label); m != c.mode || e != c.eps {
			t.Errorf("modeEpsilon(%q) = %q, %v; want %q, %v", c.label, m, e, c.mode, c.eps)
		}
	}
}

// TestPrivatePlanErrors: a non-positive ε, a δ out of range and L-BFGS
// are refused.
func TestPrivatePlanErrors(t *testing.T) {
	base := Plan{Replicates: []Replicate{{Path: "x.csv"}}, Sources: []int{1}, SourceSize: 10, Split: [3]int{5, 5, 0},
		Modes: []string{"learned"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: estimator.DefaultConfig()}
	for _, c := range []struct {
		name string
		edit func(*Plan)
	}{
		{"zero ε", func(p *Plan) { p.Epsilons = []float64{0} }},
		{"δ of 1", func(p *Plan) { p.Epsilons, p.Delta = []float64{1}, 1 }},
		{"lbfgs", func(p *Plan) { p.Epsilons, p.Config.Method = []float64{1}, estimator.LBFGS }},
		{"unknown exact", func(p *Plan) { p.Epsilons, p.Exact = []float64{1}, []string{federation.ExactRowCount, "gradients"} }},
		{"empty bound", func(p *Plan) { p.Epsilons, p.Bounds = []float64{1}, map[string]federation.Bound{"x1": {Lo: 2, Hi: 2}} }},
		{"negative psi clip", func(p *Plan) { p.Epsilons, p.PsiClip = []float64{1}, -1 }},
	} {
		p := base
		c.edit(&p)
		if err := p.check(); !errors.Is(err, ErrPlan) {
			t.Errorf("%s: %v, want ErrPlan", c.name, err)
		}
	}
	if err := base.check(); err != nil {
		t.Errorf("the base plan: %v", err)
	}
}

// TestPrivateRun runs a private mode on the paper's design (binary
// covariates, a continuous outcome) as a site would be private: without a
// bound for the outcome the plan stops, naming it; with one, the test
// source's AIPW estimate is that of its released sums, whose interval
// includes the noise (aipw_noise_se), and a second run's noise differs.
func TestPrivateRun(t *testing.T) {
	path := writeSynth(t, t.TempDir(), 1, 3)
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples, cfg.Method = 40, 3, 15, 10, estimator.Adam
	plan := Plan{
		Replicates: []Replicate{{Number: 1, Path: path}}, Sources: []int{2}, SourceSize: 200, Split: [3]int{100, 100, 0},
		Modes: []string{"learned"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg, CrossFit: true,
		Epsilons: []float64{4},
	}
	if _, err := Run(context.Background(), plan); err == nil || !strings.Contains(err.Error(), "no public bound (privacy.bounds) for the outcome") ||
		!strings.Contains(err.Error(), "--bounds") {
		t.Errorf("no outcome bound: %v", err)
	}
	plan.Bounds = map[string]federation.Bound{OutcomeName: {Lo: -5, Hi: 25}}
	var aipw []float64
	for range 2 {
		rep, err := Run(context.Background(), plan)
		if err != nil {
			t.Fatal(err)
		}
		r := rep.Runs[0]
		if r.Mode != "learned ε=4" || r.AIPWNoiseSE == nil || !(*r.AIPWNoiseSE > 0) || r.PsiClipped == nil {
			t.Fatalf("run %+v: no noise in its AIPW", r)
		}
		half := (*r.AIPWUpper - *r.AIPWLower) / 2
		if !(half > 1.95**r.AIPWNoiseSE) {
			t.Errorf("interval half-width %v does not include the noise se %v", half, *r.AIPWNoiseSE)
		}
		aipw = append(aipw, *r.AIPWATE)
	}
	if aipw[0] == aipw[1] {
		t.Error("two private runs released the same AIPW sums: no noise")
	}
}

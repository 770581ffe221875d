package evaluate

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/crffd/crffd/estimator"
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

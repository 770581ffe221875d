package estimator

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// TestFeatureMapKernel checks φ(u)ᵀφ(u') ≈ exp(−e^{2a}‖u−u'‖²/2) for the
// Gaussian spectral density at several log-scales.
func TestFeatureMapKernel(t *testing.T) {
	const d, D = 3, 20000
	om, err := GaussianSpectral{}.Sample(context.Background(), d, D, 9)
	if err != nil {
		t.Fatal(err)
	}
	f := FeatureMap{Omega0: om}
	if f.In() != d || f.Out() != 2*D {
		t.Fatalf("dims %d→%d", f.In(), f.Out())
	}
	rng := rand.New(rand.NewPCG(1, 1))
	u := mat.NewDense(6, d, nil)
	for i := range 6 {
		for j := range d {
			u.Set(i, j, rng.NormFloat64())
		}
	}
	for _, a := range []float64{-1, 0, 0.5} {
		phi := f.Map(nil, u, a)
		for i := range 6 {
			for k := range 6 {
				got := floats.Dot(phi.RawRowView(i), phi.RawRowView(k))
				diff := make([]float64, d)
				floats.SubTo(diff, u.RawRowView(i), u.RawRowView(k))
				want := math.Exp(-math.Exp(2*a) * floats.Dot(diff, diff) / 2)
				if math.Abs(got-want) > 0.03 {
					t.Errorf("a=%v: k(u%d,u%d) = %.3f, want %.3f", a, i, k, got, want)
				}
			}
		}
	}
}

// TestGaussianSpectralDeterministic checks that the sampler is a pure
// function of its arguments, as every site relies on.
func TestGaussianSpectralDeterministic(t *testing.T) {
	ctx := context.Background()
	a, _ := GaussianSpectral{}.Sample(ctx, 4, 10, 3)
	b, _ := GaussianSpectral{}.Sample(ctx, 4, 10, 3)
	c, _ := GaussianSpectral{}.Sample(ctx, 4, 10, 4)
	if !mat.Equal(a, b) || mat.Equal(a, c) {
		t.Error("samples are not a function of the seed")
	}
	if _, err := (GaussianSpectral{}).Sample(ctx, 0, 10, 1); err == nil {
		t.Error("no error for d = 0")
	}
}

// TestBinaryOutcomeATE fits a binary-outcome design with a known ATE:
// three sites, p(y=1) = σ(−0.5 + x0 + 1.2w), confounded treatment.
func TestBinaryOutcomeATE(t *testing.T) {
	skipUnlessAcceptance(t)
	const m, n = 3, 1000
	schema := Schema{Binary: []bool{false, true, false}, BinaryOutcome: true}
	rng := rand.New(rand.NewPCG(17, 18))
	sites := make([]*Data, m)
	var trueATE float64
	for s := range sites {
		d := &Data{X: mat.NewDense(n, 3, nil), W: make([]float64, n), Y: make([]float64, n)}
		for i := range n {
			x0, x2 := rng.NormFloat64(), rng.NormFloat64()
			x1 := 0.0
			if rng.Float64() < 0.5 {
				x1 = 1
			}
			d.X.SetRow(i, []float64{x0, x1, x2})
			if rng.Float64() < sigmoid(0.8*x0) {
				d.W[i] = 1
			}
			p0, p1 := sigmoid(-0.5+x0+0.3*x1), sigmoid(-0.5+x0+0.3*x1+1.2)
			if s == 0 {
				trueATE += (p1 - p0) / n
			}
			p := p0
			if d.W[i] == 1 {
				p = p1
			}
			if rng.Float64() < p {
				d.Y[i] = 1
			}
		}
		sites[s] = d
	}
	cfg := DefaultConfig()
	cfg.Features, cfg.Latent = 50, 4
	cfg.Seed = 3
	model, err := Fit(context.Background(), sites, schema, GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := model.Effects(context.Background(), 0, sites[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ATE %.3f, true %.3f", e.ATE, trueATE)
	if math.Abs(e.ATE-trueATE) > 0.05 {
		t.Errorf("ATE %.3f, true %.3f", e.ATE, trueATE)
	}
}

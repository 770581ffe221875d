package estimator

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestFitPureGo fits the same model twice, once with the kernels this
// build and CPU choose (the assembly of simd_amd64.s on amd64 with AVX) and
// once with their Go versions alone, which is what the build tag purego
// compiles, and requires the CATEs to agree within a tolerance of zero:
// bit for bit, since each vector kernel performs its Go version's IEEE
// operations in the same order. Under purego, or on a CPU without AVX, both
// fits run the Go versions and the test checks only determinism.
func TestFitPureGo(t *testing.T) {
	if !asm {
		t.Log("built without the assembly kernels (purego or not amd64): both fits run the Go kernels")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	schema := Schema{Binary: []bool{false, false, true}}
	sites := []*Data{pureGoData(rng, 120), pureGoData(rng, 90)}
	cfg := DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Samples, cfg.Draws, cfg.Rounds = 40, 4, 30, 2, 40
	cfg.Seed = 3
	fit := func() []float64 {
		t.Helper()
		m, err := Fit(context.Background(), sites, schema, GaussianSpectral{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		eff, err := m.Effects(context.Background(), 0, sites[0])
		if err != nil {
			t.Fatal(err)
		}
		return eff.CATE
	}
	active := fit()

	k, a, s, two := kernel, adamKernel, sincosKernel, twoCols4
	defer func() { kernel, adamKernel, sincosKernel, twoCols4 = k, a, s, two }()
	kernel, adamKernel, sincosKernel, twoCols4 = tileKernel{gemmRows, kernelGo}, adamGo, sincosGo, twoCols4Go
	pure := fit()

	const tolerance = 0.0
	if len(active) != len(pure) {
		t.Fatalf("%d CATEs with the active kernels, %d with the Go ones", len(active), len(pure))
	}
	for i := range active {
		if d := math.Abs(active[i] - pure[i]); !(d <= tolerance) {
			t.Fatalf("row %d: CATE %v with the active kernels, %v with the Go ones (difference %g, tolerance %g)",
				i, active[i], pure[i], d, tolerance)
		}
	}
}

// pureGoData draws n rows of two continuous covariates and a binary one,
// with a confounded treatment.
func pureGoData(rng *rand.Rand, n int) *Data {
	d := &Data{X: mat.NewDense(n, 3, nil), W: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		x0, x1 := rng.NormFloat64(), rng.NormFloat64()
		x2 := float64(rng.IntN(2))
		d.X.SetRow(i, []float64{x0, x1, x2})
		if rng.Float64() < 1/(1+math.Exp(-x0)) {
			d.W[i] = 1
		}
		d.Y[i] = x0 + 0.5*x1 + x2 + (1+x1)*d.W[i] + 0.3*rng.NormFloat64()
	}
	return d
}

package kernels

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/estimator"
)

// VerifyOptions size the self-test of a kernel plugin.
type VerifyOptions struct {
	Dim       int     // input dimension of the test points
	Features  int     // number of frequencies D
	Pairs     int     // number of random pairs
	MaxRadius float64 // pair distances are uniform on [0, MaxRadius]
	Tolerance float64 // largest acceptable |φ(a)ᵀφ(b) − k(a, b)|
	Seed      uint64
}

// DefaultVerifyOptions are the figures of the documented self-test.
var DefaultVerifyOptions = VerifyOptions{Dim: 5, Features: 20000, Pairs: 200, MaxRadius: 2.5, Tolerance: 0.03, Seed: 1}

// VerifyResult reports one self-test.
type VerifyResult struct {
	Kernel     string
	Params     Params
	Options    VerifyOptions
	MaxAbsErr  float64 // max over pairs of |φ(a)ᵀφ(b) − k(a, b)|
	MeanAbsErr float64
	MinK, MaxK float64 // range of the exact kernel values tested
}

// OK reports whether the largest error is within the tolerance.
func (r VerifyResult) OK() bool { return r.MaxAbsErr <= r.Options.Tolerance }

// Verify checks that random Fourier features built from the plugin's
// frequencies approximate its exact kernel: for random pairs (a, b) it
// compares φ(a)ᵀφ(b), with φ the estimator's feature map, with Eval(a, b). The pairs are
// spread over distances from 0 to MaxRadius so that the kernel values
// cover its range rather than sitting near 0.
func Verify(ctx context.Context, c *Client, o VerifyOptions) (VerifyResult, error) {
	res := VerifyResult{Kernel: c.Info().Name, Params: c.Params(), Options: o}
	if o.Dim < 1 || o.Features < 1 || o.Pairs < 1 || !(o.Tolerance > 0) || !(o.MaxRadius > 0) {
		return res, fmt.Errorf("verify kernel %q: dimension, features, pairs, radius and tolerance must be positive", res.Kernel)
	}
	omega, err := c.Sample(ctx, o.Dim, o.Features, o.Seed)
	if err != nil {
		return res, err
	}
	a, b := verifyPairs(o)
	exact, err := c.Eval(ctx, a, b)
	if err != nil {
		return res, err
	}
	// The features are the estimator's own, at unit scale (a = 0), so the
	// self-test checks exactly what training will use.
	fm := estimator.FeatureMap{Omega0: omega}
	pa, pb := fm.Map(nil, a, 0), fm.Map(nil, b, 0)
	res.MinK, res.MaxK = math.Inf(1), math.Inf(-1)
	for i, k := range exact {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("verify kernel %q: %w", res.Kernel, err)
		}
		approx := floats.Dot(pa.RawRowView(i), pb.RawRowView(i))
		e := math.Abs(approx - k)
		res.MaxAbsErr = math.Max(res.MaxAbsErr, e)
		res.MeanAbsErr += e / float64(len(exact))
		res.MinK, res.MaxK = math.Min(res.MinK, k), math.Max(res.MaxK, k)
	}
	return res, nil
}

// verifyPairs returns Pairs×Dim matrices a and b with b = a + r·u, u a
// uniform direction and r uniform on [0, MaxRadius].
func verifyPairs(o VerifyOptions) (a, b *mat.Dense) {
	src := rand.NewPCG(o.Seed, 0x7665726966) // "verif"
	norm := distuv.Normal{Mu: 0, Sigma: 1, Src: src}
	unif := distuv.Uniform{Min: 0, Max: o.MaxRadius, Src: src}
	a, b = mat.NewDense(o.Pairs, o.Dim, nil), mat.NewDense(o.Pairs, o.Dim, nil)
	u := make([]float64, o.Dim)
	for i := 0; i < o.Pairs; i++ {
		var n2 float64
		for j := range u {
			a.Set(i, j, norm.Rand())
			u[j] = norm.Rand()
			n2 += u[j] * u[j]
		}
		r := unif.Rand() / math.Sqrt(n2)
		for j := range u {
			b.Set(i, j, a.At(i, j)+r*u[j])
		}
	}
	return a, b
}

// Package kernelcheck is the self-test of a kernel plugin (crffd kernels
// verify): random Fourier features built by the estimator from the
// plugin's frequencies must approximate the plugin's exact kernel.
//
// It lives on the command side, not in plugins/kernels, because it needs
// the estimator's feature map, which a kernel plugin must not link.
package kernelcheck

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/plugins/kernels"
)

// Kernel is the kernel under test with its parameters bound, as a
// *kernels.Client is.
type Kernel interface {
	// Info describes the kernel.
	Info() kernels.Info
	// Params returns the bound parameters.
	Params() kernels.Params
	// Sample returns d×D base frequencies at unit lengthscale for seed.
	Sample(ctx context.Context, d, D int, seed uint64) (*mat.Dense, error)
	// Eval returns k(a_i, b_i) for each row i of a and b.
	Eval(ctx context.Context, a, b mat.Matrix) ([]float64, error)
}

var _ Kernel = (*kernels.Client)(nil)

// Options size the self-test of a kernel plugin.
type Options struct {
	Dim       int     // input dimension of the test points
	Features  int     // number of frequencies D
	Pairs     int     // number of random pairs
	MaxRadius float64 // pair distances are uniform on [0, MaxRadius]
	Tolerance float64 // largest acceptable |φ(a)ᵀφ(b) − k(a, b)|
	Seed      uint64
}

// DefaultOptions are the figures of the documented self-test.
var DefaultOptions = Options{Dim: 5, Features: 20000, Pairs: 200, MaxRadius: 2.5, Tolerance: 0.03, Seed: 1}

// Result reports one self-test.
type Result struct {
	Kernel     string
	Params     kernels.Params
	Options    Options
	MaxAbsErr  float64 // max over pairs of |φ(a)ᵀφ(b) − k(a, b)|
	MeanAbsErr float64
	MinK, MaxK float64 // range of the exact kernel values tested
}

// OK reports whether the largest error is within the tolerance.
func (r Result) OK() bool { return r.MaxAbsErr <= r.Options.Tolerance }

// Verify checks that random Fourier features built from the kernel's
// frequencies approximate its exact kernel: for random pairs (a, b) it
// compares φ(a)ᵀφ(b), with φ the estimator's feature map, with Eval(a, b).
// The pairs are spread over distances from 0 to MaxRadius so that the
// kernel values cover its range rather than sitting near 0.
func Verify(ctx context.Context, c Kernel, o Options) (Result, error) {
	res := Result{Kernel: c.Info().Name, Params: c.Params(), Options: o}
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
func verifyPairs(o Options) (a, b *mat.Dense) {
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

// Settings runs the self-test of c at its default parameters and at every
// value each parameter lists for testing (kernels.Param.Values), in that
// order.
func Settings(ctx context.Context, c *kernels.Client, o Options) ([]Result, error) {
	settings := []kernels.Params{nil}
	for _, p := range c.Info().Params {
		for _, v := range p.Values {
			if v != p.Default {
				settings = append(settings, kernels.Params{p.Name: v})
			}
		}
	}
	var out []Result
	for _, p := range settings {
		cp, err := c.WithParams(p)
		if err != nil {
			return nil, err
		}
		r, err := Verify(ctx, cp, o)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

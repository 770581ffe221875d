// Command crff-kernel-rq is a third-party kernel plugin for crffd: the
// rational quadratic kernel k(a, b) = (1 + ‖a−b‖²/(2α))^(−α).
//
// It is a scale mixture of Gaussians: with τ ~ Gamma(shape α, rate α) and
// ω | τ ~ N(0, τI), ω has exactly this kernel's spectral density.
package main

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/plugins/kernels"
)

type rationalQuadratic struct{}

func (rationalQuadratic) Info() kernels.Info {
	return kernels.Info{
		Name:        "rq",
		Version:     "1",
		Description: "rational quadratic (1 + r^2/(2 alpha))^-alpha",
		Params:      []kernels.Param{{Name: "alpha", Description: "shape, > 0", Default: 2, Values: []float64{0.5, 2}}},
	}
}

func (rationalQuadratic) Sample(d, count int, seed uint64, p kernels.Params) (*mat.Dense, error) {
	if !(p["alpha"] > 0) {
		return nil, fmt.Errorf("alpha = %g: must be positive", p["alpha"])
	}
	src := kernels.NewSource(seed)
	tau := distuv.Gamma{Alpha: p["alpha"], Beta: p["alpha"], Src: src}
	normal := distuv.Normal{Mu: 0, Sigma: 1, Src: src}
	return kernels.Columns(d, count, func(col []float64) {
		s := math.Sqrt(tau.Rand())
		for i := range col {
			col[i] = s * normal.Rand()
		}
	}), nil
}

func (rationalQuadratic) Eval(a, b []float64, p kernels.Params) (float64, error) {
	r := floats.Distance(a, b, 2)
	return math.Pow(1+r*r/(2*p["alpha"]), -p["alpha"]), nil
}

func main() { kernels.Serve(rationalQuadratic{}) }

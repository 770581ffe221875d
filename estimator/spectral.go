package estimator

import (
	"context"
	"errors"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Spectral draws base frequencies of a shift-invariant kernel.
//
// Sample returns Ω0, a d×D matrix whose columns are independent draws from
// the kernel's spectral density at unit lengthscale. It must be a pure
// function of (d, D, seed): every site calls it with the same arguments and
// must obtain the same matrix.
type Spectral interface {
	Sample(ctx context.Context, d, D int, seed uint64) (*mat.Dense, error)
}

// GaussianSpectral is the spectral density of the Gaussian kernel
// k(u, u') = exp(-‖u-u'‖²/2): every entry of Ω0 is standard normal. It is a
// pure-Go sampler for tests, simulations and single-process use; daemons
// obtain their kernels from plugins instead.
type GaussianSpectral struct{}

// Sample implements Spectral.
func (GaussianSpectral) Sample(ctx context.Context, d, D int, seed uint64) (*mat.Dense, error) {
	if d <= 0 || D <= 0 {
		return nil, errors.New("estimator: spectral sample needs positive dimensions")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	src := rand.NewPCG(seed, mix(streamOmega, uint64(d), uint64(D)))
	norm := distuv.Normal{Mu: 0, Sigma: 1, Src: src}
	data := make([]float64, d*D)
	for i := range data {
		data[i] = norm.Rand()
	}
	return mat.NewDense(d, D, data), nil
}

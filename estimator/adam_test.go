package estimator

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAdamKernel checks that the active Adam kernel (vector where the CPU
// allows) matches adamGo bit for bit, over several steps and a length that
// is not a multiple of the vector width.
func TestAdamKernel(t *testing.T) {
	const n = 1031
	rng := rand.New(rand.NewPCG(5, 6))
	x0, g := make([]float64, n), make([]float64, n)
	for i := range x0 {
		x0[i] = rng.NormFloat64()
	}
	xa, ma, va := append([]float64(nil), x0...), make([]float64, n), make([]float64, n)
	xb, mb, vb := append([]float64(nil), x0...), make([]float64, n), make([]float64, n)
	for step := 1; step <= 5; step++ {
		for i := range g {
			g[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4))
		}
		p := &adamParams{
			beta1: adamBeta1, beta1c: 1 - adamBeta1, beta2: adamBeta2, beta2c: 1 - adamBeta2,
			lr: 0.01, eps: adamEps,
			c1: 1 - math.Pow(adamBeta1, float64(step)), c2: 1 - math.Pow(adamBeta2, float64(step)),
		}
		adamKernel(xa, ma, va, g, p)
		adamGo(xb, mb, vb, g, p)
		for i := range xa {
			if xa[i] != xb[i] || ma[i] != mb[i] || va[i] != vb[i] {
				t.Fatalf("step %d, parameter %d: kernel (%v, %v, %v), adamGo (%v, %v, %v)", step, i, xa[i], ma[i], va[i], xb[i], mb[i], vb[i])
			}
		}
	}
}

package estimator

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSincosKernel checks that the active sincos kernel (vector where the
// CPU allows) matches sincosGo bit for bit, and sincos matches math.Sincos
// (bit for bit where the compiler does not fuse multiply-adds, to a few
// ulps otherwise): ordinary arguments of all magnitudes, the octant
// boundaries, signed zeros, subnormals, and the values math.Sincos reduces
// specially (huge, infinite, NaN), alone and in a vector with ordinary ones.
func TestSincosKernel(t *testing.T) {
	defer func(k func(cos, sin, x []float64, scale, c float64)) { sincosKernel = k }(sincosKernel)
	kernels := map[string]func(cos, sin, x []float64, scale, c float64){"active": sincosKernel}
	for name, k := range vectorSincos {
		kernels[name] = k
	}
	for name, k := range kernels {
		sincosKernel = k
		t.Run(name, testSincosKernel)
	}
}

func testSincosKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var x []float64
	for range 20000 {
		x = append(x, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(12)-4)))
	}
	for k := -40; k <= 40; k++ {
		b := float64(k) * math.Pi / 4
		x = append(x, b, math.Nextafter(b, 1e9), math.Nextafter(b, -1e9))
	}
	x = append(x, 0, math.Copysign(0, -1), 5e-324, -5e-324, 1e-300, 1<<29-1, 1<<29, 3e8, -6e8, 1e300)
	for _, n := range []int{len(x), len(x) - 1, len(x) - 2, len(x) - 3} {
		check(t, x[:n], 1, 1)
	}
	check(t, x[:1000], 0.37, 1/math.Sqrt(400))
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e10} {
		y := append([]float64{1, 2, 3, bad, 5, 6, 7}, x[:9]...)
		check(t, y, 1, 1)
	}
}

func check(t *testing.T, x []float64, scale, c float64) {
	t.Helper()
	n := len(x)
	cos, sin := make([]float64, n), make([]float64, n)
	wantCos, wantSin := make([]float64, n), make([]float64, n)
	sincosKernel(cos, sin, x, scale, c)
	sincosGo(wantCos, wantSin, x, scale, c)
	same := func(a, b float64) bool {
		return math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b)
	}
	for j, v := range x {
		if !same(sin[j], wantSin[j]) || !same(cos[j], wantCos[j]) {
			t.Fatalf("x = %v (scale %v): kernel (%v, %v), sincosGo (%v, %v)", v, scale, sin[j], cos[j], wantSin[j], wantCos[j])
		}
		s, co := math.Sincos(scale * v)
		s1, co1 := sincos(scale * v)
		if !(same(s, s1) && same(co, co1)) && !(math.Abs(s-s1) <= 4e-16 && math.Abs(co-co1) <= 4e-16) {
			t.Fatalf("x = %v (scale %v): sincos (%v, %v), math.Sincos (%v, %v)", v, scale, s1, co1, s, co)
		}
	}
}

package estimator

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// operand returns the strided view of m, a *mat.Dense or the transpose of
// one.
func operand(m mat.Matrix) strided {
	switch t := m.(type) {
	case *mat.Dense:
		return view(t)
	case mat.Transpose:
		return view(t.Matrix.(*mat.Dense)).t()
	}
	panic("operand of another type")
}

// TestGemm checks gemm against a plain triple loop summing in order of k,
// which it must match bit for bit, for every kernel, operand transposition
// and edge shape (rows and columns not multiples of the tile).
func TestGemm(t *testing.T) {
	kernels := map[string]tileKernel{"go": {gemmRows, kernelGo}, "active": kernel}
	for name, k := range vectorKernels {
		kernels[name] = k
	}
	defer func(k tileKernel) { kernel = k }(kernel)
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(r, c int) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		for i := range r {
			for j := range c {
				m.Set(i, j, rng.NormFloat64())
			}
		}
		return m
	}
	for name, k := range kernels {
		kernel = k
		var g gemm
		// An empty inner dimension (an arm without rows) gives zeros.
		for _, M := range []int{3, 9} {
			dst := fill(M, 9)
			g.mul(view(dst), strided{rows: M}, strided{cols: 9, rs: 9, cs: 1})
			if mat.Norm(dst, 1) != 0 {
				t.Fatalf("%s: product over no terms is not zero", name)
			}
		}
		for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 3, 8}, {25, 826, 80}, {50, 880, 28}, {826, 25, 80}, {7, 1, 9}, {5, 2, 13}, {50, 28, 880}} {
			M, K, N := sh[0], sh[1], sh[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					var a, b mat.Matrix
					if ta {
						a = fill(K, M).T()
					} else {
						a = fill(M, K)
					}
					if tb {
						b = fill(N, K).T()
					} else {
						b = fill(K, N)
					}
					// A strided destination: a view into a wider matrix.
					wide := fill(M+1, N+3)
					dst := wide.Slice(1, M+1, 2, N+2).(*mat.Dense)
					g.mul(view(dst), operand(a), operand(b))
					var ref mat.Dense
					ref.Mul(a, b)
					for i := range M {
						for j := range N {
							var want float64
							for l := range K {
								want += float64(a.At(i, l) * b.At(l, j))
							}
							if got := dst.At(i, j); got != want {
								t.Fatalf("%s %v ta=%v tb=%v: C[%d,%d] = %v, want %v", name, sh, ta, tb, i, j, got, want)
							}
							if d := math.Abs(dst.At(i, j) - ref.At(i, j)); d > 1e-12*(1+math.Abs(want)) {
								t.Fatalf("%s %v: differs from gonum by %g", name, sh, d)
							}
						}
					}
				}
			}
		}
	}
}

// TestMulTwoCols checks the two-column product against mul, bit for bit,
// with the Go and the active four-row kernels, for row counts and widths
// that are and are not multiples of 4, a row stride wider than the rows,
// and signed zeros and large values in the operands.
func TestMulTwoCols(t *testing.T) {
	kernels := map[string]func(*[8]float64, strided, strided, int){"go": twoCols4Go, "active": twoCols4}
	rng := rand.New(rand.NewPCG(5, 6))
	for name, k4 := range kernels {
		defer func(old func(*[8]float64, strided, strided, int)) { twoCols4 = old }(twoCols4)
		twoCols4 = k4
		for _, M := range []int{1, 3, 4, 7, 9, 40} {
			for _, K := range []int{1, 3, 4, 8, 13, 420} {
				a := mat.NewDense(M, K+5, nil)
				b := mat.NewDense(K, 3, nil)
				for i := range M {
					for k := range K + 5 {
						a.Set(i, k, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(9)-4)))
					}
				}
				for k := range K {
					for j := range 3 {
						b.Set(k, j, rng.NormFloat64())
					}
				}
				a.Set(0, 0, math.Copysign(0, -1))
				A := view(a).block(0, M, 0, K)
				B := view(b).block(0, K, 1, 3)
				var g gemm
				want, got := make([]float64, 2*M), make([]float64, 2*M)
				g.mul(strided{data: want, rows: M, cols: 2, rs: 2, cs: 1}, A, B)
				g.mulTwoCols(strided{data: got, rows: M, cols: 2, rs: 2, cs: 1}, A, B)
				for i := range want {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
						t.Fatalf("%s: %d×%d: entry (%d,%d) = %v, mul gives %v", name, M, K, i/2, i%2, got[i], want[i])
					}
				}
			}
		}
	}
}

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
	kernels := map[string]func(int, []float64, int, int, int, []float64, int, int, []float64, int, int){"go": kernelGo}
	if kernel != nil {
		kernels["active"] = kernel
	}
	defer func(k func(int, []float64, int, int, int, []float64, int, int, []float64, int, int)) { kernel = k }(kernel)
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

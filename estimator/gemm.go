package estimator

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// The latent model's rounds are dominated by products of an n×2D feature
// matrix (n ≈ 25–50 rows of one arm or site) with weight blocks of a few to
// a hundred columns. gonum's general dgemm builds these from SSE2 axpy and
// dot kernels of at most 64 elements and starts goroutines for some shapes;
// gemm below is a small register-blocked product for exactly these shapes.
//
// Every entry of the product is computed in the same way whatever the tiling
// and whichever kernel runs,
//
//	C_ij = (…((0 + A_i0·B_0j) + A_i1·B_1j) + …) + A_i,K−1·B_K−1,j,
//
// one rounded product and one rounded sum per term, in order of k, without
// fused multiply-adds. The vector kernel computes each lane exactly as the
// scalar one does, so results are bit-identical on every CPU and do not
// depend on the tiling; overlapping tiles (used at the edges) recompute the
// same values.

// Tile of the micro-kernel: gemmRows rows (the Go and AVX kernels';
// maxTileRows for AVX-512's, kernel.rows in general) by gemmCols columns
// of C.
const (
	gemmRows    = 4
	maxTileRows = 8
	gemmCols    = 8
)

// gemm computes matrix products with a reusable packing buffer. A gemm is
// not safe for concurrent use; each site's workspaces have their own.
type gemm struct {
	pack []float64                       // K×gemmCols per packed strip of B, row k contiguous
	tile [maxTileRows * gemmCols]float64 // a tile C cannot take directly
	acc  [8]float64                      // mulTwoCols' sums of four rows
}

// strided is a matrix view: element (i, j) is data[i*rs + j*cs]. Unlike
// mat.Dense's Slice and T, taking a strided view, block or transpose
// allocates nothing, which keeps training rounds allocation-free.
type strided struct {
	data       []float64
	rows, cols int
	rs, cs     int
}

// view returns the strided view of m.
func view(m *mat.Dense) strided {
	r := m.RawMatrix()
	return strided{data: r.Data, rows: r.Rows, cols: r.Cols, rs: r.Stride, cs: 1}
}

// block returns rows [i0, i1) and columns [j0, j1) of m.
func (m strided) block(i0, i1, j0, j1 int) strided {
	if i0 < 0 || i1 < i0 || i1 > m.rows || j0 < 0 || j1 < j0 || j1 > m.cols {
		panic(fmt.Sprintf("estimator: block [%d,%d)×[%d,%d) of a %d×%d matrix", i0, i1, j0, j1, m.rows, m.cols))
	}
	if i0 == i1 || j0 == j1 {
		return strided{rows: i1 - i0, cols: j1 - j0, rs: m.rs, cs: m.cs}
	}
	off := i0*m.rs + j0*m.cs
	end := off + (i1-i0-1)*m.rs + (j1-j0-1)*m.cs + 1
	return strided{data: m.data[off:end], rows: i1 - i0, cols: j1 - j0, rs: m.rs, cs: m.cs}
}

// mul sets C = A·B, where C shares storage with neither A nor B. It panics
// on a shape mismatch, like (*mat.Dense).Mul.
//
// The kernel reads B a row at a time and needs each row's columns
// contiguous; when they are not, a strip of B is first copied ("packed").
// A product with a transposed right operand, such as dM·Qᵀ with a wide
// weight block Q, is cheaper computed as (Q·dMᵀ)ᵀ, which packs the small
// dM instead and writes the result transposed. mul picks whichever copies
// fewer elements; each entry is the same sum in the same order either way.
func (g *gemm) mul(C, A, B strided) {
	M, K, N := A.rows, A.cols, B.cols
	if B.rows != K || C.rows != M || C.cols != N {
		panic(fmt.Sprintf("estimator: gemm of %d×%d by %d×%d into %d×%d", A.rows, A.cols, B.rows, B.cols, C.rows, C.cols))
	}
	if M == 0 || N == 0 {
		return
	}
	if packCost(B, K, N) > packCost(A.t(), K, M)+M*N {
		g.run(B.t(), A.t(), C.t())
		return
	}
	g.run(A, B, C)
}

// t returns the transpose of m, sharing its storage.
func (m strided) t() strided {
	return strided{data: m.data, rows: m.cols, cols: m.rows, rs: m.cs, cs: m.rs}
}

// packCost returns how many elements of the right operand b (K×N) run packs.
func packCost(b strided, K, N int) int {
	if b.cs == 1 && N >= gemmCols {
		return 0
	}
	return K * N
}

// cachedB is the most elements of B that run expects to stay in a core's
// cache (512 KiB) while it reads each tile of rows of A against all of B.
var cachedB = 64 << 10

// run sets C = A·B for strided operands, one tile of kernel.rows rows and
// gemmCols columns of C at a time. When B is small (the weights, which the
// scorer's and a round's products have), it computes, for each tile of
// rows, every strip of gemmCols columns, so that the tile's rows of A are
// read from memory once and then from cache (A may be megabytes, as the
// scorer's features are); otherwise, for each strip, every tile of rows,
// so that the strip stays in cache (ΦᵀΦ of a chunk of rows). A last
// partial strip or tile is moved back to overlap the previous one when the
// matrix is large enough, so that tiles are always whole; only a C with
// fewer than kernel.rows rows or gemmCols columns, or with non-contiguous
// rows, goes through the tile buffer.
func (g *gemm) run(A, B, C strided) {
	M, K, N := A.rows, A.cols, B.cols
	k, tr := kernel.run, kernel.rows
	strips := (N + gemmCols - 1) / gemmCols
	direct := packCost(B, K, N) == 0
	rowsOuter := C.cs == 1 && N >= gemmCols && M >= tr && K*N <= cachedB
	// A strip of B is read where it lies, or first copied ("packed") into
	// a slot of g.pack: every strip at once when rows are the outer loop,
	// one at a time otherwise.
	slots := 1
	if rowsOuter {
		slots = strips
	}
	if !direct && cap(g.pack) < slots*K*gemmCols {
		g.pack = make([]float64, slots*K*gemmCols)
	}
	firstCol := func(s int) int {
		if j0 := s * gemmCols; j0+gemmCols <= N || N < gemmCols {
			return j0
		}
		return N - gemmCols
	}
	// strip returns where strip s of B lies, packing it into slot first
	// when pack is set.
	strip := func(s, slot int, pack bool) (b []float64, bi, brs int) {
		j0 := firstCol(s)
		if direct {
			return B.data, j0, B.rs
		}
		b = g.pack[slot*K*gemmCols : (slot+1)*K*gemmCols]
		if pack {
			nc := min(gemmCols, N-j0)
			for kk := range K {
				p := b[kk*gemmCols : (kk+1)*gemmCols]
				off := kk*B.rs + j0*B.cs
				for j := range nc {
					p[j] = B.data[off+j*B.cs]
				}
				clear(p[nc:])
			}
		}
		return b, 0, gemmCols
	}
	if rowsOuter {
		for s := range strips {
			strip(s, s, true)
		}
		for i0 := 0; i0 < M; i0 += tr {
			i0 = min(i0, M-tr)
			for s := range strips {
				b, bi, brs := strip(s, s, false)
				k(K, A.data, i0*A.rs, A.rs, A.cs, b, bi, brs, C.data, i0*C.rs+firstCol(s), C.rs)
			}
		}
		return
	}
	for s := range strips {
		b, bi, brs := strip(s, 0, true)
		j0 := firstCol(s)
		if C.cs == 1 && N >= gemmCols && M >= tr {
			for i0 := 0; i0 < M; i0 += tr {
				i0 = min(i0, M-tr)
				k(K, A.data, i0*A.rs, A.rs, A.cs, b, bi, brs, C.data, i0*C.rs+j0, C.rs)
			}
			continue
		}
		// Through the tile buffer: whole tiles if M allows, otherwise one
		// row at a time (ars = 0: the kernel's rows all read row i0).
		nr, ars := tr, A.rs
		if M < tr {
			nr, ars = 1, 0
		}
		nc := min(gemmCols, N-j0)
		for i0 := 0; i0 < M; i0 += nr {
			i0 = min(i0, M-nr)
			k(K, A.data, i0*A.rs, ars, A.cs, b, bi, brs, g.tile[:], 0, gemmCols)
			for r := range nr {
				ci := (i0+r)*C.rs + j0*C.cs
				for j, v := range g.tile[r*gemmCols : r*gemmCols+nc] {
					C.data[ci+j*C.cs] = v
				}
			}
		}
	}
}

// mulTwoCols sets C = A·B for B of two columns and A whose rows are
// contiguous (cs 1), each entry the same sum, in the same order, as mul
// computes; mul would pad B to a strip of gemmCols columns and do four
// times the work. The decoder's two outcome columns are such a product.
func (g *gemm) mulTwoCols(C, A, B strided) {
	M, K := A.rows, A.cols
	if B.rows != K || B.cols != 2 || C.rows != M || C.cols != 2 {
		panic(fmt.Sprintf("estimator: two-column product of %d×%d by %d×%d into %d×%d", A.rows, A.cols, B.rows, B.cols, C.rows, C.cols))
	}
	if A.cs != 1 || K == 0 {
		g.mul(C, A, B)
		return
	}
	acc := &g.acc // in g, not on the stack: twoCols4, a variable, would move it to the heap
	i := 0
	for ; i+4 <= M; i += 4 {
		twoCols4(acc, A, B, i)
		for r := range 4 {
			C.data[(i+r)*C.rs], C.data[(i+r)*C.rs+C.cs] = acc[r], acc[4+r]
		}
	}
	for ; i < M; i++ {
		a := A.data[i*A.rs : i*A.rs+K]
		var s0, s1 float64
		for k, v := range a {
			s0 += float64(v * B.data[k*B.rs])
			s1 += float64(v * B.data[k*B.rs+B.cs])
		}
		C.data[i*C.rs], C.data[i*C.rs+C.cs] = s0, s1
	}
}

// twoCols4 sets acc[r] and acc[4+r] to row i+r of A times the columns of
// B, for r < 4: twoCols4Go, or a vector version with identical results.
var twoCols4 = twoCols4Go

// twoCols4Go is twoCols4 in Go.
func twoCols4Go(acc *[8]float64, A, B strided, i int) {
	*acc = [8]float64{}
	twoColsTail(acc, A, B, i, 0)
}

// twoColsTail adds to acc the products of columns [k0, K) of rows i…i+3
// of A, as twoCols4 sums them.
func twoColsTail(acc *[8]float64, A, B strided, i, k0 int) {
	K := A.cols
	for r := range 4 {
		a := A.data[(i+r)*A.rs : (i+r)*A.rs+K]
		s0, s1 := acc[r], acc[4+r]
		for k := k0; k < K; k++ {
			s0 += float64(a[k] * B.data[k*B.rs])
			s1 += float64(a[k] * B.data[k*B.rs+B.cs])
		}
		acc[r], acc[4+r] = s0, s1
	}
}

// A tileKernel computes one rows×gemmCols tile,
//
//	c[ci + r*crs + j] = Σ_k a[ai + r*ars + k*acs] · b[bi + k*brs + j],
//
// for r < rows, j < gemmCols, summing in order of k as described above.
type tileKernel struct {
	rows int
	run  func(K int, a []float64, ai, ars, acs int, b []float64, bi, brs int, c []float64, ci, crs int)
}

// kernel is the active tile kernel: kernelGo's, or a vector one where the
// CPU and OS support it (AVX: four rows; AVX-512: eight).
var kernel = tileKernel{gemmRows, kernelGo}

// kernelGo is the portable micro-kernel. The explicit float64 conversions
// forbid fusing the multiply and add into an FMA (which the Go compiler does
// on some architectures), so that every platform rounds alike.
func kernelGo(K int, a []float64, ai, ars, acs int, b []float64, bi, brs int, c []float64, ci, crs int) {
	for r := range gemmRows {
		var acc [gemmCols]float64
		p := ai + r*ars
		for k := range K {
			av := a[p+k*acs]
			bk := b[bi+k*brs : bi+k*brs+gemmCols]
			for j, bv := range bk {
				acc[j] += float64(av * bv)
			}
		}
		copy(c[ci+r*crs:ci+r*crs+gemmCols], acc[:])
	}
}

// The propensity and outcome models multiply the n×2D features by one
// weight column, and their transposes by one residual column. As products
// of matrices these go through gonum's dgemm, which builds a single column
// from axpy kernels and spends about ten times as long as the BLAS level-2
// routines below.

// colVec returns the single column of m (k×1) as a BLAS vector.
func colVec(m *mat.Dense) blas64.Vector {
	r := m.RawMatrix()
	return blas64.Vector{N: r.Rows, Data: r.Data, Inc: r.Stride}
}

// matVec sets dst (n×1) to a·x, for a n×k and x k×1.
func matVec(dst, a, x *mat.Dense) {
	blas64.Gemv(blas.NoTrans, 1, a.RawMatrix(), colVec(x), 0, colVec(dst))
}

// matTVec sets dst (k×1) to aᵀ·x, for a n×k and x n×1.
func matTVec(dst, a, x *mat.Dense) {
	blas64.Gemv(blas.Trans, 1, a.RawMatrix(), colVec(x), 0, colVec(dst))
}

// outer sets dst (n×k) to x·yᵀ, for x n×1 and y k×1.
func outer(dst, x, y *mat.Dense) {
	yv := colVec(y)
	d := dst.RawMatrix()
	xv := colVec(x)
	for i := range d.Rows {
		xi := xv.Data[i*xv.Inc]
		row := d.Data[i*d.Stride : i*d.Stride+d.Cols]
		for j := range row {
			row[j] = xi * yv.Data[j*yv.Inc]
		}
	}
}

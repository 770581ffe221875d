//go:build !purego

package estimator

import (
	"math"

	"golang.org/x/sys/cpu"
)

// On amd64 the inner loops of a training round and of scoring (the gemm
// micro-kernel, the two-column product, the Adam update and the feature
// maps' sines and cosines) have vector versions in simd_amd64.s (AVX and
// AVX2; the tile kernel and sincos also in AVX-512, with eight rows or
// lanes), chosen at init when the CPU supports them. Each performs, lane by lane, exactly the
// IEEE operations of its Go version (kernelGo, twoCols4Go, adamGo,
// sincosGo) in the same order and without fused multiply-adds, so the
// choice changes the speed, never the results; TestGemm, TestMulTwoCols,
// TestAdamKernel, TestSincosKernel and TestFitPureGo check this bit for
// bit. The build tag purego leaves this file and simd_amd64.s out, so that
// the Go versions alone run: go test -tags purego ./estimator/... tests
// that path.

// kernel4x8AVX is kernelGo's tile in AVX: a, b and c point
// at the tile's first elements and the strides are in bytes. It uses
// separate VMULPD and VADDPD, never FMA, so that each lane rounds exactly as
// kernelGo does.
//
//go:noescape
func kernel4x8AVX(k int, a *float64, ars, acs int, b *float64, brs int, c *float64, crs int)

// twoCols4AVX sums four rows of A times the two columns of B over the
// first k columns of A (k a positive multiple of 4), as twoColsGo does:
// a points at the first row's first element, b at B's first; strides in
// bytes. Column 0's sums go to acc[0:4], column 1's to acc[4:8].
//
//go:noescape
func twoCols4AVX(k int, a *float64, ars int, b *float64, brs, bcs int, acc *[8]float64)

// twoCols4Vec is twoCols4 with twoCols4AVX over the largest multiple of 4
// columns.
func twoCols4Vec(acc *[8]float64, A, B strided, i int) {
	K := A.cols
	k4 := K &^ 3
	*acc = [8]float64{}
	if k4 > 0 {
		_ = A.data[(i+3)*A.rs+K-1]
		_ = B.data[(K-1)*B.rs+B.cs]
		twoCols4AVX(k4, &A.data[i*A.rs], 8*A.rs, &B.data[0], 8*B.rs, 8*B.cs, acc)
	}
	twoColsTail(acc, A, B, i, k4)
}

// kernel8x8AVX512 is kernel4x8AVX with a tile of eight rows, in AVX-512.
//
//go:noescape
func kernel8x8AVX512(k int, a *float64, ars, acs int, b *float64, brs int, c *float64, crs int)

// adamAVX is adamGo on n parameters, n a multiple of 4, in AVX.
//
//go:noescape
func adamAVX(x, m, v, grad *float64, n int, p *adamParams)

// sincosAVX2 is sincosGo on n values, n a multiple of 4, in AVX2; it
// returns nonzero if some value is one sincos leaves to math.Sincos (other
// than a zero, which it gets right), and then the caller recomputes them.
//
//go:noescape
func sincosAVX2(cos, sin, x *float64, n int, scale, c float64, tab *sincosTable) (slow int)

// sincosAVX512 is sincosAVX2 on n values, n a multiple of 8, in AVX-512.
//
//go:noescape
func sincosAVX512(cos, sin, x *float64, n int, scale, c float64, tab *sincosTable) (slow int)

// asm reports that this build has the assembly kernels; the CPU decides
// whether they run.
const asm = true

// vectorKernels are the vector tile kernels this CPU and OS support, by
// name, so that tests can check each of them, not only the active one.
var vectorKernels = map[string]tileKernel{}

// vectorSincos are the vector sincos kernels this CPU and OS support.
var vectorSincos = map[string]func(cos, sin, x []float64, scale, c float64){}

func init() {
	// x/sys/cpu reports AVX (AVX-512) only when the OS also saves the YMM
	// (ZMM and mask) registers.
	if cpu.X86.HasAVX {
		kernel = tileKernel{gemmRows, kernelAVX}
		vectorKernels["avx"] = kernel
		twoCols4 = twoCols4Vec
		adamKernel = adamVec
	}
	if cpu.X86.HasAVX2 {
		sincosKernel = sincosVec
		vectorSincos["avx2"] = sincosVec
	}
	// sincosAVX512 also needs AVX512DQ (its masks from vectors, its
	// logic on doubles) and AVX512VL (its integers in YMM registers).
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL {
		kernel = tileKernel{maxTileRows, kernelAVX512}
		vectorKernels["avx512"] = kernel
		sincosKernel = sincosVec512
		vectorSincos["avx512"] = sincosVec512
	}
}

// sincosTable holds the constants of sincos, each four times for the four
// lanes of a vector, in the order simd_amd64.s expects.
type sincosTable struct {
	fourPi, pi4a, pi4b, pi4c, one, half [4]float64
	cos, sin                            [6][4]float64
	abs, sign, big                      [4]uint64
	ones32                              [4]uint32
	_                                   [4]uint32
}

var sincosTab = func() *sincosTable {
	four := func(v float64) [4]float64 { return [4]float64{v, v, v, v} }
	t := &sincosTable{
		fourPi: four(4 / math.Pi),
		pi4a:   four(pi4A),
		pi4b:   four(pi4B),
		pi4c:   four(pi4C),
		one:    four(1),
		half:   four(0.5),
		abs:    [4]uint64{1<<63 - 1, 1<<63 - 1, 1<<63 - 1, 1<<63 - 1},
		sign:   [4]uint64{1 << 63, 1 << 63, 1 << 63, 1 << 63},
		ones32: [4]uint32{1, 1, 1, 1},
	}
	for k := range 6 {
		t.cos[k], t.sin[k] = four(sincosCos[k]), four(sincosSin[k])
	}
	big := math.Float64bits(reduceThreshold)
	t.big = [4]uint64{big, big, big, big}
	return t
}()

// sincosVec runs sincosAVX2 on the largest multiple of 4 values and
// sincosGo on the rest, or on all of them if one needs the slow reduction.
func sincosVec(cos, sin, x []float64, scale, c float64) {
	n := len(x)
	cos, sin = cos[:n], sin[:n]
	k := n &^ 3
	if k > 0 && sincosAVX2(&cos[0], &sin[0], &x[0], k, scale, c, sincosTab) != 0 {
		k = 0
	}
	sincosGo(cos[k:], sin[k:], x[k:], scale, c)
}

// sincosVec512 runs sincosAVX512 on the largest multiple of 8 values and
// sincosVec on the rest, or sincosGo on all of them if one needs the slow
// reduction.
func sincosVec512(cos, sin, x []float64, scale, c float64) {
	n := len(x)
	cos, sin = cos[:n], sin[:n]
	k := n &^ 7
	if k > 0 && sincosAVX512(&cos[0], &sin[0], &x[0], k, scale, c, sincosTab) != 0 {
		sincosGo(cos, sin, x, scale, c)
		return
	}
	sincosVec(cos[k:], sin[k:], x[k:], scale, c)
}

// adamVec runs adamAVX on the largest multiple of 4 parameters and adamGo
// on the rest.
func adamVec(x, m, v, g []float64, p *adamParams) {
	n := len(x)
	m, v, g = m[:n], v[:n], g[:n]
	k := n &^ 3
	if k > 0 {
		adamAVX(&x[0], &m[0], &v[0], &g[0], k, p)
	}
	adamGo(x[k:], m[k:], v[k:], g[k:], p)
}

// kernelAVX checks the tile's bounds once, which is what the slice indexing
// of kernelGo does element by element, and runs the assembly kernel.
func kernelAVX(K int, a []float64, ai, ars, acs int, b []float64, bi, brs int, c []float64, ci, crs int) {
	if K == 0 {
		kernelGo(K, a, ai, ars, acs, b, bi, brs, c, ci, crs)
		return
	}
	_ = a[ai+(gemmRows-1)*ars+(K-1)*acs]
	_ = a[ai+(K-1)*acs]
	_ = b[bi+(K-1)*brs+gemmCols-1]
	_ = c[ci+(gemmRows-1)*crs+gemmCols-1]
	kernel4x8AVX(K, &a[ai], 8*ars, 8*acs, &b[bi], 8*brs, &c[ci], 8*crs)
}

// kernelAVX512 is kernelAVX for kernel8x8AVX512's tile of eight rows.
func kernelAVX512(K int, a []float64, ai, ars, acs int, b []float64, bi, brs int, c []float64, ci, crs int) {
	if K == 0 {
		for r := range maxTileRows {
			clear(c[ci+r*crs : ci+r*crs+gemmCols])
		}
		return
	}
	_ = a[ai+(maxTileRows-1)*ars+(K-1)*acs]
	_ = a[ai+(K-1)*acs]
	_ = b[bi+(K-1)*brs+gemmCols-1]
	_ = c[ci+(maxTileRows-1)*crs+gemmCols-1]
	kernel8x8AVX512(K, &a[ai], 8*ars, 8*acs, &b[bi], 8*brs, &c[ci], 8*crs)
}

package estimator

import (
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// FeatureMap is the random Fourier feature map of one kernel input,
//
//	φ(u) = D^(-1/2) [cos(uᵀΩ), sin(uᵀΩ)] ∈ R^(2D),   Ω = e^a·Ω0,
//
// so that φ(u)ᵀφ(u') approximates k(e^a·(u-u')) for the kernel whose spectral
// density Ω0 was drawn from. The log-scale a is an inverse log-lengthscale:
// larger a gives a rougher function.
//
// With Linear = γ > 0 the map also carries the input itself,
//
//	φ(u) = [D^(-1/2) cos(uᵀΩ), D^(-1/2) sin(uᵀΩ), γ·d^(-1/2)·u] ∈ R^(2D+d),
//
// so that φ(u)ᵀφ(u') approximates k(e^a·(u−u')) + γ²·uᵀu'/d: the sum of the
// shift-invariant kernel and a linear kernel, still a kernel method whose
// weights are learned exactly as before.
type FeatureMap struct {
	Omega0 *mat.Dense // d×D base frequencies at unit lengthscale
	Linear float64    // γ: weight of the linear features; 0 for none
}

// In returns the input dimension d.
func (f FeatureMap) In() int { r, _ := f.Omega0.Dims(); return r }

// Out returns the feature dimension: 2D, plus d with linear features.
func (f FeatureMap) Out() int {
	d, c := f.Omega0.Dims()
	if f.Linear > 0 {
		return 2*c + d
	}
	return 2 * c
}

// linScale is the factor γ/√d of the linear features, 0 without them.
func (f FeatureMap) linScale() float64 {
	if f.Linear <= 0 {
		return 0
	}
	return f.Linear / math.Sqrt(float64(f.In()))
}

// setLinear writes c·u into columns [2D, 2D+d) of phi for c = linScale.
func setLinear(phi *mat.Dense, u mat.Matrix, c float64, D int) {
	if c == 0 {
		return
	}
	n, d := u.Dims()
	for i := range n {
		row := phi.RawRowView(i)[2*D : 2*D+d]
		for j := range row {
			row[j] = c * u.At(i, j)
		}
	}
}

// Map stores φ(u_i) for every row u_i of u (n×d) in the rows of dst, which
// must be n×Out() or empty, and returns dst.
func (f FeatureMap) Map(dst *mat.Dense, u mat.Matrix, a float64) *mat.Dense {
	n, _ := u.Dims()
	_, D := f.Omega0.Dims()
	var pre mat.Dense
	pre.Mul(u, f.Omega0)
	if dst == nil || dst.IsEmpty() {
		dst = mat.NewDense(n, f.Out(), nil)
	}
	mapRows(dst, &pre, math.Exp(a), D)
	setLinear(dst, u, f.linScale(), D)
	return dst
}

// mapRows writes φ = D^(-1/2)[cos(scale·pre), sin(scale·pre)] into phi
// (n×2D) from the unit-scale pre-activations pre (n×D).
func mapRows(phi, pre *mat.Dense, scale float64, D int) {
	c := 1 / math.Sqrt(float64(D))
	n, _ := pre.Dims()
	for i := range n {
		row := phi.RawRowView(i)
		sincosKernel(row[:D], row[D:2*D], pre.RawRowView(i), scale, c)
	}
}

// sincosKernel sets cos[j] = c·cos(scale·x[j]) and sin[j] = c·sin(scale·x[j]):
// sincosGo, or a vector version of it with identical results.
var sincosKernel = sincosGo

// sincosGo is sincosKernel in Go, with sincos.
func sincosGo(cos, sin, x []float64, scale, c float64) {
	cos, sin = cos[:len(x)], sin[:len(x)]
	for j, v := range x {
		s, co := sincos(scale * v)
		cos[j] = c * co
		sin[j] = c * s
	}
}

// Constants of math.Sincos: π/4 in three parts, and the Cephes polynomials'
// coefficients for cos and sin on [−π/4, π/4] (math's _cos and _sin).
const (
	pi4A = 7.85398125648498535156e-1
	pi4B = 3.77489470793079817668e-8
	pi4C = 2.69515142907905952645e-15

	// reduceThreshold is where math.Sincos switches to Payne–Hanek
	// reduction.
	reduceThreshold = 1 << 29
)

var (
	sincosCos = [6]float64{
		-1.13585365213876817300e-11,
		2.08757008419747316778e-9,
		-2.75573141792967388112e-7,
		2.48015872888517045348e-5,
		-1.38888888888730564116e-3,
		4.16666666666665929218e-2,
	}
	sincosSin = [6]float64{
		1.58962301576546568060e-10,
		-2.50507477628578072866e-8,
		2.75573136213857245213e-6,
		-1.98412698295895385996e-4,
		8.33333333332211858878e-3,
		-1.66666666666666307295e-1,
	}
)

// sincos is math.Sincos written out with every product rounded before it
// is added (the float64 conversions forbid fused multiply-adds). That is what
// math.Sincos computes where the compiler does not fuse (amd64 below
// GOAMD64=v3), and what the vector kernel, which never fuses, computes on
// every platform. Zeros, NaNs, infinities and the arguments math.Sincos
// reduces otherwise go to math.Sincos itself.
func sincos(x float64) (sin, cos float64) {
	ax := math.Abs(x)
	if x == 0 || !(ax < reduceThreshold) {
		return math.Sincos(x)
	}
	j := uint64(ax * (4 / math.Pi))
	y := float64(j)
	if j&1 == 1 { // map zeros to origin
		j++
		y++
	}
	j &= 7
	z := float64(float64(ax-float64(y*pi4A))-float64(y*pi4B)) - float64(y*pi4C)
	sinNeg, cosNeg := x < 0, false
	if j > 3 { // reflect in x axis
		j -= 4
		sinNeg, cosNeg = !sinNeg, !cosNeg
	}
	if j > 1 {
		cosNeg = !cosNeg
	}
	zz := float64(z * z)
	pc, ps := float64(sincosCos[0]*zz), float64(sincosSin[0]*zz)
	for k := 1; k < 5; k++ {
		pc = float64((pc + sincosCos[k]) * zz)
		ps = float64((ps + sincosSin[k]) * zz)
	}
	pc += sincosCos[5]
	ps += sincosSin[5]
	cos = float64(1.0-float64(0.5*zz)) + float64(float64(zz*zz)*pc)
	sin = z + float64(float64(z*zz)*ps)
	if j == 2 {
		sin, cos = cos, sin
	}
	if cosNeg {
		cos = -cos
	}
	if sinNeg {
		sin = -sin
	}
	return sin, cos
}

// rffLayer evaluates a FeatureMap on a batch of n inputs and keeps what its
// backward pass needs. Its matrices are allocated once, for the largest batch
// it will see, so that training rounds do not allocate.
type rffLayer struct {
	omega0 *mat.Dense // d×D
	omegaT *mat.Dense // D×d: Ω0ᵀ stored row-major, built by inputGrad
	D      int
	lin    float64    // scale of the linear features (0: none)
	pre    *mat.Dense // n×D: U·Ω0, the pre-activations at unit scale
	phi    *mat.Dense // n×Out: φ(U) for the current a
	dphi   *mat.Dense // n×Out: ∂J/∂φ, filled by the model before backward
	dact   *mat.Dense // n×D: ∂J/∂(U·Ω), filled by backward
	scale  float64    // e^a of the last forward pass
	gemm   gemm       // products with Ω0
}

func newRFFLayer(fm FeatureMap, n int) *rffLayer {
	_, D := fm.Omega0.Dims()
	return &rffLayer{
		omega0: fm.Omega0,
		D:      D,
		lin:    fm.linScale(),
		pre:    mat.NewDense(n, D, nil),
		phi:    mat.NewDense(n, fm.Out(), nil),
		dphi:   mat.NewDense(n, fm.Out(), nil),
		dact:   mat.NewDense(n, D, nil),
	}
}

// setInput computes the unit-scale pre-activations U·Ω0 for the inputs u
// (n×d), and the linear features, which do not depend on a. Inputs that do
// not change between rounds call it once.
func (l *rffLayer) setInput(u *mat.Dense) {
	l.gemm.mul(view(l.pre), view(u), view(l.omega0))
	setLinear(l.phi, u, l.lin, l.D)
}

// forward computes φ(U) at log-scale a.
func (l *rffLayer) forward(a float64) {
	l.scale = math.Exp(a)
	mapRows(l.phi, l.pre, l.scale, l.D)
}

// backward takes dphi = ∂J/∂φ (n×2D) and returns ∂J/∂a, leaving
// ∂J/∂(U·Ω) in l.dact for inputGrad.
//
// With A = e^a·U·Ω0, φ_cos = c·cos A and φ_sin = c·sin A, so
// ∂J/∂A = −dφ_cos⊙φ_sin + dφ_sin⊙φ_cos and ∂J/∂a = Σ ∂J/∂A ⊙ A: the features
// already hold the sines and cosines the derivative needs.
func (l *rffLayer) backward(dphi *mat.Dense) float64 {
	n, _ := l.pre.Dims()
	D := l.D
	var da float64
	for i := range n {
		g := dphi.RawRowView(i)
		f := l.phi.RawRowView(i)
		p := l.pre.RawRowView(i)
		d := l.dact.RawRowView(i)
		gc, gs := g[:D], g[D:2*D]
		fc, fs := f[:D], f[D:2*D]
		var acc float64
		for j := range D {
			v := gs[j]*fc[j] - gc[j]*fs[j]
			d[j] = v
			acc += v * p[j]
		}
		da += acc
	}
	return da * l.scale
}

// inputGrad stores ∂J/∂U = e^a·(∂J/∂A)·Ω0ᵀ (n×d), plus the linear
// features' c·∂J/∂φ_lin, in du after backward.
func (l *rffLayer) inputGrad(du *mat.Dense) {
	// The product reads its right operand by rows; Ω0ᵀ stored as such
	// spares packing a transposed copy of it every round.
	if l.omegaT == nil {
		l.omegaT = mat.DenseCopyOf(l.omega0.T())
	}
	l.gemm.mul(view(du), view(l.dact), view(l.omegaT))
	n, _ := du.Dims()
	for i := range n {
		floats.Scale(l.scale, du.RawRowView(i)) // in place: Dense.Scale allocates
	}
	if l.lin == 0 {
		return
	}
	n, d := du.Dims()
	for i := range n {
		g := l.dphi.RawRowView(i)[2*l.D : 2*l.D+d]
		row := du.RawRowView(i)
		for j, v := range g {
			row[j] += l.lin * v
		}
	}
}

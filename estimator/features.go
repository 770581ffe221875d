package estimator

import (
	"math"

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
		p := pre.RawRowView(i)
		row := phi.RawRowView(i)
		cosv, sinv := row[:D], row[D:2*D]
		for j, v := range p {
			s, co := math.Sincos(scale * v)
			cosv[j] = c * co
			sinv[j] = c * s
		}
	}
}

// rffLayer evaluates a FeatureMap on a batch of n inputs and keeps what its
// backward pass needs. Its matrices are allocated once, for the largest batch
// it will see, so that training rounds do not allocate.
type rffLayer struct {
	omega0 *mat.Dense // d×D
	D      int
	lin    float64    // scale of the linear features (0: none)
	pre    *mat.Dense // n×D: U·Ω0, the pre-activations at unit scale
	phi    *mat.Dense // n×Out: φ(U) for the current a
	dphi   *mat.Dense // n×Out: ∂J/∂φ, filled by the model before backward
	dact   *mat.Dense // n×D: ∂J/∂(U·Ω), filled by backward
	scale  float64    // e^a of the last forward pass
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
func (l *rffLayer) setInput(u mat.Matrix) {
	l.pre.Mul(u, l.omega0)
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
	du.Mul(l.dact, l.omega0.T())
	du.Scale(l.scale, du)
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

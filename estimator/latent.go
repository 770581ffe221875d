package estimator

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// Decoder output columns: the outcome under each arm, the treatment, then
// one column per covariate. The site copies the received y0, y1, w and x
// blocks side by side so that one product φ_z(z)ᵀW_dec yields all outputs.
const (
	decY0 = iota
	decY1
	decW
	decX
)

// latentWork holds the latent model's per-round matrices for n rows and M
// draws. Draw j of row i is row j·n+i of the nM-row matrices.
type latentWork struct {
	m      int
	dec    *rffLayer  // nM rows, on z
	mq     *mat.Dense // n×dz encoder means
	dmq    *mat.Dense // n×dz
	eps    *mat.Dense // nM×dz noise draws
	epsKey uint64
	epsSet bool
	z, dz  *mat.Dense // nM×dz
	wdec   *mat.Dense // 2D×(3+dx)
	o, do  *mat.Dense // nM×(3+dx) decoder outputs and ∂J/∂outputs
	gdec   *mat.Dense // 2D×(3+dx)
	sq     []float64  // dz: s_q = e^r
}

func (s *Site) latentWork() *latentWork {
	if s.lat != nil {
		return s.lat
	}
	cfg := s.setup.Config
	dz, M, twoD := cfg.Latent, cfg.Draws, s.setup.Maps[mapDecoder].Out()
	dx := len(s.setup.Schema.Binary)
	nM := s.n * M
	s.lat = &latentWork{
		m:    M,
		dec:  newRFFLayer(s.setup.Maps[mapDecoder], nM),
		mq:   mat.NewDense(s.n, dz, nil),
		dmq:  mat.NewDense(s.n, dz, nil),
		eps:  mat.NewDense(nM, dz, nil),
		z:    mat.NewDense(nM, dz, nil),
		dz:   mat.NewDense(nM, dz, nil),
		wdec: mat.NewDense(twoD, decX+dx, nil),
		o:    mat.NewDense(nM, decX+dx, nil),
		do:   mat.NewDense(nM, decX+dx, nil),
		gdec: mat.NewDense(twoD, decX+dx, nil),
		sq:   make([]float64, dz),
	}
	return s.lat
}

// drawNoise fills eps with the standard normal draws of key: draw-major,
// then rows in their original (not arm-sorted) order, then coordinates, from
// PCG(Seed, mix(streamLatent, site, key)). A site daemon regenerates exactly
// these numbers from the same three integers.
func (s *Site) drawNoise(lw *latentWork, key uint64) {
	if lw.epsSet && lw.epsKey == key {
		return
	}
	rng := newRand(s.setup.Config.Seed, streamLatent, uint64(s.index), key)
	for j := range lw.m {
		for i := range s.n {
			row := lw.eps.RawRowView(j*s.n + s.pos[i])
			for k := range row {
				row[k] = rng.NormFloat64()
			}
		}
	}
	lw.epsKey, lw.epsSet = key, true
}

// latent computes the VAE's site loss, averaged over the M draws per row:
//
//	J^(s) = Σ_i [ (1/M)Σ_j −log p(y_i, w_i, x_i | z_ij) + KL(q_i ‖ N(0,I)) ],
//	z_ij = m_i + s_q ⊙ ε_ij,   m_i = φ_q([x_i, y_i])ᵀW_q{w_i},   s_q = e^r,
//
// or m_i = φ_q(x_i)ᵀW_q for a binary outcome (Setup.EncodesOutcome), where
// the Gaussian terms drop their constant ½·log 2π, a continuous y has
// variance e^{2t} (t shared, as in the outcome model), and
// KL = ½Σ_k (s_k² + m_ik² − 1 − 2r_k).
func (s *Site) latent(in *SiteInput, out *SiteOutput) {
	byArm := s.setup.EncodesOutcome()
	enc := s.fixedLayer(&s.enc, mapEncoder, func() mat.Matrix {
		if !byArm {
			return s.x
		}
		_, dx := s.x.Dims()
		u := mat.NewDense(s.n, dx+1, nil)
		u.Slice(0, s.n, 0, dx).(*mat.Dense).Copy(s.x)
		u.SetCol(dx, s.y)
		return u
	})
	lw := s.latentWork()
	s.drawNoise(lw, in.Noise)
	binaryY := s.setup.Schema.BinaryOutcome
	binX := s.setup.Schema.Binary
	n, M := s.n, lw.m
	invM := 1 / float64(M)
	// A continuous y has a learned noise scale e^t: with a fixed unit
	// variance the y term's weight would depend on the outcome's units.
	var ty, inv2 float64
	if !binaryY {
		ty = in.Shared["t"][0]
		inv2 = math.Exp(-2 * ty)
	}
	var sqY float64

	// Encoder.
	enc.forward(in.Shared["a_q"][0])
	q0, q1 := in.Weights["q0"], in.Weights["q1"]
	phiQ0, phiQ1 := s.arms(enc.phi)
	mq0, mq1 := s.arms(lw.mq)
	switch {
	case !byArm:
		lw.mq.Mul(enc.phi, in.Weights["q"])
	default:
		if phiQ0 != nil {
			mq0.Mul(phiQ0, q0)
		}
		if phiQ1 != nil {
			mq1.Mul(phiQ1, q1)
		}
	}
	r := in.Shared["r"]
	var kl float64
	for k, rk := range r {
		lw.sq[k] = math.Exp(rk)
		kl += float64(n) * 0.5 * (lw.sq[k]*lw.sq[k] - 1 - 2*rk)
	}
	for i := range n {
		mrow := lw.mq.RawRowView(i)
		for _, v := range mrow {
			kl += 0.5 * v * v
		}
		for j := range M {
			zrow := lw.z.RawRowView(j*n + i)
			erow := lw.eps.RawRowView(j*n + i)
			for k := range zrow {
				zrow[k] = mrow[k] + lw.sq[k]*erow[k]
			}
		}
	}

	// Decoder.
	lw.dec.setInput(lw.z)
	lw.dec.forward(in.Shared["a_z"][0])
	setCols(lw.wdec, decY0, in.Weights["y0"])
	setCols(lw.wdec, decY1, in.Weights["y1"])
	setCols(lw.wdec, decW, in.Weights["w"])
	setCols(lw.wdec, decX, in.Weights["x"])
	lw.o.Mul(lw.dec.phi, lw.wdec)

	var nll float64
	for j := range M {
		for i := range n {
			o := lw.o.RawRowView(j*n + i)
			d := lw.do.RawRowView(j*n + i)
			arm := decY0
			if s.w[i] == 1 {
				arm = decY1
			}
			d[decY0], d[decY1] = 0, 0
			var l, g float64
			if binaryY {
				l, g = nllTerm(o[arm], s.y[i], true)
				nll += l
			} else {
				r := s.y[i] - o[arm]
				sqY += r * r
				g = -r * inv2
			}
			d[arm] = g * invM
			l, g = nllTerm(o[decW], s.w[i], true)
			nll += l
			d[decW] = g * invM
			xrow := s.x.RawRowView(i)
			for c, b := range binX {
				l, g = nllTerm(o[decX+c], xrow[c], b)
				nll += l
				d[decX+c] = g * invM
			}
		}
	}
	out.Loss = nll*invM + kl
	if !binaryY {
		out.Loss += float64(n)*ty + 0.5*sqY*inv2*invM
		out.Shared["t"][0] = float64(n) - sqY*inv2*invM
	}

	// Decoder gradients.
	lw.gdec.Mul(lw.dec.phi.T(), lw.do)
	getCols(out.Grads["y0"], lw.gdec, decY0)
	getCols(out.Grads["y1"], lw.gdec, decY1)
	getCols(out.Grads["w"], lw.gdec, decW)
	getCols(out.Grads["x"], lw.gdec, decX)
	lw.dec.dphi.Mul(lw.do, lw.wdec.T())
	out.Shared["a_z"][0] = lw.dec.backward(lw.dec.dphi)
	lw.dec.inputGrad(lw.dz)

	// Back through z = m + s⊙ε to the encoder and r.
	dr := out.Shared["r"]
	for k := range dr {
		dr[k] = float64(n) * (lw.sq[k]*lw.sq[k] - 1)
	}
	for i := range n {
		dm := lw.dmq.RawRowView(i)
		copy(dm, lw.mq.RawRowView(i))
		for j := range M {
			dzrow := lw.dz.RawRowView(j*n + i)
			erow := lw.eps.RawRowView(j*n + i)
			for k, g := range dzrow {
				dm[k] += g
				dr[k] += g * erow[k] * lw.sq[k]
			}
		}
	}
	if !byArm {
		out.Grads["q"].Mul(enc.phi.T(), lw.dmq)
		enc.dphi.Mul(lw.dmq, in.Weights["q"].T())
		out.Shared["a_q"][0] = enc.backward(enc.dphi)
		return
	}
	dmq0, dmq1 := s.arms(lw.dmq)
	dphiQ0, dphiQ1 := s.arms(enc.dphi)
	g0, g1 := out.Grads["q0"], out.Grads["q1"]
	g0.Zero()
	g1.Zero()
	if phiQ0 != nil {
		g0.Mul(phiQ0.T(), dmq0)
		dphiQ0.Mul(dmq0, q0.T())
	}
	if phiQ1 != nil {
		g1.Mul(phiQ1.T(), dmq1)
		dphiQ1.Mul(dmq1, q1.T())
	}
	out.Shared["a_q"][0] = enc.backward(enc.dphi)
}

// nllTerm returns the negative log-likelihood of v under a unit-variance
// Gaussian (without its constant) or, when binary, a Bernoulli with logit o,
// and its derivative with respect to o.
func nllTerm(o, v float64, binary bool) (loss, grad float64) {
	if binary {
		return softplus(o) - v*o, sigmoid(o) - v
	}
	r := v - o
	return 0.5 * r * r, -r
}

// setCols copies src (r×k) into columns [c, c+k) of dst.
func setCols(dst *mat.Dense, c int, src *mat.Dense) {
	r, k := src.Dims()
	dst.Slice(0, r, c, c+k).(*mat.Dense).Copy(src)
}

// getCols copies columns [c, c+k) of src into dst (r×k).
func getCols(dst *mat.Dense, src *mat.Dense, c int) {
	r, k := dst.Dims()
	dst.Copy(src.Slice(0, r, c, c+k))
}

package estimator

import (
	"math"
	"math/rand/v2"

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
	enc    latentEncoder
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
	gemm   gemm       // products with the weights
	pcg    *rand.PCG  // the noise generator, reseeded for every key
	rng    *rand.Rand // draws from pcg
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
	s.lat.enc = s.newLatentEncoder(nil)
	return s.lat
}

// latentEncoder is the encoder's feature map φ_q on the site's fixed rows
// u_i = [x_i, y_i] (or x_i alone for a binary outcome; see
// Setup.EncodesOutcome), arranged so that each weight block's means
// m = φ_q·W_q and the derivative of φ_q with respect to its log-scale a_q
// come from one product. The rows form groups, one per weight block: the
// two arms for q0 and q1, or all rows for the single block q.
//
// With A = e^a·U·Ω0, ∂φ_q/∂a = e^a·ψ where, column for column of φ_q,
// ψ = [−φ_sin ⊙ UΩ0, φ_cos ⊙ UΩ0, 0] (the linear features do not depend on
// a). Back-propagation needs ∂J/∂a = Σ ∂J/∂φ ⊙ ∂φ/∂a with ∂J/∂φ = dM·W_qᵀ,
// which is e^a·⟨dM, ψ·W_q⟩: ψ·W_q costs what M = φ·W_q costs and is computed
// with it, instead of forming the n×2D matrix dM·W_qᵀ in the backward pass.
type latentEncoder struct {
	D     int
	byArm bool       // one weight block per arm (q0, q1) rather than one (q)
	pre   *mat.Dense // n×D: U·Ω0, fixed
	u     *mat.Dense // 2n×Out: per group (control first), its rows of φ, then of ψ
	um    *mat.Dense // 2n×dz: u·W_q of the group, rows as in u
	in    *mat.Dense // n×(dx+1): the inputs [x, y] when byArm, else nil (x is used)
	scale float64    // e^a of the last forward pass
}

// newLatentEncoder builds the encoder on the site's rows, in old's
// matrices when old (nil for none) has the site's sizes: a mini-batch
// rebuilds it every round.
func (s *Site) newLatentEncoder(old *latentEncoder) latentEncoder {
	fm := s.setup.Maps[mapEncoder]
	_, D := fm.Omega0.Dims()
	byArm := s.setup.EncodesOutcome()
	e := latentEncoder{D: D, byArm: byArm}
	if old != nil && old.pre != nil && old.byArm == byArm {
		if r, _ := old.pre.Dims(); r == s.n {
			e.pre, e.u, e.um, e.in = old.pre, old.u, old.um, old.in
			// The ψ rows' linear columns must be 0, and a row of ψ may
			// have been a row of φ in the last batch.
			e.u.Zero()
		}
	}
	if e.pre == nil {
		e.pre = mat.NewDense(s.n, D, nil)
		e.u = mat.NewDense(2*s.n, fm.Out(), nil)
		e.um = mat.NewDense(2*s.n, s.setup.Config.Latent, nil)
	}
	in := s.x
	if byArm {
		_, dx := s.x.Dims()
		if e.in == nil {
			e.in = mat.NewDense(s.n, dx+1, nil)
		}
		in = e.in
		in.Slice(0, s.n, 0, dx).(*mat.Dense).Copy(s.x)
		in.SetCol(dx, s.y)
	}
	var g gemm
	g.mul(view(e.pre), view(in), view(fm.Omega0))
	if c := fm.linScale(); c != 0 {
		for i := range s.n {
			phi, _ := e.rows(s, i)
			row := e.u.RawRowView(phi)[2*D:]
			for j, v := range in.RawRowView(i) {
				row[j] = c * v
			}
		}
	}
	return e
}

// groups returns the number of row groups, one per weight block.
func (e *latentEncoder) groups() int {
	if e.byArm {
		return 2
	}
	return 1
}

// rows returns the rows of u (and um) that hold φ and ψ of the site's row i
// (arm-sorted): group g's rows, from r_g on, have their φ from 2r_g and
// their ψ after those.
func (e *latentEncoder) rows(s *Site, i int) (phi, psi int) {
	if !e.byArm {
		return i, s.n + i
	}
	if i < s.n0 {
		return i, s.n0 + i
	}
	return s.n0 + i, s.n + i
}

// group returns the rows [lo, hi) of u and um that belong to group g, and
// its number of site rows: φ rows are [lo, lo+rows), ψ rows [lo+rows, hi).
func (e *latentEncoder) group(s *Site, g int) (lo, hi, rows int) {
	switch {
	case !e.byArm:
		return 0, 2 * s.n, s.n
	case g == 0:
		return 0, 2 * s.n0, s.n0
	}
	return 2 * s.n0, 2 * s.n, s.n - s.n0
}

// forward evaluates φ and ψ at log-scale a and each group's product with its
// weights q[g], and copies the means into mq (n×dz, arm-sorted rows).
func (e *latentEncoder) forward(s *Site, g *gemm, a float64, q [2]strided, mq *mat.Dense) {
	D := e.D
	e.scale = math.Exp(a)
	c := 1 / math.Sqrt(float64(D))
	for i := range s.n {
		fi, pi := e.rows(s, i)
		p := e.pre.RawRowView(i)
		phi, psi := e.u.RawRowView(fi), e.u.RawRowView(pi)
		sincosKernel(phi[:D], phi[D:2*D], p, e.scale, c)
		pc, ps := psi[:D], psi[D:2*D]
		fc, fs := phi[:D], phi[D:2*D]
		for j, v := range p[:D] {
			pc[j] = -fs[j] * v
			ps[j] = fc[j] * v
		}
	}
	u, um := view(e.u), view(e.um)
	for k := range e.groups() {
		lo, hi, _ := e.group(s, k)
		g.mul(um.block(lo, hi, 0, um.cols), u.block(lo, hi, 0, u.cols), q[k])
	}
	for i := range s.n {
		fi, _ := e.rows(s, i)
		copy(mq.RawRowView(i), e.um.RawRowView(fi))
	}
}

// backward takes dmq = ∂J/∂m (n×dz, arm-sorted rows), stores ∂J/∂W_q of
// each group's block in grads[g] and returns ∂J/∂a.
func (e *latentEncoder) backward(s *Site, g *gemm, dmq *mat.Dense, grads [2]*mat.Dense) float64 {
	u := view(e.u)
	dm := [2]strided{view(dmq)}
	if e.byArm {
		dm[0], dm[1] = s.armRows(view(dmq))
	}
	var da float64
	for k := range e.groups() {
		lo, _, rows := e.group(s, k)
		// An arm without rows sums over none: its gradient is zero.
		g.mul(view(grads[k]), u.block(lo, lo+rows, 0, u.cols).t(), dm[k])
		for r := range rows {
			d := dm[k].data[r*dm[k].rs : r*dm[k].rs+dm[k].cols]
			for k, v := range e.um.RawRowView(lo + rows + r)[:len(d)] {
				da += d[k] * v
			}
		}
	}
	return da * e.scale
}

// drawNoise fills eps with the standard normal draws of key: draw-major,
// then rows in their original (not arm-sorted) order, then coordinates, from
// PCG(Seed, mix(streamLatent, site, key)), or mix(streamLatent, site, key,
// c+1) for chunk c of a mini-batch. A site daemon regenerates exactly these
// numbers from the same integers.
func (s *Site) drawNoise(lw *latentWork, key uint64) {
	if lw.epsSet && lw.epsKey == key {
		return
	}
	// One generator per site, reseeded for each key rather than made anew,
	// keeps rounds allocation-free.
	if lw.rng == nil {
		lw.pcg = new(rand.PCG)
		lw.rng = rand.New(lw.pcg)
	}
	seq := mix(streamLatent, uint64(s.index), key)
	if s.chunk > 0 {
		seq = mix(streamLatent, uint64(s.index), key, s.chunk)
	}
	lw.pcg.Seed(s.setup.Config.Seed, seq)
	rng := lw.rng
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
	var q [2]strided
	grads := [2]*mat.Dense{out.Grads["q0"], out.Grads["q1"]}
	if lw.enc.byArm {
		q[0], q[1] = view(in.Weights["q0"]), view(in.Weights["q1"])
	} else {
		q[0], grads[0] = view(in.Weights["q"]), out.Grads["q"]
	}
	lw.enc.forward(s, &lw.gemm, in.Shared["a_q"][0], q, lw.mq)
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
	lw.gemm.mul(view(lw.o), view(lw.dec.phi), view(lw.wdec))

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
	lw.gemm.mul(view(lw.gdec), view(lw.dec.phi).t(), view(lw.do))
	getCols(out.Grads["y0"], lw.gdec, decY0)
	getCols(out.Grads["y1"], lw.gdec, decY1)
	getCols(out.Grads["w"], lw.gdec, decW)
	getCols(out.Grads["x"], lw.gdec, decX)
	lw.gemm.mul(view(lw.dec.dphi), view(lw.do), view(lw.wdec).t())
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
	out.Shared["a_q"][0] = lw.enc.backward(s, &lw.gemm, lw.dmq, grads)
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
	copyView(view(dst).block(0, r, c, c+k), view(src))
}

// getCols copies columns [c, c+k) of src into dst (r×k).
func getCols(dst *mat.Dense, src *mat.Dense, c int) {
	r, k := dst.Dims()
	copyView(view(dst), view(src).block(0, r, c, c+k))
}

// copyView copies src into dst, of the same shape, both with contiguous rows.
func copyView(dst, src strided) {
	for i := range dst.rows {
		copy(dst.data[i*dst.rs:i*dst.rs+dst.cols], src.data[i*src.rs:i*src.rs+src.cols])
	}
}

package estimator

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// Coordinator holds the parameters of one model across all sites, θ (one
// set of weight blocks per site), the transfer logits ρ and the shared
// parameters, and the optimiser that moves them. It never sees rows.
//
// A round is: Inputs gives every site its SiteInput; each site answers with
// (*Site).Compute; Update combines the SiteOutputs into ∇J and takes one
// optimiser step. Memory is O(m·P) for m sites of P parameters each.
type Coordinator struct {
	setup *Setup
	lay   *layout
	m     int
	mode  Transfer
	nrho  int
	opt   stepper

	lam     *mat.Dense     // m×m transfer matrix Λ (Λ_ss = 1)
	w       *mat.Dense     // m×P effective weights, row s = W^s
	g       *mat.Dense     // m×P site gradients, row s = G^s
	gBlocks [][]*mat.Dense // gBlocks[s][b]: block b of G^s, a view into g
	gSrc    [][][]float64  // gSrc[s][b]: block b of G^s, row after row
	pieces  []piece        // a site's parameters in ranges, for thetaPass
	partial []float64      // per piece: C's m·m partial sums, then Θ·Θ's
	c       *mat.Dense     // m×m: C = G·Θᵀ, for ∂J/∂ρ
	grad    []float64
	inputs  []*SiteInput

	round int
	done  bool
	loss  float64 // J at the last evaluated point
}

// Checkpoint is a coordinator's resumable state: the parameters, the
// optimiser's state and the round number. An L-BFGS checkpoint is taken at
// its last accepted iterate; a coordinator resumed from it repeats the
// rounds since then and continues bit-identically.
type Checkpoint struct {
	Model  Kind
	Sites  int
	Method Method
	Round  int
	X      []float64 // flat parameters [θ (site-major) | ρ | shared]

	M, V []float64 // Adam moment estimates
	Step int       // Adam steps taken
	// MaxRounds is Adam's round limit (Coordinator.MaxRounds); a
	// checkpoint without it resumes with Config.Rounds.
	MaxRounds int

	History []Iterate // L-BFGS accepted iterates, oldest first
	Stall   int       // L-BFGS iterations without progress
}

// NewCoordinator returns the coordinator of model kind over the given number
// of sites, at the initial parameters: θ = 0, ρ = 0 (λ = ½) and the shared
// parameters' documented initial values.
func NewCoordinator(kind Kind, sites int, setup *Setup) (*Coordinator, error) {
	if setup == nil {
		return nil, errors.New("estimator: nil setup")
	}
	if kind < Propensity || kind > Latent {
		return nil, fmt.Errorf("estimator: unknown model %v", kind)
	}
	if sites <= 0 {
		return nil, errors.New("estimator: a federation needs at least one site")
	}
	cfg := setup.Config
	lay := newLayout(kind, setup)
	c := &Coordinator{setup: setup, lay: lay, m: sites, mode: cfg.Transfer}
	if c.mode == Learned {
		c.nrho = pairs(sites)
	}
	x0 := make([]float64, sites*lay.P+c.nrho+lay.S)
	copy(x0[sites*lay.P+c.nrho:], lay.init)
	switch cfg.Method {
	case Adam:
		c.opt = newAdam(x0, cfg.LearningRate, cfg.Rounds)
	default:
		c.opt = newLBFGS(x0, cfg.Store, cfg.Rounds, cfg.Tolerance)
	}
	c.lam = mat.NewDense(sites, sites, nil)
	c.w = mat.NewDense(sites, lay.P, nil)
	c.g = mat.NewDense(sites, lay.P, nil)
	c.c = mat.NewDense(sites, sites, nil)
	c.grad = make([]float64, len(x0))
	c.gBlocks = make([][]*mat.Dense, sites)
	c.gSrc = make([][][]float64, sites)
	for b, blk := range lay.blocks {
		for lo := 0; lo < blk.Rows*blk.Cols; lo += pieceSize {
			hi := min(lo+pieceSize, blk.Rows*blk.Cols)
			off := lay.blockOff[b]
			c.pieces = append(c.pieces, piece{b: b, lo: off + lo, hi: off + hi})
		}
	}
	c.partial = make([]float64, len(c.pieces)*(sites*sites+1))
	c.inputs = make([]*SiteInput, sites)
	for s := range sites {
		in := &SiteInput{
			Model:   kind,
			Weights: make(map[string]*mat.Dense, len(lay.blocks)),
			Shared:  make(map[string][]float64, len(lay.shared)),
		}
		row := c.w.RawRowView(s)
		for b, blk := range lay.blocks {
			in.Weights[blk.Name] = lay.blockView(row, b)
			c.gBlocks[s] = append(c.gBlocks[s], lay.blockView(c.g.RawRowView(s), b))
			c.gSrc[s] = append(c.gSrc[s], nil)
		}
		for _, p := range lay.shared {
			in.Shared[p.Name] = make([]float64, p.Size)
		}
		c.inputs[s] = in
	}
	return c, nil
}

// ResumeCoordinator rebuilds a coordinator from a checkpoint.
func ResumeCoordinator(setup *Setup, cp *Checkpoint) (*Coordinator, error) {
	if cp == nil {
		return nil, errors.New("estimator: nil checkpoint")
	}
	if cp.Method != setup.Config.Method {
		return nil, fmt.Errorf("estimator: checkpoint of %v, configured %v", cp.Method, setup.Config.Method)
	}
	c, err := NewCoordinator(cp.Model, cp.Sites, setup)
	if err != nil {
		return nil, err
	}
	if len(cp.X) != len(c.grad) {
		return nil, fmt.Errorf("estimator: checkpoint has %d parameters, want %d", len(cp.X), len(c.grad))
	}
	switch o := c.opt.(type) {
	case *adam:
		if len(cp.M) != len(cp.X) || len(cp.V) != len(cp.X) {
			return nil, errors.New("estimator: malformed Adam checkpoint")
		}
		copy(o.x, cp.X)
		copy(o.m, cp.M)
		copy(o.v, cp.V)
		o.step = cp.Step
		o.max = max(o.max, cp.MaxRounds)
		c.done = o.step >= o.max
	case *lbfgs:
		for _, it := range cp.History {
			if len(it.X) != len(cp.X) || len(it.Gradient) != len(cp.X) {
				return nil, errors.New("estimator: malformed L-BFGS checkpoint")
			}
		}
		done, err := o.restore(cp)
		if err != nil {
			// Not done: a checkpoint that cannot be resumed must not be
			// published as the trained model.
			return nil, fmt.Errorf("estimator: resume %v L-BFGS at round %d: %w", cp.Model, cp.Round, err)
		}
		c.done = done
	}
	c.round = cp.Round
	return c, nil
}

// Checkpoint returns a deep copy of the coordinator's resumable state.
func (c *Coordinator) Checkpoint() *Checkpoint {
	cp := &Checkpoint{Model: c.lay.kind, Sites: c.m, Method: c.setup.Config.Method, Round: c.round}
	c.opt.save(cp)
	if cp.X == nil {
		cp.X = append([]float64(nil), c.opt.point()...)
	}
	return cp
}

// Round returns the number of rounds completed.
func (c *Coordinator) Round() int { return c.round }

// MaxRounds returns the most rounds the model may take: Config.Rounds, or
// more once the sites' outputs have shown a site larger than Rounds
// mini-batches (Config.RoundsFor).
func (c *Coordinator) MaxRounds() int {
	if a, ok := c.opt.(*adam); ok {
		return a.max
	}
	return c.setup.Config.Rounds
}

// Done reports whether training has finished.
func (c *Coordinator) Done() bool { return c.done }

// Loss returns J (data terms and regularisers) at the last evaluated point.
func (c *Coordinator) Loss() float64 { return c.loss }

// Inputs returns the SiteInputs of the current round, one per site, or nil
// once training is done. The returned messages share the coordinator's
// storage and are valid until the next Update.
func (c *Coordinator) Inputs() []*SiteInput {
	if c.done {
		return nil
	}
	c.effective(c.opt.point())
	return c.inputs
}

// effective fills Λ, W = Λ·Θ and the inputs' shared parameters from x.
func (c *Coordinator) effective(x []float64) {
	mP := c.m * c.lay.P
	fillLambda(c.lam, c.mode, x[mP:mP+c.nrho])
	mixRows(c.w.RawMatrix().Data, c.lam, x[:mP])
	noise := uint64(c.round)
	if c.opt.fixedNoise() {
		noise = 0
	}
	shared := x[mP+c.nrho:]
	for _, in := range c.inputs {
		in.Round = c.round
		in.Noise = noise
		for i, p := range c.lay.shared {
			off := c.lay.sharedOff[i]
			copy(in.Shared[p.Name], shared[off:off+p.Size])
		}
	}
}

// Update takes every site's output of the current round (indexed by site),
// forms J and its exact gradient, and steps the optimiser. It reports
// whether training has finished.
func (c *Coordinator) Update(outs []*SiteOutput) (bool, error) {
	if c.done {
		return true, errors.New("estimator: update after training finished")
	}
	if err := c.gather(outs); err != nil {
		return false, err
	}
	c.loss = c.objective(c.opt.point(), outs)
	if a, ok := c.opt.(*adam); ok {
		rows := 0
		for _, o := range outs {
			rows = max(rows, o.Rows)
		}
		a.max = max(a.max, c.setup.Config.RoundsFor(rows))
	}
	done, err := c.opt.tell(c.loss, c.grad)
	c.round++
	if err != nil {
		c.done = true
		return true, fmt.Errorf("%v model, round %d: %w", c.lay.kind, c.round, err)
	}
	c.done = done
	return done, nil
}

// gather validates the outputs and records where each block of each G^s
// is: in the output itself when its storage is contiguous (it is read there,
// not copied), in row s of G otherwise and whenever a large federation's
// products need G whole.
func (c *Coordinator) gather(outs []*SiteOutput) error {
	if len(outs) != c.m {
		return fmt.Errorf("estimator: %d site outputs, want %d", len(outs), c.m)
	}
	for s, o := range outs {
		if o == nil || o.Model != c.lay.kind || o.Round != c.round || o.Site != s {
			return fmt.Errorf("estimator: output %d is not site %d's %v gradient of round %d", s, s, c.lay.kind, c.round)
		}
		if math.IsNaN(o.Loss) || math.IsInf(o.Loss, 0) {
			return fmt.Errorf("estimator: site %d: loss is %v", s, o.Loss)
		}
		for b, blk := range c.lay.blocks {
			gb, ok := o.Grads[blk.Name]
			if !ok || gb == nil {
				return fmt.Errorf("estimator: site %d: gradient %q missing", s, blk.Name)
			}
			if r, k := gb.Dims(); r != blk.Rows || k != blk.Cols {
				return fmt.Errorf("estimator: site %d: gradient %q is %d×%d, want %d×%d", s, blk.Name, r, k, blk.Rows, blk.Cols)
			}
			raw := gb.RawMatrix()
			for i := range raw.Rows {
				for j, v := range raw.Data[i*raw.Stride : i*raw.Stride+raw.Cols] {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						return fmt.Errorf("estimator: site %d: gradient %q[%d,%d] is %v", s, blk.Name, i, j, v)
					}
				}
			}
			if c.m < smallFederation && (raw.Stride == raw.Cols || raw.Rows == 1) {
				c.gSrc[s][b] = raw.Data[:raw.Rows*raw.Cols]
			} else {
				c.gBlocks[s][b].Copy(gb)
				c.gSrc[s][b] = c.gBlocks[s][b].RawMatrix().Data
			}
		}
		for _, p := range c.lay.shared {
			if len(o.Shared[p.Name]) != p.Size {
				return fmt.Errorf("estimator: site %d: shared gradient %q has %d values, want %d", s, p.Name, len(o.Shared[p.Name]), p.Size)
			}
			for j, v := range o.Shared[p.Name] {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("estimator: site %d: shared gradient %q[%d] is %v", s, p.Name, j, v)
				}
			}
		}
	}
	return nil
}

// objective returns J = Σ_s J^(s) + regularisers at x and stores ∇J in
// c.grad, from the gathered site gradients:
//
//	∂J/∂θ^v = G^v + Σ_{s≠v} λ^{s,v} G^s + 2ζθ^v      (row v of Λ·G + 2ζΘ),
//	∂J/∂ρ_sv = σ'(ρ_sv)·(⟨G^s, θ^v⟩ + ⟨G^v, θ^s⟩)     (from C = G·Θᵀ),
//	∂J/∂(shared) = Σ_s site gradients + regulariser.
func (c *Coordinator) objective(x []float64, outs []*SiteOutput) float64 {
	mP := c.m * c.lay.P
	theta := x[:mP]
	var loss float64
	for _, o := range outs {
		loss += o.Loss
	}
	zeta := c.lay.zeta
	if c.m < smallFederation {
		if sq := c.thetaPass(theta); zeta != 0 {
			loss += zeta * sq
		}
	} else {
		// A large federation: whole-matrix products, G copied in gather.
		g := c.g.RawMatrix().Data
		mixRows(c.grad[:mP], c.lam, g)
		if zeta != 0 {
			loss += zeta * floats.Dot(theta, theta)
			floats.AddScaled(c.grad[:mP], 2*zeta, theta)
		}
		if c.nrho > 0 {
			c.c.Mul(mat.NewDense(c.m, c.lay.P, g), mat.NewDense(c.m, c.lay.P, theta).T())
		}
	}
	if c.nrho > 0 {
		rho := x[mP : mP+c.nrho]
		for s := range c.m {
			for v := s + 1; v < c.m; v++ {
				k := pairIndex(c.m, s, v)
				l := sigmoid(rho[k])
				c.grad[mP+k] = l * (1 - l) * (c.c.At(s, v) + c.c.At(v, s))
				if kappa := c.setup.Config.TransferPrior; kappa != 0 {
					loss += kappa * softplus(-rho[k])
					c.grad[mP+k] -= kappa * (1 - l)
				}
			}
		}
	}
	shared := x[mP+c.nrho:]
	gShared := c.grad[mP+c.nrho:]
	for i, p := range c.lay.shared {
		off := c.lay.sharedOff[i]
		g := gShared[off : off+p.Size]
		for k := range g {
			g[k] = 0
		}
		for _, o := range outs {
			floats.Add(g, o.Shared[p.Name])
		}
	}
	for k, z := range c.lay.zetaS {
		if z != 0 {
			loss += z * shared[k] * shared[k]
			gShared[k] += 2 * z * shared[k]
		}
	}
	return loss
}

// piece is a range [lo, hi) of a site's parameters inside block b.
type piece struct{ b, lo, hi int }

// pieceSize is the most parameters in a piece: the unit of work of
// thetaPass, and of its partial sums, whatever the number of CPUs.
const pieceSize = 1 << 13

// thetaPass is objective's work on the site weights for a small federation,
// in one parallel pass over the pieces of the parameters: it sets the θ part
// of ∇J to Λ·G + 2ζΘ, fills C = G·Θᵀ when ρ is learned, and returns Θ·Θ
// when ζ ≠ 0. The inner products are summed per piece and then over the
// pieces in order, so they do not depend on how the pieces were shared out.
func (c *Coordinator) thetaPass(theta []float64) float64 {
	m, P, zeta := c.m, c.lay.P, c.lay.zeta
	stride := m*m + 1
	parallelRange(len(c.pieces), 1, 1, func(k0, k1 int) {
		for k := k0; k < k1; k++ {
			pc := c.pieces[k]
			off := c.lay.blockOff[pc.b]
			part := c.partial[k*stride : (k+1)*stride]
			for s := range m {
				d := c.grad[s*P+pc.lo : s*P+pc.hi]
				floats.ScaleTo(d, c.lam.At(s, 0), c.gSrc[0][pc.b][pc.lo-off:pc.hi-off])
				for v := 1; v < m; v++ {
					if l := c.lam.At(s, v); l != 0 {
						floats.AddScaled(d, l, c.gSrc[v][pc.b][pc.lo-off:pc.hi-off])
					}
				}
				th := theta[s*P+pc.lo : s*P+pc.hi]
				if zeta != 0 {
					floats.AddScaled(d, 2*zeta, th)
				}
				if c.nrho > 0 {
					for v := range m {
						part[v*m+s] = floats.Dot(c.gSrc[v][pc.b][pc.lo-off:pc.hi-off], th)
					}
				}
			}
			if zeta != 0 {
				var sq float64
				for s := range m {
					th := theta[s*P+pc.lo : s*P+pc.hi]
					sq += floats.Dot(th, th)
				}
				part[m*m] = sq
			}
		}
	})
	var sq float64
	if c.nrho > 0 {
		c.c.Zero()
	}
	cc := c.c.RawMatrix()
	for k := range c.pieces {
		part := c.partial[k*stride : (k+1)*stride]
		if c.nrho > 0 {
			for s := range m {
				floats.Add(cc.Data[s*cc.Stride:s*cc.Stride+m], part[s*m:(s+1)*m])
			}
		}
		sq += part[m*m]
	}
	return sq
}

// smallFederation is the site count below which the coordinator's m×m by
// m×P products run as row operations: gonum's parallel GEMM splits the long
// P dimension into many goroutines and allocations, which costs more than
// the few passes over P that a small federation needs.
const smallFederation = 8

// mixRows sets dst = lam·src for lam m×m and dst, src m×P stored row after
// row. A small federation's rows are mixed in ranges of columns on all CPUs:
// every entry is the same sum, lam_s0·src_0 + lam_s1·src_1 + … in that
// order, however the columns are split.
func mixRows(dst []float64, lam *mat.Dense, src []float64) {
	m, _ := lam.Dims()
	P := len(dst) / m
	if m >= smallFederation {
		mat.NewDense(m, P, dst).Mul(lam, mat.NewDense(m, P, src))
		return
	}
	parallelRange(P, parallelGrain, 8, func(lo, hi int) {
		for s := range m {
			d := dst[s*P+lo : s*P+hi]
			floats.ScaleTo(d, lam.At(s, 0), src[lo:hi])
			for v := 1; v < m; v++ {
				if l := lam.At(s, v); l != 0 {
					floats.AddScaled(d, l, src[v*P+lo:v*P+hi])
				}
			}
		}
	})
}

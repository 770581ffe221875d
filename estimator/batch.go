package estimator

import (
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// streamBatch keys the permutations that draw a site's mini-batches.
const streamBatch uint64 = 0x6261746368 // "batch"

// batches holds a site's mini-batch state: the permutation of its rows for
// the current epoch of one model, and the Site of the current batch's rows,
// whose workspaces are reused from round to round.
type batches struct {
	size  int // B
	kind  Kind
	epoch int // of perm; −1 before the first
	perm  []int
	idx   []int // the current batch's rows, ascending
	sub   *Site
}

// batchSize returns the rows a round of model kind computes on: B when
// Config.BatchSize = B is positive and below the site's row count and the
// method is Adam, else every row. L-BFGS needs the same objective in every
// evaluation of its line search, so it always takes every row.
func (s *Site) batchSize() int {
	b := s.setup.Config.BatchSize
	if b <= 0 || b >= s.n || s.setup.Config.Method != Adam {
		return s.n
	}
	return b
}

// batch returns the Site of the rows that round round of model kind
// computes on. Rounds go through epochs: epoch e = round / (n/B) draws a
// permutation of the site's rows from PCG(Seed, mix(streamBatch, site,
// kind, e)), and round r takes its (r mod n/B)-th block of B rows. The
// n mod B rows past the last block sit out that epoch, a different few in
// each. Every batch is thus a uniformly random B-subset of the rows, and
// (n/B)·J(batch) an unbiased estimate of the site's objective J and its
// gradients; and the batch is a function of the seed, the site, the model
// and the round alone, so a simulated federation and site daemons, or a
// run resumed from a checkpoint, compute on the same rows.
func (s *Site) batch(kind Kind, round int) *Site {
	b := s.batchSize()
	bt := s.bt
	if bt == nil || bt.size != b {
		bt = &batches{size: b, epoch: -1, perm: make([]int, s.n), idx: make([]int, b)}
		s.bt = bt
	}
	per := s.n / b
	epoch, k := round/per, round%per
	if round < 0 {
		epoch, k = 0, 0
	}
	if bt.epoch != epoch || bt.kind != kind {
		for i := range bt.perm {
			bt.perm[i] = i
		}
		rng := rand.New(rand.NewPCG(s.setup.Config.Seed, mix(streamBatch, uint64(s.index), uint64(kind), uint64(epoch))))
		rng.Shuffle(len(bt.perm), func(i, j int) { bt.perm[i], bt.perm[j] = bt.perm[j], bt.perm[i] })
		bt.epoch, bt.kind = epoch, kind
	}
	copy(bt.idx, bt.perm[k*b:(k+1)*b])
	// Ascending prepared positions keep the batch arm-sorted, controls
	// first, as every model expects.
	slices.Sort(bt.idx)
	if bt.sub == nil {
		_, dx := s.x.Dims()
		bt.sub = &Site{
			index: s.index, setup: s.setup, lays: s.lays, n: b, pos: make([]int, b),
			x: mat.NewDense(b, dx, nil), w: make([]float64, b), y: make([]float64, b),
			col: mat.NewDense(b, 1, nil), dcol: mat.NewDense(b, 1, nil),
		}
		for i := range bt.sub.pos {
			bt.sub.pos[i] = i
		}
	}
	sub := bt.sub
	sub.n0 = 0
	for r, i := range bt.idx {
		copy(sub.x.RawRowView(r), s.x.RawRowView(i))
		sub.w[r], sub.y[r] = s.w[i], s.y[i]
		if i < s.n0 {
			sub.n0++
		}
	}
	// The feature maps on the rows' fixed inputs and the latent encoder
	// are rebuilt on the new rows; the rest of the workspaces are kept.
	if sub.prop != nil {
		sub.prop.setInput(sub.x)
	}
	if sub.out != nil {
		sub.out.setInput(sub.x)
	}
	if sub.lat != nil {
		sub.lat.enc = sub.newLatentEncoder(&sub.lat.enc)
		sub.lat.epsSet = false
	}
	return sub
}

// scaleOutput multiplies out's loss and gradients by f: a batch's share
// of the site's objective, n/B.
func scaleOutput(out *SiteOutput, f float64) {
	out.Loss *= f
	for _, g := range out.Grads {
		g.Scale(f, g)
	}
	for _, v := range out.Shared {
		for i := range v {
			v[i] *= f
		}
	}
}

package estimator

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/internal/parallel"
)

// streamBatch keys the permutations that draw a site's mini-batches.
const streamBatch uint64 = 0x6261746368 // "batch"

// batchChunk is the most rows of a batch one goroutine computes: a batch of
// B rows is split into ⌈B/batchChunk⌉ chunks of consecutive batch rows,
// computed on every core and added in chunk order, so that the sum does
// not depend on the number of cores. It is a variable so that tests can
// split small batches.
var batchChunk = 1024

// batches holds a site's mini-batch state: the permutation of its rows for
// the current epoch of one model, the Sites the current batch's chunks
// are computed in, whose workspaces are reused from chunk to chunk and
// round to round, and a copy of each chunk's output.
type batches struct {
	size  int // B
	kind  Kind
	epoch int // of perm; −1 before the first
	perm  []int
	idx   []int         // the current batch's rows, ascending
	subs  []*Site       // one per worker, of min(B, batchChunk) rows
	tail  *Site         // the Site of a last chunk shorter than batchChunk, or nil
	outs  []*SiteOutput // per chunk: a copy of its output
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

// batch draws the rows round round of model kind computes on into s.bt.idx
// and returns their number of chunks. Rounds go through epochs: epoch
// e = round / (n/B) draws a permutation of the site's rows from PCG(Seed,
// mix(streamBatch, site, kind, e)), and round r takes its (r mod n/B)-th
// block of B rows. The n mod B rows past the last block sit out that
// epoch, a different few in each. Every batch is thus a uniformly random
// B-subset of the rows, and (n/B)·J(batch) an unbiased estimate of the
// site's objective J and its gradients; and the batch is a function of the
// seed, the site, the model and the round alone, so a simulated federation
// and site daemons, or a run resumed from a checkpoint, compute on the same
// rows. Chunk c of the batch draws the latent model's noise from its own
// stream (Site.chunk).
func (s *Site) batch(kind Kind, round int) (chunks int) {
	b := s.batchSize()
	bt := s.bt
	if bt == nil || bt.size != b {
		bt = &batches{size: b, epoch: -1, perm: make([]int, s.n), idx: make([]int, b)}
		if tail := b % batchChunk; tail > 0 && b > batchChunk {
			bt.tail = s.subSite(tail, 0)
		}
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
	// Ascending prepared positions keep the batch, and each chunk of it,
	// arm-sorted, controls first, as every model expects.
	slices.Sort(bt.idx)
	return (b + batchChunk - 1) / batchChunk
}

// loadChunk makes sub hold chunk c of the current batch.
func (s *Site) loadChunk(sub *Site, c int) {
	lo := c * batchChunk
	rows := s.bt.idx[lo:min(len(s.bt.idx), lo+batchChunk)]
	sub.chunk = uint64(c + 1)
	sub.n0 = 0
	for r, i := range rows {
		sub.w[r], sub.y[r] = s.readRow(i, sub.x.RawRowView(r))
		if i < s.n0 {
			sub.n0++
		}
	}
	sub.rowsChanged()
}

// rowsChanged rebuilds what depends on a sub-Site's rows after they were
// replaced: the feature maps on the rows' fixed inputs and the latent
// encoder. The rest of the workspaces are kept.
func (s *Site) rowsChanged() {
	if s.prop != nil {
		s.prop.setInput(s.x)
	}
	if s.out != nil {
		s.out.setInput(s.x)
	}
	if s.lat != nil {
		s.lat.enc = s.newLatentEncoder(&s.lat.enc)
		s.lat.epsSet = false
	}
}

// subSite returns an empty Site of n rows for s's rows to be copied into,
// sharing s's setup and layouts.
func (s *Site) subSite(n int, chunk uint64) *Site {
	sub := &Site{
		index: s.index, chunk: chunk, setup: s.setup, lays: s.lays, n: n, dx: s.dx, pos: make([]int, n),
		x: mat.NewDense(n, s.dx, nil), w: make([]float64, n), y: make([]float64, n),
		col: mat.NewDense(n, 1, nil), dcol: mat.NewDense(n, 1, nil),
	}
	for i := range sub.pos {
		sub.pos[i] = i
	}
	return sub
}

// computeBatch computes round in.Round's batch, chunk by chunk on every
// core, into the site's own output: the chunks' sums, added in chunk
// order, times n/B. A chunk's result depends on its rows, its number and
// the input alone, not on the Site it is computed in, so the chunks share
// one Site per worker, and a chunk's output is copied out before its Site
// takes the next.
func (s *Site) computeBatch(ctx context.Context, in *SiteInput) (*SiteOutput, error) {
	chunks := s.batch(in.Model, in.Round)
	bt := s.bt
	lay := s.lays[in.Model]
	for len(bt.outs) < chunks {
		bt.outs = append(bt.outs, nil)
	}
	for c := range chunks {
		if bt.outs[c] == nil || bt.outs[c].Model != in.Model {
			bt.outs[c] = newOutput(lay, s.index)
		}
	}
	// Worker k computes chunks k, k+W, k+2W, … in its own Site; a short
	// last chunk has a Site of its size.
	full := chunks
	if bt.tail != nil {
		full--
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), full))
	for len(bt.subs) < workers {
		bt.subs = append(bt.subs, s.subSite(min(len(bt.idx), batchChunk), 0))
	}
	errs := make([]error, chunks)
	compute := func(sub *Site, c int) {
		s.loadChunk(sub, c)
		out, err := sub.Compute(ctx, in)
		if err == nil {
			setOutput(bt.outs[c], out)
		}
		errs[c] = err
	}
	parallel.ForEach(workers+1, workers+1, func(k int) {
		switch {
		case k < workers:
			for c := k; c < full; c += workers {
				compute(bt.subs[k], c)
			}
		case bt.tail != nil:
			compute(bt.tail, full)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := s.output(lay)
	out.Round, out.Rows, out.Loss = in.Round, s.n, 0
	for _, g := range out.Grads {
		g.Zero()
	}
	for _, v := range out.Shared {
		clear(v)
	}
	for _, o := range bt.outs[:chunks] {
		out.Loss += o.Loss
		for name, g := range out.Grads {
			g.Add(g, o.Grads[name])
		}
		for name, v := range out.Shared {
			floats.Add(v, o.Shared[name])
		}
	}
	scaleOutput(out, float64(s.n)/float64(s.batchSize()))
	return out, nil
}

// setOutput sets dst's loss, gradients and shared gradients to src's.
func setOutput(dst, src *SiteOutput) {
	dst.Loss = src.Loss
	for name, g := range src.Grads {
		dst.Grads[name].Copy(g)
	}
	for name, v := range src.Shared {
		copy(dst.Shared[name], v)
	}
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

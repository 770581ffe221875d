package estimator

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/internal/parallel"
)

// rowChunk offsets the chunk key of the one-row Sites of a private Site, so
// that row i's latent noise draws come from their own stream, apart from
// those of every mini-batch chunk.
const rowChunk uint64 = 1 << 40

// Privacy makes a Site's answers differentially private: the Gaussian
// mechanism on per-row clipped gradients (Abadi et al. 2016).
//
// Each round, every row's contribution to the gradient (its weight blocks
// and shared parameters together, the gradient of its own term J_i of
// J^(s) = Σ_i J_i) is scaled to an L2 norm of at most Clip, the
// contributions are summed, and independent N(0, (Noise·Clip)²) noise is
// added to every coordinate. Adding or removing a row moves the sum by at
// most Clip, so one round is the Gaussian mechanism of noise multiplier
// Noise, whatever weights the coordinator sent: its Rényi DP of order α is
// α/(2·Noise²) (Mironov 2017), composed over the rounds by an accountant
// (package privacy). Mini-batches are drawn from the model seed, which the
// coordinator knows, so a round is charged as a full pass: no amplification
// by subsampling is claimed.
//
// The site's loss is not released: SiteOutput.Loss is 0. Training under
// Privacy therefore needs an optimiser that uses gradients alone (Adam).
type Privacy struct {
	Clip  float64 // C > 0: the most one row can move the answer, in L2 norm
	Noise float64 // σ ≥ 0: the noise multiplier; the noise's standard deviation is σ·C
	// Rand draws the noise. Nil draws it from a ChaCha8 generator seeded
	// from crypto/rand on first use: the noise must be unknown to the
	// coordinator, which knows the model seed and every key derived from
	// it. Tests may set a seeded generator.
	Rand *rand.Rand
}

// ErrPrivacy reports a private Site asked for something its privacy
// forbids or given an invalid Privacy.
var ErrPrivacy = errors.New("estimator: privacy")

func (p *Privacy) check() error {
	switch {
	case !(p.Clip > 0) || math.IsInf(p.Clip, 1):
		return fmt.Errorf("%w: clip norm %v must be positive and finite", ErrPrivacy, p.Clip)
	case !(p.Noise >= 0) || math.IsInf(p.Noise, 1):
		return fmt.Errorf("%w: noise multiplier %v must be non-negative and finite", ErrPrivacy, p.Noise)
	}
	return nil
}

// NewNoiseSource returns a ChaCha8 generator seeded from crypto/rand.
func NewNoiseSource() (*rand.Rand, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("%w: seeding the noise: %w", ErrPrivacy, err)
	}
	return rand.New(rand.NewChaCha8(seed)), nil
}

// SetPrivacy makes every later Compute of s private under p (see Privacy);
// nil makes it exact again. Private training refuses L-BFGS, whose line
// search needs the losses a private site does not release.
func (s *Site) SetPrivacy(p *Privacy) error {
	if p == nil {
		s.priv = nil
		return nil
	}
	if err := p.check(); err != nil {
		return err
	}
	if s.setup.Config.Method != Adam {
		return fmt.Errorf("%w: %v needs the site's losses, which a private site does not release; train with adam", ErrPrivacy, s.setup.Config.Method)
	}
	q := *p
	s.priv = &q
	return nil
}

// privateWork holds, per worker, a one-row Site that computes each row's
// own gradient and the clipped sum of that worker's rows.
type privateWork struct {
	rows []*Site
	sums [3][]*SiteOutput // by model, then worker
}

// computePrivate is Compute under s.priv: each of the round's rows (every
// row, or the mini-batch's) is computed alone, clipped and added, and noise
// is added to the sum, which is then scaled as a batch is.
func (s *Site) computePrivate(ctx context.Context, in *SiteInput) (*SiteOutput, error) {
	p := s.priv
	if p.Rand == nil {
		r, err := NewNoiseSource()
		if err != nil {
			return nil, err
		}
		p.Rand = r
	}
	var rows []int
	if s.batchSize() < s.n {
		s.batch(in.Model, in.Round)
		rows = s.bt.idx
	}
	count := s.n
	if rows != nil {
		count = len(rows)
	}
	lay := s.lays[in.Model]
	pw := s.privateWork(min(runtime.GOMAXPROCS(0), count))
	workers := len(pw.rows)
	if pw.sums[in.Model] == nil {
		for range workers {
			pw.sums[in.Model] = append(pw.sums[in.Model], newOutput(lay, s.index))
		}
	}
	sums := pw.sums[in.Model]
	errs := make([]error, workers)
	parallel.ForEach(workers, workers, func(w int) {
		rs, sum := pw.rows[w], sums[w]
		zeroOutput(sum)
		for k := w * count / workers; k < (w+1)*count/workers; k++ {
			i := k
			if rows != nil {
				i = rows[k]
			}
			s.loadRow(rs, i)
			o, err := rs.Compute(ctx, in)
			if err != nil {
				errs[w] = err
				return
			}
			addOutput(sum, o, math.Min(1, p.Clip/outputNorm(o, lay)))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := s.output(lay)
	zeroOutput(out)
	out.Round, out.Rows = in.Round, s.n
	for _, sum := range sums {
		addOutput(out, sum, 1)
	}
	sd := p.Noise * p.Clip
	if sd > 0 {
		// Blocks in the layout's order, so that a seeded source gives the
		// same noise whatever order the map ranges in.
		for _, b := range lay.blocks {
			g := out.Grads[b.Name].RawMatrix()
			for r := range g.Rows {
				for j := range g.Data[r*g.Stride : r*g.Stride+g.Cols] {
					g.Data[r*g.Stride+j] += sd * p.Rand.NormFloat64()
				}
			}
		}
		for _, sh := range lay.shared {
			v := out.Shared[sh.Name]
			for j := range v {
				v[j] += sd * p.Rand.NormFloat64()
			}
		}
	}
	if count < s.n {
		scaleOutput(out, float64(s.n)/float64(count))
	}
	out.Loss = 0
	return out, nil
}

// privateWork returns the site's per-worker one-row Sites and sums, made
// on first use.
func (s *Site) privateWork(workers int) *privateWork {
	if s.pw != nil && len(s.pw.rows) == workers {
		return s.pw
	}
	pw := &privateWork{}
	for range workers {
		pw.rows = append(pw.rows, s.subSite(1, rowChunk))
	}
	s.pw = pw
	return pw
}

// loadRow makes the one-row Site rs hold the site's prepared row i.
func (s *Site) loadRow(rs *Site, i int) {
	copy(rs.x.RawRowView(0), s.x.RawRowView(i))
	rs.w[0], rs.y[0] = s.w[i], s.y[i]
	rs.n0 = 0
	if i < s.n0 {
		rs.n0 = 1
	}
	rs.chunk = rowChunk + uint64(i)
	rs.rowsChanged()
}

// outputNorm returns the L2 norm of o's gradients, its weight blocks and
// shared parameters together, summed in lay's order.
func outputNorm(o *SiteOutput, lay *layout) float64 {
	var ss float64
	for _, b := range lay.blocks {
		n := mat.Norm(o.Grads[b.Name], 2)
		ss += n * n
	}
	for _, p := range lay.shared {
		n := floats.Norm(o.Shared[p.Name], 2)
		ss += n * n
	}
	return math.Sqrt(ss)
}

// zeroOutput zeroes o's loss and gradients.
func zeroOutput(o *SiteOutput) {
	o.Loss = 0
	for _, g := range o.Grads {
		g.Zero()
	}
	for _, v := range o.Shared {
		clear(v)
	}
}

// addOutput adds f times src's loss and gradients to dst, an output of the
// same model.
func addOutput(dst, src *SiteOutput, f float64) {
	dst.Loss += f * src.Loss
	for name, g := range src.Grads {
		d := dst.Grads[name].RawMatrix()
		v := g.RawMatrix()
		for r := range v.Rows {
			floats.AddScaled(d.Data[r*d.Stride:r*d.Stride+d.Cols], f, v.Data[r*v.Stride:r*v.Stride+v.Cols])
		}
	}
	for name, v := range src.Shared {
		floats.AddScaled(dst.Shared[name], f, v)
	}
}

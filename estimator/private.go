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

	"github.com/crffd/crffd/internal/parallel"
)

// streamCoin keys the coins of Poisson subsampling.
const streamCoin uint64 = 0x636f696e // "coin"

// Privacy makes a Site's answers differentially private: the Gaussian
// mechanism on per-row clipped gradients (Abadi et al. 2016), over Poisson
// subsamples of the rows.
//
// Each round, every row joins the round's sample independently with
// probability Rate (every row when Rate is 0 or 1); each sampled row's
// contribution to the gradient (its weight blocks and shared parameters
// together, the gradient of its own term J_i of J^(s) = Σ_i J_i) is
// scaled to an L2 norm of at most Clip; the contributions are summed; and
// independent N(0, (Noise·Clip)²) noise is added to every coordinate.
// The answer is that sum divided by Rate, an unbiased estimate of the
// site's gradient.
//
// A row's contribution depends on that row alone: its coin and its latent
// noise draws are keyed by the row itself (an HMAC-SHA256 under Key of
// its values and of how many identical rows come before it), never by its
// position among the site's rows, so adding or removing a row leaves every
// other row's term as it was and moves the sum by at most Clip. One round
// is then the Poisson-subsampled Gaussian mechanism of rate Rate and noise
// multiplier Noise under the add/remove relation, whatever weights the
// coordinator sent, and package privacy accounts for it. Key is a secret
// of the site: the coordinator, which knows the model seed, cannot predict
// a row's coins or draws. Package privacy/audit checks the sensitivity on
// neighbouring datasets.
//
// The site's loss is not released: SiteOutput.Loss is 0. Training under
// Privacy therefore needs an optimiser that uses gradients alone (Adam).
// Config.BatchSize does not apply: Rate sets the sample.
type Privacy struct {
	Clip  float64 // C > 0: the most one row can move the sum, in L2 norm
	Noise float64 // σ ≥ 0: the noise multiplier; the noise's standard deviation is σ·C
	// Rate q is the probability that a row joins a round; 0 and 1 mean
	// every row joins every round.
	Rate float64
	// Key keys every row's coins and latent draws. The zero key is
	// replaced by one drawn from crypto/rand when the Site is made private.
	Key [32]byte
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
	case !(p.Rate >= 0 && p.Rate <= 1):
		return fmt.Errorf("%w: sampling rate %v must be in [0, 1]", ErrPrivacy, p.Rate)
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
	if q.Key == ([32]byte{}) {
		if _, err := crand.Read(q.Key[:]); err != nil {
			return fmt.Errorf("%w: drawing the row key: %w", ErrPrivacy, err)
		}
	}
	s.priv = &q
	s.prepare()
	s.rowKeys = siteRowKeys(s, q.Key)
	return nil
}

// rate returns the sampling rate of p, 1 for every row.
func (p *Privacy) rate() float64 {
	if p.Rate == 0 {
		return 1
	}
	return p.Rate
}

// siteRowKeys returns the key of each of s's prepared rows under key
// (Data.RowKeys of its standardised values), with bit 63 set, so that no key
// is a chunk number of a mini-batch.
func siteRowKeys(s *Site, key [32]byte) []uint64 {
	keys := (&Data{X: s.x, W: s.w, Y: s.y}).RowKeys(key[:])
	for i := range keys {
		keys[i] |= 1 << 63
	}
	return keys
}

// sampled reports whether prepared row i joins round round of model kind:
// its coin, keyed by the row, falls below the sampling rate.
func (s *Site) sampled(i int, kind Kind, round int) bool {
	q := s.priv.rate()
	if q >= 1 {
		return true
	}
	u := mix(streamCoin, s.rowKeys[i], uint64(kind), uint64(round))
	return float64(u>>11)/(1<<53) < q
}

// privateWork holds, per worker, a one-row Site that computes each row's
// own gradient and the clipped sum of that worker's rows.
type privateWork struct {
	rows []*Site
	sums [3][]*SiteOutput // by model, then worker
}

// ClippedSum returns what a private round of in adds its noise to: the sum
// over the round's rows of each row's own gradient clipped to Clip, before
// the noise and before any scaling, flattened in the model's layout order
// (weight blocks, then shared parameters), and the number of rows summed.
// The accountant's sensitivity is a bound on how far this sum moves when
// one row is added, removed or replaced; package privacy/audit measures it.
// s must be private (SetPrivacy); its noise is not drawn.
func (s *Site) ClippedSum(ctx context.Context, in *SiteInput) ([]float64, int, error) {
	if s.priv == nil {
		return nil, 0, fmt.Errorf("%w: ClippedSum of a site that is not private", ErrPrivacy)
	}
	if in == nil || in.Model < Propensity || in.Model > Latent {
		return nil, 0, errors.New("estimator: invalid site input")
	}
	lay := s.lays[in.Model]
	if err := checkInput(lay, in); err != nil {
		return nil, 0, fmt.Errorf("estimator: site %d: %w", s.index, err)
	}
	out, count, err := s.clippedSum(ctx, in)
	if err != nil {
		return nil, 0, err
	}
	return flatten(out, lay), count, nil
}

// flatten returns o's gradients, blocks then shared parameters, in lay's
// order.
func flatten(o *SiteOutput, lay *layout) []float64 {
	var v []float64
	for _, b := range lay.blocks {
		g := o.Grads[b.Name].RawMatrix()
		for r := range g.Rows {
			v = append(v, g.Data[r*g.Stride:r*g.Stride+g.Cols]...)
		}
	}
	for _, p := range lay.shared {
		v = append(v, o.Shared[p.Name]...)
	}
	return v
}

// clippedSum computes the clipped sum of ClippedSum into the site's output
// of in's model, and returns it with the number of rows summed.
func (s *Site) clippedSum(ctx context.Context, in *SiteInput) (*SiteOutput, int, error) {
	var rows []int // nil: every row
	if s.priv.rate() < 1 {
		rows = s.sample[:0]
		for i := range s.n {
			if s.sampled(i, in.Model, in.Round) {
				rows = append(rows, i)
			}
		}
		s.sample = rows
	}
	count := s.n
	if rows != nil {
		count = len(rows)
	}
	lay := s.lays[in.Model]
	out := s.output(lay)
	zeroOutput(out)
	out.Round, out.Rows = in.Round, s.n
	if count == 0 {
		return out, 0, nil
	}
	pw := s.privateWork(min(runtime.GOMAXPROCS(0), count))
	workers := len(pw.rows)
	if pw.sums[in.Model] == nil {
		for range workers {
			pw.sums[in.Model] = append(pw.sums[in.Model], newOutput(lay, s.index))
		}
	}
	sums := pw.sums[in.Model]
	errs := make([]error, workers)
	p := s.priv
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
		return nil, 0, err
	}
	for _, sum := range sums {
		addOutput(out, sum, 1)
	}
	return out, count, nil
}

// computePrivate is Compute under s.priv: each of the round's sampled rows
// is computed alone, clipped and added, noise is added to the sum, and the
// sum is divided by the sampling rate.
func (s *Site) computePrivate(ctx context.Context, in *SiteInput) (*SiteOutput, error) {
	p := s.priv
	if p.Rand == nil {
		r, err := NewNoiseSource()
		if err != nil {
			return nil, err
		}
		p.Rand = r
	}
	out, _, err := s.clippedSum(ctx, in)
	if err != nil {
		return nil, err
	}
	lay := s.lays[in.Model]
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
	if q := p.rate(); q < 1 {
		scaleOutput(out, 1/q)
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
		pw.rows = append(pw.rows, s.subSite(1, 1<<63))
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
	rs.chunk = s.rowKeys[i]
	rs.rowsChanged()
}

// outputNorm returns the L2 norm of o's gradients, its weight blocks and
// shared parameters together, summed in lay's order.
func outputNorm(o *SiteOutput, lay *layout) float64 {
	// A plain sum of squares: the gradients are of moderate size, and
	// gonum's scaled norm (Dlange) took a quarter of a private round.
	var ss float64
	for _, b := range lay.blocks {
		g := o.Grads[b.Name].RawMatrix()
		for r := range g.Rows {
			for _, v := range g.Data[r*g.Stride : r*g.Stride+g.Cols] {
				ss += v * v
			}
		}
	}
	for _, p := range lay.shared {
		for _, v := range o.Shared[p.Name] {
			ss += v * v
		}
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

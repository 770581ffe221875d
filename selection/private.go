package selection

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/parallel"
)

// A private site (federation.SitePrivacy) releases model selection's sums
// with Gaussian noise. Every sum is over rows whose terms depend on the
// row alone, and each term is clipped, so that adding or removing one row
// moves each released piece by at most a known L2 norm, its sensitivity:
//
//   - its rows are held out by a coin keyed by the row (KeyedHoldout), not
//     by a permutation of positions, so one row added or removed leaves
//     every other row where it was;
//   - ψ comes from the run's own models (estimator.Model.Nuisance), trained
//     under differential privacy, not from nuisances cross-fitted on the
//     site's rows, which every row would move;
//   - a latent candidate's CATE is computed at a position the row's values
//     give (RowwiseLatent), so that its Monte Carlo draws do not depend on
//     where the row sits among the others;
//   - each row's outcome features are clipped to an L2 norm, outcomes and
//     pseudo-outcomes to intervals, and each candidate's residual ψ − τ̂
//     to an interval about 0 (PrivateClip): the losses and the centring
//     sums are sums of residuals, which clipping biases little when the
//     candidates are near ψ, while clipping ψ itself about 0 would bias
//     them whenever the effect is large.
//
// NoiseStats and SiteSums.Noise release the pieces through a callback
// that adds the noise, and record its variance where the coordinator
// needs it (Stats.Noise, Pairs.ResVar, Centre.ResVar, …).

// Bounds of a private selection's clipping, in units of the pooled
// outcome standard deviation (estimator.Scaler.YSD).
const (
	// PrivateYBound is the half-width of the interval about the pooled
	// outcome mean that the T-learner's outcomes are clipped to.
	PrivateYBound = 3.0
	// PrivatePsiBound is the half-width of the interval about 0 that the
	// DR-learner's pseudo-outcomes ψ are clipped to.
	PrivatePsiBound = 3.0
	// PrivateResidualBound is the half-width of the interval about 0 that
	// each candidate's residual ψ − τ̂ is clipped to.
	PrivateResidualBound = 4.0
	// PrivateLinearSlack bounds the linear part of a row's outcome
	// features: rows whose standardised covariates have a mean square of
	// at most this are not clipped.
	PrivateLinearSlack = 2.0
)

// StatsPieces and LossPieces are the number of Gaussian mechanisms a
// private site's stats and losses answers are: the pieces NoiseStats and
// SiteSums.Noise release.
const (
	StatsPieces = 7 // per arm (in parallel) n, Σφ, Σy, ΦᵀΦ, Φᵀy; and Σψ, Φᵀψ
	LossPieces  = 4 // Σe_a·e_b, Σl_a·l_b over the held-out rows; Σe_c, Σe_c² over all rows
)

// PrivateClip are the clipping bounds of a private selection: a row's
// outcome features to L2 norm Features, its outcome to YCentre ± Y, its
// pseudo-outcome (the DR-learner's target) to ±Psi, and a candidate's
// residual ψ − τ̂ to ±Residual.
type PrivateClip struct {
	Features   float64
	YCentre, Y float64
	Psi        float64
	Residual   float64
}

// NewPrivateClip returns the bounds for model m: features to
// √(1 + PrivateLinearSlack·γ²) (the random features have norm 1, the
// linear part γ/√d·u of standardised covariates u), outcomes to the pooled
// mean ± PrivateYBound standard deviations, ψ to ± PrivatePsiBound and
// residuals to ± PrivateResidualBound standard deviations. They depend on
// the setup alone, which the federation agreed on before training.
func NewPrivateClip(m *estimator.Model) (PrivateClip, error) {
	if m == nil || m.Setup == nil {
		return PrivateClip{}, fmt.Errorf("%w: no model", ErrInput)
	}
	sc := m.Setup.Scaler
	sd := sc.YSD
	if !(sd > 0) || math.IsInf(sd, 0) {
		sd = 1
	}
	g := math.Max(0, m.Setup.Config.Linear)
	return PrivateClip{Features: math.Sqrt(1 + PrivateLinearSlack*g*g), YCentre: sc.YMean, Y: PrivateYBound * sd, Psi: PrivatePsiBound * sd,
		Residual: PrivateResidualBound * sd}, nil
}

// Sensitivity of each piece, in the order NoiseStats releases them.
func (c PrivateClip) statsSensitivity() [StatsPieces]float64 {
	b := c.Features
	return [StatsPieces]float64{1, b, c.Y, b * b, b * c.Y, c.Psi, b * c.Psi}
}

// lossSensitivity returns the sensitivity of each piece SiteSums.Noise
// releases for k candidates: each of a row's k residuals e is within ±E
// and its loss l = e² within [0, E²], so one row moves the upper triangle
// of Σ e·eᵀ by at most ‖e‖² ≤ kE², that of Σ l·lᵀ by ‖l‖² ≤ kE⁴, the k
// sums Σe_c by √k·E and the k sums Σe_c² by √k·E².
func (c PrivateClip) lossSensitivity(k int) [LossPieces]float64 {
	e := c.Residual
	kf := float64(k)
	return [LossPieces]float64{kf * e * e, kf * e * e * e * e, math.Sqrt(kf) * e, math.Sqrt(kf) * e * e}
}

// AddNoise adds a Gaussian mechanism's noise to v, whose L2 sensitivity is
// sensitivity, and returns the noise's standard deviation.
type AddNoise func(v []float64, sensitivity float64) (sd float64, err error)

// KeyedHoldout returns the positions of the rows of d held out for a
// private site's selection: each row is held out when its coin, its
// estimator.Data.RowKeys key under key as a number in [0, 1), falls below
// share. A row's coin depends on the row and the key alone, never on where
// the row sits or on the other rows, so adding or removing a row leaves
// every other row where it was. Fewer than 2·minArm held-out rows hold
// none out (nil): the count of held-out rows is public, as the row count
// is.
func KeyedHoldout(d *estimator.Data, share float64, key []byte, minArm int) ([]int, error) {
	if !(share > 0 && share < 1) {
		return nil, fmt.Errorf("%w: validation share %v, want one in (0, 1)", ErrInput, share)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: a keyed holdout without a key", ErrInput)
	}
	var held []int
	for i, k := range d.RowKeys(key) {
		if float64(k>>11)/(1<<53) < share {
			held = append(held, i)
		}
	}
	n := d.Rows()
	if len(held) < max(2, 2*minArm) || len(held) > n-2 {
		return nil, nil
	}
	return held, nil
}

// latentSlots is the number of positions RowwiseLatent places rows at.
const latentSlots = 64

// RowwiseLatent returns m's latent CATE of each row of d at site, such
// that a row's CATE depends on the row alone. estimator.Model.Effects
// draws a row's Monte Carlo samples from a stream keyed by its position,
// which another row's removal would shift, so here each row has a slot
// in [0, latentSlots) given by its estimator.Data.RowKeys key, and is computed at
// that position in a batch of latentSlots rows: the b-th row of each
// slot goes into batch b, and a slot no row fills holds a copy of a row
// whose result is discarded. Its draws are then those of its slot
// whatever the other rows. workers batches are computed at once (0:
// GOMAXPROCS).
func RowwiseLatent(ctx context.Context, m *estimator.Model, site int, d *estimator.Data, workers int) ([]float64, error) {
	n := d.Rows()
	out := make([]float64, n)
	if n == 0 {
		return out, nil
	}
	buckets := make([][]int, latentSlots)
	for i, k := range d.RowKeys(nil) {
		slot := k % latentSlots
		buckets[slot] = append(buckets[slot], i)
	}
	batches := 0
	for _, bk := range buckets {
		batches = max(batches, len(bk))
	}
	errs := make([]error, batches)
	parallel.ForEach(batches, workers, func(bt int) {
		if err := ctx.Err(); err != nil {
			errs[bt] = err
			return
		}
		rows := make([]int, latentSlots)
		filler := -1
		for slot, bk := range buckets {
			if bt < len(bk) {
				rows[slot], filler = bk[bt], bk[bt]
			} else {
				rows[slot] = -1
			}
		}
		for slot, r := range rows {
			if r < 0 {
				rows[slot] = filler
			}
		}
		eff, err := m.Effects(ctx, site, d.Subset(rows))
		if err != nil {
			errs[bt] = fmt.Errorf("latent CATE: %w", err)
			return
		}
		for slot, bk := range buckets {
			if bt < len(bk) {
				out[bk[bt]] = eff.CATE[slot]
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// clipTo returns v clipped to [c − b, c + b].
func clipTo(v, c, b float64) float64 { return math.Min(c+b, math.Max(c-b, v)) }

// clipRows scales each row of phi to an L2 norm of at most b.
func clipRows(phi *mat.Dense, b float64) {
	n, _ := phi.Dims()
	for i := range n {
		row := phi.RawRowView(i)
		var ss float64
		for _, v := range row {
			ss += v * v
		}
		if nrm := math.Sqrt(ss); nrm > b {
			f := b / nrm
			for j := range row {
				row[j] *= f
			}
		}
	}
}

// PrivateSiteStats returns the clipped Stats of a private site's training
// rows train under model m (the reference kernel's), before any noise:
// per arm, the statistics of the centred clipped outcome y − YCentre
// (clipped to ±Y) on the clipped outcome features, and with dr those of
// the pseudo-outcomes ψ clipped to ±Psi, from m's own nuisances. The
// outcome statistics are centred so that Σy's sensitivity is Y whatever
// the outcome's mean; NoiseStats restores the centre after the noise.
func PrivateSiteStats(ctx context.Context, m *estimator.Model, site int, train *estimator.Data, dr bool, clip PrivateClip) (Stats, error) {
	p := m.OutcomeFeatureCount()
	st := Stats{Arms: [2]*estimator.RidgeStats{estimator.NewRidgeStats(p), estimator.NewRidgeStats(p)}}
	var psi []float64
	if dr {
		nu, err := m.Nuisance(site, train)
		if err != nil {
			return Stats{}, fmt.Errorf("training rows: %w", err)
		}
		if psi, _, err = inference.Scores(train.W, train.Y, nu, inference.DefaultClip); err != nil {
			return Stats{}, fmt.Errorf("training rows: %w", err)
		}
		for i, v := range psi {
			psi[i] = clipTo(v, 0, clip.Psi)
		}
		st.DR = estimator.NewRidgeStats(p)
	}
	n := train.Rows()
	y := make([]float64, n)
	for i, v := range train.Y {
		y[i] = clipTo(v-clip.YCentre, 0, clip.Y)
	}
	var rows [2][]int
	for lo := 0; lo < n; lo += estimator.FeatureChunk {
		if err := ctx.Err(); err != nil {
			return Stats{}, err
		}
		hi := min(n, lo+estimator.FeatureChunk)
		phi, err := m.OutcomeFeatures(train, lo, hi)
		if err != nil {
			return Stats{}, err
		}
		clipRows(phi, clip.Features)
		rows[0], rows[1] = rows[0][:0], rows[1][:0]
		for i, w := range train.W[lo:hi] {
			rows[int(w)] = append(rows[int(w)], i)
		}
		for a := range 2 {
			if err := st.Arms[a].AddRows(phi, y[lo:hi], rows[a]); err != nil {
				return Stats{}, err
			}
		}
		if dr {
			if err := st.DR.AddRows(phi, psi[lo:hi], nil); err != nil {
				return Stats{}, err
			}
		}
	}
	return st, nil
}

// upper returns the upper triangle, diagonal included, of the p×p
// row-major g, row by row.
func upper(g []float64, p int) []float64 {
	out := make([]float64, 0, p*(p+1)/2)
	for j := range p {
		out = append(out, g[j*p+j:(j+1)*p]...)
	}
	return out
}

// setUpper sets g, p×p row-major, symmetric from its upper triangle u.
func setUpper(g, u []float64, p int) {
	k := 0
	for j := range p {
		for l := j; l < p; l++ {
			g[j*p+l], g[l*p+j] = u[k], u[k]
			k++
		}
	}
}

// NoiseStats releases st, the clipped Stats of PrivateSiteStats under
// clip, through add: StatsPieces Gaussian mechanisms, each on a piece
// whose terms a row's arm alone holds (the two arms' pieces side by side:
// a row is in one arm, so they move together by no more than one arm's
// would), of sensitivity
//
//	n: 1, Σφ: B, Σ(y − c): Y, ΦᵀΦ (upper triangle): B², Φᵀ(y − c): B·Y,
//	Σψ: Ψ, Φᵀψ: B·Ψ
//
// for B = clip.Features, Y = clip.Y and Ψ = clip.Psi (the DR-learner's
// two when st has them). It then restores the outcome's centre c in the
// arms' Σy and Φᵀy, and sets the DR-learner's n, Σφ and ΦᵀΦ, which are the
// arms' together, to the sum of the arms' noised ones (post-processing).
// st.Noise records the variance of the noise on each Gram entry.
func NoiseStats(st *Stats, clip PrivateClip, add AddNoise) error {
	if st.Arms[0] == nil || st.Arms[1] == nil {
		return fmt.Errorf("%w: stats without both arms", ErrInput)
	}
	a0, a1 := st.Arms[0], st.Arms[1]
	p := a0.P
	sens := clip.statsSensitivity()
	pieces := [][]float64{
		{a0.N, a1.N},
		append(append([]float64{}, a0.FeatSum...), a1.FeatSum...),
		{a0.TargetSum, a1.TargetSum},
		append(upper(a0.Gram, p), upper(a1.Gram, p)...),
		append(append([]float64{}, a0.Moment...), a1.Moment...),
	}
	if st.DR != nil {
		pieces = append(pieces, []float64{st.DR.TargetSum}, append([]float64{}, st.DR.Moment...))
	}
	sds := make([]float64, len(pieces))
	for i, v := range pieces {
		sd, err := add(v, sens[i])
		if err != nil {
			return fmt.Errorf("model selection's stats: %w", err)
		}
		sds[i] = sd
	}
	u := p * (p + 1) / 2
	for a, r := range []*estimator.RidgeStats{a0, a1} {
		r.N = pieces[0][a]
		copy(r.FeatSum, pieces[1][a*p:(a+1)*p])
		setUpper(r.Gram, pieces[3][a*u:(a+1)*u], p)
		copy(r.Moment, pieces[4][a*p:(a+1)*p])
		// The outcome was centred at c: Σy = Σ(y − c) + c·n and
		// Φᵀy = Φᵀ(y − c) + c·Σφ, from the noised sums.
		r.TargetSum = pieces[2][a] + clip.YCentre*r.N
		for j := range r.Moment {
			r.Moment[j] += clip.YCentre * r.FeatSum[j]
		}
	}
	v := sds[3] * sds[3]
	st.Noise = [3]float64{v, v, 0}
	if st.DR != nil {
		st.DR.N = a0.N + a1.N
		st.DR.TargetSum = pieces[5][0]
		copy(st.DR.Moment, pieces[6])
		for j := range st.DR.FeatSum {
			st.DR.FeatSum[j] = a0.FeatSum[j] + a1.FeatSum[j]
		}
		for j := range st.DR.Gram {
			st.DR.Gram[j] = a0.Gram[j] + a1.Gram[j]
		}
		st.Noise[2] = 2 * v
	}
	return nil
}

// PrivateSiteLosses is SiteLosses at a private site: the SiteSums of the
// candidates ests (ests[c] computed from models[c]) at site, whose rows
// are d and held-out rows the positions val, before any noise. nu are
// the run's own models' nuisances of every row of d (not cross-fitted),
// and a latent candidate's CATE is computed by RowwiseLatent. Every row's
// residual e_c = ψ − τ̂_c of each candidate is clipped to ±clip.Residual;
// the Pairs are those of the clipped residuals over the held-out rows
// (Σ e_a·e_b, and Σ e_a²·e_b²), and the Centre holds, over every row,
// each candidate's Σe_c and Σe_c² (Centre.Res, Centre.ResSq) in place of
// Σψ, Σψ² and Σ τ̂_c, which it leaves 0. The candidates' CATEs are
// computed workers at a time (0: GOMAXPROCS).
func PrivateSiteLosses(ctx context.Context, nu inference.Nuisance, site int, d *estimator.Data, val []int, ests []Estimator, models []*estimator.Model, clip PrivateClip, workers int) (SiteSums, error) {
	k := len(ests)
	if len(models) != k || k == 0 {
		return SiteSums{}, fmt.Errorf("%w: %d candidates and %d models", ErrInput, k, len(models))
	}
	psi, _, err := inference.Scores(d.W, d.Y, nu, inference.DefaultClip)
	if err != nil {
		return SiteSums{}, fmt.Errorf("validation pseudo-outcomes: %w", err)
	}
	latent := map[*estimator.Model][]float64{}
	res := make([][]float64, k) // by candidate, then row
	for c, e := range ests {
		var lat []float64
		if e.Kind == KindLatent || e.Kind == "" {
			if lat = latent[models[c]]; lat == nil {
				if lat, err = RowwiseLatent(ctx, models[c], site, d, workers); err != nil {
					return SiteSums{}, fmt.Errorf("candidate %d (%s): %w", c, e.Kind, err)
				}
				latent[models[c]] = lat
			}
		}
		tau, err := e.CATE(ctx, models[c], site, d, lat)
		if err != nil {
			return SiteSums{}, fmt.Errorf("candidate %d (%s): %w", c, e.Kind, err)
		}
		if len(tau) != len(psi) {
			return SiteSums{}, fmt.Errorf("%w: candidate %d has %d CATEs for %d rows", ErrInput, c, len(tau), len(psi))
		}
		res[c] = make([]float64, len(tau))
		for i, v := range tau {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return SiteSums{}, fmt.Errorf("%w: candidate %d: a CATE of %v", ErrInput, c, v)
			}
			res[c][i] = clipTo(psi[i]-v, 0, clip.Residual)
		}
	}
	out := SiteSums{Pairs: NewPairs(k), Centre: Centre{N: float64(d.Rows()), CATE: make([]float64, k), Res: make([]float64, k), ResSq: make([]float64, k)}}
	out.Pairs.N = float64(len(val))
	e := make([]float64, k)
	for _, i := range val {
		if i < 0 || i >= len(psi) {
			return SiteSums{}, fmt.Errorf("%w: validation row %d of %d", ErrInput, i, len(psi))
		}
		for c := range e {
			e[c] = res[c][i]
		}
		for a := range k {
			for b := range k {
				out.Pairs.Res[a*k+b] += e[a] * e[b]
				out.Pairs.Loss[a*k+b] += e[a] * e[a] * e[b] * e[b]
			}
		}
	}
	for c, r := range res {
		for _, v := range r {
			out.Centre.Res[c] += v
			out.Centre.ResSq[c] += v * v
		}
	}
	return out, nil
}

// Noise releases s, the sums of PrivateSiteLosses under clip, through
// add: LossPieces Gaussian mechanisms, on the upper triangles of the pair
// sums Σ e_a·e_b and Σ l_a·l_b, and on the centring sums Σe_c and Σe_c²,
// of the sensitivities lossSensitivity gives for s's candidates. The
// counts (held-out rows, and all the site's rows) are left exact: they
// are row counts, public. The noise variances go into s.Pairs' ResVar
// and LossVar and s.Centre's ResVar and ResSqVar, for the coordinator's
// standard errors.
func (s *SiteSums) Noise(clip PrivateClip, add AddNoise) error {
	k := s.Pairs.C
	if k == 0 || len(s.Pairs.Res) != k*k || len(s.Pairs.Loss) != k*k || len(s.Centre.Res) != k || len(s.Centre.ResSq) != k {
		return fmt.Errorf("%w: private sums of %d candidates", ErrInput, k)
	}
	sens := clip.lossSensitivity(k)
	pieces := [][]float64{upper(s.Pairs.Res, k), upper(s.Pairs.Loss, k), slices.Clone(s.Centre.Res), slices.Clone(s.Centre.ResSq)}
	vars := make([]float64, len(pieces))
	for i, v := range pieces {
		sd, err := add(v, sens[i])
		if err != nil {
			return fmt.Errorf("model selection's losses: %w", err)
		}
		vars[i] = sd * sd
	}
	setUpper(s.Pairs.Res, pieces[0], k)
	setUpper(s.Pairs.Loss, pieces[1], k)
	copy(s.Centre.Res, pieces[2])
	copy(s.Centre.ResSq, pieces[3])
	s.Pairs.ResVar, s.Pairs.LossVar = vars[0], vars[1]
	s.Centre.ResVar, s.Centre.ResSqVar = vars[2], vars[3]
	return nil
}

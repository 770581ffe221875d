package federation

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// The aggregates a private site releases with noise, beside its training
// rounds (see SitePrivacy):
//
//   - StepMoments, the hello's moments, one Gaussian mechanism. Each
//     continuous covariate's value, the continuous outcome, and, when the
//     outcome's lower bound is positive, its log, is clipped to its public
//     Bound [lo, hi] and mapped to t = (v − c)/h ∈ [−1, 1], c = (lo + hi)/2
//     and h = (hi − lo)/2. The vector of every such column's (Σt, Σt²) moves
//     by (t, t²) per column when one row is added or removed, of L2 norm at
//     most √2 per column and √(2k) over k columns: that is its sensitivity,
//     and the noise is N(0, (σ·√(2k))²) on every coordinate. Centring and
//     scaling first make the noise of each column proportional to its own
//     range, h on Σ(v − c) and h² on Σ(v − c)², where the raw sums would
//     carry max(|lo|, |hi|) and its square (a column of ages in [18, 100]
//     has h = 41, not 100). One mechanism over the whole vector rather than
//     one per column is a choice of how the run's aggregate budget is
//     split: the moments only standardise the inputs, which tolerates
//     noise, so they get one share of it, whatever the number of columns,
//     and the ATE's sums the rest. The sums of the binary covariates and of
//     a binary outcome are not released at all: the pooled standardisation
//     does not use them (estimator.NewScaler), so a private site sends
//     zeros for them. The site turns the noised vector back into sums of
//     the raw values (c and h are public, and so is the row count) after
//     clamping each column's mean into [lo, hi] and its variance into
//     [(MinSDShare·h)², h²]: noise can make a variance negative or tiny,
//     and a standardisation by a tiny scale would blow the inputs up. The
//     clamping is post-processing and costs no privacy.
//   - StepATE, the final ATE's sums, three Gaussian mechanisms: Σψ of the
//     AIPW scores clipped to [−B, B] (sensitivity B), Σψ² of the same
//     (sensitivity B²) and Σ τ̂ of the CATEs clipped to [−R, R]
//     (sensitivity R), whose mean is the plug-in ATE. They split the
//     step's noise multiplier σ by ATEShares: the k-th has σ/√f_k, so that
//     their Rényi divergences, f_k·α/(2σ²), add up to that of the one
//     Gaussian mechanism of σ the ledger charges. Σψ, the ATE itself, gets
//     most of it. R = hi − lo is the width of the outcome's bound (1 for a
//     binary outcome). B is SitePrivacy.PsiClip when set; otherwise, for
//     a continuous outcome, DefaultPsiClipSDs standard deviations of the
//     outcome from the run's pooled standardisation, which the coordinator
//     computed from the moments the sites released (with noise, at a
//     private site), so using it is post-processing and costs nothing;
//     never more than DefaultPsiClipRanges·R, which is also the bound of a
//     binary outcome's scores.
//     The row count n stays exact (row_count). The site sends the standard
//     deviation of each noise (tATENoise), which is public, a function of
//     σ and the bounds: the coordinator adds the variance of the noise on Σψ
//     of every private site to the variance of the global AIPW ATE (inference.Sums.NoiseVar). The
//     site also projects the noised sums onto what n clipped scores can
//     give (|Σψ| ≤ nB, (Σψ)²/n ≤ Σψ² ≤ nB²). Clipping biases the estimate
//     when |ψ| exceeds B; the site logs how many rows it clipped, which
//     never leaves it. The count of rows whose propensity was clipped is
//     not released either: a private site sends 0.
//   - Balance sums (package balance) are released only when exact: a
//     private site sends none unless privacy.exact names balance.
//
// Every release draws its noise with noiseAggregate at the noise multiplier
// the run calibrated its step to (see the Share* weights), charged by
// chargePrivacy before the hello computes anything; an aggregate named in
// SitePrivacy.Exact is sent exactly and is not charged.

// Bound is a public range [Lo, Hi] of a column's values. A private site
// clips each value to it before the value enters a sum it releases with
// noise, so that one row moves the sum by a known amount whatever its
// value. It must not be learned from the site's rows: a range from the
// data's own minimum and maximum would itself tell of the rows that
// attain them.
type Bound struct{ Lo, Hi float64 }

// check reports a bound that is not a finite range of positive width.
func (b Bound) check(column string) error {
	if math.IsNaN(b.Lo) || math.IsNaN(b.Hi) || math.IsInf(b.Lo, 0) || math.IsInf(b.Hi, 0) || !(b.Lo < b.Hi) {
		return fmt.Errorf("privacy: the bound [%v, %v] of column %s must be finite, with lo < hi", b.Lo, b.Hi, column)
	}
	return nil
}

// clip returns v clipped to b, and whether it was outside.
func (b Bound) clip(v float64) (float64, bool) {
	switch {
	case v < b.Lo:
		return b.Lo, true
	case v > b.Hi:
		return b.Hi, true
	}
	return v, false
}

// DefaultPsiClipRanges caps the bound of the AIPW scores when
// SitePrivacy.PsiClip is 0, in widths of the outcome's bound: ψ is clipped
// to ±2·(hi − lo) at most. The outcome-model part of ψ, μ̂1 − μ̂0, lies
// within ±(hi − lo) when the predictions do, and the weighted residual
// (y − μ̂)/ê adds at most another width wherever |y − μ̂| ≤ ê·(hi − lo).
// It is the bound of a binary outcome's scores, and of a continuous one's
// when DefaultPsiClipSDs standard deviations of the outcome are more.
const DefaultPsiClipRanges = 2

// DefaultPsiClipSDs is the bound of a continuous outcome's AIPW scores
// when SitePrivacy.PsiClip is 0, in the outcome's pooled standard
// deviations (estimator.Scaler.YSD). A public range is usually far wider
// than the outcome's spread: the simulated designs' ranges are ten to
// twenty standard deviations wide, and the noise on Σψ grows with the
// bound. ψ is the effect plus a residual weighted by 1/ê, so beyond 8
// standard deviations lie rows whose residual is large where their
// propensity is small; on the linear design of 30 000 rows, 3 rows did,
// and clipping them moved the ATE by 5e-5 (docs/privacy.md).
const DefaultPsiClipSDs = 8

// ATEShares split the noise multiplier σ of the ATE's step among its
// three sums, Σψ, Σψ² and Σ τ̂: the k-th gets σ/√ATEShares[k]. The shares
// add up to 1, so the three together spend what one mechanism of σ does.
// Σψ is the ATE; Σψ² only sizes its interval, and Σ τ̂ the plug-in ATE.
var ATEShares = [3]float64{0.8, 0.1, 0.1}

// MinSDShare is the smallest standard deviation, as a share of half its
// bound's width, that a private site's noised moments give a column. The
// noise can leave a variance negative or near zero, and standardising by
// a scale near zero would blow the column's values up; a column whose
// spread is truly smaller is standardised by this floor, which leaves its
// values smaller than unit spread, a scale the kernel's learned
// lengthscale absorbs.
const MinSDShare = 0.05

// Tensor names of the noised aggregates.
const (
	// tATENoise: ate, from a private site: the standard deviations of the
	// noise on Σψ, Σψ² and Σ τ̂; absent from exact sums.
	tATENoise = "ate.noise"
	// tAIPWNoiseSE: global-ate: the part of aipw.se that the private
	// sites' noise accounts for (inference.Estimate.NoiseSE).
	tAIPWNoiseSE = "aipw.noise_se"
)

// momentColumn is one column whose sums a private site's hello releases
// with noise.
type momentColumn struct {
	index int    // its entry in estimator.Moments.Sum: a covariate's, or dx for the outcome
	name  string // for errors and logs
	bound Bound
	log   bool // the outcome's log: log y, bounded by the log of its bound
}

// columnName names covariate j of columns for errors.
func columnName(columns []string, j int) string {
	if j < len(columns) && columns[j] != "" {
		return columns[j]
	}
	return fmt.Sprintf("covariate %d", j)
}

// outcomeBound returns the bound of the outcome: [0, 1] for a binary one,
// else p.Outcome (ok false when unset).
func (p *SitePrivacy) outcomeBound(schema estimator.Schema) (Bound, bool) {
	if schema.BinaryOutcome {
		return Bound{0, 1}, true
	}
	if p.Outcome == nil {
		return Bound{}, false
	}
	return *p.Outcome, true
}

// Aggregates says how a site private under p releases each aggregate of
// exactNames: exactly (named in Exact, row_count always), with noise (the
// hello's moments and the ATE's sums), or not at all (the balance sums,
// and model selection's statistics, whose runs a private site refuses).
func (p *SitePrivacy) Aggregates() (exact, noised, withheld []string) {
	for _, name := range exactNames {
		switch {
		case p.IsExact(name):
			exact = append(exact, name)
		case name == ExactMoments || name == ExactATE:
			noised = append(noised, name)
		default:
			withheld = append(withheld, name)
		}
	}
	return exact, noised, withheld
}

// bound returns the bound of the column name: its entry in Bounds, or
// one whose key differs from it in case alone, as SQLite's column names
// do (and configuration keys, which viper lower-cases).
func (p *SitePrivacy) bound(name string) (Bound, bool) {
	if b, ok := p.Bounds[name]; ok {
		return b, true
	}
	for k, b := range p.Bounds {
		if strings.EqualFold(k, name) {
			return b, true
		}
	}
	return Bound{}, false
}

// momentColumns returns the columns whose moments p releases with noise
// (none when it names moments exact), and the names of the continuous
// columns it has no bound for.
func (p *SitePrivacy) momentColumns(columns []string, schema estimator.Schema) (cols []momentColumn, missing []string) {
	if p.IsExact(ExactMoments) {
		return nil, nil
	}
	for j, bin := range schema.Binary {
		if bin {
			continue
		}
		name := columnName(columns, j)
		b, ok := p.bound(name)
		if !ok {
			missing = append(missing, name)
			continue
		}
		cols = append(cols, momentColumn{index: j, name: name, bound: b})
	}
	if schema.BinaryOutcome {
		return cols, missing
	}
	if p.Outcome == nil {
		return cols, append(missing, "the outcome")
	}
	dx := len(schema.Binary)
	cols = append(cols, momentColumn{index: dx, name: "the outcome", bound: *p.Outcome})
	if p.Outcome.Lo > 0 {
		cols = append(cols, momentColumn{index: dx, name: "the outcome's log", bound: Bound{math.Log(p.Outcome.Lo), math.Log(p.Outcome.Hi)}, log: true})
	}
	return cols, missing
}

// CheckColumns reports what keeps p from releasing the aggregates of rows
// with these covariate names (in schema order) and schema: a bound that
// is not a range, and every continuous column, the outcome included,
// that has no bound while the moments (or, with PsiClip 0, the ATE's
// sums, whose clip is relative to the outcome's range) are released with
// noise. The error names every missing column.
func (p *SitePrivacy) CheckColumns(columns []string, schema estimator.Schema) error {
	for _, name := range slices.Sorted(maps.Keys(p.Bounds)) {
		if err := p.Bounds[name].check(name); err != nil {
			return err
		}
	}
	if p.Outcome != nil {
		if err := p.Outcome.check("the outcome"); err != nil {
			return err
		}
	}
	if math.IsNaN(p.PsiClip) || math.IsInf(p.PsiClip, 0) || p.PsiClip < 0 {
		return fmt.Errorf("privacy: psi_clip %v must be finite and not negative (0: %d × the width of the outcome's bound)", p.PsiClip, DefaultPsiClipRanges)
	}
	_, missing := p.momentColumns(columns, schema)
	if _, ok := p.outcomeBound(schema); !ok && !p.IsExact(ExactATE) && p.PsiClip == 0 && !slices.Contains(missing, "the outcome") {
		missing = append(missing, "the outcome")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("privacy: no public bound (privacy.bounds) for %s: a private site clips each value of a continuous column to its bound before its sums are released with noise; give each a bound, or name moments (and ate) in privacy.exact to release them without noise",
		strings.Join(missing, ", "))
}

// aggregateReleasesOf returns the aggregates a site private under p
// releases with noise in a run, from its configuration alone: the hello's
// moments when a column has any to release, and the ATE's sums.
func aggregateReleasesOf(p *SitePrivacy, columns []string, schema estimator.Schema) []release {
	if p == nil {
		return nil
	}
	var out []release
	if cols, _ := p.momentColumns(columns, schema); len(cols) > 0 {
		out = append(out, release{step: StepMoments, count: 1, share: ShareMoments})
	}
	if !p.IsExact(ExactATE) {
		out = append(out, nuisanceRelease, release{step: StepATE, count: 1, share: ShareATE})
	}
	return out
}

// aggregateReleases returns the run's one-shot aggregates other than model
// selection's that a private site releases with noise (see releases).
func (s *site) aggregateReleases() []release {
	return aggregateReleasesOf(s.cfg.Privacy, s.cfg.Columns, s.cfg.Schema)
}

// momentSensitivity is the L2 sensitivity of the normalised moments of k
// columns under add/remove: one row moves each column's (Σt, Σt²) by
// (t, t²) with |t| ≤ 1, of norm at most √2.
func momentSensitivity(k int) float64 { return math.Sqrt(2 * float64(k)) }

// normalisedMoments returns, for each column of cols in turn, Σt and Σt²
// over the rows of d, t = (clip(v) − c)/h, and how many values of each
// column lay outside its bound.
func normalisedMoments(d *estimator.Data, cols []momentColumn) (v []float64, clipped []int) {
	v, clipped = make([]float64, 2*len(cols)), make([]int, len(cols))
	_, dx := d.X.Dims()
	for i := range d.Rows() {
		row := d.X.RawRowView(i)
		for k, c := range cols {
			var x float64
			switch {
			case c.index < dx:
				x = row[c.index]
			case c.log:
				// log of the clipped outcome: the bound's Lo > 0
				y, _ := Bound{math.Exp(c.bound.Lo), math.Exp(c.bound.Hi)}.clip(d.Y[i])
				x = math.Log(y)
			default:
				x = d.Y[i]
			}
			x, out := c.bound.clip(x)
			if out {
				clipped[k]++
			}
			mid, half := (c.bound.Lo+c.bound.Hi)/2, (c.bound.Hi-c.bound.Lo)/2
			t := (x - mid) / half
			v[2*k] += t
			v[2*k+1] += t * t
		}
	}
	return v, clipped
}

// momentsFrom turns the noised normalised moments v of cols over n rows
// back into the estimator.Moments the hello sends, clamping each column's
// mean into its bound and its standard deviation into
// [MinSDShare·h, h]. Columns not in cols (binary ones) get zeros, and the
// log moments are sent only for a log column.
func momentsFrom(n, dx int, cols []momentColumn, v []float64) estimator.Moments {
	mo := estimator.Moments{N: n, Sum: make([]float64, dx+1), SumSq: make([]float64, dx+1)}
	fn := float64(n)
	for k, c := range cols {
		mid, half := (c.bound.Lo+c.bound.Hi)/2, (c.bound.Hi-c.bound.Lo)/2
		m := max(-1, min(1, v[2*k]/fn))
		sd := math.Sqrt(max(0, v[2*k+1]/fn-m*m))
		sd = max(MinSDShare, min(1, sd))
		mean, variance := mid+half*m, half*half*sd*sd
		sum, sumsq := fn*mean, fn*(variance+mean*mean)
		if c.log {
			mo.Positive, mo.LogSum, mo.LogSumSq = n, sum, sumsq
			continue
		}
		mo.Sum[c.index], mo.SumSq[c.index] = sum, sumsq
	}
	return mo
}

// privateMoments returns the moments a site private under p releases of
// d: the exact ones when p names moments exact, otherwise those of the
// columns it bounds, noised by noise (each call adds independent noise of
// its multiplier times sensitivity to every value of v), and zeros for
// the binary columns and a binary outcome. It also returns, per released
// column, how many values its bound clipped.
func privateMoments(p *SitePrivacy, d *estimator.Data, columns []string, schema estimator.Schema,
	noise func(v []float64, sensitivity float64) error) (estimator.Moments, []momentColumn, []int, error) {
	if p.IsExact(ExactMoments) {
		return d.Moments(), nil, nil, nil
	}
	if err := p.CheckColumns(columns, schema); err != nil {
		return estimator.Moments{}, nil, nil, err
	}
	cols, _ := p.momentColumns(columns, schema)
	v, clipped := normalisedMoments(d, cols)
	if len(cols) > 0 {
		if err := noise(v, momentSensitivity(len(cols))); err != nil {
			return estimator.Moments{}, nil, nil, err
		}
	}
	return momentsFrom(d.Rows(), len(schema.Binary), cols, v), cols, clipped, nil
}

// helloMoments returns the moments the site's hello sends, of the rows
// not held out for model selection (site.heldAll): their exact Moments
// (MomentsWithin: the log moments only when every row's outcome is
// positive), or those privateMoments releases with noise for a private
// site, which decides the log transform on the outcome's public bound
// instead, and logs how many values each bound clipped (counts, never
// values).
func (s *site) helloMoments() (estimator.Moments, error) {
	d := s.cfg.Data
	if s.heldAll != nil {
		train, err := selection.TrainingRows(d.Rows(), s.heldAll)
		if err != nil {
			return estimator.Moments{}, err
		}
		d = d.Subset(train)
	}
	p := s.cfg.Privacy
	if p == nil || p.IsExact(ExactMoments) {
		return d.MomentsWithin(s.cfg.Data), nil
	}
	mo, cols, clipped, err := privateMoments(p, d, s.cfg.Columns, s.cfg.Schema, s.noiseFor(StepMoments))
	if err != nil {
		return mo, err
	}
	for k, c := range cols {
		if clipped[k] > 0 {
			s.log.Warn("values outside their public bound were clipped to it in the moments released with noise", slog.String(LogKeyColumn, c.name),
				slog.Int("rows_clipped", clipped[k]), slog.Int("rows", mo.N))
		}
	}
	return mo, nil
}

// ATERelease is what a private site's ate envelope releases of its rows,
// and what it keeps to itself about that.
type ATERelease struct {
	// Sums are the row count (exact), and Σψ and Σψ² of the scores
	// clipped to [−PsiClip, PsiClip], noised; Sums.NoiseVar is the
	// variance of the noise on Σψ.
	Sums inference.Sums
	// PlugIn is the mean of the CATEs clipped to [−CATEClip, CATEClip],
	// from their noised sum.
	PlugIn float64
	// NoiseSD are the standard deviations of the noise on Σψ, Σψ² and
	// Σ τ̂: public, as they follow from σ and the clip bounds alone.
	NoiseSD           [3]float64
	PsiClip, CATEClip float64
	PsiClipped        int // rows whose |ψ| exceeded PsiClip: never sent
	CATEClipped       int // rows whose |τ̂| exceeded CATEClip: never sent
	// Exact is set when the sums were released without noise
	// (privacy.exact names ate).
	Exact bool
}

// ateClips returns the bounds B of the scores and R of the CATEs that p
// clips them to: R the width of the outcome's bound, and B PsiClip, or for
// a continuous outcome DefaultPsiClipSDs·ysd capped at
// DefaultPsiClipRanges·R, where ysd is the outcome's pooled standard
// deviation (0: unknown), or for a binary one DefaultPsiClipRanges·R.
// Without an outcome bound (PsiClip set) R is B.
func (p *SitePrivacy) ateClips(schema estimator.Schema, ysd float64) (psi, cate float64) {
	b, ok := p.outcomeBound(schema)
	if !ok {
		return p.PsiClip, p.PsiClip
	}
	r := b.Hi - b.Lo
	switch {
	case p.PsiClip > 0:
		return p.PsiClip, r
	case !schema.BinaryOutcome && ysd > 0:
		return min(DefaultPsiClipSDs*ysd, DefaultPsiClipRanges*r), r
	}
	return DefaultPsiClipRanges * r, r
}

// clippedATESums returns Σψ and Σψ² of the scores psi clipped to [−b, b]
// and Σ τ̂ of the CATEs cate clipped to [−r, r], with how many of each
// were clipped.
func clippedATESums(psi, cate []float64, b, r float64) (sums []float64, psiClipped, cateClipped int) {
	sums = make([]float64, 3)
	for i := range psi {
		v, out := Bound{-b, b}.clip(psi[i])
		if out {
			psiClipped++
		}
		sums[0] += v
		sums[1] += v * v
		t, out := Bound{-r, r}.clip(cate[i])
		if out {
			cateClipped++
		}
		sums[2] += t
	}
	return sums, psiClipped, cateClipped
}

// ateSensitivities are the sensitivities of clippedATESums' three sums
// under add/remove: one row moves Σψ by at most b, Σψ² by b² and Σ τ̂ by r.
func ateSensitivities(b, r float64) []float64 { return []float64{b, b * b, r} }

// privateATE returns what a site private under p releases of its rows'
// AIPW scores psi and CATEs cate, with noise: see ATERelease.
func privateATE(p *SitePrivacy, psi, cate []float64, schema estimator.Schema, ysd, sigma float64,
	noise func(v []float64, sensitivity float64) error) (ATERelease, error) {
	n := len(psi)
	if n == 0 || len(cate) != n {
		return ATERelease{}, fmt.Errorf("privacy: %d scores and %d CATEs to release", len(psi), len(cate))
	}
	b, r := p.ateClips(schema, ysd)
	if !(b > 0) || !(r > 0) {
		return ATERelease{}, fmt.Errorf("privacy: no clip bound for the ATE's sums: set privacy.psi_clip or the outcome's privacy.bounds")
	}
	rel := ATERelease{PsiClip: b, CATEClip: r, Sums: inference.Sums{N: n}}
	var sums []float64
	sums, rel.PsiClipped, rel.CATEClipped = clippedATESums(psi, cate, b, r)
	// Three Gaussian mechanisms, each at its own sensitivity and its
	// share of σ: noise(v, s) adds σ·s.
	for k, sens := range ateSensitivities(b, r) {
		scaled := sens / math.Sqrt(ATEShares[k])
		if err := noise(sums[k:k+1], scaled); err != nil {
			return ATERelease{}, err
		}
		rel.NoiseSD[k] = sigma * scaled
	}
	// Post-processing: what n clipped values can sum to.
	fn := float64(n)
	rel.Sums.Sum = max(-fn*b, min(fn*b, sums[0]))
	rel.Sums.SumSq = max(rel.Sums.Sum*rel.Sums.Sum/fn, min(fn*b*b, sums[1]))
	rel.PlugIn = max(-r, min(r, sums[2]/fn))
	rel.Sums.NoiseVar = rel.NoiseSD[0] * rel.NoiseSD[0]
	return rel, nil
}

// ateTensors returns the ate envelope's tensors of the site's rows: the
// plug-in ATE, the row count, Σψ and Σψ² and the rows whose propensity was
// clipped, exact, or for a private site that does not name ate exact, as
// privateATE releases them, with the noise's standard deviations.
func (s *site) ateTensors(plugin float64, sums inference.Sums, clipped int, psi, cate []float64) ([]wire.Tensor, error) {
	p := s.cfg.Privacy
	if p == nil || p.IsExact(ExactATE) {
		return []wire.Tensor{wire.Scalar(tATE, plugin), wire.Scalar(tN, float64(sums.N)),
			wire.Scalar(tAIPWSum, sums.Sum), wire.Scalar(tAIPWSumSq, sums.SumSq), wire.Scalar(tClipped, float64(clipped))}, nil
	}
	if s.charge == nil {
		return nil, fmt.Errorf("privacy: the ATE's sums of a private site were not charged")
	}
	rel, err := privateATE(p, psi, cate, s.cfg.Schema, s.outcomeSD(), s.charge.aggregate(StepATE), s.noiseFor(StepATE))
	if err != nil {
		return nil, err
	}
	s.res.Released = &rel
	if rel.PsiClipped > 0 || rel.CATEClipped > 0 {
		s.log.Warn("scores or CATEs beyond their public bound were clipped in the ATE's sums released with noise, which biases the global ATE toward 0",
			slog.Int("psi_clipped", rel.PsiClipped), slog.Float64("psi_clip", rel.PsiClip),
			slog.Int("cate_clipped", rel.CATEClipped), slog.Float64("cate_clip", rel.CATEClip), slog.Int("rows", sums.N))
	}
	return []wire.Tensor{wire.Scalar(tATE, rel.PlugIn), wire.Scalar(tN, float64(rel.Sums.N)),
		wire.Scalar(tAIPWSum, rel.Sums.Sum), wire.Scalar(tAIPWSumSq, rel.Sums.SumSq), wire.Scalar(tClipped, 0),
		wire.Vector(tATENoise, rel.NoiseSD[:])}, nil
}

// outcomeSD returns the outcome's pooled standard deviation of the run's
// standardisation, or 0 before the run has one.
func (s *site) outcomeSD() float64 {
	if len(s.setups) == 0 || s.setups[0] == nil {
		return 0
	}
	return s.setups[0].Scaler.YSD
}

// RunNoise is the noise a private site calibrates a run to (see
// SitePrivacy.Calibrate).
type RunNoise struct {
	Rounds int     // the most rounds of each model the site answers
	Rate   float64 // the Poisson sampling rate q of its training rounds
	// Training is σ of the training rounds, Moments that of the
	// moments, Nuisance that of the nuisance models' statistics and ATE
	// that of the ATE's sums (0 when released exactly).
	Training, Moments, Nuisance, ATE float64
	// Epsilon is what the run spends at the budget's δ, all charges
	// composed.
	Epsilon float64
}

// Calibrate returns the noise that a site private under p, with rows
// rows of these covariate names and schema, calibrates a run of cfg to,
// by the charge rules of a site daemon: the training rounds of the three
// models at the Poisson rate of cfg's batch size, and the aggregates it
// releases with noise (the hello's moments and the ATE's sums, not model
// selection's), composed by Rényi DP to spend p's run ε. crffd eval
// simulates private sites with it.
func (p *SitePrivacy) Calibrate(cfg estimator.Config, rows, scored int, columns []string, schema estimator.Schema) (RunNoise, error) {
	if err := p.Check(); err != nil {
		return RunNoise{}, err
	}
	if err := p.CheckColumns(columns, schema); err != nil {
		return RunNoise{}, err
	}
	rc, charges, err := calibrateNuisance(p, "", cfg, rows, scored, len(schema.Binary), nil, aggregateReleasesOf(p, columns, schema))
	if err != nil {
		return RunNoise{}, err
	}
	eps, err := compose(nil, charges, p.Delta)
	if err != nil {
		return RunNoise{}, err
	}
	return RunNoise{Rounds: rc.rounds, Rate: rc.q, Training: rc.noise, Moments: rc.aggregate(StepMoments), Nuisance: rc.aggregate(StepNuisance),
		ATE: rc.aggregate(StepATE), Epsilon: eps}, nil
}

// Moments returns the moments a site private under p releases of its
// rows d in a run whose moments' noise multiplier is sigma (see
// RunNoise.Moments), drawing the noise from r: exact when p names moments exact.
func (p *SitePrivacy) Moments(d *estimator.Data, columns []string, schema estimator.Schema, sigma float64, r *rand.Rand) (estimator.Moments, error) {
	mo, _, _, err := privateMoments(p, d, columns, schema, gaussianNoise(sigma, r))
	return mo, err
}

// ATE returns what a site private under p releases of its rows' AIPW
// scores psi and CATEs cate in a run whose ATE's noise multiplier is sigma
// (RunNoise.ATE) and whose pooled outcome standard deviation is ysd
// (estimator.Scaler.YSD), drawing the noise from r; with ate named exact,
// their exact sums.
func (p *SitePrivacy) ATE(psi, cate []float64, schema estimator.Schema, ysd, sigma float64, r *rand.Rand) (ATERelease, error) {
	if p.IsExact(ExactATE) {
		rel := ATERelease{Sums: inference.Accumulate(psi), Exact: true}
		if len(cate) > 0 {
			pl, err := inference.PlugIn(cate)
			if err != nil {
				return rel, err
			}
			rel.PlugIn = pl.Estimate
		}
		return rel, nil
	}
	return privateATE(p, psi, cate, schema, ysd, sigma, gaussianNoise(sigma, r))
}

// gaussianNoise adds N(0, (sigma·sensitivity)²) noise drawn from r.
func gaussianNoise(sigma float64, r *rand.Rand) func([]float64, float64) error {
	return func(v []float64, sensitivity float64) error {
		if !(sigma > 0) || r == nil {
			return fmt.Errorf("privacy: an aggregate released with noise has noise multiplier %v", sigma)
		}
		for i := range v {
			v[i] += sigma * sensitivity * r.NormFloat64()
		}
		return nil
	}
}

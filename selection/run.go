package selection

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/internal/parallel"
)

// Kinds of candidate.
const (
	KindLatent   = "latent"   // the CausalRFF latent CATE (the paper's)
	KindOutcome  = "outcome"  // the outcome model's μ̂1(x) − μ̂0(x)
	KindTLearner = "tlearner" // per-arm ridge regression of y on the outcome features
	KindDR       = "dr"       // ridge regression of training pseudo-outcomes on the outcome features
	// KindEnsemble is the selection's result: the mean of the candidates
	// the validation rows cannot tell from the best, re-centred.
	KindEnsemble = "ensemble"
)

// Kernel is a kernel whose latent and outcome models are candidates, and
// its name in candidate names. Its GridPoint, when set, replaces the
// configuration's D and γ for this kernel's models, so that one kernel
// can be a candidate at several points of a grid.
type Kernel struct {
	Name     string
	Spectral estimator.Spectral
	GridPoint
}

// GridPoint is a point of the selection's grid: the settings of one
// kernel's models that replace the configuration's.
type GridPoint struct {
	Features int      `json:"features,omitempty"` // D, the random frequencies per feature map; 0: the configuration's
	Linear   *float64 `json:"linear,omitempty"`   // γ, the weight of the linear part; nil: the configuration's
	// Transfer is the transfer mode's name (estimator.ParseTransfer); ""
	// is the configuration's. "none" makes the kernel's latent and outcome
	// CATEs CausalRFF fitted at each site on its own rows, a site-local
	// candidate beside the learned transfer's.
	Transfer string `json:"transfer,omitempty"`
}

// SplitTransfer returns the label of a kernel without its transfer grid
// setting, and that setting ("" when it has none): "gaussian" and "none"
// for "gaussian(transfer=none)", "matern(nu=0.5)" and "none" for
// "matern(nu=0.5,transfer=none)". A federation names a kernel at a
// transfer grid point so, and a site trains it with its base kernel's
// plugin.
func SplitTransfer(label string) (base, transfer string) {
	open := strings.LastIndexByte(label, '(')
	if open < 0 || !strings.HasSuffix(label, ")") {
		return label, ""
	}
	inner := label[open+1 : len(label)-1]
	cut := strings.LastIndexByte(inner, ',')
	t, ok := strings.CutPrefix(inner[cut+1:], "transfer=")
	if !ok {
		return label, ""
	}
	if cut < 0 {
		return label[:open], t
	}
	return label[:open+1] + inner[:cut] + ")", t
}

// Check returns an error when the point names no transfer mode that
// estimator.ParseTransfer knows.
func (g GridPoint) Check() error {
	if g.Transfer == "" {
		return nil
	}
	_, err := estimator.ParseTransfer(g.Transfer)
	return err
}

// Config returns cfg with the point's Features, Linear and Transfer in
// place; a Transfer that Check refuses is left out.
func (g GridPoint) Config(cfg estimator.Config) estimator.Config {
	if g.Features > 0 {
		cfg.Features = g.Features
	}
	if g.Linear != nil {
		cfg.Linear = *g.Linear
	}
	if t, err := estimator.ParseTransfer(g.Transfer); g.Transfer != "" && err == nil {
		cfg.Transfer = t
	}
	return cfg
}

// DefaultRidge are the ridge penalties of the T-learner and DR-learner
// candidates: the T-learner baseline's penalty (estimator.TLearnerRidge)
// and two decades above it.
var DefaultRidge = []float64{1, 10, 100}

// Options say which candidates to fit and how to choose.
type Options struct {
	// Kernels: the latent and outcome candidates of each; the first
	// kernel's latent CATE is the reference, and the ridge candidates use
	// its model's outcome features.
	Kernels []Kernel
	// Ridge are the penalties of the ridge candidates; nil means
	// DefaultRidge, and an empty non-nil slice none.
	Ridge []float64
	// Z is the ensemble's threshold (Combine).
	Z float64
	// Kinds, when not empty, keeps only candidates of these kinds. The
	// first candidate kept is the reference.
	Kinds []string
	// Workers is the number of kernels fitted, and of candidates scored,
	// at once; 0 means GOMAXPROCS. The result does not depend on it.
	Workers int
	// OnFitted, when set, is called after each kernel's fit with the
	// number fitted so far, one call at a time.
	OnFitted func(done, total int)
	// BySite gives each site the ensemble of its own choice
	// (CombineBySite) rather than the federation's (Combine), among
	// candidates that include site-local ones. It does nothing for one
	// site, whose own choice is the federation's.
	BySite bool
}

// wants reports whether candidates of kind are fitted.
func (o Options) wants(kind string) bool { return Wants(o.Kinds, kind) }

// Wants reports whether a selection among candidates of kinds (empty:
// every kind) has candidates of kind.
func Wants(kinds []string, kind string) bool {
	return len(kinds) == 0 || slices.Contains(kinds, kind)
}

// Penalties returns the ridge penalties of the ridge candidates: p, or
// DefaultRidge when p is nil.
func Penalties(p []float64) []float64 {
	if p == nil {
		return DefaultRidge
	}
	return p
}

// KernelCandidates returns the latent and outcome candidates of kinds
// (Wants) of every kernel, kernel k named names[k], in that order, with
// their Estimators.
func KernelCandidates(names []string, kinds []string) ([]Candidate, []Estimator) {
	var cands []Candidate
	var ests []Estimator
	for k, name := range names {
		for _, kind := range []string{KindLatent, KindOutcome} {
			if Wants(kinds, kind) {
				cands = append(cands, Candidate{Name: CandidateName(kind, name, 0), Kind: kind, Kernel: k})
				ests = append(ests, Estimator{Kind: kind})
			}
		}
	}
	return cands, ests
}

// Candidate is one fitted candidate and its validation score.
type Candidate struct {
	Name   string // kind/kernel, or kind/penalty
	Kind   string
	Kernel int     // index into Options.Kernels (latent, outcome); 0 for the ridge kinds
	Ridge  float64 // penalty of the ridge kinds
	Member bool    // one of the ensemble's members
	Score
}

// CandidateName names a candidate: its kind and kernel for the latent and
// outcome kinds (latent/gaussian), its kind and penalty for the ridge kinds
// (dr/10), and the ensemble by its kind alone.
func CandidateName(kind, kernel string, ridge float64) string {
	switch kind {
	case KindTLearner, KindDR, KindSiteTLearner, KindSiteDR:
		return fmt.Sprintf("%s/%g", kind, ridge)
	case KindEnsemble:
		return kind
	}
	return kind + "/" + kernel
}

// Result is a finished selection: every candidate scored on the
// validation rows, and what it takes to compute any candidate's CATE.
type Result struct {
	// Candidates are the candidates, then the ensemble, which is Chosen.
	Candidates []Candidate
	Chosen     int
	Ensemble   Ensemble
	Z          float64            // the threshold of the choice
	Models     []*estimator.Model // per kernel, fitted on the training rows
	// Progress holds, per kernel, the training rounds of its fit, as
	// estimator.WithProgress reports them.
	Progress [][]estimator.Progress
	// Nuisance are, per site, the nuisances of all its rows cross-fitted
	// under Models[0].Setup with no model trained on a validation row
	// (estimator.CrossFitExcept), which gave its validation and training
	// pseudo-outcomes; empty for a site that held no rows out and had no
	// DR-learner to train. The AIPW ATE of the site under that setup needs
	// no other cross-fit.
	Nuisance []inference.Nuisance
	// Effects are, per site, Models[0]'s effects of all its rows, when
	// its latent CATE was a candidate (nil otherwise): the site's scoring
	// under that model needs no second pass over its rows.
	Effects    []*estimator.Effects
	estimators []Estimator // by candidate; site-local ones without regressions
	// own are, per site, the Stats of its training rows, which solve the
	// site-local candidates (Estimator.Localise); nil without them.
	own []Stats
	// pairs are, per site, the Pairs of its validation rows.
	pairs []Pairs
}

// SiteScores returns how site's own choice came about (Ensemble.Scores),
// or nil when the run did not choose per site.
func (r *Result) SiteScores(site int) (*SiteScores, error) {
	if site < 0 || site >= len(r.pairs) {
		return nil, fmt.Errorf("%w: site %d of %d", ErrInput, site, len(r.pairs))
	}
	return r.Ensemble.Scores(site, &r.pairs[site])
}

// Run fits every candidate on the training rows of the sites, scores each
// on their validation rows (val[s]: positions in sites[s], in increasing
// order, as Holdout returns them; none for a site that holds no rows out
// and trains on all of them, see SiteHoldout) by the doubly robust loss,
// and forms the ensemble (Decide, the first kernel's latent CATE the
// reference of the scores).
//
// Every kernel's setup is agreed on the Moments of all of each site's rows,
// as a federation's hello pools them, and the models are trained on the
// training rows. Each site's part is what a federated site computes from
// its own rows: the ridge statistics of its training rows (SiteStats),
// added over sites and solved into the ridge candidates (RidgeCandidates),
// then the SiteSums of its rows (SiteLosses), whose pair sums add over
// sites and whose centring sums re-centre each site's ensemble. A
// federation of the same rows therefore chooses the same candidate with
// the same scores, bit for bit.
func Run(ctx context.Context, sites []*estimator.Data, val [][]int, schema estimator.Schema, cfg estimator.Config, opt Options) (*Result, error) {
	k := len(sites)
	if k == 0 || len(val) != k {
		return nil, fmt.Errorf("%w: %d sites and %d validation sets", ErrInput, k, len(val))
	}
	if len(opt.Kernels) == 0 {
		return nil, fmt.Errorf("%w: no kernel", ErrInput)
	}
	for _, kn := range opt.Kernels {
		if err := kn.Check(); err != nil {
			return nil, fmt.Errorf("%w: kernel %s: %w", ErrInput, kn.Name, err)
		}
	}
	// The training rows are read in place, by their positions, never
	// copied as a whole.
	trainRows := make([][]int, k)
	for s, d := range sites {
		if d == nil {
			return nil, fmt.Errorf("%w: site %d has no rows", ErrInput, s)
		}
		rows, err := TrainingRows(d.Rows(), val[s])
		if err != nil {
			return nil, fmt.Errorf("site %d: %w", s, err)
		}
		trainRows[s] = rows
	}
	// One site's own choice is the federation's, and its own rows' ridge
	// candidates are the pooled ones.
	opt.BySite = opt.BySite && k > 1
	ridge := Penalties(opt.Ridge)
	// The standardisation sees training rows only: the held-out rows'
	// outcomes are what the candidates are scored on.
	moments := make([]estimator.Moments, k)
	for s, d := range sites {
		moments[s] = momentsOf(d, trainRows[s])
	}
	scaler, err := estimator.NewScaler(schema, moments)
	if err != nil {
		return nil, err
	}
	res := &Result{Z: opt.Z}
	if err := res.fitKernels(ctx, sites, trainRows, schema, cfg, scaler, opt); err != nil {
		return nil, err
	}
	names := make([]string, len(opt.Kernels))
	for k, kn := range opt.Kernels {
		names[k] = kn.Name
	}
	res.Candidates, res.estimators = KernelCandidates(names, opt.Kinds)
	// The cross-fits below report no training progress: their folds run
	// at once, and their rounds are not the model's.
	ctx = estimator.WithProgress(ctx, nil)
	local, localDR := LocalStatsWanted(opt.Kinds, opt.BySite)
	stats := len(ridge) > 0 && (opt.wants(KindTLearner) || opt.wants(KindDR) || local)
	dr := stats && (opt.wants(KindDR) || localDR)
	// One cross-fit per site, no model of it trained on a validation row,
	// gives the training rows' pseudo-outcomes of the DR-learner and the
	// validation rows' of the losses (estimator.CrossFitExcept).
	res.Nuisance = make([]inference.Nuisance, k)
	for s, d := range sites {
		if !dr && len(val[s]) == 0 {
			continue
		}
		if res.Nuisance[s], err = estimator.CrossFitExcept(ctx, res.Models[0].Setup, s, d, val[s]); err != nil {
			return nil, fmt.Errorf("site %d: pseudo-outcomes: %w", s, err)
		}
	}
	if stats {
		var pooled Stats
		if local {
			res.own = make([]Stats, k)
		}
		for s, d := range sites {
			var psi []float64
			if dr {
				if psi, err = PseudoOutcomes(sites[s], res.Nuisance[s], trainRows[s]); err != nil {
					return nil, fmt.Errorf("site %d: training rows: %w", s, err)
				}
			}
			st, err := SiteStatsRows(ctx, res.Models[0], s, d, trainRows[s], psi)
			if err != nil {
				return nil, fmt.Errorf("site %d: %w", s, err)
			}
			if local {
				res.own[s] = st
			}
			if err := pooled.Add(st); err != nil {
				return nil, err
			}
		}
		cands, ests, err := RidgeCandidates(pooled, ridge, opt.Kinds)
		if err != nil {
			return nil, err
		}
		res.Candidates = append(res.Candidates, cands...)
		res.estimators = append(res.estimators, ests...)
		if local {
			cands, ests := LocalCandidates(ridge, opt.Kinds)
			res.Candidates = append(res.Candidates, cands...)
			res.estimators = append(res.estimators, ests...)
		}
	}
	if len(res.Candidates) == 0 {
		return nil, fmt.Errorf("%w: no candidate of kinds %v", ErrInput, opt.Kinds)
	}
	models := make([]*estimator.Model, len(res.Candidates))
	for c, cand := range res.Candidates {
		models[c] = res.Models[cand.Kernel]
	}
	if slices.ContainsFunc(res.Candidates, func(c Candidate) bool { return c.Kind == KindLatent && c.Kernel == 0 }) {
		res.Effects = make([]*estimator.Effects, k)
	}
	var pairs Pairs
	centres := make([]Centre, k)
	perSite := make([]Pairs, k)
	for s, d := range sites {
		if len(val[s]) == 0 {
			centres[s] = Centre{CATE: make([]float64, len(res.Candidates))}
			perSite[s] = NewPairs(len(res.Candidates))
			continue
		}
		ests := res.estimators
		if res.own != nil {
			if ests, err = Localised(ests, res.own[s]); err != nil {
				return nil, fmt.Errorf("site %d: %w", s, err)
			}
		}
		var known Known
		if res.Effects != nil {
			if res.Effects[s], err = res.Models[0].Effects(ctx, s, d); err != nil {
				return nil, fmt.Errorf("site %d: %w", s, err)
			}
			known = Known{Model: res.Models[0], Latent: res.Effects[s].CATE}
		}
		site, err := SiteLosses(ctx, res.Nuisance[s], s, d, val[s], ests, models, opt.Workers, known)
		if err != nil {
			return nil, fmt.Errorf("site %d: %w", s, err)
		}
		if err := pairs.Add(site.Pairs); err != nil {
			return nil, err
		}
		centres[s], perSite[s] = site.Centre, site.Pairs
	}
	scores, ens, err := Decide(pairs, centres, opt.Z)
	if err != nil {
		return nil, err
	}
	if opt.BySite {
		if ens, err = CombineBySite(ens, perSite, centres, opt.Z); err != nil {
			return nil, err
		}
	}
	res.Ensemble, res.pairs = ens, perSite
	res.Candidates, res.estimators = Ensembled(res.Candidates, res.estimators, scores, ens)
	res.Chosen = len(res.Candidates) - 1
	return res, nil
}

// Ensembled returns the candidates cands with their scores and estimators
// ests, each marked Member when in ens, followed by the ensemble itself:
// chosen, with its validation loss and difference from the reference, and
// standard errors of 0, which stand for none: they would need fourth
// moments of the residuals, which no site sends. The ensemble's Estimator
// has no shift: each site's is in ens.Sites (Estimator.AtSite).
func Ensembled(cands []Candidate, ests []Estimator, scores []Score, ens Ensemble) ([]Candidate, []Estimator) {
	out := make([]Candidate, len(cands), len(cands)+1)
	copy(out, cands)
	e := Estimator{Kind: KindEnsemble}
	for c := range out {
		out[c].Score = scores[c]
		out[c].Chosen = false
		out[c].Member = ens.Has(c)
		// The estimator holds every site's members (Estimator.AtSite).
		site := slices.ContainsFunc(ens.Sites, func(s Centring) bool { return slices.Contains(s.Members, c) })
		if out[c].Member || site {
			e.Members = append(e.Members, Member{Estimator: ests[c], Kernel: out[c].Kernel, Candidate: c})
		}
	}
	ensemble := Candidate{Name: KindEnsemble, Kind: KindEnsemble, Kernel: out[ens.Members[0]].Kernel,
		Score: Score{Loss: ens.Loss, Diff: ens.Loss - scores[0].Loss, Chosen: true}}
	return append(out, ensemble), append(slices.Clip(ests), e)
}

// TrainingRows returns the positions of n rows that are not in val, which
// must be increasing positions: none, or at least 2 and not every row.
func TrainingRows(n int, val []int) ([]int, error) {
	if len(val) == 1 || len(val) > n-1 {
		return nil, fmt.Errorf("%w: %d validation rows of %d; need none or at least 2, and a training row", ErrInput, len(val), n)
	}
	train := mapped.LargeArray[int](n - len(val))[:0]
	next := 0
	for j, i := range val {
		if i < next || i >= n || (j > 0 && i == val[j-1]) {
			return nil, fmt.Errorf("%w: validation row positions must increase within [0, %d): %d after %d", ErrInput, n, i, next-1)
		}
		for ; next < i; next++ {
			train = append(train, next)
		}
		next = i + 1
	}
	for ; next < n; next++ {
		train = append(train, next)
	}
	return train, nil
}

// fitKernels fits the three models with each kernel, under scaler, Options.Workers at
// a time, keeping each fit's progress in r.Progress.
func (r *Result) fitKernels(ctx context.Context, sites []*estimator.Data, train [][]int, schema estimator.Schema, cfg estimator.Config, scaler estimator.Scaler, opt Options) error {
	n := len(opt.Kernels)
	r.Models = make([]*estimator.Model, n)
	r.Progress = make([][]estimator.Progress, n)
	errs := make([]error, n)
	var mu sync.Mutex
	done := 0
	parallel.ForEach(n, opt.Workers, func(i int) {
		kctx := estimator.WithProgress(ctx, func(p estimator.Progress) { r.Progress[i] = append(r.Progress[i], p) })
		setup, err := estimator.NewSetup(kctx, schema, opt.Kernels[i].Spectral, opt.Kernels[i].Config(cfg), scaler)
		if err == nil {
			r.Models[i], err = estimator.FitSetupRows(kctx, sites, train, setup)
		}
		if errs[i] = err; err != nil {
			errs[i] = fmt.Errorf("kernel %s: %w", opt.Kernels[i].Name, errs[i])
		}
		mu.Lock()
		done++
		if opt.OnFitted != nil {
			opt.OnFitted(done, n)
		}
		mu.Unlock()
	})
	return errors.Join(errs...)
}

// CATE returns candidate c's CATE of data's rows, which belong to site.
func (r *Result) CATE(ctx context.Context, c, site int, data *estimator.Data) ([]float64, error) {
	e, k, err := r.Estimator(c, site)
	if err != nil {
		return nil, err
	}
	if e.Kind == KindEnsemble {
		return e.CATEModels(ctx, r.Models, site, data, nil)
	}
	return e.CATE(ctx, r.Models[k], site, data, nil)
}

// Stats are a site's ridge statistics on the reference kernel's outcome
// features of its training rows: per treatment arm, of the outcome (the
// T-learner), and of the doubly robust pseudo-outcomes (the DR-learner;
// nil when no DR candidate is wanted). They add over sites.
type Stats struct {
	Arms [2]*estimator.RidgeStats
	DR   *estimator.RidgeStats
	// Noise is the variance of the noise on each entry of the Gram
	// matrices of Arms[0], Arms[1] and DR, 0 for exact sums (a private
	// site's NoiseStats sets it); it adds over sites.
	Noise [3]float64
}

// Add adds o to s; an empty s becomes a copy of o.
func (s *Stats) Add(o Stats) error {
	if s.Arms[0] == nil {
		for a := range 2 {
			s.Arms[a] = estimator.NewRidgeStats(o.Arms[a].P)
		}
		if o.DR != nil {
			s.DR = estimator.NewRidgeStats(o.DR.P)
		}
	}
	if (s.DR == nil) != (o.DR == nil) {
		return fmt.Errorf("%w: ridge statistics with and without the DR-learner's", ErrInput)
	}
	for a := range 2 {
		if err := s.Arms[a].Add(o.Arms[a]); err != nil {
			return err
		}
	}
	for i, v := range o.Noise {
		s.Noise[i] += v
	}
	if s.DR != nil {
		return s.DR.Add(o.DR)
	}
	return nil
}

// SiteStats returns the Stats of site's training rows train under model m
// (the reference kernel's): the T-learner's per-arm ridge statistics, and
// with psi, the training rows' doubly robust pseudo-outcomes
// (PseudoOutcomes, from nuisances no validation row trained), the
// DR-learner's; nil psi leaves the DR statistics out.
func SiteStats(ctx context.Context, m *estimator.Model, site int, train *estimator.Data, psi []float64) (Stats, error) {
	return SiteStatsRows(ctx, m, site, train, nil, psi)
}

// SiteStatsRows is SiteStats of the rows of d at positions rows (nil:
// every row), read a chunk at a time, in place.
func SiteStatsRows(ctx context.Context, m *estimator.Model, site int, d *estimator.Data, rows []int, psi []float64) (Stats, error) {
	p := m.OutcomeFeatureCount()
	st := Stats{Arms: [2]*estimator.RidgeStats{estimator.NewRidgeStats(p), estimator.NewRidgeStats(p)}}
	dr := psi != nil
	n := d.Rows()
	if rows != nil {
		n = len(rows)
	}
	if dr {
		if len(psi) != n {
			return Stats{}, fmt.Errorf("%w: site %d: %d pseudo-outcomes for %d training rows", ErrInput, site, len(psi), n)
		}
		st.DR = estimator.NewRidgeStats(p)
	}
	// Each chunk's features and Gram matrices, the costly part, are
	// computed on every core; the chunks are then added in order, so the
	// statistics are the same, bit for bit, whatever the cores.
	workers := max(1, runtime.GOMAXPROCS(0))
	parts := make([]statsChunk, workers)
	chunks := (n + estimator.FeatureChunk - 1) / estimator.FeatureChunk
	for c0 := 0; c0 < chunks; c0 += workers {
		group := min(workers, chunks-c0)
		parallel.ForEach(group, workers, func(w int) {
			lo := (c0 + w) * estimator.FeatureChunk
			parts[w].set(ctx, m, d, rows, psi, lo, min(n, lo+estimator.FeatureChunk), dr)
		})
		for w := range group {
			if err := parts[w].err; err != nil {
				return Stats{}, err
			}
			for a := range 2 {
				if err := st.Arms[a].AddChunk(&parts[w].arms[a]); err != nil {
					return Stats{}, err
				}
			}
			if dr {
				if err := st.DR.AddChunk(&parts[w].dr); err != nil {
					return Stats{}, err
				}
			}
		}
	}
	return st, nil
}

// statsChunk is one chunk of rows' contribution to Stats.
type statsChunk struct {
	arms [2]estimator.RidgeChunk
	dr   estimator.RidgeChunk
	arm  [2][]int
	err  error
}

// set computes the chunk of rows [lo, hi) of d (of its rows at positions
// rows, when not nil).
func (c *statsChunk) set(ctx context.Context, m *estimator.Model, d *estimator.Data, rows []int, psi []float64, lo, hi int, dr bool) {
	c.err = ctx.Err()
	if c.err != nil {
		return
	}
	chunk, clo, chi := d, lo, hi
	if rows != nil {
		chunk, clo, chi = d.Subset(rows[lo:hi]), 0, hi-lo
	}
	phi, err := m.OutcomeFeatures(chunk, clo, chi)
	if err != nil {
		c.err = err
		return
	}
	c.arm[0], c.arm[1] = c.arm[0][:0], c.arm[1][:0]
	for i, w := range chunk.W[clo:chi] {
		c.arm[int(w)] = append(c.arm[int(w)], i)
	}
	for a := range 2 {
		if c.err = c.arms[a].Set(phi, chunk.Y[clo:chi], c.arm[a]); c.err != nil {
			return
		}
	}
	if dr {
		c.err = c.dr.Set(phi, psi[lo:hi], nil)
	}
}

// momentsOf returns the Moments of the rows of d at positions rows, as
// (*Data).MomentsWithin(d) gives those of their copy: summed a chunk at a
// time, in order, bit for bit the same.
func momentsOf(d *estimator.Data, rows []int) estimator.Moments {
	_, dx := d.X.Dims()
	m := estimator.Moments{Sum: make([]float64, dx+1), SumSq: make([]float64, dx+1)}
	for lo := 0; lo < len(rows); lo += estimator.FeatureChunk {
		m.Add(d.Subset(rows[lo:min(len(rows), lo+estimator.FeatureChunk)]))
	}
	if !d.Positive() {
		m.Positive, m.LogSum, m.LogSumSq = 0, 0, 0
	}
	return m
}

// RidgeCandidates solves the pooled Stats for every penalty and returns the
// T-learner and DR-learner candidates of kinds (empty: both), penalty by
// penalty, with their Estimators. Their Kernel is 0: they use the
// reference kernel's outcome features.
func RidgeCandidates(pooled Stats, penalties []float64, kinds []string) ([]Candidate, []Estimator, error) {
	want := func(k string) bool { return Wants(kinds, k) }
	if pooled.Arms[0] == nil || (want(KindDR) && pooled.DR == nil) {
		return nil, nil, fmt.Errorf("%w: ridge candidates without their statistics", ErrInput)
	}
	var cands []Candidate
	var ests []Estimator
	for _, lambda := range penalties {
		if want(KindTLearner) {
			var arms [2]estimator.Ridge
			for a := range 2 {
				var err error
				if arms[a], err = solve(pooled.Arms[a], lambda, pooled.Noise[a]); err != nil {
					return nil, nil, fmt.Errorf("t-learner, treatment %d: %w", a, err)
				}
			}
			cands = append(cands, Candidate{Name: CandidateName(KindTLearner, "", lambda), Kind: KindTLearner, Ridge: lambda})
			ests = append(ests, Estimator{Kind: KindTLearner, Ridge: lambda, Arms: &arms})
		}
		if want(KindDR) {
			dr, err := solve(pooled.DR, lambda, pooled.Noise[2])
			if err != nil {
				return nil, nil, fmt.Errorf("dr-learner: %w", err)
			}
			cands = append(cands, Candidate{Name: CandidateName(KindDR, "", lambda), Kind: KindDR, Ridge: lambda})
			ests = append(ests, Estimator{Kind: KindDR, Ridge: lambda, DR: &dr})
		}
	}
	return cands, ests, nil
}

// solve solves r with penalty lambda. When r's Gram matrix carries noise
// of variance noise per entry, the noise can leave ΦᵀΦ + λI indefinite:
// its symmetric noise matrix has a spectral norm near 2√(p·noise), so the
// penalty is raised by 3√(p·noise), and doubled again until the system is
// positive definite (at most ten times). Exact sums (noise 0) are solved
// at lambda itself.
func solve(r *estimator.RidgeStats, lambda, noise float64) (estimator.Ridge, error) {
	if !(noise > 0) {
		return r.Solve(lambda)
	}
	bump := 3 * math.Sqrt(float64(r.P)*noise)
	var err error
	for range 10 {
		var fit estimator.Ridge
		if fit, err = r.Solve(lambda + bump); err == nil {
			return fit, nil
		}
		bump *= 2
	}
	return estimator.Ridge{}, fmt.Errorf("noisy ridge statistics at penalty %g and more: %w", lambda, err)
}

// SiteSums are a site's validation sums: the Pairs of its validation rows
// and the Centre sums of all its rows.
type SiteSums struct {
	Pairs  Pairs
	Centre Centre
}

// SiteLosses returns the SiteSums of the candidates ests (ests[c] computed
// from models[c]) at site, whose rows are d and validation rows the
// positions val. nu are the
// nuisances of all of d, cross-fitted on d (estimator.CrossFit) as for
// the site's AIPW ATE, which can reuse them: each validation row's
// pseudo-outcome then comes from models that did not see it but saw most
// of the site; on IHDP this chose better than cross-fitting on the
// validation rows alone (three sources: √PEHE 1.63 against 1.67 over ten
// replicates). The candidates' CATEs are computed workers at a time (0:
// GOMAXPROCS); the result does not depend on it.
func SiteLosses(ctx context.Context, nu inference.Nuisance, site int, d *estimator.Data, val []int, ests []Estimator, models []*estimator.Model, workers int, known Known) (SiteSums, error) {
	if len(models) != len(ests) || len(ests) == 0 {
		return SiteSums{}, fmt.Errorf("%w: %d candidates and %d models", ErrInput, len(ests), len(models))
	}
	all, _, err := inference.Scores(d.W, d.Y, nu, inference.DefaultClip)
	if err != nil {
		return SiteSums{}, fmt.Errorf("validation pseudo-outcomes: %w", err)
	}
	psi := mapped.Large(len(val))
	for j, i := range val {
		if i < 0 || i >= len(all) {
			return SiteSums{}, fmt.Errorf("%w: validation row %d of %d", ErrInput, i, len(all))
		}
		psi[j] = all[i]
	}
	cates := make([][]float64, len(ests))
	errs := make([]error, len(ests))
	parallel.ForEach(len(ests), workers, func(c int) {
		var latent []float64
		if known.Model != nil && models[c] == known.Model {
			latent = known.Latent
		}
		if cates[c], errs[c] = ests[c].CATE(ctx, models[c], site, d, latent); errs[c] != nil {
			errs[c] = fmt.Errorf("candidate %d (%s): %w", c, ests[c].Kind, errs[c])
		}
	})
	if err := errors.Join(errs...); err != nil {
		return SiteSums{}, err
	}
	held := make([][]float64, len(ests))
	for c, tau := range cates {
		held[c] = mapped.Large(len(val))
		for j, i := range val {
			held[c][j] = tau[i]
		}
	}
	var out SiteSums
	if out.Pairs, err = PairSums(psi, held); err != nil {
		return SiteSums{}, err
	}
	if out.Centre, err = CentreSums(all, cates); err != nil {
		return SiteSums{}, err
	}
	return out, nil
}

// Known is a latent CATE of all of a site's rows computed already, by
// Model (its Effects' CATE), which SiteLosses takes instead of scoring the
// rows again for the candidates of that model; the zero Known is none.
type Known struct {
	Model  *estimator.Model
	Latent []float64
}

// PseudoOutcomes returns the doubly robust pseudo-outcomes of the rows of
// d at the positions rows (ascending; nil: every row), under nu, the
// nuisances of all of d's rows.
func PseudoOutcomes(d *estimator.Data, nu inference.Nuisance, rows []int) ([]float64, error) {
	psi, _, err := inference.Scores(d.W, d.Y, nu, inference.DefaultClip)
	if err != nil || rows == nil {
		return psi, err
	}
	out := make([]float64, len(rows))
	for k, i := range rows {
		if i < 0 || i >= len(psi) {
			return nil, fmt.Errorf("%w: row %d of %d", ErrInput, i, len(psi))
		}
		out[k] = psi[i]
	}
	return out, nil
}

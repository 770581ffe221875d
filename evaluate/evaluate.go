package evaluate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/dataset/ihdp"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/heterogeneity"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// Modes are the methods a plan can compare: the three transfer modes of
// CausalRFF and the T-learner baseline.
var Modes = []string{"learned", "none", "full", "tlearner", "auto"}

// ErrPlan reports a plan that cannot be run as given.
var ErrPlan = errors.New("invalid evaluation plan")

// Replicate is one data file.
type Replicate struct {
	Number int    // the replicate's number, from the file name when it ends in one
	Path   string // the CSV file
	// FS, when set, holds Path (the embedded IHDP replicates); otherwise
	// Path is a file of the operating system.
	FS fs.FS
}

// Plan says what to run.
type Plan struct {
	Replicates []Replicate
	Sources    []int    // numbers k of training sources, each run separately
	SourceSize int      // rows per source
	Split      [3]int   // training, test and validation rows inside a source, in that order
	Modes      []string // a subset of Modes
	TestSource int      // 1-based source whose test rows are scored; it must be among the first k
	Spectral   estimator.Spectral
	Config     estimator.Config // Transfer is set per mode
	// Seeds, when not empty, replaces Config.Seed: every run is repeated
	// with each seed, which draws the random frequencies, the initial
	// weights and the effect samples afresh. A random-feature estimate
	// varies with that draw as well as with the data, so the summaries
	// average each replicate's runs over the seeds first and take the
	// standard error over replicates.
	Seeds []uint64
	// CrossFit, when set, takes the nuisances of the AIPW estimate and of
	// the calibrated CATE from estimator.CrossFit on the scored rows
	// themselves, as crffd fit and a site daemon do, instead of from the
	// models fitted on the training rows (sample splitting).
	CrossFit bool
	// Kernels are the kernels whose latent and outcome models the auto
	// mode fits as candidates, the first being the reference; empty means
	// Spectral alone.
	Kernels []selection.Kernel
	// SelectionZ, when set, replaces selection.DefaultZ in the auto mode.
	SelectionZ *float64
	// AutoBySite gives each source of the auto mode the ensemble of its
	// own choice (selection.Options.BySite).
	AutoBySite bool
	// AutoKinds, when not empty, keeps only the auto mode's candidates of
	// these kinds (selection.Options.Kinds), as model.estimator does.
	AutoKinds []string
	// Epsilons, when not empty, runs each transfer mode (learned, none,
	// full) once per ε with every source differentially private as a
	// site daemon is, as mode "learned ε=4"; +Inf runs the mode as it is.
	// Each source is charged by the rules of a site
	// (federation.SitePrivacy.Calibrate): its training rounds at the
	// Poisson rate of Config.BatchSize, and the aggregates it releases
	// with noise, the moments of the pooled standardisation
	// (SitePrivacy.Moments) and the test source's ATE sums
	// (SitePrivacy.ATE), whose noise the AIPW interval then includes; the
	// run spends ε at Delta.
	Epsilons []float64
	Delta    float64 // δ of the private modes; 0 means 1e-5
	Clip     float64 // the private modes' per-row clip norm; 0 means 1
	// Bounds are the public ranges the private modes' sources clip their
	// values to (privacy.bounds): the continuous covariates by name, x1,
	// x2, …, and the outcome as y. PsiClip and Exact are privacy.psi_clip
	// and privacy.exact.
	Bounds  map[string]federation.Bound
	PsiClip float64
	Exact   []string
	// Progress, when set, is called after each run.
	Progress func(done, total int, r Result)
}

// privateModes returns p.Modes with each transfer mode repeated for every
// finite ε of p.Epsilons, labelled "MODE ε=EPS".
func (p *Plan) privateModes() []string {
	if len(p.Epsilons) == 0 {
		return p.Modes
	}
	var out []string
	for _, m := range p.Modes {
		if _, err := estimator.ParseTransfer(m); err != nil {
			out = append(out, m)
			continue
		}
		for _, eps := range p.Epsilons {
			if math.IsInf(eps, 1) {
				out = append(out, m)
			} else {
				out = append(out, fmt.Sprintf("%s ε=%g", m, eps))
			}
		}
	}
	return out
}

// modeEpsilon splits a private mode's label into its mode and ε (+Inf for
// a mode that is not private).
func modeEpsilon(label string) (string, float64) {
	m, e, ok := strings.Cut(label, " ε=")
	if !ok {
		return label, math.Inf(1)
	}
	eps, err := strconv.ParseFloat(e, 64)
	if err != nil {
		return label, math.Inf(1)
	}
	return m, eps
}

// Result is one fit and its errors on the test rows of the test source.
type Result struct {
	Replicate    int     `json:"replicate"`
	Mode         string  `json:"mode"`
	Sources      int     `json:"sources"`
	Seed         uint64  `json:"seed"` // Config.Seed of the run
	SqrtPEHE     float64 `json:"sqrt_pehe"`
	ATEErr       float64 `json:"ate_err"`
	TrainSeconds float64 `json:"train_seconds"`
	Rounds       int     `json:"rounds"`

	// ATETrue is the mean of mu1 − mu0 over the scored rows, and ATE the
	// mode's plug-in estimate of it (the mean of its CATEs).
	ATETrue float64 `json:"ate_true"`
	ATE     float64 `json:"ate"`
	// The AIPW estimate on the scored rows, with the nuisances fitted on the
	// training rows (sample splitting), and its 95% interval; absent for
	// the tlearner mode, which has no propensity model.
	AIPWATE   *float64 `json:"aipw_ate,omitempty"`
	AIPWLower *float64 `json:"aipw_lower,omitempty"`
	AIPWUpper *float64 `json:"aipw_upper,omitempty"`
	// In a private mode, the AIPW figures are those of the sums the test
	// source releases: AIPWNoiseSE is the part of the standard error its
	// noise accounts for, and PsiClipped the scored rows whose score its
	// clip bound changed.
	AIPWNoiseSE *float64 `json:"aipw_noise_se,omitempty"`
	PsiClipped  *int     `json:"psi_clipped,omitempty"`
	// The DR-calibrated CATE (inference.Calibration of the mode's CATE,
	// fitted on the scored rows' pseudo-outcomes): its sqrt(PEHE), the
	// share of scored rows whose 95% interval holds mu1 − mu0, and the
	// mean width of those intervals; absent for tlearner.
	DRSqrtPEHE   *float64 `json:"dr_sqrt_pehe,omitempty"`
	CATECoverage *float64 `json:"cate_coverage,omitempty"`
	CATEWidth    *float64 `json:"cate_width,omitempty"`
	// Hetero are the heterogeneity tests on the test rows, where the
	// calibrated CATE is (not in a private mode).
	Hetero *Hetero `json:"heterogeneity,omitempty"`

	// The auto mode's chosen candidate and every candidate's figures.
	Chosen     string      `json:"chosen,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
}

// Summary is the mean and standard error of the results of one mode and
// source count over the replicates. With several seeds, each replicate
// contributes the mean of its runs over the seeds.
type Summary struct {
	Mode         string  `json:"mode"`
	Sources      int     `json:"sources"`
	N            int     `json:"n"`     // replicates
	Seeds        int     `json:"seeds"` // seeds per replicate
	SqrtPEHEMean float64 `json:"sqrt_pehe_mean"`
	SqrtPEHESE   float64 `json:"sqrt_pehe_se"`
	ATEErrMean   float64 `json:"ate_err_mean"`
	ATEErrSE     float64 `json:"ate_err_se"`
	// ATEBiasMean is the mean signed error of the plug-in ATE, mean of
	// (ate − ate_true).
	ATEBiasMean float64 `json:"ate_bias_mean"`

	// The AIPW figures, over the runs that have them (not tlearner):
	// the mean of |aipw_ate − ate_true| and of aipw_ate − ate_true, the
	// share of runs whose interval holds ate_true, and the mean width of
	// the interval.
	AIPWATEErrMean *float64 `json:"aipw_ate_err_mean,omitempty"`
	AIPWATEErrSE   *float64 `json:"aipw_ate_err_se,omitempty"`
	AIPWBiasMean   *float64 `json:"aipw_bias_mean,omitempty"`
	AIPWCoverage   *float64 `json:"aipw_coverage,omitempty"`
	AIPWWidthMean  *float64 `json:"aipw_width_mean,omitempty"`

	// The DR-calibrated CATE, over the runs that have it: mean and
	// standard error of its sqrt(PEHE), the mean share of scored rows
	// whose interval holds mu1 − mu0 (cate_coverage), and the mean width.
	DRSqrtPEHEMean *float64 `json:"dr_sqrt_pehe_mean,omitempty"`
	DRSqrtPEHESE   *float64 `json:"dr_sqrt_pehe_se,omitempty"`
	CATECoverage   *float64 `json:"cate_coverage,omitempty"`
	CATEWidthMean  *float64 `json:"cate_width_mean,omitempty"`

	// The heterogeneity tests, over the runs that have them: the share
	// of runs whose BLP test rejects at 5%, the mean GATES coverage, the
	// share of runs whose AUTOC and policy-value intervals hold their
	// truths, and the mean AUTOC estimate and the true ranking's.
	BLPRejection  *float64 `json:"blp_rejection,omitempty"`
	GATESCoverage *float64 `json:"gates_coverage,omitempty"`
	// GATESWorst is the coverage of the fifth of τ̂ that covers least
	// often, which the mean over the fifths can hide.
	GATESWorst     *float64 `json:"gates_worst_fifth_coverage,omitempty"`
	AUTOCCoverage  *float64 `json:"autoc_coverage,omitempty"`
	PolicyCoverage *float64 `json:"policy_coverage,omitempty"`
	AUTOCMean      *float64 `json:"autoc_mean,omitempty"`
	AUTOCBestMean  *float64 `json:"autoc_best_mean,omitempty"`
}

// Report holds every run and the summaries, in the order of the plan.
type Report struct {
	Runs    []Result  `json:"runs"`
	Summary []Summary `json:"summary"`
	Seconds float64   `json:"seconds"` // wall time of the whole evaluation
}

func (p *Plan) check() error {
	switch {
	case len(p.Replicates) == 0:
		return fmt.Errorf("%w: no replicate files", ErrPlan)
	case len(p.Sources) == 0:
		return fmt.Errorf("%w: no source counts", ErrPlan)
	case p.SourceSize < 1:
		return fmt.Errorf("%w: source size %d", ErrPlan, p.SourceSize)
	case p.Split[0] < 2 || p.Split[1] < 1 || p.Split[2] < 0:
		return fmt.Errorf("%w: split %d,%d,%d needs at least 2 training and 1 test row", ErrPlan, p.Split[0], p.Split[1], p.Split[2])
	case p.Split[0]+p.Split[1]+p.Split[2] != p.SourceSize:
		return fmt.Errorf("%w: split %d+%d+%d does not add up to the source size %d", ErrPlan, p.Split[0], p.Split[1], p.Split[2], p.SourceSize)
	case p.Spectral == nil:
		return fmt.Errorf("%w: no kernel", ErrPlan)
	}
	for _, k := range p.Sources {
		if k < 1 || p.TestSource > k || p.TestSource < 1 {
			return fmt.Errorf("%w: test source %d is not among the first %d sources", ErrPlan, p.TestSource, k)
		}
	}
	for _, m := range p.Modes {
		if !slices.Contains(Modes, m) {
			return fmt.Errorf("%w: unknown mode %q (want %s)", ErrPlan, m, strings.Join(Modes, ", "))
		}
	}
	for _, eps := range p.Epsilons {
		if !(eps > 0) {
			return fmt.Errorf("%w: ε %v must be positive (inf for no privacy)", ErrPlan, eps)
		}
	}
	if p.Delta < 0 || p.Delta >= 1 || p.Clip < 0 || math.IsNaN(p.Delta) || math.IsNaN(p.Clip) || math.IsInf(p.Clip, 0) {
		return fmt.Errorf("%w: δ %v must be in [0, 1) and clip %v finite and non-negative", ErrPlan, p.Delta, p.Clip)
	}
	if len(p.Epsilons) > 0 && p.Config.Method != estimator.Adam {
		return fmt.Errorf("%w: private modes train with adam (a private site withholds the losses %v needs)", ErrPlan, p.Config.Method)
	}
	if len(p.Epsilons) > 0 {
		sp := p.sitePrivacy(1)
		if err := sp.Check(); err != nil {
			return fmt.Errorf("%w: %w", ErrPlan, err)
		}
		if err := sp.CheckColumns(nil, estimator.Schema{BinaryOutcome: true}); err != nil {
			return fmt.Errorf("%w: %w", ErrPlan, err)
		}
	}
	return nil
}

// Run executes the plan.
func Run(ctx context.Context, p Plan) (*Report, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{}
	seeds := p.Seeds
	if len(seeds) == 0 {
		seeds = []uint64{p.Config.Seed}
	}
	modes := p.privateModes()
	// The private modes' aggregate noise, as a site draws it.
	rng, err := estimator.NewNoiseSource()
	if err != nil {
		return nil, err
	}
	total := len(p.Replicates) * len(modes) * len(p.Sources) * len(seeds)
	for _, rp := range p.Replicates {
		splits, schema, err := load(rp, p)
		if err != nil {
			return nil, err
		}
		for _, mode := range modes {
			for _, k := range p.Sources {
				for _, seed := range seeds {
					q := p
					q.Config.Seed = seed
					r, err := runOne(ctx, q, splits[:k], schema, mode, rng)
					if err != nil {
						return nil, fmt.Errorf("replicate %d (%s), mode %s, %d sources, seed %d: %w", rp.Number, rp.Path, mode, k, seed, err)
					}
					r.Replicate, r.Seed = rp.Number, seed
					rep.Runs = append(rep.Runs, r)
					if p.Progress != nil {
						p.Progress(len(rep.Runs), total, r)
					}
				}
			}
		}
	}
	rep.Summary = summarise(rep.Runs, modes, p.Sources, len(seeds))
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// OutcomeName is the name of the outcome in Plan.Bounds.
const OutcomeName = "y"

// sitePrivacy returns the privacy of every source of a private mode at
// eps, as a site daemon with the plan's settings would have it.
func (p Plan) sitePrivacy(eps float64) *federation.SitePrivacy {
	sp := &federation.SitePrivacy{Epsilon: eps, Delta: p.Delta, Clip: p.Clip, Exact: p.Exact, PsiClip: p.PsiClip,
		Bounds: map[string]federation.Bound{}}
	if sp.Delta == 0 {
		sp.Delta = 1e-5
	}
	if sp.Clip == 0 {
		sp.Clip = 1
	}
	for name, b := range p.Bounds {
		if name == OutcomeName {
			sp.Outcome = &b
			continue
		}
		sp.Bounds[name] = b
	}
	return sp
}

// covariateNames are the names of dx covariates, x1, x2, …
func covariateNames(dx int) []string {
	out := make([]string, dx)
	for j := range out {
		out[j] = dataset.ColumnName(dataset.FixedColumns + 1 + j)
	}
	return out
}

// privateFit is a model fitted with every source private, and what its
// test source needs to release its ATE's sums.
type privateFit struct {
	model *estimator.Model
	priv  *federation.SitePrivacy // nil: not private
	noise []federation.RunNoise   // per source, the noise it calibrated
}

// fitPrivate fits cfg by simulated federation, every site private at eps
// (+Inf: exact), whose test source scores scored rows: each source
// calibrates its noise as a site daemon does
// (federation.SitePrivacy.Calibrate), releases its moments with noise for
// the pooled standardisation, and trains on Poisson samples at its rate.
func fitPrivate(ctx context.Context, p Plan, train []*estimator.Data, scored int, schema estimator.Schema, cfg estimator.Config, eps float64, rng *rand.Rand) (privateFit, error) {
	if math.IsInf(eps, 1) {
		m, err := estimator.Fit(ctx, train, schema, p.Spectral, cfg)
		return privateFit{model: m}, err
	}
	sp := p.sitePrivacy(eps)
	names := covariateNames(len(schema.Binary))
	moments := make([]estimator.Moments, len(train))
	privs := make([]*estimator.Privacy, len(train))
	fit := privateFit{priv: sp, noise: make([]federation.RunNoise, len(train))}
	for s, d := range train {
		noise, err := sp.Calibrate(cfg, d.Rows(), scored, names, schema)
		if err != nil {
			return fit, fmt.Errorf("source %d at ε = %g: %w (eval: --bounds, --exact)", s+1, eps, err)
		}
		if moments[s], err = sp.Moments(d, names, schema, noise.Moments, rng); err != nil {
			return fit, fmt.Errorf("source %d: %w", s+1, err)
		}
		privs[s] = &estimator.Privacy{Clip: sp.Clip, Noise: noise.Training, Rate: noise.Rate}
		fit.noise[s] = noise
	}
	scaler, err := estimator.NewScaler(schema, moments)
	if err != nil {
		return fit, err
	}
	setup, err := estimator.NewSetup(ctx, schema, p.Spectral, cfg, scaler)
	if err != nil {
		return fit, err
	}
	fit.model, err = estimator.FitPrivate(ctx, train, setup, privs)
	return fit, err
}

// split is one source's rows, split.
type split struct{ train, test, val *dataset.Table }

// load reads a replicate and splits every source of it. The schema is
// inferred from the whole file, so that a column does not change type
// between sources.
func load(rp Replicate, p Plan) ([]split, estimator.Schema, error) {
	path := rp.Path
	var t *dataset.Table
	var err error
	if rp.FS != nil {
		var b []byte
		if b, err = fs.ReadFile(rp.FS, path); err == nil {
			t, err = dataset.Read(bytes.NewReader(b), path)
		}
	} else {
		t, err = dataset.ReadFile(path)
	}
	if err != nil {
		return nil, estimator.Schema{}, err
	}
	schema, err := dataset.InferSchema(t)
	if err != nil {
		return nil, estimator.Schema{}, fmt.Errorf("%s: %w", path, err)
	}
	need := slices.Max(p.Sources)
	if t.Rows() < need*p.SourceSize {
		return nil, schema, fmt.Errorf("%w: %s has %d rows, fewer than %d sources of %d", ErrPlan, path, t.Rows(), need, p.SourceSize)
	}
	head, err := t.Slice(0, need*p.SourceSize)
	if err != nil {
		return nil, schema, err
	}
	sources, err := head.Sources(p.SourceSize)
	if err != nil {
		return nil, schema, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]split, len(sources))
	for i, s := range sources {
		if out[i].train, out[i].test, out[i].val, err = s.Split(p.Split[0], p.Split[1], p.Split[2]); err != nil {
			return nil, schema, fmt.Errorf("%s: source %d: %w", path, i+1, err)
		}
	}
	return out, schema, nil
}

// runOne fits one mode on the training rows of the given sources and
// scores the test rows of the test source.
func runOne(ctx context.Context, p Plan, sources []split, schema estimator.Schema, mode string, rng *rand.Rand) (Result, error) {
	r := Result{Mode: mode, Sources: len(sources)}
	train := make([]*estimator.Data, len(sources))
	for i, s := range sources {
		train[i] = s.train.Data()
	}
	test := sources[p.TestSource-1].test
	start := time.Now()
	var cate []float64
	if mode == "auto" {
		var err error
		if r, cate, err = runAuto(ctx, p, sources, schema); err != nil {
			return r, err
		}
		r.TrainSeconds = time.Since(start).Seconds()
	} else if mode == "tlearner" {
		tl, err := estimator.FitTLearner(ctx, train, schema, p.Spectral, p.Config)
		if err != nil {
			return r, err
		}
		r.TrainSeconds = time.Since(start).Seconds()
		if cate, err = tl.CATE(test.Data()); err != nil {
			return r, err
		}
	} else {
		cfg := p.Config
		base, eps := modeEpsilon(mode)
		var err error
		if cfg.Transfer, err = estimator.ParseTransfer(base); err != nil {
			return r, err
		}
		fit, err := fitPrivate(ctx, p, train, test.Data().Rows(), schema, cfg, eps, rng)
		if err != nil {
			return r, err
		}
		model := fit.model
		r.TrainSeconds = time.Since(start).Seconds()
		r.Rounds = model.Propensity.Rounds + model.Outcome.Rounds + model.Latent.Rounds
		eff, err := model.Effects(ctx, p.TestSource-1, test.Data())
		if err != nil {
			return r, err
		}
		cate = eff.CATE
		var rel *release
		if fit.priv != nil {
			rel = &release{priv: fit.priv, noise: fit.noise[p.TestSource-1], schema: schema, rng: rng}
		}
		if err := r.aipw(ctx, model, p.TestSource-1, train[p.TestSource-1], test.Data(), cate, test.Tau(), test.Mu0, p.CrossFit, rel); err != nil {
			return r, err
		}
	}
	tau := test.Tau()
	r.ATETrue, r.ATE = stat.Mean(tau, nil), stat.Mean(cate, nil)
	var err error
	if r.SqrtPEHE, err = estimator.SqrtPEHE(cate, tau); err != nil {
		return r, err
	}
	if r.ATEErr, err = estimator.ATEError(cate, tau); err != nil {
		return r, err
	}
	return r, nil
}

// release is how a private source releases its ATE's sums.
type release struct {
	priv   *federation.SitePrivacy
	noise  federation.RunNoise // the noise the source calibrated its run to
	schema estimator.Schema
	rng    *rand.Rand
}

// aipw sets the AIPW estimate and interval of the rows d from the
// nuisances of the super learner fitted on train, the training rows of
// model's site (Model.StackedNuisance), or with crossFit from nuisances
// cross-fitted on d (estimator.Analyse, as a site computes them), and the
// figures of the DR-calibrated CATE against the true effects tau; those
// stay absent when d has too few rows for a calibration. With rel, the
// AIPW estimate is that of the sums the private site releases (its scores
// clipped, with noise), and its interval includes the noise; its
// nuisances are then fitted from d's sufficient statistics released with
// noise, even with crossFit, as a private site's are: cross-fitted ψ
// would move with every row.
func (r *Result) aipw(ctx context.Context, model *estimator.Model, site int, train, d *estimator.Data, cate, tau, mu0 []float64, crossFit bool, rel *release) error {
	var an *inference.Analysis
	var err error
	switch {
	case rel != nil:
		// As a private site computes its released ψ, with or without
		// crossFit.
		var nu inference.Nuisance
		if nu, err = rel.priv.Nuisance(model, site, d, rel.noise.Nuisance, rel.rng); err == nil {
			an, err = inference.Analyse(d.W, d.Y, nu, cate, d.X)
		}
	case crossFit:
		an, err = estimator.Analyse(ctx, model.Setup, site, d, cate)
	default:
		var nu inference.Nuisance
		if nu, err = model.StackedNuisance(ctx, site, train, d); err == nil {
			an, err = inference.Analyse(d.W, d.Y, nu, cate, d.X)
		}
	}
	if err != nil {
		return err
	}
	r.AIPWATE, r.AIPWLower, r.AIPWUpper = &an.AIPW.Estimate, &an.AIPW.Lower, &an.AIPW.Upper
	if rel != nil {
		sent, err := rel.priv.ATE(an.Scores, cate, rel.schema, model.Setup.Scaler.YSD, rel.noise.ATE, rel.rng)
		if err != nil {
			return err
		}
		e, err := sent.Sums.Estimate()
		if err != nil {
			return err
		}
		r.AIPWATE, r.AIPWLower, r.AIPWUpper, r.AIPWNoiseSE = &e.Estimate, &e.Lower, &e.Upper, &e.NoiseSE
		r.PsiClipped = &sent.PsiClipped
	}
	if an.Calibration == nil {
		return nil
	}
	dr, _, lo, hi, err := an.Calibration.Interval(cate, d.X)
	if err != nil {
		return err
	}
	pehe, err := estimator.SqrtPEHE(dr, tau)
	if err != nil {
		return err
	}
	var covered, width float64
	for i, t := range tau {
		if lo[i] <= t && t <= hi[i] {
			covered++
		}
		width += hi[i] - lo[i]
	}
	r.DRSqrtPEHE, r.CATECoverage, r.CATEWidth = &pehe, ptr(covered/float64(len(tau))), ptr(width/float64(len(tau)))
	if rel == nil && len(mu0) == len(tau) && len(tau) >= 2*heterogeneity.Fifths {
		if r.Hetero, err = hetero(an.Scores, an.Control, cate, lo, tau, mu0); err != nil {
			return fmt.Errorf("heterogeneity: %w", err)
		}
	}
	return nil
}

// Indices of a run's figures (Result.figures), each averaged over a
// replicate's runs and then over the replicates by summarise.
const (
	figPEHE = iota
	figATEErr
	figATEBias
	figAIPWErr // the AIPW figures, present or absent together
	figAIPWBias
	figAIPWCover
	figAIPWWidth
	figDR // the calibrated CATE's figures, present or absent together
	figCATECover
	figCATEWidth
	figBLPReject // the heterogeneity figures, present or absent together
	figGATESCover
	figAUTOCCover
	figPolicyCover
	figAUTOC
	figAUTOCBest
	figGATESFifth // Fifths figures, one per fifth of τ̂
	numFigures    = figGATESFifth + heterogeneity.Fifths
)

// figures returns the run's figures by the indices above, and which of
// them it has.
func (r Result) figures() (v [numFigures]float64, has [numFigures]bool) {
	set := func(k int, x float64) { v[k], has[k] = x, true }
	set(figPEHE, r.SqrtPEHE)
	set(figATEErr, r.ATEErr)
	set(figATEBias, r.ATE-r.ATETrue)
	if r.AIPWATE != nil {
		set(figAIPWErr, math.Abs(*r.AIPWATE-r.ATETrue))
		set(figAIPWBias, *r.AIPWATE-r.ATETrue)
		cover := 0.0
		if *r.AIPWLower <= r.ATETrue && r.ATETrue <= *r.AIPWUpper {
			cover = 1
		}
		set(figAIPWCover, cover)
		set(figAIPWWidth, *r.AIPWUpper-*r.AIPWLower)
	}
	if r.DRSqrtPEHE != nil {
		set(figDR, *r.DRSqrtPEHE)
		set(figCATECover, *r.CATECoverage)
		set(figCATEWidth, *r.CATEWidth)
	}
	if h := r.Hetero; h != nil {
		set(figBLPReject, b2f(h.BLPHetP < 0.05))
		set(figGATESCover, h.GATESCoverage)
		set(figAUTOCCover, b2f(h.AUTOCCovered))
		set(figPolicyCover, b2f(h.PolicyCovered))
		set(figAUTOC, h.AUTOC)
		set(figAUTOCBest, h.AUTOCBest)
		for k, c := range h.GATESCovered {
			set(figGATESFifth+k, b2f(c))
		}
	}
	return v, has
}

// summarise averages the runs of each mode and source count per replicate
// (over the seeds), then over the replicates. Runs of one replicate share
// its rows, so only replicates count as independent for the standard error.
func summarise(runs []Result, modes []string, sources []int, seeds int) []Summary {
	type sum struct {
		v [numFigures]float64
		n [numFigures]int
	}
	var out []Summary
	for _, mode := range modes {
		for _, k := range sources {
			var order []int
			sums := map[int]*sum{} // by replicate
			for _, r := range runs {
				if r.Mode != mode || r.Sources != k {
					continue
				}
				a, ok := sums[r.Replicate]
				if !ok {
					a = &sum{}
					sums[r.Replicate] = a
					order = append(order, r.Replicate)
				}
				v, has := r.figures()
				for f := range numFigures {
					if has[f] {
						a.v[f] += v[f]
						a.n[f]++
					}
				}
			}
			var per [numFigures][]float64 // per figure, the replicates' means
			for _, rep := range order {
				a := sums[rep]
				for f := range numFigures {
					if a.n[f] > 0 {
						per[f] = append(per[f], a.v[f]/float64(a.n[f]))
					}
				}
			}
			s := Summary{Mode: mode, Sources: k, N: len(order), Seeds: seeds}
			s.SqrtPEHEMean, s.SqrtPEHESE = meanSE(per[figPEHE])
			s.ATEErrMean, s.ATEErrSE = meanSE(per[figATEErr])
			s.ATEBiasMean, _ = meanSE(per[figATEBias])
			mean := func(f int) *float64 { return ptr(stat.Mean(per[f], nil)) }
			if len(per[figAIPWErr]) > 0 {
				m, se := meanSE(per[figAIPWErr])
				s.AIPWATEErrMean, s.AIPWATEErrSE = &m, &se
				s.AIPWBiasMean, s.AIPWCoverage, s.AIPWWidthMean = mean(figAIPWBias), mean(figAIPWCover), mean(figAIPWWidth)
			}
			if len(per[figDR]) > 0 {
				m, se := meanSE(per[figDR])
				s.DRSqrtPEHEMean, s.DRSqrtPEHESE = &m, &se
				s.CATECoverage, s.CATEWidthMean = mean(figCATECover), mean(figCATEWidth)
			}
			if len(per[figBLPReject]) > 0 {
				s.BLPRejection, s.GATESCoverage, s.AUTOCCoverage = mean(figBLPReject), mean(figGATESCover), mean(figAUTOCCover)
				s.PolicyCoverage, s.AUTOCMean, s.AUTOCBestMean = mean(figPolicyCover), mean(figAUTOC), mean(figAUTOCBest)
				for k := range heterogeneity.Fifths {
					if c := mean(figGATESFifth + k); s.GATESWorst == nil || *c < *s.GATESWorst {
						s.GATESWorst = c
					}
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func ptr(v float64) *float64 { return &v }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// meanSE returns the mean and its standard error (sample SD / √n; 0 for a
// single value).
func meanSE(x []float64) (mean, se float64) {
	if len(x) == 0 {
		return math.NaN(), math.NaN()
	}
	if len(x) == 1 {
		return x[0], 0
	}
	mean, sd := stat.MeanStdDev(x, nil)
	return mean, sd / math.Sqrt(float64(len(x)))
}

var trailingNumber = regexp.MustCompile(`(\d+)\.csv$`)

// FindReplicates lists the replicate files at path: the file itself, or
// every .csv file in the directory; path "ihdp" (ihdp.Name) names the
// embedded IHDP replicates. A file whose name ends in a number
// (ihdp_npci_7.csv) is replicate 7; otherwise files are numbered by their
// order. With a non-empty selection only those replicates are returned, and
// a selected replicate without a file is an error.
func FindReplicates(path string, selection []int) ([]Replicate, error) {
	var fsys fs.FS
	files := []string{path}
	if path == ihdp.Name {
		fsys = ihdp.Files
		files, _ = fs.Glob(fsys, "*.csv")
	} else if info, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("data %q: %w", path, err)
	} else if info.IsDir() {
		var err error
		if files, err = filepath.Glob(filepath.Join(path, "*.csv")); err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("data %q: no .csv files", path)
		}
	}
	all := make([]Replicate, len(files))
	numbered := true
	for i, f := range files {
		all[i] = Replicate{Number: i + 1, Path: f, FS: fsys}
		if m := trailingNumber.FindStringSubmatch(filepath.Base(f)); m != nil {
			all[i].Number, _ = strconv.Atoi(m[1])
		} else {
			numbered = false
		}
	}
	if numbered {
		slices.SortFunc(all, func(a, b Replicate) int { return a.Number - b.Number })
		for i := 1; i < len(all); i++ {
			if all[i].Number == all[i-1].Number {
				return nil, fmt.Errorf("data %q: %s and %s are both replicate %d", path, all[i-1].Path, all[i].Path, all[i].Number)
			}
		}
	} else {
		for i := range all {
			all[i].Number = i + 1
		}
	}
	if len(selection) == 0 {
		return all, nil
	}
	var out []Replicate
	for _, n := range selection {
		i := slices.IndexFunc(all, func(r Replicate) bool { return r.Number == n })
		if i < 0 {
			return nil, fmt.Errorf("data %q: no file for replicate %d", path, n)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// ParseList parses a list of positive integers and ranges: "1-10", "1,2,3",
// "1-3,7".
func ParseList(s string) ([]int, error) {
	return parseList(s, 1)
}

// ParseSeeds parses a list of seeds like ParseList, but 0, the default
// seed, is allowed too: "0-4".
func ParseSeeds(s string) ([]uint64, error) {
	list, err := parseList(s, 0)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(list))
	for i, v := range list {
		out[i] = uint64(v)
	}
	return out, nil
}

// parseList parses a list of integers no smaller than least, and ranges.
func parseList(s string, least int) ([]int, error) {
	what := "a positive integer"
	if least == 0 {
		what = "a non-negative integer"
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < least {
			return nil, fmt.Errorf("list %q: %q is not %s or range", s, part, what)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("list %q: %q is not a range LOW-HIGH", s, part)
			}
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

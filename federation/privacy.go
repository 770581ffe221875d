package federation

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/privacy"
)

// Tensor names of the privacy flags. A run's ATE intervals do not include
// the noise of differential privacy, so every site is told whether any
// site's answers carried it.
const (
	tPrivate      = "privacy.private" // hello, the site's answer: 1 when its answers carry DP noise
	tPrivateSites = "privacy.sites"   // global-ate: how many of the run's sites were private
)

// Steps of a private run, as Charge.Step names them: one charge per
// model's training rounds (TrainingStep), and one per aggregate the run
// releases with noise.
const (
	StepMoments   = "moments"   // the hello's column sums and sums of squares
	StepATE       = "ate"       // the doubly robust ATE's sums
	StepSelection = "selection" // model selection's statistics and held-out losses
	// StepNuisance (privacy_nuisance.go) is the nuisance models' statistics.
)

// TrainingStep returns the step name of the training rounds of model
// kind, for example "training propensity".
func TrainingStep(kind estimator.Kind) string { return "training " + kind.String() }

// Relation is the neighbouring relation a private site's guarantee is
// stated under: datasets that differ by one row added or removed, with
// the site's row count public (SitePrivacy.Exact always names it).
const Relation = "add/remove, row count public"

// Aggregates a site may release exactly, as SitePrivacy.Exact names them.
const (
	ExactRowCount  = "row_count" // the row count: in the hello, every gradient and the ATE's sums; always exact
	ExactMoments   = "moments"
	ExactATE       = "ate"
	ExactSelection = "selection"
	ExactBalance   = "balance"
)

// exactNames are the names SitePrivacy.Exact accepts.
var exactNames = []string{ExactRowCount, ExactMoments, ExactATE, ExactSelection, ExactBalance}

// AggregateShare is the share of a run's ε a private site calibrates its
// one-shot aggregates to (moments, ATE sums, selection statistics); the
// training rounds get the rest. The run's charges are then composed by
// Rényi DP, which spends at most the run's ε.
const AggregateShare = 0.2

// SitePrivacy is a site's differential privacy, under its own control:
// other sites of the federation may choose other budgets, or none.
//
// A private site answers every training round with the Poisson-subsampled
// Gaussian mechanism on per-row clipped gradients (estimator.Privacy): each
// row joins a round with probability q = B/n (B the run's batch size, n
// the site's rows; q = 1 without mini-batches), by coins keyed by the row
// under a secret of the site. Before a run starts it calibrates the noise
// so that the run alone spends RunEpsilon at Delta over the rounds it will
// answer (three models of Config.RoundsFor(its rows) rounds each) and the
// aggregates it releases with noise, composes that with every charge its
// Ledger holds by Rényi DP (package privacy), and refuses the run
// (ErrBudget) when the total would pass Epsilon. It answers no more rounds
// than it was charged for (ErrLimit), and refuses runs it cannot answer
// privately: L-BFGS, whose line search needs its losses.
//
// The guarantee is (ε, δ)-DP under Relation: the row count is released
// exactly. Aggregates named in Exact are released without noise and are
// not covered.
type SitePrivacy struct {
	Epsilon    float64 // the site's whole budget ε, over every run
	Delta      float64 // δ of the budget and of every run
	RunEpsilon float64 // ε one run spends; 0 spends Epsilon in one run
	Clip       float64 // C: each row's gradient is clipped to L2 norm C
	// Exact names the aggregates the site releases without noise (the
	// Exact* names). It must name ExactRowCount; nil means just that.
	Exact []string
	// Bounds are the public ranges of the continuous covariates, by
	// column name (SiteConfig.Columns), and Outcome that of a continuous
	// outcome: each value is clipped to its column's range before it
	// enters an aggregate released with noise (see Bound and
	// privacy_aggregates.go). Binary columns and a binary outcome need
	// none. A site that releases its moments with noise refuses a run
	// while a continuous column has no bound (CheckColumns).
	Bounds  map[string]Bound
	Outcome *Bound
	// NuisanceStatistics fits the AIPW's nuisance models from noised
	// sufficient statistics (fitPrivateNuisance) where the site has the
	// rows for it (calibrateNuisance); off, and on smaller sites, they
	// are the run's DP-trained models'.
	NuisanceStatistics bool
	// PsiClip bounds the AIPW scores ψ of the ATE's sums, |ψ| ≤ PsiClip;
	// 0 means DefaultPsiClipRanges × the width of the outcome's bound.
	PsiClip float64
	// Ledger keeps the site's spending across runs and restarts; nil
	// keeps it for this process alone.
	Ledger Ledger
}

// Charge is what one step of one run spends of a site's budget: Steps
// Gaussian mechanisms of noise multiplier Noise, each on a Poisson sample
// of rate Q of the site's rows.
type Charge struct {
	RunID  string
	Step   string // TrainingStep(kind), or StepMoments, StepATE, StepSelection
	At     time.Time
	Rounds int     // the most rounds of this step the site answers (1 for an aggregate)
	Steps  int     // the Gaussian mechanisms composed
	Q      float64 // the sampling rate of each; 1: every row
	Noise  float64 // σ, the noise multiplier
	Clip   float64
	Delta  float64
	// Epsilon is what this step spends alone, Total what every charge so
	// far spends composed, this one included, and Budget the site's whole ε.
	Epsilon, Total, Budget float64
	// Relation is the neighbouring relation the charge is stated under,
	// and Exact the aggregates the run released without noise.
	Relation string
	Exact    []string
}

// q returns c's sampling rate; charges recorded before subsampling have
// none and count as full passes.
func (c Charge) q() float64 {
	if c.Q == 0 {
		return 1
	}
	return c.Q
}

// Remaining is the ε of the budget the charges up to c leave.
func (c Charge) Remaining() float64 { return math.Max(0, c.Budget-c.Total) }

// Ledger keeps a site's privacy charges.
type Ledger interface {
	// Charges returns every charge recorded, oldest first.
	Charges(ctx context.Context) ([]Charge, error)
	// Record adds a charge. The site records it before it computes anything
	// from its rows for the run.
	Record(ctx context.Context, c Charge) error
}

// memoryLedger keeps charges for the life of a process.
type memoryLedger struct{ charges []Charge }

func (m *memoryLedger) Charges(context.Context) ([]Charge, error) { return m.charges, nil }

func (m *memoryLedger) Record(_ context.Context, c Charge) error {
	m.charges = append(m.charges, c)
	return nil
}

// Check reports an invalid setting.
func (p *SitePrivacy) Check() error {
	switch {
	case !(p.Epsilon > 0) || math.IsInf(p.Epsilon, 1):
		return fmt.Errorf("privacy: epsilon %v must be positive and finite", p.Epsilon)
	case !(p.Delta > 0 && p.Delta < 1):
		return fmt.Errorf("privacy: delta %v must be in (0, 1)", p.Delta)
	case p.RunEpsilon < 0 || p.RunEpsilon > p.Epsilon || math.IsNaN(p.RunEpsilon):
		return fmt.Errorf("privacy: run_epsilon %v must be in [0, epsilon %v]", p.RunEpsilon, p.Epsilon)
	case !(p.Clip > 0) || math.IsInf(p.Clip, 1):
		return fmt.Errorf("privacy: clip %v must be positive and finite", p.Clip)
	}
	if p.Exact == nil {
		return nil
	}
	for _, e := range p.Exact {
		if !slices.Contains(exactNames, e) {
			return fmt.Errorf("privacy: exact names %q; the aggregates that may be released exactly are %s", e, strings.Join(exactNames, ", "))
		}
	}
	if !slices.Contains(p.Exact, ExactRowCount) {
		return fmt.Errorf("privacy: exact must name %s: the site's row count is sent exactly in every run (the hello, every gradient's scale, the ATE's sums), and the guarantee is stated with it public", ExactRowCount)
	}
	return nil
}

// exact returns the aggregates p releases exactly, sorted.
func (p *SitePrivacy) exact() []string {
	if p.Exact == nil {
		return []string{ExactRowCount}
	}
	out := slices.Clone(p.Exact)
	slices.Sort(out)
	return slices.Compact(out)
}

// IsExact reports whether p releases aggregate name without noise.
func (p *SitePrivacy) IsExact(name string) bool { return slices.Contains(p.exact(), name) }

// release is one aggregate a private run releases with noise: count
// Gaussian mechanisms on sums over every row, which together take share
// of the run's aggregate budget (see the Share* weights).
type release struct {
	step  string
	count int
	share float64
}

// The shares of a run's aggregate budget, as weights of its Rényi
// divergence (1/(2σ²) per Gaussian mechanism at q = 1, which adds up over
// mechanisms): each release's weight over the weights of the releases the
// run makes is the share it gets. The ATE's sums get the most since the
// headline figure is made of them, and a noise of σ·B on Σψ of a site of
// n rows moves its ATE by σ·B/n; the moments only standardise the inputs,
// and model selection's eleven statistics choose among candidates whose
// doubly robust losses differ by more than the noise does once rows are
// many.
const (
	ShareMoments   = 1
	ShareATE       = 5
	ShareSelection = 4
)

// runCharge is what a private site keeps of its run's charges.
type runCharge struct {
	rounds int     // the most rounds of each model the site answers
	q      float64 // the training rounds' sampling rate
	noise  float64 // σ of the training rounds
	// agg holds σ of each Gaussian mechanism of each aggregate step
	// released with noise (for the ATE's sums, see ATEShares).
	agg  map[string]float64
	clip float64
}

// aggregate returns σ of step's mechanisms; 0 when the run does not
// release it with noise.
func (rc *runCharge) aggregate(step string) float64 {
	if rc == nil {
		return 0
	}
	return rc.agg[step]
}

// releases returns the aggregates the run releases with noise, beside its
// training rounds, in the order they are charged.
func (s *site) releases() []release {
	rel := slices.Concat(s.aggregateReleases(), s.selectionReleases())
	if s.privateNuisance() && !slices.Contains(rel, nuisanceRelease) {
		// A run whose ATE is exact but whose selection is not.
		rel = append(rel, nuisanceRelease)
	}
	return rel
}

// noiseFor returns the noise of step's releases (see noiseAggregate).
func (s *site) noiseFor(step string) func(v []float64, sensitivity float64) error {
	return func(v []float64, sensitivity float64) error { return s.noiseAggregate(step, v, sensitivity) }
}

// noiseAggregate adds the noise of one aggregate release of step to v:
// independent N(0, (σ·sensitivity)²) on every coordinate, σ the noise
// multiplier the run calibrated step to, where sensitivity bounds the L2 norm by which adding or
// removing one row moves v. The noise comes from a ChaCha8 source seeded
// from crypto/rand, which the coordinator cannot know.
func (s *site) noiseAggregate(step string, v []float64, sensitivity float64) error {
	sigma := s.charge.aggregate(step)
	if sigma == 0 {
		return fmt.Errorf("privacy: an aggregate released with noise (%s) was not charged", step)
	}
	if s.aggRand == nil {
		r, err := estimator.NewNoiseSource()
		if err != nil {
			return err
		}
		s.aggRand = r
	}
	sd := sigma * sensitivity
	for i := range v {
		v[i] += sd * s.aggRand.NormFloat64()
	}
	return nil
}

// SamplingRate returns the Poisson rate of a private site's training
// rounds under cfg: B/n with mini-batches of B below its n rows, else 1.
func SamplingRate(cfg estimator.Config, rows int) float64 {
	if b := cfg.BatchSize; b > 0 && b < rows && cfg.Method == estimator.Adam {
		return float64(b) / float64(rows)
	}
	return 1
}

// chargePrivacy charges run the rounds cfg will ask of the site and the
// aggregates it will release, before the site computes anything from its
// rows, and keeps the charge for the run: its noise, and its round limit.
// further are the further kernels the run chooses among (decodeKernels),
// each of whose three models the site trains for as many rounds.
func (s *site) chargePrivacy(ctx context.Context, run string, cfg estimator.Config, further []string) error {
	s.charge = nil
	p := s.cfg.Privacy
	if p == nil {
		return nil
	}
	if err := p.Check(); err != nil {
		return err
	}
	if err := p.CheckColumns(s.cfg.Columns, s.cfg.Schema); err != nil {
		return fmt.Errorf("%w: %w", ErrLimit, err)
	}
	if cfg.Method != estimator.Adam {
		return fmt.Errorf("%w: a private site does not release its losses, which %v's line search needs (model.method: adam)", ErrLimit, cfg.Method)
	}
	if p.Ledger == nil {
		if s.ledger == nil {
			s.ledger = &memoryLedger{}
		}
		p.Ledger = s.ledger
	}
	rows := s.cfg.Data.Rows()
	rc, charges, err := calibrateNuisance(p, run, cfg, rows, rows, len(s.cfg.Schema.Binary), further, s.releases())
	if err != nil {
		return err
	}
	steps := rc.rounds * len(trainingSteps(further))
	runEps := p.runEpsilon()
	past, err := p.Ledger.Charges(ctx)
	if err != nil {
		return fmt.Errorf("privacy: read the ledger: %w", err)
	}
	before := 0.0
	if len(past) > 0 {
		if before, err = compose(past, nil, p.Delta); err != nil {
			return err
		}
	}
	total, err := compose(past, charges, p.Delta)
	if err != nil {
		return err
	}
	if total > p.Epsilon*(1+1e-9) {
		return fmt.Errorf("%w: run %s would spend ε = %.4g at δ = %g over %d rounds, bringing the site's total from ε = %.4g to %.4g, past its budget of ε = %.4g (%.4g left)",
			ErrBudget, run, runEps, p.Delta, steps, before, total, p.Epsilon, math.Max(0, p.Epsilon-before))
	}
	exact := p.exact()
	now := time.Now().UTC()
	for i := range charges {
		c := &charges[i]
		c.At, c.Clip, c.Delta, c.Budget, c.Relation, c.Exact = now, p.Clip, p.Delta, p.Epsilon, Relation, exact
		if c.Epsilon, err = compose(nil, []Charge{*c}, p.Delta); err != nil {
			return err
		}
		if c.Total, err = compose(past, charges[:i+1], p.Delta); err != nil {
			return err
		}
		if err := p.Ledger.Record(ctx, *c); err != nil {
			return fmt.Errorf("privacy: record the charge of run %s: %w", run, err)
		}
	}
	s.charge = &rc
	alone, err := compose(nil, charges, p.Delta)
	if err != nil {
		return err
	}
	s.log.Info("privacy budget charged", slog.String(wire.LogKeyRun, run), slog.Float64("epsilon", alone), slog.Float64("epsilon_total", total),
		slog.Float64("epsilon_budget", p.Epsilon), slog.Float64("delta", p.Delta), slog.Int("rounds", steps), slog.Float64("sampling_rate", rc.q),
		slog.Float64("noise", rc.noise), slog.Float64("ate_noise", rc.aggregate(StepATE)), slog.String("relation", Relation), slog.String("exact", strings.Join(exact, ",")))
	return nil
}

// trainingSteps returns the step names of a run's training rounds: each
// model of the run's kernel (TrainingStep), then each model of every
// further kernel, named for people as the site's loss names it
// ("training latent (laplacian)").
func trainingSteps(further []string) []string {
	var steps []string
	for k := range 1 + len(further) {
		for _, kind := range estimator.Kinds {
			steps = append(steps, "training "+modelLabel(kind, k, further))
		}
	}
	return steps
}

// runEpsilon is the ε one run spends: RunEpsilon, or Epsilon when 0.
func (p *SitePrivacy) runEpsilon() float64 {
	if p.RunEpsilon == 0 {
		return p.Epsilon
	}
	return p.RunEpsilon
}

// calibrateRun calibrates the noise of a run of cfg at a site of rows rows
// private under p that releases rel beside its training rounds: σ of the
// training rounds at the Poisson rate of cfg's batch size, and σ of each
// aggregate release, which together are calibrated to AggregateShare of
// the run's ε and split among the releases by their shares; then every σ
// is scaled by one factor so that the charges, composed by Rényi DP, spend
// the run's ε (at most, to a relative 1e-4 of the noise). It returns the
// run's charge and its charges, without their time and totals. A site
// daemon (chargePrivacy) and crffd eval (SitePrivacy.Calibrate) both
// calibrate with it.
func calibrateRun(p *SitePrivacy, run string, cfg estimator.Config, rows int, further []string, rel []release) (runCharge, []Charge, error) {
	rounds := cfg.RoundsFor(rows)
	q := SamplingRate(cfg, rows)
	// Kernels (selection): each further kernel's three models are
	// trained for as many rounds as the run's own, and charged as steps
	// of their own (trainingSteps).
	train := trainingSteps(further)
	steps := rounds * len(train)
	runEps := p.runEpsilon()
	weight := 0.0
	for _, r := range rel {
		if !(r.share > 0) || r.count < 1 {
			// A release of no share would get infinite noise.
			return runCharge{}, nil, fmt.Errorf("privacy: the release %s has share %v over %d mechanisms", r.step, r.share, r.count)
		}
		weight += r.share
	}
	rc := runCharge{rounds: rounds, q: q, clip: p.Clip, agg: map[string]float64{}}
	var err error
	if weight == 0 {
		rc.noise, err = privacy.Calibrate(runEps, p.Delta, q, steps)
	} else {
		rc.noise, err = privacy.Calibrate(runEps*(1-AggregateShare), p.Delta, q, steps)
		var one float64
		if err == nil {
			// σ of one Gaussian mechanism spending the whole aggregate
			// share. At q = 1 a mechanism's Rényi divergence is
			// α/(2σ²) and adds up over mechanisms, so the count
			// mechanisms of a release of share s/weight of it each
			// take σ·√(count·weight/s).
			one, err = privacy.Calibrate(runEps*AggregateShare, p.Delta, 1, 1)
		}
		for _, r := range rel {
			rc.agg[r.step] = one * math.Sqrt(float64(r.count)*weight/r.share)
		}
	}
	if err != nil {
		return rc, nil, fmt.Errorf("privacy: calibrating the noise of %d rounds at sampling rate %.4g: %w", steps, q, err)
	}
	charges := make([]Charge, 0, len(train)+len(rel))
	for _, step := range train {
		charges = append(charges, Charge{RunID: run, Step: step, Rounds: rounds, Steps: rounds, Q: q, Noise: rc.noise})
	}
	for _, r := range rel {
		charges = append(charges, Charge{RunID: run, Step: r.step, Rounds: 1, Steps: r.count, Q: 1, Noise: rc.agg[r.step]})
	}
	// The two calibrations each spend their share; composed by RDP the
	// run spends less than their sum, often well below the run's ε. Every
	// noise is then scaled by one factor, which keeps their ratios, so
	// that the run
	// spends its ε: the largest noise that spends more, and the smallest
	// that spends no more, are bisected to a relative 1e-4, and the run
	// takes the latter.
	spent := func(f float64) (float64, error) {
		scaled := slices.Clone(charges)
		for i := range scaled {
			scaled[i].Noise *= f
		}
		return compose(nil, scaled, p.Delta)
	}
	lo, hi := 1.0, 1.0
	for range 60 {
		e, err := spent(hi)
		if err != nil {
			return rc, nil, err
		}
		if e <= runEps*(1+1e-9) {
			break
		}
		lo, hi = hi, hi*2
	}
	for range 60 {
		e, err := spent(lo)
		if err != nil {
			return rc, nil, err
		}
		if e > runEps*(1+1e-9) {
			break
		}
		lo, hi = lo/2, lo
	}
	for hi-lo > 1e-4*hi {
		mid := (lo + hi) / 2
		e, err := spent(mid)
		if err != nil {
			return rc, nil, err
		}
		if e <= runEps*(1+1e-9) {
			hi = mid
		} else {
			lo = mid
		}
	}
	rc.noise *= hi
	for step := range rc.agg {
		rc.agg[step] *= hi
	}
	for i := range charges {
		charges[i].Noise *= hi
	}
	return rc, charges, nil
}

// compose returns the ε at delta of the charges of a and b composed.
func compose(a, b []Charge, delta float64) (float64, error) {
	var acc privacy.Accountant
	for _, c := range slices.Concat(a, b) {
		if err := acc.Add(c.q(), c.Noise, c.Steps); err != nil {
			return 0, fmt.Errorf("privacy: the charge of run %s (%s): %w", c.RunID, c.Step, err)
		}
	}
	eps, _, err := acc.Epsilon(delta)
	return eps, err
}

// privatize makes the site's training private under the run's charge.
func (s *site) privatize() error {
	if s.charge == nil {
		return nil
	}
	return s.train.SetPrivacy(&estimator.Privacy{Clip: s.charge.clip, Noise: s.charge.noise, Rate: s.charge.q})
}

package federation

import (
	"context"
	"fmt"
	"log/slog"
	"math"
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

// SitePrivacy is a site's differential privacy, under its own control:
// other sites of the federation may choose other budgets, or none.
//
// A private site answers every training round with the Gaussian mechanism
// on per-row clipped gradients (estimator.Privacy). Before a run starts it
// calibrates the noise so that the run alone spends RunEpsilon at Delta
// over the rounds it will answer (three models of
// Config.RoundsFor(its rows) rounds each, without amplification by
// subsampling), composes that with every run its Ledger holds by Rényi DP
// (package privacy), and refuses the run (ErrBudget) when the total would
// pass Epsilon. It answers no more rounds than it was charged for
// (ErrLimit), and refuses runs it cannot answer privately: L-BFGS, whose
// line search needs its losses, and model selection, whose statistics and
// held-out losses are sums over rows without noise.
//
// What the guarantee covers: the training gradients, the part a
// coordinator chooses the questions of and can ask for again and again.
// The hello's moments, which set the pooled standardisation, and the ATE's
// sums are released once per run without noise; each is a sum over at
// least SiteConfig.MinArmRows rows per arm.
type SitePrivacy struct {
	Epsilon    float64 // the site's whole budget ε, over every run
	Delta      float64 // δ of the budget and of every run
	RunEpsilon float64 // ε one run spends; 0 spends Epsilon in one run
	Clip       float64 // C: each row's gradient is clipped to L2 norm C
	// Ledger keeps the site's spending across runs and restarts; nil
	// keeps it for this process alone.
	Ledger Ledger
}

// Charge is what one run spends of a site's budget.
type Charge struct {
	RunID  string
	At     time.Time
	Rounds int     // per model: the most the site answers
	Steps  int     // rounds over every model: the Gaussian mechanisms composed
	Noise  float64 // σ, the noise multiplier
	Clip   float64
	Delta  float64
	// Epsilon is what this run spends alone (at most the run's ε: the
	// noise is calibrated to it), Total what every run so far
	// spends composed, this one included, and Budget the site's whole ε.
	Epsilon, Total, Budget float64
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
	return nil
}

// chargePrivacy charges run the rounds cfg will ask of the site, before
// the site computes anything from its rows, and keeps the charge for the
// run: its noise, and its round limit.
func (s *site) chargePrivacy(ctx context.Context, run string, cfg estimator.Config) error {
	s.charge = nil
	p := s.cfg.Privacy
	if p == nil {
		return nil
	}
	if err := p.Check(); err != nil {
		return err
	}
	switch {
	case cfg.Method != estimator.Adam:
		return fmt.Errorf("%w: a private site does not release its losses, which %v's line search needs (model.method: adam)", ErrLimit, cfg.Method)
	case s.share > 0:
		return fmt.Errorf("%w: model selection's statistics and held-out losses are not private; a private site takes part in runs that select no model (model.estimator: latent)", ErrLimit)
	}
	if p.Ledger == nil {
		if s.ledger == nil {
			s.ledger = &memoryLedger{}
		}
		p.Ledger = s.ledger
	}
	rounds := cfg.RoundsFor(s.cfg.Data.Rows())
	steps := rounds * len(estimator.Kinds)
	runEps := p.RunEpsilon
	if runEps == 0 {
		runEps = p.Epsilon
	}
	sigma, err := privacy.Calibrate(runEps, p.Delta, 1, steps)
	if err != nil {
		return fmt.Errorf("privacy: calibrating the noise of %d rounds: %w", steps, err)
	}
	past, err := p.Ledger.Charges(ctx)
	if err != nil {
		return fmt.Errorf("privacy: read the ledger: %w", err)
	}
	var acc privacy.Accountant
	for _, c := range past {
		if err := acc.Add(1, c.Noise, c.Steps); err != nil {
			return fmt.Errorf("privacy: the ledger's charge of run %s: %w", c.RunID, err)
		}
	}
	before := 0.0
	if len(past) > 0 {
		if before, _, err = acc.Epsilon(p.Delta); err != nil {
			return err
		}
	}
	var one privacy.Accountant
	if err := one.Add(1, sigma, steps); err != nil {
		return err
	}
	alone, _, err := one.Epsilon(p.Delta)
	if err != nil {
		return err
	}
	if err := acc.Add(1, sigma, steps); err != nil {
		return err
	}
	total, _, err := acc.Epsilon(p.Delta)
	if err != nil {
		return err
	}
	if total > p.Epsilon*(1+1e-9) {
		return fmt.Errorf("%w: run %s would spend ε = %.4g at δ = %g over %d rounds, bringing the site's total from ε = %.4g to %.4g, past its budget of ε = %.4g (%.4g left)",
			ErrBudget, run, runEps, p.Delta, steps, before, total, p.Epsilon, math.Max(0, p.Epsilon-before))
	}
	c := Charge{RunID: run, At: time.Now().UTC(), Rounds: rounds, Steps: steps, Noise: sigma, Clip: p.Clip, Delta: p.Delta,
		Epsilon: alone, Total: total, Budget: p.Epsilon}
	if err := p.Ledger.Record(ctx, c); err != nil {
		return fmt.Errorf("privacy: record the charge of run %s: %w", run, err)
	}
	s.charge = &c
	s.log.Info("privacy budget charged", slog.String(wire.LogKeyRun, run), slog.Float64("epsilon", alone), slog.Float64("epsilon_total", total),
		slog.Float64("epsilon_budget", p.Epsilon), slog.Float64("delta", p.Delta), slog.Int("rounds", steps), slog.Float64("noise", sigma))
	return nil
}

// privatize makes the site's training private under the run's charge.
func (s *site) privatize() error {
	if s.charge == nil {
		return nil
	}
	return s.train.SetPrivacy(&estimator.Privacy{Clip: s.charge.Clip, Noise: s.charge.Noise})
}

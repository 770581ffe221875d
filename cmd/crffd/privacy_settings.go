package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
)

// privacySettings are a site's differential privacy and the limits it puts
// on what a coordinator may ask of it. Both are the site's own: a
// coordinator's setting of them is ignored.
var privacySettings = func() []setting {
	l := federation.DefaultLimits()
	return []setting{
		{"privacy.epsilon", 0.0, "sites only: the site's whole differential-privacy budget ε over every run; 0 turns privacy off. Training gradients are clipped per row and noised (see docs/privacy.md); a run that would pass the budget is refused, and crff_privacy shows what each run spent"},
		{"privacy.delta", 1e-5, "sites only: δ of the privacy budget and of every run"},
		{"privacy.run_epsilon", 0.0, "sites only: the ε one run spends (the noise is calibrated to it); 0 spends the whole privacy.epsilon in one run"},
		{"privacy.clip", 1.0, "sites only: the L2 norm each row's gradient is clipped to, in the model's standardised units"},
		{"privacy.exact", []string{federation.ExactRowCount}, "sites only: the aggregates a private site releases without noise, listed in crff_privacy, crffd report and the start log; row_count must be named (the guarantee is add/remove DP with the row count public); others: moments (the hello's column sums), ate (the ATE's sums), selection, balance (the balance sums, which a private site otherwise does not send)"},
		{"privacy.bounds", map[string]string{}, "sites only: the public range [lo, hi] of each continuous covariate and of a continuous outcome, by column name (age: [18, 100]; in the environment \"18,100\"): a private site clips each value to it before the hello's moments are noised, and the outcome's width caps privacy.psi_clip's default. Binary columns need none; a private site refuses to start while a continuous column has none, unless privacy.exact names moments. Take it from what the column can hold, never from the rows"},
		{"privacy.psi_clip", 0.0, "sites only: a private site clips each AIPW score ψ to [-psi_clip, psi_clip] (and each CATE to the outcome's range) before the ATE's sums are noised; 0: 8 pooled standard deviations of a continuous outcome (from the run's noised moments, at no further cost), at most 2 × the width of the outcome's privacy.bounds (2 for a binary outcome). Larger costs noise, smaller biases the ATE toward 0; the site logs how many rows it clipped"},
		{"limits.features", l.Features, "sites only: the most random frequencies (model.features) a coordinator may ask for"},
		{"limits.latent", l.Latent, "sites only: the most latent dimensions (model.latent)"},
		{"limits.draws", l.Draws, "sites only: the most noise draws per row in the latent model"},
		{"limits.samples", l.Samples, "sites only: the most effect samples per row (model.samples)"},
		{"limits.mh_steps", l.MHSteps, "sites only: the most Metropolis–Hastings steps (model.mh_steps)"},
		{"limits.folds", l.Folds, "sites only: the most cross-fitting folds (model.folds)"},
		{"limits.rounds", l.Rounds, "sites only: the most rounds of one model the site answers in a run, and the largest model.rounds it accepts"},
		{"limits.min_batch", l.MinBatch, "sites only: the smallest mini-batch (model.batch_size) the site computes a round on; a batch of one row would put that row's gradient on the wire"},
		{"limits.kernels", l.Kernels, "sites only: the most kernels whose models the site trains in one run, its own included (a coordinator's kernel.name auto asks three models of each; the site needs kernel.name auto to train more than one)"},
		{"limits.sites", l.Sites, "sites only: the most sites a run may have (the site keeps every site's name and its row of each model's transfer matrix)"},
		{"limits.candidates", l.Candidates, "sites only: the most candidates of model selection the site scores in a run (it holds each candidate's CATE of every row)"},
		{"limits.transfers", []string{}, "sites only: the transfer modes (learned, none, full) the site takes part in; empty allows all"},
	}
}()

// siteLimits returns the limits.* settings.
func (a *app) siteLimits() (federation.Limits, error) {
	l := federation.Limits{
		Features: a.v.GetInt("limits.features"), Latent: a.v.GetInt("limits.latent"), Draws: a.v.GetInt("limits.draws"),
		Samples: a.v.GetInt("limits.samples"), MHSteps: a.v.GetInt("limits.mh_steps"), Folds: a.v.GetInt("limits.folds"),
		Rounds: a.v.GetInt("limits.rounds"), MinBatch: a.v.GetInt("limits.min_batch"), Kernels: a.v.GetInt("limits.kernels"),
		Sites: a.v.GetInt("limits.sites"), Candidates: a.v.GetInt("limits.candidates"),
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"limits.features", l.Features}, {"limits.latent", l.Latent}, {"limits.draws", l.Draws}, {"limits.samples", l.Samples},
		{"limits.mh_steps", l.MHSteps}, {"limits.folds", l.Folds}, {"limits.rounds", l.Rounds}, {"limits.min_batch", l.MinBatch},
		{"limits.kernels", l.Kernels}, {"limits.sites", l.Sites}, {"limits.candidates", l.Candidates}} {
		if f.v < 1 {
			return l, fmt.Errorf("%s %d: want at least 1", f.key, f.v)
		}
	}
	for _, name := range a.stringList("limits.transfers") {
		t, err := estimator.ParseTransfer(strings.TrimSpace(name))
		if err != nil {
			return l, fmt.Errorf("limits.transfers: %w", err)
		}
		l.Transfers = append(l.Transfers, t)
	}
	return l, nil
}

// sitePrivacy returns the privacy.* settings, nil when privacy.epsilon is
// 0, without a ledger (see storeLedger).
func (a *app) sitePrivacy() (*federation.SitePrivacy, error) {
	eps := a.v.GetFloat64("privacy.epsilon")
	if eps == 0 {
		return nil, nil
	}
	p := &federation.SitePrivacy{
		Epsilon: eps, Delta: a.v.GetFloat64("privacy.delta"), RunEpsilon: a.v.GetFloat64("privacy.run_epsilon"),
		Clip: a.v.GetFloat64("privacy.clip"), Exact: a.v.GetStringSlice("privacy.exact"),
		PsiClip: a.v.GetFloat64("privacy.psi_clip"),
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	bounds, err := a.privacyBounds()
	if err != nil {
		return nil, err
	}
	p.Bounds = bounds
	if err := p.CheckColumns(nil, estimator.Schema{BinaryOutcome: true}); err != nil {
		return nil, err
	}
	return p, nil
}

// privacyBounds reads privacy.bounds: per column, two numbers lo < hi.
func (a *app) privacyBounds() (map[string]federation.Bound, error) {
	out := map[string]federation.Bound{}
	for name, v := range a.stringMap("privacy.bounds") {
		parts := strings.Split(v, ",")
		var b federation.Bound
		var err error
		if len(parts) == 2 {
			if b.Lo, err = strconv.ParseFloat(strings.TrimSpace(parts[0]), 64); err == nil {
				b.Hi, err = strconv.ParseFloat(strings.TrimSpace(parts[1]), 64)
			}
		}
		if len(parts) != 2 || err != nil || math.IsNaN(b.Lo) || math.IsNaN(b.Hi) || math.IsInf(b.Lo, 0) || math.IsInf(b.Hi, 0) || !(b.Lo < b.Hi) {
			return nil, fmt.Errorf("privacy.bounds.%s %q: want two finite numbers lo < hi, [lo, hi]", name, v)
		}
		out[name] = b
	}
	return out, nil
}

package federation

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// TestPrivateSitesSpendTheirBudgets: three sites, two private with budgets
// of their own choosing and one not, complete a run. Each private site
// records one charge for the rounds it answers (three models of
// Config.Rounds), spending its run ε within 1%, and sends no loss. A second run would pass the smaller budget:
// that site refuses it before it sends anything, and says by how much.
func TestPrivateSitesSpendTheirBudgets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	cfg.Method = estimator.Adam
	ledgers := []*memoryLedger{{}, {}}
	budgets := []SitePrivacy{
		{Epsilon: 2, Delta: 1e-5, Clip: 1, Ledger: ledgers[0], Bounds: testBounds, Outcome: &testOutcomeBound},
		{Epsilon: 8, RunEpsilon: 4, Delta: 1e-6, Clip: 0.5, Ledger: ledgers[1], Bounds: testBounds, Outcome: &testOutcomeBound},
	}
	f := newFed(40, 40, 40)
	for s := range budgets {
		f.cfgs[s].Privacy = &budgets[s]
	}
	sent := f.recordSent("site1")
	sites := f.start(ctx)
	res, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	// Every site learns that the run's intervals do not cover the noise of
	// its two private sites; each knows whether it was one.
	if res.PrivateSites != 2 {
		t.Errorf("coordinator counts %d private sites, want 2", res.PrivateSites)
	}
	for s, r := range waitSites(t, sites) {
		if r.PrivateSites != 2 || r.Private != (s < 2) {
			t.Errorf("site%d: private %v, %d private sites; want %v, 2", s+1, r.Private, r.PrivateSites, s < 2)
		}
	}
	steps := []string{TrainingStep(estimator.Propensity), TrainingStep(estimator.Outcome), TrainingStep(estimator.Latent), StepMoments, StepATE}
	for s, l := range ledgers {
		if len(l.charges) != len(steps) {
			t.Fatalf("site%d: %d charges, want one per model and one per aggregate released with noise", s+1, len(l.charges))
		}
		b := budgets[s]
		run := b.RunEpsilon
		if run == 0 {
			run = b.Epsilon
		}
		for k, c := range l.charges {
			rounds, mechanisms := cfg.Rounds, cfg.Rounds
			switch c.Step {
			case StepMoments:
				rounds, mechanisms = 1, 1
			case StepATE:
				rounds, mechanisms = 1, 3
			}
			if want := steps[k]; c.RunID != "run-1" || c.Step != want || c.Rounds != rounds || c.Steps != mechanisms || c.Q != 1 ||
				c.Delta != b.Delta || c.Clip != b.Clip || c.Budget != b.Epsilon || c.Relation != Relation || !slices.Equal(c.Exact, []string{ExactRowCount}) {
				t.Errorf("site%d: charge %+v, want run-1, %s, %d rounds, %d mechanisms, q 1, δ %g, clip %g, budget %g, the relation and the row count exact",
					s+1, c, want, rounds, mechanisms, b.Delta, b.Clip, b.Epsilon)
			}
			if !(c.Noise > 0) || !(c.Epsilon > 0 && c.Epsilon < c.Total) && k > 0 {
				t.Errorf("site%d: charge %d spends ε = %v of a total %v at noise %v", s+1, k, c.Epsilon, c.Total, c.Noise)
			}
		}
		if c := l.charges[len(l.charges)-1]; !(c.Total <= run && c.Total > 0.99*run) {
			t.Errorf("site%d: spent ε = %v, want just under %v", s+1, c.Total, run)
		}
	}
	for _, e := range sent.envelopes() {
		if e.Kind != wire.KindGradient {
			continue
		}
		if loss, err := scalar(e, tLoss); err != nil || loss != 0 {
			t.Errorf("a private site sent loss %v (%v)", loss, err)
		}
	}

	f2 := newFed(40, 40, 40)
	for s := range budgets {
		f2.cfgs[s].Privacy = &budgets[s]
	}
	sent2 := f2.recordSent("site1")
	sites = f2.start(ctx)
	c2 := f2.coordinator(cfg)
	c2.RunID = "run-2"
	if _, err := RunCoordinator(ctx, c2, f2.net.Endpoint("coord")); !errors.Is(err, ErrSiteRefused) {
		t.Errorf("second run: %v, want ErrSiteRefused", err)
	}
	r := <-sites[0]
	if !errors.Is(r.err, ErrBudget) || !strings.Contains(r.err.Error(), "past its budget of ε = 2") {
		t.Errorf("site1, second run: %v, want ErrBudget with the figures", r.err)
	}
	<-sites[1]
	<-sites[2]
	if env := sent2.envelopes(); len(env) != 1 {
		t.Errorf("site1 sent %d envelopes for the run it refused, want the refusal alone", len(env))
	} else {
		checkRefusal(t, env[0], refusalBudget)
	}
	if len(ledgers[0].charges) != len(steps) {
		t.Errorf("the refused run was charged: %d charges", len(ledgers[0].charges))
	}
}

// TestPrivateSiteRefusesWhatItCannotAnswerPrivately: L-BFGS needs the
// losses a private site withholds, and model selection's statistics are
// not private.
func TestPrivateSiteRefusesWhatItCannotAnswerPrivately(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		cc   func(*CoordinatorConfig)
		msg  string
	}{
		{"lbfgs", func(c *CoordinatorConfig) { c.Config.Method = estimator.LBFGS }, "model.method: adam"},
		{"model selection", func(c *CoordinatorConfig) {
			c.Config.Method = estimator.Adam
			c.Selection = Selection{Share: 0.2}
		}, "model.estimator: latent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40, 40)
			f.cfgs[0].Privacy = &SitePrivacy{Epsilon: 1, Delta: 1e-5, Clip: 1, Bounds: testBounds, Outcome: &testOutcomeBound}
			sites := f.start(ctx)
			cc := f.coordinator(testConfig())
			tc.cc(&cc)
			if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrSiteRefused) {
				t.Errorf("coordinator: %v, want ErrSiteRefused", err)
			}
			if r := <-sites[0]; !errors.Is(r.err, ErrLimit) || !strings.Contains(r.err.Error(), tc.msg) {
				t.Errorf("site1: %v, want ErrLimit saying %q", r.err, tc.msg)
			}
			<-sites[1]
		})
	}
}

package federation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/selection"
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
	steps := []string{TrainingStep(estimator.Propensity), TrainingStep(estimator.Outcome), TrainingStep(estimator.Latent), StepMoments, StepATE} // sites too small for the nuisance step (calibrateNuisance)
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
			case StepMoments, StepNuisance:
				rounds, mechanisms = 1, 1
			case StepATE:
				// Three sums, charged as the one mechanism they compose to.
				rounds, mechanisms = 1, 1
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
		// The aggregates split their budget by their shares.
		if m, a := l.charges[3].Noise, l.charges[4].Noise; math.Abs(m/a-math.Sqrt(ShareATE/ShareMoments)) > 1e-9 {
			t.Errorf("site%d: the moments' noise %v over the ATE's %v, want √(%v/%v)", s+1, m, a, ShareATE, ShareMoments)
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
// losses a private site withholds. (Model selection is no longer refused:
// TestPrivateSitesSelectAModel.)
func TestPrivateSiteRefusesWhatItCannotAnswerPrivately(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		cc   func(*CoordinatorConfig)
		msg  string
	}{
		{"lbfgs", func(c *CoordinatorConfig) { c.Config.Method = estimator.LBFGS }, "model.method: adam"},
		{"lbfgs with model selection", func(c *CoordinatorConfig) {
			c.Config.Method = estimator.LBFGS
			c.Selection = Selection{Share: 0.2}
		}, "model.method: adam"},
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

// TestPrivateSitesSelectAModel: with every site private and model
// selection on, among two kernels, the run completes and reports a chosen
// estimator. Each site charges every training step of both kernels (six)
// and one StepSelection of StatsPieces + LossPieces mechanisms, within
// its run ε, and tells the coordinator its noise, which the scores'
// standard errors include. A site that names selection in Exact charges
// no selection step and sends exact sums.
func TestPrivateSitesSelectAModel(t *testing.T) {
	for _, bySite := range []bool{false, true} {
		t.Run(fmt.Sprintf("by site %v", bySite), func(t *testing.T) { privateSitesSelectAModel(t, bySite) })
	}
}

// privateSitesSelectAModel is TestPrivateSitesSelectAModel, with a choice
// per site when bySite, which offers no site-local candidate: a private
// site's exact statistics would leak into its losses.
func privateSitesSelectAModel(t *testing.T, bySite bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := testConfig()
	cfg.Method = estimator.Adam
	extra := testKernels()[:1]
	f := newFed(120, 150, 130)
	ledgers := []*memoryLedger{{}, {}, {}}
	for s := range f.cfgs {
		f.cfgs[s].Privacy = &SitePrivacy{Epsilon: 4, Delta: 1e-5, Clip: 1, Ledger: ledgers[s], Bounds: testBounds, Outcome: &testOutcomeBound}
		f.cfgs[s].Kernels, f.cfgs[s].KernelName = kernelsOf(extra), "gaussian"
	}
	f.cfgs[2].Privacy.Exact = []string{ExactRowCount, ExactSelection}
	sent := f.recordSent("site1")
	sites := f.start(ctx)
	cc := f.coordinator(cfg)
	cc.Selection = Selection{Share: 0.25, Z: 1, Kernel: "gaussian", BySite: bySite}
	cc.Extra = extra
	res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
	if err != nil {
		cancel()
		for s, c := range sites {
			t.Logf("site%d: %v", s+1, (<-c).err)
		}
		t.Fatal(err)
	}
	waitSites(t, sites)
	if res.Selection == nil || !res.Selection.Scored {
		t.Fatalf("no selection: %+v", res.Selection)
	}
	won := res.Selection.Candidates[res.Selection.Chosen]
	t.Logf("chose %s of %d candidates (members %v)", won.Name, len(res.Selection.Candidates), res.Selection.Ensemble.Members)
	// The noise enters the standard errors: no candidate's SE is 0.
	for _, c := range res.Selection.Candidates[:len(res.Selection.Candidates)-1] {
		if selection.Local(c.Kind) {
			t.Errorf("candidate %s offered to private sites", c.Name)
		}
		if !(c.SE > 0) {
			t.Errorf("candidate %s: SE %v, want one with the noise", c.Name, c.SE)
		}
	}
	wantTrain := []string{"training propensity", "training outcome", "training latent",
		"training propensity (wide)", "training outcome (wide)", "training latent (wide)"}
	for s, l := range ledgers {
		var steps []string
		for _, c := range l.charges {
			steps = append(steps, c.Step)
			if c.Step == StepSelection && (c.Steps != selection.StatsPieces+selection.LossPieces || c.Q != 1 || c.Rounds != 1 || !(c.Noise > 0)) {
				t.Errorf("site%d: selection charge %+v", s+1, c)
			}
		}
		want, exact := append(slices.Clone(wantTrain), StepMoments, StepATE), []string{ExactRowCount, ExactSelection}
		if s < 2 {
			want, exact = append(slices.Clone(wantTrain), StepMoments, StepATE, StepSelection), []string{ExactRowCount}
		}
		if got := l.charges[0].Exact; !slices.Equal(got, exact) {
			t.Errorf("site%d: charges list %v as exact, want %v", s+1, got, exact)
		}
		if !slices.Equal(steps, want) {
			t.Errorf("site%d: charges %v, want %v", s+1, steps, want)
		}
		if last := l.charges[len(l.charges)-1]; !(last.Total <= 4*(1+1e-9)) {
			t.Errorf("site%d: spent ε = %v of 4", s+1, last.Total)
		}
	}
	var stats, losses int
	for _, e := range sent.envelopes() {
		switch e.Kind {
		case wire.KindStats:
			stats++
			if v, err := noiseVariances(e, tStatsNoise, 3); err != nil || len(v) != 3 || !(v[0] > 0) {
				t.Errorf("site1's stats carry noise variances %v (%v)", v, err)
			}
		case wire.KindLosses:
			losses++
			if v, err := noiseVariances(e, tLossNoise, 4); err != nil || len(v) != 4 || !(v[0] > 0) {
				t.Errorf("site1's losses carry noise variances %v (%v)", v, err)
			}
		case wire.KindATE:
			// No mechanism noises the sums of heterogeneity yet.
			for _, name := range []string{tHetBLP, tHetPolicy} {
				if _, ok := e.Tensor(name); ok {
					t.Errorf("private site1 sent %s", name)
				}
			}
		}
	}
	if h := res.Heterogeneity; h.BLP != nil || h.Policy != nil {
		t.Errorf("global heterogeneity %+v pooled over private sites", h)
	}
	if stats != 1 || losses != 1 {
		t.Errorf("site1 sent %d stats and %d losses, want one each", stats, losses)
	}
}

// TestNoisedSelectionAnsweredOnce: a private site draws the noise of each
// selection stage once per run. The same request (a resumed coordinator
// asking again) gets the same tensors, with no new noise drawn; a request
// for something else (other candidates) is refused, since averaging fresh
// noise over repeated requests would undo it; a new run answers anew.
func TestNoisedSelectionAnsweredOnce(t *testing.T) {
	s := &site{}
	env := func(run string, ts ...wire.Tensor) *wire.Envelope {
		e, err := wire.New(wire.Header{RunID: run, Kind: wire.KindWeights, Sender: "coord", Recipient: "site1"}, ts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	calls := 0
	answer := func() ([]wire.Tensor, error) {
		calls++
		return []wire.Tensor{wire.Scalar("answer", float64(calls))}, nil
	}
	stage2 := func(run string, kinds ...float64) *wire.Envelope {
		return env(run, wire.Scalar(tSelectStage, 2), wire.Vector(tCandKind, kinds), wire.Scalar("latent.weights", float64(len(kinds))))
	}
	for _, tc := range []struct {
		name  string
		e     *wire.Envelope
		stage int
		calls int     // answers computed so far
		got   float64 // the answer returned
		err   error
	}{
		{"first", stage2("r1", 0, 1), 2, 1, 1, nil},
		{"asked again", stage2("r1", 0, 1), 2, 1, 1, nil},
		{"other candidates", stage2("r1", 0, 1, 3), 2, 1, 0, ErrLimit},
		{"stage 1", env("r1", wire.Scalar(tSelectStage, 1), wire.Scalar(tSelectDR, 1)), 1, 2, 2, nil},
		{"stage 1 without the DR-learner", env("r1", wire.Scalar(tSelectStage, 1), wire.Scalar(tSelectDR, 0)), 1, 2, 0, ErrLimit},
		{"a new run", stage2("r2", 0, 1, 3), 2, 3, 3, nil},
	} {
		ts, err := s.noisedOnce(tc.e, tc.stage, answer)
		if !errors.Is(err, tc.err) || calls != tc.calls || (err == nil && ts[0].Values[0] != tc.got) {
			t.Errorf("%s: %v, %v after %d answers; want %v, %v after %d", tc.name, ts, err, calls, tc.got, tc.err, tc.calls)
		}
	}
}

// TestPrivateSiteRefusedForKernelsSpendsNothing: a private site that
// cannot train a kernel the run chooses among refuses the run before it
// is charged.
func TestPrivateSiteRefusedForKernelsSpendsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(40, 40)
	ledger := &memoryLedger{}
	f.cfgs[0].Privacy = &SitePrivacy{Epsilon: 4, Delta: 1e-5, Clip: 1, Ledger: ledger}
	f.cfgs[1].Kernels = kernelsOf(testKernels())
	sites := f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.Config.Method = estimator.Adam
	cc.Selection, cc.Extra = Selection{Share: 0.25, Kernel: "gaussian"}, testKernels()[:1]
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrSiteRefused) {
		t.Errorf("coordinator: %v, want ErrSiteRefused", err)
	}
	if r := <-sites[0]; !errors.Is(r.err, ErrNoKernel) {
		t.Errorf("site1: %v, want ErrNoKernel", r.err)
	}
	<-sites[1]
	if len(ledger.charges) != 0 {
		t.Errorf("the refused run was charged: %d charges", len(ledger.charges))
	}
}

// TestPrivateSiteFitsItsNuisance: a private site large enough for its
// noise charges the nuisance step and takes its ψ from models fitted on
// its noised statistics, and, since makeData's outcomes are linear in the
// covariates, its local AIPW finds the effect (2) where the test's
// eight-round DP-trained models alone would not be trusted to.
func TestPrivateSiteFitsItsNuisance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	cfg.Method = estimator.Adam
	ledger := &memoryLedger{}
	f := newFed(3000, 3000)
	f.cfgs[0].Privacy = &SitePrivacy{Epsilon: 16, Delta: 1e-5, Clip: 1, Ledger: ledger, Bounds: testBounds, Outcome: &testOutcomeBound, NuisanceStatistics: true}
	sites := f.start(ctx)
	if _, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord")); err != nil {
		t.Fatal(err)
	}
	res := waitSites(t, sites)
	if !slices.ContainsFunc(ledger.charges, func(c Charge) bool { return c.Step == StepNuisance }) {
		t.Fatalf("charges %+v: no nuisance step", ledger.charges)
	}
	a := res[0].Local.AIPW
	t.Logf("private site's local AIPW %.3f ± %.3f", a.Estimate, a.SE)
	if math.Abs(a.Estimate-2) > 4*a.SE || a.SE > 0.2 {
		t.Errorf("private site's local AIPW %.3f ± %.3f, want 2 within 4 se (se under 0.2)", a.Estimate, a.SE)
	}
}

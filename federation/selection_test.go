package federation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/heterogeneity"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// selectionRun is a federation with model selection over sites of the given
// sizes, and the simulated selection (selection.Run) of the same rows.
func selectionRun(ctx context.Context, t *testing.T, sel Selection, sizes ...int) (*fed, *Result, []*SiteResult, *selection.Result) {
	t.Helper()
	return selectionRunOn(ctx, t, sel, newFed(sizes...))
}

// selectionRunOn is selectionRun on the sites of f.
func selectionRunOn(ctx context.Context, t *testing.T, sel Selection, f *fed) (*fed, *Result, []*SiteResult, *selection.Result) {
	t.Helper()
	return selectionRunKernels(ctx, t, sel, nil, f)
}

// selectionRunKernels is selectionRunOn choosing among the further
// kernels extra too, which every site has.
func selectionRunKernels(ctx context.Context, t *testing.T, sel Selection, extra []selection.Kernel, f *fed) (*fed, *Result, []*SiteResult, *selection.Result) {
	t.Helper()
	cfg := testConfig()
	held := make([][]int, len(f.data))
	for s, d := range f.data {
		var err error
		if held[s], err = selection.SiteHoldout(d.W, sel.Share, cfg.Seed, DefaultMinArmRows); err != nil {
			t.Fatal(err)
		}
		f.cfgs[s].KernelName = sel.Kernel
		if extra != nil {
			f.cfgs[s].Kernels = kernelsOf(extra)
		}
	}
	want, err := selection.Run(ctx, f.data, held, testSchema, cfg, selection.Options{
		Kernels: append([]selection.Kernel{{Name: sel.Kernel, Spectral: estimator.GaussianSpectral{}}}, extra...),
		Ridge:   sel.Ridge, Z: sel.Z, Kinds: sel.Kinds, Workers: 1, BySite: sel.BySite})
	if err != nil {
		t.Fatal(err)
	}
	sites := f.start(ctx)
	cc := f.coordinator(cfg)
	cc.Selection, cc.Extra = sel, extra
	res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	return f, res, waitSites(t, sites), want
}

// TestSelectionEquivalence: a federation that selects a model chooses the
// simulated selection's candidate, with the same scores bit for bit, and
// every site reports that candidate's CATE of every row as the simulated
// selection computes it.
func TestSelectionEquivalence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := Selection{Share: 0.25, Z: 1, Kernel: "gaussian"}
	f, res, sites, want := selectionRun(ctx, t, sel, 90, 120, 70)
	sameModels(t, res, func(k estimator.Kind) *estimator.Trained { return want.Models[0].Trained(k) }, "max abs difference %g, want bit-identical")
	got := res.Selection
	if got == nil || !got.Scored {
		t.Fatalf("coordinator's selection %+v, want a scored one", got)
	}
	if len(got.Candidates) != len(want.Candidates) {
		t.Fatalf("%d candidates, simulated %d", len(got.Candidates), len(want.Candidates))
	}
	for c, cand := range got.Candidates {
		if fmt.Sprintf("%+v", cand) != fmt.Sprintf("%+v", want.Candidates[c]) {
			t.Errorf("candidate %d: federated %+v\nsimulated %+v", c, cand, want.Candidates[c])
		}
	}
	if got.Chosen != want.Chosen {
		t.Errorf("chosen %d, simulated %d", got.Chosen, want.Chosen)
	}
	var members []string
	for _, c := range got.Candidates {
		if c.Member {
			members = append(members, c.Name)
		}
	}
	if len(members) < 2 {
		t.Errorf("ensemble of %v: want one of several members, to check their CATEs add up", members)
	}
	t.Logf("chose the mean of %v, shifted per site by %+v (spread %v), of %d candidates (z = 1)", members, got.Ensemble.Sites, got.Ensemble.Spread, len(got.Candidates))
	if fmt.Sprintf("%+v", got.Ensemble) != fmt.Sprintf("%+v", want.Ensemble) {
		t.Errorf("ensemble %+v, simulated %+v", got.Ensemble, want.Ensemble)
	}
	for s, r := range sites {
		if r.Selection == nil || r.Selection.Chosen != want.Chosen || r.Selection.HeldAll != got.Held {
			t.Fatalf("site %d: selection %+v, want candidate %d over %d rows", s, r.Selection, want.Chosen, got.Held)
		}
		for c, cand := range r.Selection.Candidates {
			if fmt.Sprintf("%+v", cand) != fmt.Sprintf("%+v", want.Candidates[c]) {
				t.Errorf("site %d, candidate %d: %+v, simulated %+v", s, c, cand, want.Candidates[c])
			}
		}
		sameSiteCATE(ctx, t, want, s, f.data[s], r)
		held, _ := selection.SiteHoldout(f.data[s].W, sel.Share, testConfig().Seed, DefaultMinArmRows)
		if r.Local.PlugIn.N != f.data[s].Rows() || len(held) == 0 || !slices.Equal(r.Held, held) {
			t.Errorf("site %d: ATE over %d rows, held out %v, simulated %v", s, r.Local.PlugIn.N, r.Held, held)
		}
	}
	// Every envelope a site sent is of a known kind, stats and losses
	// among them.
	for name, a := range f.audits {
		joined := strings.Join(a, ";")
		for _, k := range []wire.Kind{wire.KindStats, wire.KindLosses} {
			if !strings.Contains(joined, fmt.Sprintf("%d %s", Sent, k)) {
				t.Errorf("%s sent no %s", name, k)
			}
		}
	}
}

// TestSelectionUnlikeSites: when one site's effect is 3 larger, its
// ensemble's gap differs from the others', and each site is shifted by its
// own amount, bit for bit as the simulated selection shifts it.
func TestSelectionUnlikeSites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := newFed(150, 150, 150)
	for i, w := range f.data[1].W {
		f.data[1].Y[i] += 3 * w
	}
	sel := Selection{Share: 0.25, Z: 1, Kernel: "gaussian", Kinds: []string{selection.KindTLearner}}
	_, res, sites, want := selectionRunOn(ctx, t, sel, f)
	ens := res.Selection.Ensemble
	t.Logf("shifts %+v, spread %v", ens.Sites, ens.Spread)
	if fmt.Sprintf("%+v", ens) != fmt.Sprintf("%+v", want.Ensemble) {
		t.Errorf("ensemble %+v, simulated %+v", ens, want.Ensemble)
	}
	if ens.Spread == 0 || !(ens.Sites[1].Shift > ens.Sites[0].Shift+1 && ens.Sites[1].Shift > ens.Sites[2].Shift+1) {
		t.Errorf("site 2's effect is 3 larger: shifts %+v, spread %v; want site 2's above the others' by more than 1", ens.Sites, ens.Spread)
	}
	// Against the truth, 2 + x3/3 (5 + x3/3 at site 2): the pooled
	// ridge candidates miss site 2's effect by much, which its own shift
	// must cut to under a third. The other sites' doubly robust ATEs,
	// from the test's eight-round nuisance models, are themselves off by
	// about 0.75, so there the shift need only not move the mean CATE
	// away from the truth by more than its gap's standard error.
	for s, r := range sites {
		sameSiteCATE(ctx, t, want, s, f.data[s], r)
		d := f.data[s]
		var truth, cate float64
		for i := range r.CATE {
			tau := 2 + d.X.At(i, 3)/3
			if s == 1 {
				tau += 3
			}
			truth += tau / float64(len(r.CATE))
			cate += r.CATE[i] / float64(len(r.CATE))
		}
		after, before := math.Abs(cate-truth), math.Abs(cate-r.Selection.Estimator.Shift-truth)
		t.Logf("site %d: mean CATE %.3f, true %.3f: off by %.3f, %.3f before its shift", s+1, cate, truth, after, before)
		if s == 1 && !(before > 1.5 && after < before/3) {
			t.Errorf("site 2: mean CATE off the truth by %.3f before its shift, %.3f after; want a miss above 1.5 cut to under a third", before, after)
		}
		if after > before+ens.Sites[s].GapSE {
			t.Errorf("site %d: the shift moved the mean CATE away from the truth, from %.3f to %.3f (gap's standard error %.3f)", s+1, before, after, ens.Sites[s].GapSE)
		}
	}
}

// sameSiteCATE fails the test unless site s of a federation was shifted
// as the simulated selection want shifts it, and reports the CATE of each
// of its rows d that want computes, bit for bit.
func sameSiteCATE(ctx context.Context, t *testing.T, want *selection.Result, s int, d *estimator.Data, r *SiteResult) {
	t.Helper()
	if r.Selection.Estimator.Shift != want.Ensemble.Sites[s].Shift {
		t.Errorf("site %d: shift %v, simulated %v", s, r.Selection.Estimator.Shift, want.Ensemble.Sites[s].Shift)
	}
	cate, err := want.CATE(ctx, want.Chosen, s, d)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cate {
		if cate[i] != r.CATE[i] {
			t.Fatalf("site %d row %d: CATE %g, simulated %g", s, i, r.CATE[i], cate[i])
		}
	}
}

// TestSelectionKindsAndRidge: a run restricted to some kinds and penalties
// scores those candidates alone, still bit for bit.
func TestSelectionKindsAndRidge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := Selection{Share: 0.3, Z: 1, Kernel: "k", Kinds: []string{selection.KindOutcome, selection.KindTLearner}, Ridge: []float64{3}}
	_, res, _, want := selectionRun(ctx, t, sel, 80, 60)
	var names []string
	for c, cand := range res.Selection.Candidates {
		names = append(names, cand.Name)
		if cand.Score != want.Candidates[c].Score {
			t.Errorf("%s: %+v, simulated %+v", cand.Name, cand.Score, want.Candidates[c].Score)
		}
	}
	if strings.Join(names, ",") != "outcome/k,tlearner/3,ensemble" {
		t.Errorf("candidates %v", names)
	}
}

// TestSelectionSmallSites: a site too small to hold rows out within
// min_arm_rows trains on all its rows and adds nothing to the losses, still
// bit for bit with selection.Run; when every site is, the run stops with
// ErrNoHeldOut, and a coordinator refuses a bad selection configuration.
func TestSelectionSmallSites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := Selection{Share: 0.2, Z: 0, Kernel: "gaussian"}
	_, res, sites, want := selectionRun(ctx, t, sel, 120, 40)
	if len(sites[1].Held) != 0 || len(sites[0].Held) != 24 || res.Selection.Held != 24 {
		t.Errorf("held out %d and %d rows (%d in all); want 24 and none (8 < 10)", len(sites[0].Held), len(sites[1].Held), res.Selection.Held)
	}
	for c, cand := range res.Selection.Candidates {
		if cand.Score != want.Candidates[c].Score {
			t.Errorf("%s: %+v, simulated %+v", cand.Name, cand.Score, want.Candidates[c].Score)
		}
	}

	f := newFed(40, 45)
	f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.Selection = sel
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrNoHeldOut) {
		t.Errorf("every site too small: %v, want ErrNoHeldOut", err)
	}
	for _, bad := range []Selection{{Share: 1}, {Share: -0.1}, {Share: 0.2, Z: math.NaN()}, {Share: 0.2, Kinds: []string{"forest"}}, {Share: 0.2, Ridge: []float64{0}}} {
		cc := f.coordinator(testConfig())
		cc.Selection = bad
		if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); err == nil {
			t.Errorf("selection %+v accepted", bad)
		}
	}
}

// TestSelectionResumesAndRejoins: a coordinator stopped in model selection
// (once the first site's stats, or losses, or ATE is in) resumes and makes
// the uninterrupted run's choice, and so does a run in which a site
// restarts in those steps and rejoins.
func TestSelectionResumesAndRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := Selection{Share: 0.25, Z: 1, Kernel: "gaussian"}
	_, ref, _, _ := selectionRun(ctx, t, sel, 60, 80)
	for _, at := range []wire.Kind{wire.KindStats, wire.KindLosses, wire.KindATE} {
		t.Run(at.String(), func(t *testing.T) {
			interruptSelection(ctx, t, sel, nil, ref, func(e *wire.Envelope) bool { return e.Kind == at }, nil)
		})
	}
}

// interruptSelection runs a federation of two sites of 60 and 80 rows
// that selects a model with sel among the further kernels extra twice:
// once with the coordinator stopped at the first envelope at which at
// holds, then resumed from its checkpoint, which saved (when not nil)
// checks, and once with site2 restarted at the first such envelope it
// sends. Both must choose as ref, the uninterrupted run.
func interruptSelection(ctx context.Context, t *testing.T, sel Selection, extra []selection.Kernel, ref *Result,
	at func(*wire.Envelope) bool, saved func(t *testing.T, cc CoordinatorConfig, f *fed, st *State)) {
	same := func(t *testing.T, res *Result) {
		t.Helper()
		got, want := res.Selection, ref.Selection
		if fmt.Sprintf("%+v %d %d", got.Candidates, got.Chosen, got.Held) != fmt.Sprintf("%+v %d %d", want.Candidates, want.Chosen, want.Held) ||
			res.GlobalAIPW != ref.GlobalAIPW {
			t.Errorf("selection %+v, global %+v\nuninterrupted %+v, %+v", got.Candidates, res.GlobalAIPW, want.Candidates, ref.GlobalAIPW)
		}
	}
	newSites := func() *fed {
		f := newFed(60, 80)
		for s := range f.cfgs {
			f.cfgs[s].KernelName = sel.Kernel
			if extra != nil {
				f.cfgs[s].Kernels = kernelsOf(extra)
			}
		}
		return f
	}
	t.Run("coordinator stopped", func(t *testing.T) {
		f := newSites()
		sites := f.start(ctx)
		cctx, stop := context.WithCancel(ctx)
		var once sync.Once
		f.net.Intercept = func(b []byte) [][]byte {
			if e, _ := wire.Unmarshal(b); e != nil && at(e) {
				once.Do(stop)
			}
			return [][]byte{b}
		}
		cp := &memCheckpoints{}
		cc := f.coordinator(testConfig())
		cc.Selection, cc.Extra, cc.Checkpoints = sel, extra, cp
		runUntilStopped(t, cctx, cc, f)
		if saved != nil {
			st, err := cp.Load(ctx)
			if err != nil || st == nil {
				t.Fatalf("no checkpoint: %v", err)
			}
			saved(t, cc, f, st)
		}
		res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
		if err != nil {
			t.Fatal(err)
		}
		same(t, res)
		waitSites(t, sites)
	})
	t.Run("site restarted", func(t *testing.T) {
		f := newSites()
		others := f.cfgs
		f.cfgs = others[:1]
		sites := f.start(ctx)
		f.cfgs = others
		site2ctx, kill := context.WithCancel(ctx)
		// The envelope at which site2 dies is lost with it: passed on, it
		// could let the coordinator finish (the ATE is a site's last
		// message) before site2 is back, and the restarted site2 would then
		// wait for a coordinator that is gone.
		var once sync.Once
		f.net.Intercept = func(b []byte) [][]byte {
			dies := false
			if e, _ := wire.Unmarshal(b); e != nil && at(e) && e.Sender == "site2" {
				once.Do(func() { dies = true; kill() })
			}
			if dies {
				return nil
			}
			return [][]byte{b}
		}
		second := f.restartSite(site2ctx, ctx, 1, f.cfgs[1], nil)
		var logs logBuffer
		cc := f.rejoinCoordinator(testConfig(), &logs)
		cc.Selection, cc.Extra = sel, extra
		res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
		if err != nil {
			t.Fatal(err)
		}
		same(t, res)
		if r := <-second; r.err != nil || r.res.Selection == nil || r.res.Selection.Chosen != ref.Selection.Chosen {
			t.Fatalf("restarted site2: %v", r.err)
		}
		if !strings.Contains(logs.String(), "site rejoins the run") {
			t.Errorf("site2 did not rejoin: %s", logs.String())
		}
		waitSites(t, sites)
	})
}

// TestDecodeCandidatesKernels: a site reads the candidates' kernels; the
// ensemble is listed with its first member's kernel (selection.Ensembled),
// a further kernel's when the best candidates are all of it, which the
// site took for a protocol violation before. Only latent, outcome and the
// ensemble may name a further kernel.
func TestDecodeCandidatesKernels(t *testing.T) {
	kernels := []string{"gaussian", "wide"}
	for _, tc := range []struct {
		name  string
		cands []selection.Candidate
		ok    bool
	}{
		{"ensemble of a further kernel", []selection.Candidate{{Kind: selection.KindLatent}, {Kind: selection.KindLatent, Kernel: 1}, {Kind: selection.KindEnsemble, Kernel: 1}}, true},
		{"outcome of a further kernel", []selection.Candidate{{Kind: selection.KindOutcome, Kernel: 1}}, true},
		{"dr of a further kernel", []selection.Candidate{{Kind: selection.KindDR, Ridge: 1, Kernel: 1}}, false},
		{"a kernel beyond the run's", []selection.Candidate{{Kind: selection.KindEnsemble, Kernel: 2}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindWeights, Sender: "coord", Recipient: "site1"}, candidateTensors(tc.cands))
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeCandidates(e, kernels, DefaultLimits().Candidates)
			if (err == nil) != tc.ok {
				t.Fatalf("decode: %v, want ok %v", err, tc.ok)
			}
			for c := range got {
				if got[c].Kernel != tc.cands[c].Kernel || got[c].Kind != tc.cands[c].Kind {
					t.Errorf("candidate %d: %+v, sent %+v", c, got[c], tc.cands[c])
				}
			}
		})
	}
}

// TestSelectionBySite: with Selection.BySite each site gets the ensemble
// of its own choice, the same as the simulated selection's with
// selection.Options.BySite, bit for bit: members, shift and every row's
// CATE. Site 2, whose effect is 3 larger, must choose its own, among them
// learners of its own rows alone (selection.KindSiteTLearner, KindSiteDR).
func TestSelectionBySite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := newFed(150, 150, 150)
	for i, w := range f.data[1].W {
		f.data[1].Y[i] += 3 * w
	}
	sel := Selection{Share: 0.25, Z: 1, Kernel: "gaussian", BySite: true}
	_, res, sites, want := selectionRunOn(ctx, t, sel, f)
	ens := res.Selection.Ensemble
	if fmt.Sprintf("%+v", ens) != fmt.Sprintf("%+v", want.Ensemble) {
		t.Errorf("ensemble %+v, simulated %+v", ens, want.Ensemble)
	}
	own := 0
	for s, r := range sites {
		var members []int
		for c, cand := range r.Selection.Candidates {
			if cand.Member {
				members = append(members, c)
			}
		}
		if wantMembers := want.Ensemble.SiteMembers(s); !slices.Equal(members, wantMembers) {
			t.Errorf("site %d: members %v, simulated %v", s+1, members, wantMembers)
		}
		if ens.Sites[s].Members != nil {
			own++
		}
		if s == 1 && !slices.ContainsFunc(members, func(c int) bool { return selection.Local(r.Selection.Candidates[c].Kind) }) {
			t.Errorf("site 2, whose effect is 3 larger, chose no site-local candidate: %v", members)
		}
		t.Logf("site %d: members %v, shift %.3f", s+1, members, ens.Sites[s].Shift)
		wantScores, err := want.SiteScores(s)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", r.Selection.Site) != fmt.Sprintf("%+v", wantScores) || r.Selection.Site.Own == nil {
			t.Errorf("site %d: scores %+v, simulated %+v", s+1, r.Selection.Site, wantScores)
		}
		sameSiteCATE(ctx, t, want, s, f.data[s], r)
	}
	if own == 0 {
		t.Errorf("no site chose members of its own (federation's %v): the test exercises nothing", ens.Members)
	}
}

// TestKeptHeld: the rows held out at hello, among all a site's rows, are
// found among the rows de-duplication kept, and a holdout that
// de-duplication thinned below the bound is given up.
func TestKeptHeld(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kept, held []int
		want       []int
	}{
		{"none held", []int{0, 1, 2}, nil, nil},
		{"every row kept", []int{0, 1, 2, 3}, []int{1, 3}, []int{1, 3}},
		{"a held row dropped", []int{0, 2, 3, 5}, []int{1, 3, 5}, []int{2, 3}},
		{"every held row dropped", []int{0, 2}, []int{1, 3}, []int{}},
	} {
		if got := keptHeld(tc.kept, tc.held); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: keptHeld(%v, %v) = %v, want %v", tc.name, tc.kept, tc.held, got, tc.want)
		}
	}
	w := []float64{0, 0, 0, 1, 1, 1}
	for _, tc := range []struct {
		held   []int
		minArm int
		want   bool
	}{
		{[]int{0, 3}, 1, true},
		{[]int{0, 3}, 2, false},       // fewer than 2·minArm held
		{[]int{0, 1, 3, 4}, 2, false}, // one row of each arm left to train on
		{[]int{0}, 1, false},          // one held row leaves no choice
		{[]int{0, 1, 2, 3, 4}, 0, false},
		{[]int{}, 0, false},
	} {
		if got := enoughHeld(w, tc.held, tc.minArm); got != tc.want {
			t.Errorf("enoughHeld(%v, %v, %d) = %v, want %v", w, tc.held, tc.minArm, got, tc.want)
		}
	}
}

// TestHeldOutRowsLeaveTheScaler: a site holds its validation rows out of
// the moments its hello sends, so that moving their outcomes leaves the
// pooled standardisation, and the models, as they were.
func TestHeldOutRowsLeaveTheScaler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := Selection{Share: 0.25, Z: 1, Kernel: "gaussian"}
	run := func(shift float64) *SiteResult {
		f := newFed(150, 150)
		held, err := selection.SiteHoldout(f.data[0].W, sel.Share, testConfig().Seed, DefaultMinArmRows)
		if err != nil || len(held) == 0 {
			t.Fatalf("holdout %v: %v", held, err)
		}
		for _, i := range held {
			f.data[0].Y[i] += shift
		}
		_, _, sites, _ := selectionRunOn(ctx, t, sel, f)
		if !slices.Equal(sites[0].Held, held) {
			t.Fatalf("site 1 held out %v, want %v", sites[0].Held, held)
		}
		return sites[0]
	}
	a, b := run(0), run(40)
	if sa, sb := a.Setup.Scaler, b.Setup.Scaler; sa.YMean != sb.YMean || sa.YSD != sb.YSD {
		t.Errorf("held-out outcomes moved the scaler: y mean %v → %v, sd %v → %v", sa.YMean, sb.YMean, sa.YSD, sb.YSD)
	}
}

// TestGlobalHeterogeneity: the global BLP and policy value a federation
// returns to every site equal, to 1e-9, those of the sites' held-out rows
// pooled: ψ, Γ0 and τ̂ of every site's held-out rows taken together, and
// the rule read from each site's own calibration. A site whose rule
// treats too few of its held-out rows (1 to 2·min_arm_rows − 1) keeps the
// rule's sums, and the run then pools no policy value.
func TestGlobalHeterogeneity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(minArm int) (*Result, []*SiteResult, *fed) {
		// The effect x₃/3 (x₃ ~ N(0, 9)) is below 0 for half the rows, so
		// that the rule treats some of each site's held-out rows and not
		// others.
		f := newFed(200, 200, 200)
		for s, d := range f.data {
			for i, w := range d.W {
				d.Y[i] -= 2 * w
			}
			f.cfgs[s].MinArmRows = minArm
		}
		_, res, sites, _ := selectionRunOn(ctx, t, Selection{Share: 0.3, Z: 1, Kernel: "gaussian"}, f)
		return res, sites, f
	}
	// By default site 3's rule treats 7 of its 60 held-out rows, fewer
	// than 2·5.
	res, _, _ := run(0)
	if h := res.Heterogeneity; h.BLP == nil || h.Policy != nil || h.Ranked == nil {
		t.Errorf("min_arm_rows 5: global heterogeneity %+v; want the BLP and the ranked statistics", h)
	}
	res, sites, f := run(3)
	var psi, gamma0, cate []float64
	var treat []bool
	var buckets []heterogeneity.Bucket
	for s, r := range sites {
		d := f.data[s]
		_, dx := d.X.Dims()
		var c []float64
		x := mat.NewDense(len(r.Held), dx, nil)
		for j, p := range r.Held {
			k := r.Kept[p]
			psi, gamma0, c = append(psi, r.Scores[k]), append(gamma0, r.Control[k]), append(c, r.CATE[k])
			x.SetRow(j, d.X.RawRowView(k))
		}
		_, _, lower, _, err := r.Calibration.Interval(c, x)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, l := range lower {
			treat = append(treat, l > 0)
			if l > 0 {
				k++
			}
		}
		t.Logf("site %d: the rule treats %d of %d held-out rows", s+1, k, len(lower))
		b, err := heterogeneity.NewBuckets(psi[len(cate):], c, treat[len(cate):], r.Setup.Scaler.YSD/bucketBinsPerSD, 2*3)
		if err != nil {
			t.Fatal(err)
		}
		buckets = append(buckets, b...)
		cate = append(cate, c...)
	}
	ranked, err := heterogeneity.NewRanked(buckets)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := heterogeneity.NewBLPSums(psi, cate, 0)
	if err != nil {
		t.Fatal(err)
	}
	blp, err := sums.BLP()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := heterogeneity.NewPolicy(gamma0, psi, treat)
	if err != nil {
		t.Fatal(err)
	}
	same := func(who string, g GlobalHeterogeneity) {
		if g.BLP == nil || g.Policy == nil {
			t.Fatalf("%s: global heterogeneity %+v; want both pooled", who, g)
		}
		for i, p := range [][2]inference.Estimate{{g.BLP.ATE, blp.ATE}, {g.BLP.Het, blp.Het}, {g.Policy.Value, pol.Value},
			{g.Policy.GainOverNone, pol.GainOverNone}, {g.Policy.GainOverAll, pol.GainOverAll}} {
			if math.Abs(p[0].Estimate-p[1].Estimate) > 1e-9 || math.Abs(p[0].SE-p[1].SE) > 1e-9 || p[0].N != p[1].N || p[0].N != len(psi) {
				t.Errorf("%s: statistic %d is %+v, from the pooled rows %+v", who, i, p[0], p[1])
			}
		}
		if math.Abs(g.BLP.HetP-blp.HetP) > 1e-9 || g.Policy.Share != pol.Share {
			t.Errorf("%s: p-value %v and share %v, from the pooled rows %v and %v", who, g.BLP.HetP, g.Policy.Share, blp.HetP, pol.Share)
		}
		if g.Ranked == nil {
			t.Fatalf("%s: no ranked statistics", who)
		}
		want := rankedEstimates(ranked)
		for i, e := range rankedEstimates(g.Ranked) {
			if math.Abs(e.Estimate-want[i].Estimate) > 1e-9 || math.Abs(e.SE-want[i].SE) > 1e-9 || e.N != want[i].N {
				t.Errorf("%s: ranked statistic %d is %+v, from the pooled buckets %+v", who, i, *e, *want[i])
			}
		}
	}
	same("coordinator", res.Heterogeneity)
	for s, r := range sites {
		same(fmt.Sprintf("site %d", s+1), r.GlobalHeterogeneity)
	}
	t.Logf("global BLP loading %.3f ± %.3f (p %.2g) on %d held-out rows; the rule treats %.2f", blp.Het.Estimate, blp.Het.SE, blp.HetP, len(psi), pol.Share)
}

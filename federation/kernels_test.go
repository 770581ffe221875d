package federation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/selection"
)

// scaledSpectral is the Gaussian kernel's spectral density with its
// frequencies scaled: a Gaussian of bandwidth 1/Scale, a second kernel for
// the tests that needs no plugin.
type scaledSpectral struct{ Scale float64 }

func (s scaledSpectral) Sample(ctx context.Context, d, D int, seed uint64) (*mat.Dense, error) {
	m, err := estimator.GaussianSpectral{}.Sample(ctx, d, D, seed)
	if err != nil {
		return nil, err
	}
	m.Scale(s.Scale, m)
	return m, nil
}

// testKernels are two further kernels: a wider and a narrower Gaussian.
func testKernels() []selection.Kernel {
	return []selection.Kernel{{Name: "wide", Spectral: scaledSpectral{0.4}}, {Name: "narrow", Spectral: scaledSpectral{2.5}}}
}

// kernelsOf is a SiteConfig.Kernels that opens the kernels of extra.
func kernelsOf(extra []selection.Kernel) func(context.Context, string) (estimator.Spectral, error) {
	return func(_ context.Context, name string) (estimator.Spectral, error) {
		for _, k := range extra {
			if k.Name == name {
				return k.Spectral, nil
			}
		}
		return nil, fmt.Errorf("no kernel %q", name)
	}
}

// TestSelectionKernelsEquivalence: a federation that chooses among three
// kernels trains each kernel's models as selection.Run fits them, bit for
// bit, scores the same candidates the same, and every site reports the
// chosen ensemble's CATE, whose members come from more than one kernel,
// as the simulated selection computes it.
func TestSelectionKernelsEquivalence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Z = 3: an ensemble wide enough to take members of every kernel here.
	sel := Selection{Share: 0.25, Z: 3, Kernel: "gaussian"}
	f := newFed(90, 120, 70)
	var mu sync.Mutex
	losses := map[string]int{}
	f.cfgs[0].Loss = func(model string, _ int, _ float64) {
		mu.Lock()
		defer mu.Unlock()
		losses[model]++
	}
	f, res, sites, want := selectionRunKernels(ctx, t, sel, testKernels(), f)
	// The site's loss history names each kernel's models for people.
	for _, model := range []string{"propensity", "latent", "outcome (wide)", "latent (narrow)"} {
		if losses[model] == 0 {
			t.Errorf("no loss reported for the %s model: %v", model, losses)
		}
	}
	if len(losses) != 9 {
		t.Errorf("losses reported for %d models, want 3 of each of 3 kernels: %v", len(losses), losses)
	}
	sameModels(t, res, func(k estimator.Kind) *estimator.Trained { return want.Models[0].Trained(k) }, "max abs difference %g, want bit-identical")
	if len(res.ExtraModels) != 2 {
		t.Fatalf("%d further kernels' models, want 2", len(res.ExtraModels))
	}
	for j, models := range res.ExtraModels {
		for _, kind := range estimator.Kinds {
			if d := maxDiff(t, models[kind], want.Models[j+1].Trained(kind)); d != 0 {
				t.Errorf("kernel %d, %s: max abs difference %g, want bit-identical", j+1, kind, d)
			}
		}
	}
	got := res.Selection
	var names []string
	kernels := map[int]bool{}
	for c, cand := range got.Candidates {
		names = append(names, cand.Name)
		if fmt.Sprintf("%+v", cand) != fmt.Sprintf("%+v", want.Candidates[c]) {
			t.Errorf("candidate %d: federated %+v\nsimulated %+v", c, cand, want.Candidates[c])
		}
		if cand.Member {
			kernels[cand.Kernel] = true
		}
	}
	if len(got.Candidates) != len(want.Candidates) || got.Chosen != want.Chosen {
		t.Fatalf("%d candidates, chosen %d; simulated %d, %d", len(got.Candidates), got.Chosen, len(want.Candidates), want.Chosen)
	}
	for _, name := range []string{"latent/wide", "outcome/wide", "latent/narrow", "outcome/narrow"} {
		if !slices.Contains(names, name) {
			t.Errorf("candidates %v lack %s", names, name)
		}
	}
	if len(kernels) < 2 {
		t.Errorf("the ensemble's members are of kernels %v: want several, to check a site combines their models", kernels)
	}
	t.Logf("candidates %v; members of kernels %v", names, kernels)
	if fmt.Sprintf("%+v", got.Ensemble) != fmt.Sprintf("%+v", want.Ensemble) {
		t.Errorf("ensemble %+v, simulated %+v", got.Ensemble, want.Ensemble)
	}
	for s, r := range sites {
		if !slices.Equal(r.Kernels, []string{"gaussian", "wide", "narrow"}) || len(r.Models) != 3 {
			t.Fatalf("site %d: kernels %v with %d models", s, r.Kernels, len(r.Models))
		}
		for c, cand := range r.Selection.Candidates {
			if fmt.Sprintf("%+v", cand) != fmt.Sprintf("%+v", want.Candidates[c]) {
				t.Errorf("site %d, candidate %d: %+v, simulated %+v", s, c, cand, want.Candidates[c])
			}
		}
		sameSiteCATE(ctx, t, want, s, f.data[s], r)
	}
}

// TestSelectionKernelsResume: a coordinator stopped while it trains a
// further kernel resumes there, and a site restarted then rejoins; both
// runs choose as the uninterrupted one. A configuration with other
// kernels does not resume the checkpoint.
func TestSelectionKernelsResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := Selection{Share: 0.25, Z: 1, Kernel: "gaussian"}
	extra := testKernels()[:1]
	_, ref, _, _ := selectionRunKernels(ctx, t, sel, extra, newFed(60, 80))
	// The outcome model of the further kernel, a few rounds in.
	at := func(e *wire.Envelope) bool { return e.Model == "outcome.1" && e.Round%7 == 0 }
	interruptSelection(ctx, t, sel, extra, ref, at, func(t *testing.T, cc CoordinatorConfig, f *fed, st *State) {
		if st.Kind < 3 || !slices.Equal(st.Kernels, []string{"wide"}) {
			t.Fatalf("checkpoint at model %v of kernels %v, want one in the further kernel's", st.Kind, st.Kernels)
		}
		cc.Extra = testKernels()[1:]
		if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrCheckpointKernels) {
			t.Fatalf("resumed with other kernels: %v, want ErrCheckpointKernels", err)
		}
	})
}

// TestSelectionKernelsRefused: a site that does not train further
// kernels, or not as many as the run asks for, refuses the run and the
// coordinator says why; a coordinator refuses further kernels it cannot
// choose among.
func TestSelectionKernelsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := Selection{Share: 0.25, Z: 1, Kernel: "gaussian"}
	for _, tc := range []struct {
		name    string
		edit    func(*SiteConfig)
		site    error
		message string
	}{
		{"no further kernels", func(c *SiteConfig) { c.Kernels = nil }, ErrNoKernel, "cannot train a kernel the run chooses among"},
		{"no such plugin", func(c *SiteConfig) { c.Kernels = kernelsOf(testKernels()[1:]) }, ErrNoKernel, "cannot train a kernel the run chooses among"},
		{"too many", func(c *SiteConfig) { c.Limits.Kernels = 1 }, ErrLimit, "limits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(60, 60)
			for s := range f.cfgs {
				f.cfgs[s].KernelName, f.cfgs[s].Kernels = sel.Kernel, kernelsOf(testKernels())
			}
			tc.edit(&f.cfgs[1])
			sites := f.start(ctx)
			cc := f.coordinator(testConfig())
			cc.Selection, cc.Extra = sel, testKernels()[:1]
			_, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if !errors.Is(err, ErrSiteRefused) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("coordinator: %v, want site2's refusal saying %q", err, tc.message)
			}
			if r := <-sites[1]; !errors.Is(r.err, tc.site) {
				t.Errorf("site2: %v, want %v", r.err, tc.site)
			}
		})
	}
	f := newFed(60, 60)
	grid := selection.Kernel{Name: "g", Spectral: estimator.GaussianSpectral{}, GridPoint: selection.GridPoint{Features: 5}}
	for _, bad := range []struct {
		sel   Selection
		extra []selection.Kernel
	}{
		{Selection{}, testKernels()},
		{Selection{Share: 0.25, Kernel: "gaussian", Kinds: []string{selection.KindTLearner}}, testKernels()},
		{sel, []selection.Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}}},
		{sel, append(testKernels(), testKernels()[0])},
		{sel, []selection.Kernel{{Name: "none"}}},
		{sel, []selection.Kernel{grid}},
	} {
		cc := f.coordinator(testConfig())
		cc.Selection, cc.Extra = bad.sel, bad.extra
		if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); err == nil || errors.Is(err, ErrSilent) {
			t.Errorf("selection %+v with kernels %v: %v, want a configuration error", bad.sel, extraNames(bad.extra), err)
		}
	}
}

func TestParseModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   estimator.Kind
		kernel int
		ok     bool
	}{
		{"latent", estimator.Latent, 0, true},
		{"propensity.2", estimator.Propensity, 2, true},
		{"outcome.12", estimator.Outcome, 12, true},
		{"outcome.0", 0, 0, false},
		{"outcome.01", 0, 0, false},
		{"outcome.-1", 0, 0, false},
		{"outcome.", 0, 0, false},
		{"forest.1", 0, 0, false},
	} {
		kind, k, err := parseModel(tc.name)
		if (err == nil) != tc.ok || (tc.ok && (kind != tc.kind || k != tc.kernel)) {
			t.Errorf("%q: %v, %d, %v", tc.name, kind, k, err)
		}
		if tc.ok && modelName(kind, k) != tc.name {
			t.Errorf("%q: named back %q", tc.name, modelName(kind, k))
		}
	}
}

func TestDecodeKernels(t *testing.T) {
	hello := func(ts ...wire.Tensor) *wire.Envelope {
		e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindHello, Sender: "c", Recipient: "s"}, append(ts, wire.Scalar(tSiteIndex, 0)))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	run, names, err := decodeKernels(hello(kernelTensors("gaussian", []string{"matern(nu=0.5)", "laplacian"})...), 8)
	if err != nil || run != "gaussian" || !slices.Equal(names, []string{"matern(nu=0.5)", "laplacian"}) {
		t.Errorf("round trip: %q, %v, %v", run, names, err)
	}
	if run, names, err := decodeKernels(hello(), 8); err != nil || run != "" || len(names) != 0 {
		t.Errorf("no kernels: %q, %v, %v", run, names, err)
	}
	for _, bad := range [][]wire.Tensor{
		{wire.Scalar(tKernelPrefix+"a", 2)},
		{wire.Scalar(tKernelPrefix+"a", -1)},
		{wire.Scalar(tKernelPrefix+"a", 0), wire.Scalar(tKernelPrefix+"b", 0)},
		{wire.Scalar(tKernelPrefix+"a", 1.5)},
		{wire.Scalar(tKernelPrefix+"a", 1), wire.Scalar(tKernelPrefix+"b", 1)},
		{wire.Scalar(tKernelPrefix, 1)},
		{wire.Vector(tKernelPrefix+"a", []float64{1, 2})},
	} {
		if _, _, err := decodeKernels(hello(bad...), 8); !errors.Is(err, ErrProtocol) {
			t.Errorf("%v: %v, want ErrProtocol", bad, err)
		}
	}
}

func TestModelLabel(t *testing.T) {
	st := &State{Kernels: []string{"laplacian", "matern(nu=0.5)"}}
	for i, want := range map[int]string{0: "propensity", 2: "latent", 3: "propensity (laplacian)", 7: "outcome (matern(nu=0.5))", 9: "propensity"} {
		if got := st.ModelLabel(i); got != want {
			t.Errorf("model %d: %q, want %q", i, got, want)
		}
	}
	if got := (&State{}).ModelLabel(4); got != "outcome" {
		t.Errorf("a state of one kernel: model 4 is %q", got)
	}
}

// TestRunKernelNamed: a site with several kernels trains the one the
// coordinator names, not its own; a site with one is refused when the
// named kernel's frequencies differ from its own.
func TestRunKernelNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wide := testKernels()[0]
	run := func(kernels func(context.Context, string) (estimator.Spectral, error)) (*Result, []chan siteRun, error) {
		f := newFed(60, 70)
		for s := range f.cfgs {
			f.cfgs[s].KernelName, f.cfgs[s].Kernels = "gaussian", kernels
		}
		sites := f.start(ctx)
		cc := f.coordinator(testConfig())
		cc.Spectral, cc.KernelName = wide.Spectral, wide.Name
		res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
		return res, sites, err
	}
	res, sites, err := run(kernelsOf(testKernels()))
	if err != nil {
		t.Fatal(err)
	}
	for s, r := range waitSites(t, sites) {
		if !slices.Equal(r.Kernels, []string{"wide"}) || frequencyDigest(r.Setup) != frequencyDigest(res.Setup) {
			t.Errorf("site %d trained kernels %v, want the coordinator's wide", s, r.Kernels)
		}
	}
	if _, _, err := run(nil); !errors.Is(err, ErrFrequencies) {
		t.Errorf("sites of the Gaussian alone in a run of another kernel: %v, want ErrFrequencies", err)
	}
}

// TestSelectionNoTransferKernel: the run's own kernel at transfer none is
// a further kernel whose models the coordinator trains with λ ≡ 0, as
// selection.Run fits them, bit for bit; a site trains it with its own
// kernel's plugin (its SiteConfig.Kernels knows no "gaussian").
func TestSelectionNoTransferKernel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sel := Selection{Share: 0.25, Z: 3, Kernel: "gaussian"}
	extra := []selection.Kernel{{Name: "gaussian(transfer=none)", Spectral: estimator.GaussianSpectral{}, GridPoint: selection.GridPoint{Transfer: "none"}}}
	_, res, sites, want := selectionRunKernels(ctx, t, sel, extra, newFed(90, 120, 70))
	if len(res.ExtraModels) != 1 {
		t.Fatalf("%d further kernels' models, want 1", len(res.ExtraModels))
	}
	for _, kind := range estimator.Kinds {
		if d := maxDiff(t, res.ExtraModels[0][kind], want.Models[1].Trained(kind)); d != 0 {
			t.Errorf("%s at transfer none: max abs difference %g, want bit-identical", kind, d)
		}
		lam := res.ExtraModels[0][kind].LambdaRows()
		if lam[0][1] != 0 || res.Models[kind].LambdaRows()[0][1] == 0 {
			t.Errorf("%s: λ from site 2 to site 1 is %v at transfer none and %v learned", kind, lam[0][1], res.Models[kind].LambdaRows()[0][1])
		}
	}
	for c, cand := range res.Selection.Candidates {
		if fmt.Sprintf("%+v", cand) != fmt.Sprintf("%+v", want.Candidates[c]) {
			t.Errorf("candidate %d: federated %+v\nsimulated %+v", c, cand, want.Candidates[c])
		}
	}
	if !slices.Equal(sites[0].Kernels, []string{"gaussian", "gaussian(transfer=none)"}) {
		t.Errorf("site 1 trained kernels %v", sites[0].Kernels)
	}
}

// TestCheckExtraGridPoints: a further kernel may sit at a transfer grid
// point, named for it, but not at one of D or γ, nor at a transfer mode
// nobody knows.
func TestCheckExtraGridPoints(t *testing.T) {
	sel := Selection{Share: 0.2, Z: 1, Kernel: "gaussian"}
	g := estimator.GaussianSpectral{}
	for _, tc := range []struct {
		k    selection.Kernel
		want string
	}{
		{selection.Kernel{Name: "gaussian(transfer=none)", Spectral: g, GridPoint: selection.GridPoint{Transfer: "none"}}, ""},
		{selection.Kernel{Name: "matern(nu=0.5,transfer=full)", Spectral: g, GridPoint: selection.GridPoint{Transfer: "full"}}, ""},
		{selection.Kernel{Name: "gaussian(features=10)", Spectral: g, GridPoint: selection.GridPoint{Features: 10}}, "grid point of D or γ"},
		{selection.Kernel{Name: "local", Spectral: g, GridPoint: selection.GridPoint{Transfer: "none"}}, "its name must end in transfer=none"},
		// A name that says another transfer than the point's, or one the
		// point does not set: the sites would train another model.
		{selection.Kernel{Name: "gaussian(transfer=full)", Spectral: g, GridPoint: selection.GridPoint{Transfer: "none"}}, "its name must end in transfer=none"},
		{selection.Kernel{Name: "wide(transfer=none)", Spectral: g}, "its name must end in transfer="},
		{selection.Kernel{Name: "gaussian(transfer=some)", Spectral: g, GridPoint: selection.GridPoint{Transfer: "some"}}, "unknown transfer mode"},
	} {
		err := checkExtra(sel, []selection.Kernel{tc.k})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.k.Name, err, tc.want)
		}
	}
}

// TestSiteRefusesTransferOutsideItsLimits: a site whose limits.transfers
// leave out none refuses a further kernel at transfer none, as it
// refuses a run of that transfer mode.
func TestSiteRefusesTransferOutsideItsLimits(t *testing.T) {
	s := &site{cfg: SiteConfig{Name: "site1", Spectral: estimator.GaussianSpectral{}, KernelName: "gaussian",
		Limits: Limits{Transfers: []estimator.Transfer{estimator.Learned}}}, share: 0.2}
	if _, _, err := s.openKernels(context.Background(), "", []string{"gaussian(transfer=none)"}); !errors.Is(err, ErrLimit) {
		t.Errorf("transfer none outside limits.transfers: %v, want ErrLimit", err)
	}
	s.cfg.Limits.Transfers = nil
	sp, names, err := s.openKernels(context.Background(), "", []string{"gaussian(transfer=none)"})
	if err != nil || len(sp) != 2 || sp[1] != sp[0] || !slices.Equal(names, []string{"gaussian", "gaussian(transfer=none)"}) {
		t.Errorf("transfer none of the site's own kernel: %v, %v, %v", sp, names, err)
	}
	if _, _, err := s.openKernels(context.Background(), "", []string{"laplacian(transfer=none)"}); !errors.Is(err, ErrNoKernel) {
		t.Errorf("transfer none of a kernel the site does not train: %v, want ErrNoKernel", err)
	}
}

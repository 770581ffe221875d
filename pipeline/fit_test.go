package pipeline

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// confounded returns n rows of two covariates with a treatment confounded
// by the first and the effect 2.
func confounded(n int) *store.Records {
	r := rand.New(rand.NewPCG(4, 2))
	d := &estimator.Data{X: mat.NewDense(n, 2, nil), W: make([]float64, n), Y: make([]float64, n)}
	ids := make([]store.RowID, n)
	for i := range n {
		a, b := r.NormFloat64(), r.NormFloat64()
		d.X.SetRow(i, []float64{a, b})
		if r.Float64() < 1/(1+math.Exp(-a)) {
			d.W[i] = 1
		}
		d.Y[i] = 1 + a + 0.5*b + 2*d.W[i] + r.NormFloat64()
		ids[i] = store.IntID(int64(i + 1))
	}
	return &store.Records{Data: d, Schema: estimator.Schema{Binary: []bool{false, false}}, IDs: ids}
}

// TestFitSite: one kernel's latent CATE, fitted alone, scores every row,
// gives an AIPW ATE near the effect, records the super learner of its
// nuisances for crff_nuisance and keeps it for rows scored later; a fit
// without records or kernels is refused.
func TestFitSite(t *testing.T) {
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 20, 3, 30, 10
	recs := confounded(300)
	open := func(context.Context, modelstore.Kernel) (estimator.Spectral, error) {
		return estimator.GaussianSpectral{}, nil
	}
	c := SiteFit{Run: "run-1", DB: "site.sqlite", Records: recs, Config: cfg, Open: open,
		Choice: Selection{Kinds: []string{selection.KindLatent}, Kernels: []modelstore.Kernel{{Name: "gaussian"}}}}
	f, err := FitSite(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Run.CATE) != 300 || f.Selected != nil || len(f.Losses) == 0 {
		t.Errorf("%d CATEs, selection %v, %d losses", len(f.Run.CATE), f.Selected, len(f.Losses))
	}
	if a := f.ATEs.AIPW; math.Abs(a.Estimate-2) > 3*a.SE+0.05 {
		t.Errorf("AIPW ATE %v ± %v, want near 2", a.Estimate, a.SE)
	}
	if len(f.Run.Results.Nuisance) != 9 || f.Run.Nuisance == nil {
		t.Errorf("%d crff_nuisance rows and kept stack %v; want 9 and a stack", len(f.Run.Results.Nuisance), f.Run.Nuisance)
	}
	for _, r := range f.Run.Results.Nuisance {
		if r.Model == inference.StackPropensity && r.N != 300 {
			t.Errorf("the propensity's loss is over %d rows, want 300", r.N)
		}
	}
	for name, bad := range map[string]SiteFit{
		"no records": {DB: "site.sqlite", Open: open, Choice: c.Choice},
		"no kernel":  {DB: "site.sqlite", Records: recs, Open: open},
	} {
		if _, err := FitSite(context.Background(), bad); err == nil || !strings.Contains(err.Error(), `fit "site.sqlite"`) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestFitSiteReusesSelectionsEffects: with model selection, the rows'
// effects are the ones selection computed for its latent candidate (no
// second scoring pass), and they are the model's effects of the rows, bit
// for bit.
func TestFitSiteReusesSelectionsEffects(t *testing.T) {
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 20, 3, 30, 10
	recs := confounded(300)
	recs.Layout.Covariates = []string{"a", "b"}
	open := func(context.Context, modelstore.Kernel) (estimator.Spectral, error) {
		return estimator.GaussianSpectral{}, nil
	}
	ctx := context.Background()
	f, err := FitSite(ctx, SiteFit{Run: "run-1", DB: "site.sqlite", Records: recs, Config: cfg, Open: open,
		Choice: Selection{Kinds: []string{selection.KindLatent, selection.KindTLearner}, Kernels: []modelstore.Kernel{{Name: "gaussian"}}, Share: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Selected == nil || len(f.Selected.Result.Effects) != 1 || f.Run.Effects != f.Selected.Result.Effects[0] {
		t.Fatalf("the run's effects are not model selection's")
	}
	again, err := f.Run.Fitted.Models[0].Effects(ctx, 0, recs.Data)
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2][]float64{"CATE": {f.Run.Effects.CATE, again.CATE}, "SD": {f.Run.Effects.SD, again.SD},
		"Y0": {f.Run.Effects.Y0, again.Y0}, "Propensity": {f.Run.Effects.Propensity, again.Propensity}} {
		for i := range pair[1] {
			if math.Float64bits(pair[0][i]) != math.Float64bits(pair[1][i]) {
				t.Fatalf("%s of row %d: %v, scored again %v", name, i, pair[0][i], pair[1][i])
			}
		}
	}
}

// TestFitSiteMapped: a fit with every per-row array in a mapping (as a
// one-shot fit of millions of rows keeps them) gives the heap's results
// bit for bit: the CATEs, their intervals, the latent effects, the
// scores and the ATEs.
func TestFitSiteMapped(t *testing.T) {
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 20, 3, 30, 10
	open := func(context.Context, modelstore.Kernel) (estimator.Spectral, error) {
		return estimator.GaussianSpectral{}, nil
	}
	fit := func() *Fit {
		recs := confounded(300)
		recs.Layout.Covariates = []string{"a", "b"}
		f, err := FitSite(context.Background(), SiteFit{Run: "run-1", DB: "site.sqlite", Records: recs, Config: cfg, Open: open,
			Choice: Selection{Kinds: []string{selection.KindLatent, selection.KindTLearner, selection.KindDR},
				Kernels: []modelstore.Kernel{{Name: "gaussian"}}, Share: 0.2}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	heap := fit()
	before, _ := mapped.Made()
	restore := mapped.Use(t.TempDir(), 1)
	inMappings := fit()
	restore()
	if after, _ := mapped.Made(); after == before {
		t.Skip("nothing was mapped (no unnamed files here?)")
	}
	same := func(name string, a, b []float64) {
		t.Helper()
		if len(a) != len(b) {
			t.Fatalf("%s: %d and %d rows", name, len(a), len(b))
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				t.Fatalf("%s of row %d: heap %v, mapped %v", name, i, a[i], b[i])
			}
		}
	}
	h, m := heap.Run, inMappings.Run
	same("CATE", h.CATE, m.CATE)
	same("latent CATE", h.Effects.CATE, m.Effects.CATE)
	same("latent SD", h.Effects.SD, m.Effects.SD)
	same("propensity", h.Effects.Propensity, m.Effects.Propensity)
	same("psi", h.Scores.PSI, m.Scores.PSI)
	if heap.ATEs.AIPW != inMappings.ATEs.AIPW {
		t.Errorf("AIPW ATE: heap %+v, mapped %+v", heap.ATEs.AIPW, inMappings.ATEs.AIPW)
	}
}

package modelstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

func gaussian(context.Context, modelstore.Kernel) (estimator.Spectral, error) {
	return estimator.GaussianSpectral{}, nil
}

// TestSaveLoad checks that a model saved to a site file and loaded back
// scores rows bit for bit like the model that was fitted.
func TestSaveLoad(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	schema := estimator.Schema{Binary: []bool{true, false}}
	sites := make([]*estimator.Data, 2)
	for s := range sites {
		n := 40
		d := &estimator.Data{X: mat.NewDense(n, 2, nil), W: make([]float64, n), Y: make([]float64, n)}
		for i := range n {
			z := rng.NormFloat64()
			d.X.Set(i, 0, float64(i%2))
			d.X.Set(i, 1, z)
			d.W[i] = float64((i / 2) % 2)
			d.Y[i] = z + 2*d.W[i] + 0.1*rng.NormFloat64()
		}
		sites[s] = d
	}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 10, 2, 10, 10
	m, err := estimator.Fit(ctx, sites, schema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "site.sqlite"), store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	layout := store.Layout{Table: "records", ID: "id", Treatment: "w", Outcome: "y", Covariates: []string{"a", "b"}, Binary: schema.Binary}
	if err := db.BeginRun(ctx, "r1", layout); err != nil {
		t.Fatal(err)
	}
	// A calibration of the site's CATEs, saved with the model: here from
	// pseudo-outcomes that are the CATEs plus a linear bias.
	fitted, err := m.Effects(ctx, 1, sites[1])
	if err != nil {
		t.Fatal(err)
	}
	psi := make([]float64, len(fitted.CATE))
	for i, c := range fitted.CATE {
		psi[i] = c + 0.5 + 0.25*sites[1].X.At(i, 0) + 0.1*float64(i%3)
	}
	cal, err := inference.FitCalibration(psi, fitted.CATE, sites[1].X)
	if err != nil {
		t.Fatal(err)
	}
	params := cal.Params()
	setup := modelstore.Setup{Kernel: modelstore.Kernel{Name: "gaussian"}, Config: cfg, Scaler: m.Setup.Scaler, Schema: schema, Site: 1, Sites: 2,
		Calibration: &params}
	if err := modelstore.Save(ctx, db, "r1", setup, m); err != nil {
		t.Fatal(err)
	}
	loaded, got, err := modelstore.Load(ctx, db, "r1", gaussian)
	if err != nil {
		t.Fatal(err)
	}
	if got.Site != 1 || got.Sites != 2 || got.Config.Seed != cfg.Seed || got.Rounds["latent"] != m.Latent.Rounds {
		t.Errorf("setup read back as %+v", got)
	}
	if got.Calibration == nil || fmt.Sprint(*got.Calibration) != fmt.Sprint(params) {
		t.Errorf("calibration read back as %+v, saved %+v", got.Calibration, params)
	} else if _, err := inference.NewCalibration(*got.Calibration); err != nil {
		t.Errorf("the calibration read back does not rebuild: %v", err)
	}
	want, err := m.Effects(ctx, 1, sites[1])
	if err != nil {
		t.Fatal(err)
	}
	eff, err := loaded.Effects(ctx, 1, sites[1])
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.CATE {
		if math.Float64bits(eff.CATE[i]) != math.Float64bits(want.CATE[i]) {
			t.Fatalf("row %d: loaded model CATE %v, fitted %v", i, eff.CATE[i], want.CATE[i])
		}
	}
	if err := db.BeginRun(ctx, "r2", layout); err != nil {
		t.Fatal(err)
	}
	if _, _, err := modelstore.Load(ctx, db, "r2", gaussian); !errors.Is(err, store.ErrNoModel) {
		t.Errorf("run without a saved model: err = %v, want ErrNoModel", err)
	}
}

// TestSaveLoadEnsemble saves an ensemble whose members need two kernels'
// models and checks that LoadAll gives both back and the ensemble's CATE
// bit for bit.
func TestSaveLoadEnsemble(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2, 2))
	schema := estimator.Schema{Binary: []bool{false}}
	n := 60
	d := &estimator.Data{X: mat.NewDense(n, 1, nil), W: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		z := rng.NormFloat64()
		d.X.Set(i, 0, z)
		d.W[i] = float64(i % 2)
		d.Y[i] = z + 2*d.W[i] + 0.1*rng.NormFloat64()
	}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 8, 2, 8, 10
	a, err := estimator.Fit(ctx, []*estimator.Data{d}, schema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The second kernel's model is fitted at a point of the selection
	// grid, with its own D and γ, which the kept kernel must carry.
	zero := 0.0
	grid := modelstore.Kernel{Name: "narrow", GridPoint: selection.GridPoint{Features: 5, Linear: &zero}}
	b, err := estimator.Fit(ctx, []*estimator.Data{d}, schema, narrow{}, grid.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Setup.Config; c.Features != 5 || c.Linear != 0 || cfg.Linear == 0 {
		t.Fatalf("grid point fitted with D %d, γ %v (configuration's γ %v)", c.Features, c.Linear, cfg.Linear)
	}
	est := selection.Estimator{Kind: selection.KindEnsemble, Shift: 0.25, Members: []selection.Member{
		{Estimator: selection.Estimator{Kind: selection.KindOutcome}, Kernel: 0},
		{Estimator: selection.Estimator{Kind: selection.KindLatent}, Kernel: 1},
	}}
	want, err := est.CATEModels(ctx, []*estimator.Model{a, b}, 0, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := est.CATE(ctx, a, 0, d, nil); !errors.Is(err, selection.ErrInput) {
		t.Errorf("an ensemble over two kernels from one model: %v, want ErrInput", err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "site.sqlite"), store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.BeginRun(ctx, "r1", store.Layout{Table: "records", ID: "id", Treatment: "w", Outcome: "y", Covariates: []string{"x"}, Binary: schema.Binary}); err != nil {
		t.Fatal(err)
	}
	setup := modelstore.Setup{Kernel: modelstore.Kernel{Name: "gaussian"}, Config: cfg, Scaler: a.Setup.Scaler, Schema: schema, Sites: 1,
		Estimator: &est, Extra: []modelstore.Kernel{grid}}
	if err := modelstore.Save(ctx, db, "r1", setup, a); err == nil {
		t.Error("saved an ensemble of two kernels with one model")
	}
	open := func(_ context.Context, k modelstore.Kernel) (estimator.Spectral, error) {
		if k.Name == "narrow" {
			return narrow{}, nil
		}
		return estimator.GaussianSpectral{}, nil
	}
	if err := modelstore.Save(ctx, db, "r1", setup, a, b); err != nil {
		t.Fatal(err)
	}
	models, got, err := modelstore.LoadAll(ctx, db, "r1", open)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 || got.Estimator == nil || len(got.Extra) != 1 {
		t.Fatalf("loaded %d models, setup %+v", len(models), got)
	}
	if c := models[1].Setup.Config; c.Features != 5 || c.Linear != 0 {
		t.Errorf("the grid point's model loaded with D %d, γ %v; want 5, 0", c.Features, c.Linear)
	}
	cate, err := got.Estimator.CATEModels(ctx, models, 0, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cate {
		if cate[i] != want[i] {
			t.Fatalf("row %d: loaded ensemble's CATE %v, fitted %v", i, cate[i], want[i])
		}
	}
}

// narrow is a Gaussian kernel of half the frequencies: a second kernel.
type narrow struct{}

func (narrow) Sample(ctx context.Context, d, count int, seed uint64) (*mat.Dense, error) {
	w, err := estimator.GaussianSpectral{}.Sample(ctx, d, count, seed)
	if err == nil {
		w.Scale(0.5, w)
	}
	return w, err
}

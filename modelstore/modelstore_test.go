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

package coordstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
)

// benchState is a coordinator state in the latent model's training, at the
// default model size (D = 200, dz = 20) and 30 covariates, for sites
// sites, with Adam's parameters and moments filled with random values as
// after some rounds.
func benchState(b *testing.B, sites int) *federation.State {
	b.Helper()
	ctx := context.Background()
	cfg := estimator.DefaultConfig()
	schema := estimator.Schema{Binary: make([]bool, 30)}
	// Two rows, every covariate 0 then 1 and the outcome −1 then 1.
	mo := estimator.Moments{N: 2, Sum: make([]float64, 31), SumSq: make([]float64, 31)}
	for j := range 30 {
		mo.Sum[j], mo.SumSq[j] = 1, 1
	}
	mo.SumSq[30] = 2
	scaler, err := estimator.NewScaler(schema, []estimator.Moments{mo})
	if err != nil {
		b.Fatal(err)
	}
	setup, err := estimator.NewSetup(ctx, schema, estimator.GaussianSpectral{}, cfg, scaler)
	if err != nil {
		b.Fatal(err)
	}
	co, err := estimator.NewCoordinator(estimator.Latent, sites, setup)
	if err != nil {
		b.Fatal(err)
	}
	cp := co.Checkpoint()
	r := rand.New(rand.NewPCG(1, 2))
	for _, v := range [][]float64{cp.X, cp.M, cp.V} {
		for i := range v {
			v[i] = r.NormFloat64()
		}
	}
	names := make([]string, sites)
	for s := range names {
		names[s] = fmt.Sprintf("site%d", s+1)
	}
	return &federation.State{RunID: "bench", Sites: names, Step: 100, Every: 1, Config: cfg, Schema: schema, Scaler: scaler, Kind: 2, Checkpoint: cp}
}

// BenchmarkCheckpoint measures one checkpoint of the latent model in
// training at 3 and 20 sites: encoding the state (encode), and saving it
// to the coordinator's SQLite file with its full fsync (save).
// B/checkpoint is the encoded size.
func BenchmarkCheckpoint(b *testing.B) {
	for _, sites := range []int{3, 20} {
		st := benchState(b, sites)
		enc, err := federation.EncodeState(st)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("encode/sites=%d", sites), func(b *testing.B) {
			for b.Loop() {
				if _, err := federation.EncodeState(st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(enc)), "B/checkpoint")
		})
		b.Run(fmt.Sprintf("save/sites=%d", sites), func(b *testing.B) {
			ctx := context.Background()
			db, err := Open(ctx, filepath.Join(b.TempDir(), "coord.sqlite"), 5*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			for b.Loop() {
				if err := db.Save(ctx, st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(enc)), "B/checkpoint")
		})
	}
}

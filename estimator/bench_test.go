package estimator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkLatentRound measures one federated round of the latent model
// (three sites compute, the coordinator updates) at the reference
// implementation's IHDP size: 3 sources of 50 rows, D = 400, dz = 80.
// The reference PyTorch code needs 124 ms a round on this machine. Sites
// compute in parallel (one per CPU), as in Train.
func BenchmarkLatentRound(b *testing.B) {
	for _, tc := range []struct {
		method Method
		draws  int
	}{{Adam, 1}, {LBFGS, 1}, {LBFGS, 5}} {
		b.Run(fmt.Sprintf("%v/M=%d", tc.method, tc.draws), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Features, cfg.Latent, cfg.Draws = 400, 80, tc.draws
			cfg.Method = tc.method
			cfg.Rounds = 1 << 30
			schema := Schema{Binary: make([]bool, 25)}
			for j := 6; j < 25; j++ {
				schema.Binary[j] = true
			}
			setup, sites, _ := toyFederation(b, 3, 50, schema, cfg)
			c, err := NewCoordinator(Latent, 3, setup)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			outs := make([]*SiteOutput, 3)
			b.ReportAllocs()
			for b.Loop() {
				if err := Round(ctx, c, sites, 0, outs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIHDPFit measures one fit and score of the IHDP table: three
// sources of 50 training rows, 100 test rows scored.
func BenchmarkIHDPFit(b *testing.B) {
	readIHDP(b, 1)
	for b.Loop() {
		runIHDP(b, 1, 3, DefaultConfig())
	}
}

// BenchmarkSiteRound measures one site's round of each model, on every
// row and on a mini-batch of 4096 (the default Config.BatchSize, four
// chunks computed on every core), at 10 000 and
// 100 000 rows of 30 covariates with the default D = 200, dz = 20: with a
// batch the cost of a round should not grow with the rows.
func BenchmarkSiteRound(b *testing.B) {
	schema := Schema{Binary: make([]bool, 30)}
	for _, n := range []int{10000, 100000} {
		for _, batch := range []int{0, 4096} {
			if n == 100000 && batch == 0 && testing.Short() {
				continue
			}
			cfg := DefaultConfig()
			cfg.BatchSize = batch
			setup, sites, _ := toyFederation(b, 1, n, schema, cfg)
			for _, kind := range Kinds {
				b.Run(fmt.Sprintf("rows=%d/batch=%d/%v", n, batch, kind), func(b *testing.B) {
					in := randomInput(newLayout(kind, setup), rand.New(rand.NewPCG(1, uint64(kind))))
					ctx := context.Background()
					b.ReportAllocs()
					round := 0
					for b.Loop() {
						in.Round, in.Noise = round, uint64(round)
						round++
						if _, err := sites[0].Compute(ctx, in); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			sites[0].Release()
		}
	}
}

// BenchmarkEffects measures scoring 10 000 rows of 30 covariates with the
// default D = 200, dz = 20 and 100 samples per row (the model is trained
// for 5 rounds only: its weights do not change the cost), on one core and
// on every core.
func BenchmarkEffects(b *testing.B) {
	schema := Schema{Binary: make([]bool, 30)}
	cfg := DefaultConfig()
	cfg.Rounds = 5
	data := toySites(1, 10000, schema)
	m, err := Fit(context.Background(), data, schema, GaussianSpectral{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, procs := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("rows=10000/procs=%d", procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Effects(context.Background(), 0, data[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrivateSiteRound compares a private round (every sampled row's
// gradient computed alone and clipped, Poisson rate 4096/n) with the
// exact mini-batch round of the same expected size, at 10 000 rows of 30
// covariates with the default D = 200, dz = 20.
func BenchmarkPrivateSiteRound(b *testing.B) {
	schema := Schema{Binary: make([]bool, 30)}
	const n, batch = 10000, 4096
	cfg := DefaultConfig()
	cfg.BatchSize = batch
	setup, sites, _ := toyFederation(b, 1, n, schema, cfg)
	for _, private := range []bool{false, true} {
		if private {
			if err := sites[0].SetPrivacy(&Privacy{Clip: 1, Noise: 1, Rate: float64(batch) / n}); err != nil {
				b.Fatal(err)
			}
		}
		for _, kind := range Kinds {
			b.Run(fmt.Sprintf("private=%v/%v", private, kind), func(b *testing.B) {
				in := randomInput(newLayout(kind, setup), rand.New(rand.NewPCG(1, uint64(kind))))
				ctx := context.Background()
				b.ReportAllocs()
				round := 0
				for b.Loop() {
					in.Round, in.Noise = round, uint64(round)
					round++
					if _, err := sites[0].Compute(ctx, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

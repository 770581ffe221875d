//go:build unix

package evaluate

import (
	"context"
	"math"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/synth"
)

// TestPaperLargeSetting runs the paper's large setting in simulated
// federation: 100 sources of 1000 rows with Δ ~ U[0, 8] per source, split
// 100/800/100, scored on the test rows of the first 20 sources. It takes
// minutes, so it runs only with CRFFD_SCALE=1, and logs time and memory.
// CRFFD_SCALE_TRANSFER_PRIOR overrides Config.TransferPrior.
func TestPaperLargeSetting(t *testing.T) {
	if os.Getenv("CRFFD_SCALE") != "1" {
		t.Skip("set CRFFD_SCALE=1 to run the 100-source setting")
	}
	ctx := context.Background()
	const sources, rows = 100, 1000
	deltas, err := synth.UniformDeltas(sources, 0, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := synth.Generate(synth.Design{Sources: sources, Rows: rows, Delta: deltas, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := dataset.InferSchema(tables...)
	if err != nil {
		t.Fatal(err)
	}
	train := make([]*estimator.Data, sources)
	tests := make([]split, sources)
	for s, tab := range tables {
		tr, te, va, err := tab.Split(100, 800, 100)
		if err != nil {
			t.Fatal(err)
		}
		train[s], tests[s] = tr.Data(), split{tr, te, va}
	}
	start := time.Now()
	cfg := estimator.DefaultConfig()
	if v := os.Getenv("CRFFD_SCALE_TRANSFER_PRIOR"); v != "" {
		if cfg.TransferPrior, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatalf("CRFFD_SCALE_TRANSFER_PRIOR: %v", err)
		}
	}
	m, err := estimator.Fit(ctx, train, schema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	trainTime := time.Since(start)
	var pehe, ateErr, valSE float64
	var valN int
	for s := range 20 {
		eff, err := m.Effects(ctx, s, tests[s].test.Data())
		if err != nil {
			t.Fatal(err)
		}
		p, _ := estimator.SqrtPEHE(eff.CATE, tests[s].test.Tau())
		a, _ := estimator.ATEError(eff.CATE, tests[s].test.Tau())
		pehe += p / 20
		ateErr += a / 20
		val := tests[s].val.Data()
		ev, err := m.Effects(ctx, s, val)
		if err != nil {
			t.Fatal(err)
		}
		sse, n, err := estimator.FactualSSE(ev, val)
		if err != nil {
			t.Fatal(err)
		}
		valSE += sse
		valN += n
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t.Logf("100 sources × 1000 rows: training %.1f s (%d rounds), total %.1f s, peak RSS %.0f MiB; first 20 sources: mean sqrt(PEHE) %.3f, mean ATE error %.3f, factual RMSE on their validation rows %.3f",
		trainTime.Seconds(), m.Propensity.Rounds+m.Outcome.Rounds+m.Latent.Rounds, time.Since(start).Seconds(), float64(ru.Maxrss)/1024, pehe, ateErr, math.Sqrt(valSE/float64(valN)))
}

package estimator_test

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/synth"
)

// TestSynthBinaryOutcomeATE is the binary-outcome acceptance of issue 3 on
// the synth package's binary design: three sources of 1000 rows, the
// estimated ATE of source 1 within 0.05 of the true mean risk difference,
// for seeds 1, 2 and 3 (one fit each; no seed was chosen by its result).
// It is slow, so it runs only with CRFFD_ACCEPTANCE set; a fit takes one to
// four minutes on two cores, so give it -timeout 30m. CRFFD_BINARY_SEEDS
// (e.g. 4-10) checks other seeds instead.
func TestSynthBinaryOutcomeATE(t *testing.T) {
	if testing.Short() || getenv("CRFFD_ACCEPTANCE") == "" {
		t.Skip("slow acceptance check: set CRFFD_ACCEPTANCE=1 to run")
	}
	seeds := []uint64{1, 2, 3}
	if v := getenv("CRFFD_BINARY_SEEDS"); v != "" {
		lo, hi, ok := strings.Cut(v, "-")
		a, err1 := strconv.ParseUint(lo, 10, 64)
		b, err2 := strconv.ParseUint(hi, 10, 64)
		if !ok || err1 != nil || err2 != nil || a > b {
			t.Fatalf("CRFFD_BINARY_SEEDS %q: want FIRST-LAST", v)
		}
		seeds = seeds[:0]
		for s := a; s <= b; s++ {
			seeds = append(seeds, s)
		}
	}
	var sumErr float64
	defer func() { t.Logf("mean |ATE error| over %d seeds: %.3f", len(seeds), sumErr/float64(len(seeds))) }()
	for _, seed := range seeds {
		src, err := synth.Generate(synth.Design{Sources: 3, Rows: 1000, Seed: seed, BinaryOutcome: true})
		if err != nil {
			t.Fatal(err)
		}
		schema, err := dataset.InferSchema(src...)
		if err != nil {
			t.Fatal(err)
		}
		sites := make([]*estimator.Data, len(src))
		for s, tb := range src {
			sites[s] = tb.Data()
		}
		cfg := estimator.DefaultConfig()
		cfg.Seed = seed
		ctx := context.Background()
		model, err := estimator.Fit(ctx, sites, schema, estimator.GaussianSpectral{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		e, err := model.Effects(ctx, 0, sites[0])
		if err != nil {
			t.Fatal(err)
		}
		var truth float64
		tau := src[0].Tau()
		for _, v := range tau {
			truth += v / float64(len(tau))
		}
		t.Logf("seed %d: ATE %.3f, true %.3f", seed, e.ATE, truth)
		sumErr += math.Abs(e.ATE - truth)
		if math.Abs(e.ATE-truth) > 0.05 {
			t.Errorf("seed %d: ATE %.3f, true %.3f", seed, e.ATE, truth)
		}
	}
}

func getenv(k string) string { return os.Getenv(k) }

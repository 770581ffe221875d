package estimator_test

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/evaluate"
	"github.com/crffd/crffd/synth"
)

// TestSynthBinaryOutcomeATE is the binary-outcome acceptance of issue 3 on
// the synth package's binary design: three sources of 1000 rows, the
// estimated ATE of source 1 within 0.05 of the true mean risk difference,
// for seeds 1, 2 and 3 (one fit each; no seed was chosen by its result).
// It is slow, so it runs only with CRFFD_ACCEPTANCE set; a fit takes one to
// four minutes on two cores, so give it -timeout 30m. CRFFD_BINARY_SEEDS
// (a list such as 4-10 or 1,5,7) checks other seeds instead.
func TestSynthBinaryOutcomeATE(t *testing.T) {
	if testing.Short() || getenv("CRFFD_ACCEPTANCE") == "" {
		t.Skip("slow acceptance check: set CRFFD_ACCEPTANCE=1 to run")
	}
	seeds := []int{1, 2, 3}
	if v := getenv("CRFFD_BINARY_SEEDS"); v != "" {
		var err error
		if seeds, err = evaluate.ParseList(v); err != nil {
			t.Fatalf("CRFFD_BINARY_SEEDS: %v", err)
		}
	}
	var sumErr float64
	defer func() { t.Logf("mean |ATE error| over %d seeds: %.3f", len(seeds), sumErr/float64(len(seeds))) }()
	for _, seed := range seeds {
		src, err := synth.Generate(synth.Design{Sources: 3, Rows: 1000, Seed: uint64(seed), BinaryOutcome: true})
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
		cfg.Seed = uint64(seed)
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

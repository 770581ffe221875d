package audit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/privacy/audit"
	"github.com/crffd/crffd/synth"
)

// site returns one simulated site of the paper's design and a setup for
// private training on it.
func site(t testing.TB, rows int, binary bool) (*estimator.Data, *estimator.Setup) {
	t.Helper()
	tables, err := synth.Generate(synth.Design{Sources: 1, Rows: rows, Seed: 7, BinaryOutcome: binary})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := dataset.InferSchema(tables...)
	if err != nil {
		t.Fatal(err)
	}
	data := tables[0].Data()
	scaler, err := estimator.NewScaler(schema, []estimator.Moments{data.Moments()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := estimator.DefaultConfig()
	cfg.Method, cfg.Features, cfg.Latent, cfg.Draws = estimator.Adam, 8, 2, 2
	setup, err := estimator.NewSetup(context.Background(), schema, estimator.GaussianSpectral{}, cfg, scaler)
	if err != nil {
		t.Fatal(err)
	}
	return data, setup
}

// TestSensitivityHolds: on neighbouring datasets (one row removed, one row
// replaced by another), the clipped round sum of every model, in full
// batches and Poisson mini-batches, for continuous and binary outcomes,
// moves by at most C and 2C: the sensitivity the accountant assumes.
//
// The nuisance models' statistics are audited beside them, against their
// own sensitivity.
func TestSensitivityHolds(t *testing.T) {
	for _, binary := range []bool{false, true} {
		data, setup := site(t, 60, binary)
		res, err := audit.Run(context.Background(), data, setup, audit.Options{Clip: 0.5, Rows: 6, Rate: 0.3, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if last := res[len(res)-1]; last.Statistic != audit.StatNuisance {
			t.Errorf("binary=%v: the last result audits %q, want the nuisance statistics", binary, last.Statistic)
		}
		if want := len(estimator.Kinds)*2*2 + 2; len(res) != want {
			t.Fatalf("binary=%v: %d results, want %d", binary, len(res), want)
		}
		for _, r := range res {
			name := fmt.Sprint(r.Model)
			if r.Statistic != "" {
				name = r.Statistic
			}
			t.Logf("binary=%v %s q=%g %s: max ‖Δ‖/C = %.3f (row %d), bound %g", binary, name, r.Rate, r.Relation, r.Ratio, r.Row, r.Bound)
			if !r.OK() {
				t.Errorf("binary=%v %s q=%g %s: ‖Δ‖/C = %.3f above the bound %g", binary, name, r.Rate, r.Relation, r.Ratio, r.Bound)
			}
			if r.Ratio == 0 {
				t.Errorf("binary=%v %s q=%g %s: no row moved the sum; the audit measures nothing", binary, name, r.Rate, r.Relation)
			}
		}
	}
}

func ExampleRun() {
	fmt.Println(audit.Bound(audit.AddRemove), audit.Bound(audit.ReplaceOne))
	// Output: 1 2
}

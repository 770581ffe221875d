package store_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/store"
)

// TestUpdateLocalATE: the local ATEs follow crff_cate: the AIPW estimate
// is the mean of the rows' ψ with its standard error, the plug-in the mean
// of the uncalibrated CATEs, each over the rows present now; CATEs written
// without ψ leave the run's figures as they were.
func TestUpdateLocalATE(t *testing.T) {
	ctx := context.Background()
	path, s, recs := begunRun(t)
	res := fakeResults(recs.IDs, 1)
	for i := range res.CATE {
		res.CATE[i].Raw = float64(i)
		res.CATE[i].PSI = float64(i*i) / 4
		res.CATE[i].PSIClipped = i%3 == 0
	}
	res.CATE[1].PSI = math.NaN() // a row without a valid outcome
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	check := func(label string, cs []store.CATE) {
		t.Helper()
		var psi, raw []float64
		clipped := 0
		for _, c := range cs {
			raw = append(raw, c.Raw)
			if !math.IsNaN(c.PSI) {
				psi = append(psi, c.PSI)
				if c.PSIClipped {
					clipped++
				}
			}
		}
		want, err := inference.Accumulate(psi).Estimate()
		if err != nil {
			t.Fatal(err)
		}
		plugin, _ := inference.PlugIn(raw)
		got, err := s.UpdateLocalATE(ctx, "run-1")
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		read, err := s.ReadATE(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || len(read) != 2 {
			t.Fatalf("%s: wrote %v, crff_ate holds %v", label, got, read)
		}
		for _, a := range [][]store.ATE{got, read} {
			aipw, pi := a[0], a[1]
			if aipw.N != want.N || math.Abs(aipw.ATE-want.Estimate) > 1e-12 || math.Abs(aipw.SE-want.SE) > 1e-12 ||
				math.Abs(aipw.Lower-want.Lower) > 1e-12 || aipw.Clipped != clipped {
				t.Errorf("%s: AIPW %+v, want %+v with %d clipped", label, aipw, want, clipped)
			}
			if pi.N != len(raw) || math.Abs(pi.ATE-plugin.Estimate) > 1e-12 || !math.IsNaN(pi.SE) {
				t.Errorf("%s: plug-in %+v, want %v over %d rows", label, pi, plugin.Estimate, len(raw))
			}
		}
	}
	cs, _ := s.ReadCATE(ctx)
	check("as written", cs)
	execSQL(t, path, `DELETE FROM records WHERE patient_id = ?`, recs.IDs[2])
	if n, err := s.PruneScores(ctx, "run-1"); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	cs, _ = s.ReadCATE(ctx)
	check("after a deletion", cs)

	// Scores of rows without ψ (written before crff_cate kept it) leave the
	// ATEs alone.
	legacy := fakeResults(nil, 0).CATE
	legacy = append(legacy, store.CATE{RowID: store.TextID("legacy"), CATE: 1, SE: math.NaN(), Lower: math.NaN(), Upper: math.NaN(),
		Raw: math.NaN(), PSI: math.NaN(), Propensity: 0.5})
	if _, err := s.AppendScores(ctx, "run-1", legacy, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := s.ReadATE(ctx)
	if got, err := s.UpdateLocalATE(ctx, "run-1"); err != nil || got != nil {
		t.Errorf("with a CATE without ψ: wrote %v, %v; want nothing", got, err)
	}
	if after, _ := s.ReadATE(ctx); len(after) != len(before) || after[0].N != before[0].N {
		t.Errorf("crff_ate changed: %v → %v", before, after)
	}
	if _, err := s.UpdateLocalATE(ctx, "run-0"); !errors.Is(err, store.ErrStaleRun) {
		t.Errorf("update of a run that is not current: %v, want ErrStaleRun", err)
	}
}

// TestPrivateATE: a private run's ATEs are marked in crff_ate, and stay
// marked when the local ATEs are recomputed between runs.
func TestPrivateATE(t *testing.T) {
	ctx := context.Background()
	_, s, recs := begunRun(t)
	res := fakeResults(recs.IDs, 1)
	for i := range res.ATE {
		res.ATE[i].Private = true
	}
	for i := range res.CATE {
		res.CATE[i].Raw, res.CATE[i].PSI = float64(i), float64(i)
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"written", "recomputed"} {
		if step == "recomputed" {
			if _, err := s.UpdateLocalATE(ctx, "run-1"); err != nil {
				t.Fatal(err)
			}
		}
		read, err := s.ReadATE(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(read) != 2 {
			t.Fatalf("%s: crff_ate holds %v", step, read)
		}
		for _, a := range read {
			if !a.Private {
				t.Errorf("%s: %s %s ATE not marked private", step, a.Scope, a.Estimator)
			}
		}
	}
}

package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

// TestSelectionEnsembleRow: crff_model_selection keeps the candidates with
// their member flags and the chosen ensemble with its shift and NULL
// standard errors, which ReadSelection gives back as 0.
func TestSelectionEnsembleRow(t *testing.T) {
	ctx := context.Background()
	path, s, recs := begunRun(t)
	res := fakeResults(recs.IDs, 1)
	res.Selection = []store.Selection{
		{Candidate: "latent/gaussian", Kind: "latent", Kernel: "gaussian", Loss: 4, SE: 1, N: 30},
		{Candidate: "tlearner/10", Kind: "tlearner", Ridge: 10, Loss: 3.5, SE: 0.9, Diff: -0.5, DiffSE: 0.2, Member: true, N: 30},
		{Candidate: "ensemble", Kind: "ensemble", Loss: 3.4, Diff: -0.6, Chosen: true, Shift: 0.25, N: 30},
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadSelection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, res.Selection) {
		t.Errorf("read back %+v\nwrote %+v", got, res.Selection)
	}
	db := rawDB(t, path)
	var se, diffSE, shift sql.NullFloat64
	if err := db.QueryRow(`SELECT se, diff_se, shift FROM crff_model_selection WHERE kind = 'ensemble'`).Scan(&se, &diffSE, &shift); err != nil {
		t.Fatal(err)
	}
	if se.Valid || diffSE.Valid || !shift.Valid || shift.Float64 != 0.25 {
		t.Errorf("ensemble row: se %v, diff_se %v, shift %v; want NULL, NULL, 0.25", se, diffSE, shift)
	}
	// Only the ensemble lacks standard errors and has a shift.
	for _, bad := range []string{
		`INSERT INTO crff_model_selection (candidate, kind, loss, diff, chosen, n, run, computed_at)
		 VALUES ('latent/laplacian', 'latent', 1, 0, 0, 30, 'run-1', 'now')`,
		`INSERT INTO crff_model_selection (candidate, kind, loss, se, diff, diff_se, shift, chosen, n, run, computed_at)
		 VALUES ('latent/laplacian', 'latent', 1, 1, 0, 0, 0.5, 0, 30, 'run-1', 'now')`,
		`INSERT INTO crff_model_selection (candidate, kind, loss, se, diff, diff_se, shift, chosen, n, run, computed_at)
		 VALUES ('ensemble2', 'ensemble', 1, 1, 0, 0, 0.5, 1, 30, 'run-1', 'now')`,
	} {
		if _, err := db.Exec(bad); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestNuisanceRows: crff_nuisance keeps each learner's weight and loss,
// the stack's row with a NULL weight, and is emptied by the next run's
// results; a weight outside [0, 1] is refused with the learner named.
func TestNuisanceRows(t *testing.T) {
	ctx := context.Background()
	path, s, recs := begunRun(t)
	res := fakeResults(recs.IDs, 1)
	res.Nuisance = []store.Nuisance{
		{Model: "propensity", Learner: "glm", Weight: 0.85, Loss: 0.61, N: 40},
		{Model: "propensity", Learner: "rff", Weight: 0.15, Loss: 0.64, N: 40},
		{Model: "propensity", Learner: store.NuisanceStack, Weight: 7, Loss: 0.6, N: 40},
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	rows, err := db.Query(`SELECT learner, weight, loss FROM crff_nuisance WHERE model = 'propensity' ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var l string
		var w sql.NullFloat64
		var loss float64
		if err := rows.Scan(&l, &w, &loss); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %v %v %g", l, w.Valid, w.Float64, loss))
	}
	rows.Close()
	if want := []string{"glm true 0.85 0.61", "rff true 0.15 0.64", "stack false 0 0.6"}; !reflect.DeepEqual(got, want) {
		t.Errorf("crff_nuisance %q, want %q", got, want)
	}
	res.Nuisance = []store.Nuisance{{Model: "mu1", Learner: "glm", Weight: 2, Loss: 1, N: 40}}
	if err := s.WriteResults(ctx, "run-1", res); err == nil || !strings.Contains(err.Error(), `nuisance learner "glm" of the mu1`) {
		t.Errorf("weight 2: %v", err)
	}
	res.Nuisance = nil
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM crff_nuisance`).Scan(&n); err != nil || n != 0 {
		t.Errorf("crff_nuisance after a run without a stack: %d rows, %v", n, err)
	}
}

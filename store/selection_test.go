package store_test

import (
	"context"
	"database/sql"
	"reflect"
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

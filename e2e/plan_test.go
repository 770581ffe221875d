package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFitPlan: crffd fit --plan prints the trainings, the expected time by
// step and the peak memory of a fit, measured on a sample of the rows, and
// writes nothing to the site file: no run begins, the user's table is as it
// was, and no scratch file is left beside it.
func TestFitPlan(t *testing.T) {
	dir, cfg := simulateSite(t, 3000, smallModel)
	path := filepath.Join(dir, "site1.sqlite")
	db := openDB(t, path)
	before := tableSum(t, db, "records")
	files, _ := os.ReadDir(dir)

	r := crffd(t, []string{"TMPDIR=" + t.TempDir()}, "fit", "--config", cfg, "--plan").mustSucceed(t)
	for _, want := range []string{"site1.sqlite: 3000 rows (measured on 3000 of them in ",
		"trainings (cross-fitted nuisances included): latent 1 × 30 rounds, ",
		"expected time: ", "read ", "training rounds ", "write ", "expected peak memory: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the plan lacks %q:\n%s", want, r.stdout)
		}
	}
	var runs int
	if err := db.QueryRow(`SELECT count(*) FROM crff_run`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d runs after a plan (%v), want none", runs, err)
	}
	if after := tableSum(t, db, "records"); after != before {
		t.Error("the plan changed the user's table")
	}
	if after, _ := os.ReadDir(dir); len(after) != len(files) {
		t.Errorf("%d files beside the site file after the plan, %d before", len(after), len(files))
	}

	bad := filepath.Join(dir, "bad.yaml")
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "table: records", "table: patients", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "fit", "--config", bad, "--plan").mustFail(t, `table "patients": no such table or view`)
}

package demo

import (
	"context"
	"database/sql"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/positivity"
	"github.com/crffd/crffd/sandbox"
	"github.com/crffd/crffd/store"
)

func TestPositivityNote(t *testing.T) {
	for _, tc := range []struct {
		name string
		site site
		want string // a substring of the note; "" for no note
	}{
		{"balanced", site{name: "site1", treated: 140, control: 160}, ""},
		{"few controls", site{name: "site3", treated: 291, control: 9},
			"positivity: site3: 9 control rows (w = 0) among 300 (3.0%), below the 20 rows and 5% of the rows each arm should hold; its effects rest on extrapolation"},
		{"few treated", site{name: "site2", treated: 4, control: 296}, "positivity: site2: 4 treated rows (w = 1) among 300"},
		{"at the soft minimum", site{name: "site1", treated: 280, control: 20}, ""},
		{"below the soft minimum of rows, above the share", site{name: "site1", treated: 285, control: 15}, "site1: 15 control rows"},
		{"a few extreme propensities", site{name: "site1", treated: 150, control: 150, extreme: 2}, ""},
		{"too many extreme propensities", site{name: "site1", treated: 150, control: 150, extreme: 16},
			"positivity: site1: 16 of 300 rows (5.3%) have a propensity outside [0.01, 0.99], above the 5% limit"},
		{"nothing scored", site{name: "site1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := positivityNote(tc.site)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("positivityNote = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestClipMatchesPositivityBounds ties the propensity clipping of the AIPW
// estimate to the bounds that the positivity warnings count outside of, so
// that crff_ate's clipped rows are the rows crff_positivity calls extreme.
func TestClipMatchesPositivityBounds(t *testing.T) {
	if inference.DefaultClip != positivity.Low || 1-inference.DefaultClip != positivity.High {
		t.Errorf("AIPW clips propensities to [%v, %v]; the positivity rules use [%v, %v]",
			inference.DefaultClip, 1-inference.DefaultClip, positivity.Low, positivity.High)
	}
}

func TestTruth(t *testing.T) {
	tau := []float64{1, 2, 3, 6}
	cate := []float64{2, 2, 1, 6} // errors 1, 0, -2, 0: PEHE 5/4
	ate, pehe, err := truth(cate, tau)
	if err != nil || ate != 3 || math.Abs(pehe-math.Sqrt(1.25)) > 1e-15 {
		t.Errorf("truth = %v, %v, %v; want 3, %v, nil", ate, pehe, err, math.Sqrt(1.25))
	}
	if _, _, err := truth(nil, nil); err == nil {
		t.Error("truth of no rows: no error")
	}
	if _, _, err := truth([]float64{1}, []float64{1, 2}); err == nil {
		t.Error("truth of unpaired rows: no error")
	}
}

// TestTruthQuerySearchesByKey: the CATE of each truth row is found by
// crff_cate_rows' key, not by a scan per row.
func TestTruthQuerySearchesByKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "site.sqlite")
	s, err := store.Open(ctx, path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close() // its tables and views are made
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+sandbox.TruthTable+` (id INTEGER, mu0 REAL, mu1 REAL, y_cfactual REAL)`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+truthQuery)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "crff_cate_rows USING PRIMARY KEY (run=? AND row_id=?)") {
		t.Errorf("plan %q: want crff_cate_rows searched by run and row id", got)
	}
}

package store_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/store"
)

// gateSite returns an open site of n rows (age, sex, treated, y) with run
// run-1 published, each row's ψ its age/10 plus treatment and its raw CATE
// its sex, and the ψ, raw CATE, age, sex and arm of each row.
func gateSite(t *testing.T, n int) (path string, s *store.Site, psi, raw, age, sex, w []float64) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "site.sqlite")
	db := rawDB(t, path)
	if _, err := db.Exec(`CREATE TABLE records (id INTEGER PRIMARY KEY, age REAL, sex INTEGER, treated INTEGER, y REAL);
		CREATE TABLE other (secret TEXT); INSERT INTO other VALUES ('keep me')`); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		a, x, tr := 20+60*r.Float64(), float64(r.IntN(2)), float64(r.IntN(2))
		if _, err := db.Exec(`INSERT INTO records VALUES (?, ?, ?, ?, ?)`, i+1, a, x, tr, a/10+tr); err != nil {
			t.Fatal(err)
		}
		age, sex, w = append(age, a), append(sex, x), append(w, tr)
		psi, raw = append(psi, a/10+tr+r.NormFloat64()), append(raw, x)
	}
	db.Close()
	s = openSite(t, path)
	recs, err := s.ReadRecords(ctx, store.Source{DB: path, Table: "records", IDColumn: "id", TreatmentColumn: "treated",
		OutcomeColumn: "y", Covariates: []string{"age", "sex"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, "run-1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	res := fakeResults(recs.IDs, 1)
	for i := range res.CATE {
		res.CATE[i].PSI, res.CATE[i].Raw = psi[i], raw[i]
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	return path, s, psi, raw, age, sex, w
}

// TestGATE: each subgroup in crff_subgroup gets the mean ψ of its rows
// with its standard error, and the mean raw CATE, after a run and after
// rescoring; refused predicates and small cells get a reason, leave the
// others be, and leave every table as it was.
func TestGATE(t *testing.T) {
	ctx := context.Background()
	path, s, psi, raw, age, sex, w := gateSite(t, 400)
	groups := map[string]string{
		"old":      `age >= 65`,
		"women":    `sex = 1`,
		"old_men":  `age >= 65 AND sex = 0`,
		"inject":   `1=1; DROP TABLE records`,
		"subquery": `age > (SELECT count(*) FROM other)`,
		"function": `random() > 0`,
		"escape":   `1=1) OR (1=1`,
		"tiny":     `age < 21`,
		"broken":   `age >`,
	}
	for name, pred := range groups {
		execSQL(t, path, `INSERT INTO crff_subgroup (name, predicate) VALUES (?, ?)`, name, pred)
	}
	before := tableDigest(t, path, "records") + tableDigest(t, path, "other")
	// The subgroups are read when the run's results are written, or the
	// local ATE recomputed.
	if _, err := s.UpdateLocalATE(ctx, "run-1"); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadGATE(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]store.GATE{}
	for _, g := range got {
		if g.Scope != store.ScopeLocal {
			t.Errorf("%s: scope %s", g.Subgroup, g.Scope)
		}
		byName[g.Subgroup] = g
	}
	if len(byName) != len(groups) {
		t.Fatalf("crff_gate holds %d subgroups, want %d: %+v", len(byName), len(groups), got)
	}
	for name, in := range map[string]func(i int) bool{
		"old":     func(i int) bool { return age[i] >= 65 },
		"women":   func(i int) bool { return sex[i] == 1 },
		"old_men": func(i int) bool { return age[i] >= 65 && sex[i] == 0 },
	} {
		var sel []float64
		var rawSum float64
		var treated int
		for i := range psi {
			if in(i) {
				sel = append(sel, psi[i])
				rawSum += raw[i]
				treated += int(w[i])
			}
		}
		want, err := inference.Accumulate(sel).Estimate()
		if err != nil {
			t.Fatal(err)
		}
		g := byName[name]
		if g.Reason != "" || g.N != len(sel) || g.Treated != treated || g.Control != len(sel)-treated ||
			math.Abs(g.Estimate.Estimate-want.Estimate) > 1e-12 || math.Abs(g.Estimate.SE-want.SE) > 1e-12 ||
			math.Abs(g.Estimate.Lower-want.Lower) > 1e-12 || math.Abs(g.PlugIn-rawSum/float64(len(sel))) > 1e-12 {
			t.Errorf("%s: %+v, want %+v over %d rows (%d treated), plug-in %v", name, g, want, len(sel), treated, rawSum/float64(len(sel)))
		}
	}
	for name, want := range map[string]string{
		"inject":   store.ReasonRefused,
		"subquery": store.ReasonRefused,
		"function": store.ReasonRefused,
		"escape":   store.ReasonRefused,
		"tiny":     store.ReasonSmallCell,
		"broken":   store.ReasonFailed,
	} {
		g := byName[name]
		if !strings.HasPrefix(g.Reason, want) || g.N != 0 || g.Estimate.Estimate != 0 {
			t.Errorf("%s: %+v, want no figures and a reason starting %q", name, g, want)
		}
		t.Logf("%s: %s", name, g.Reason)
	}
	if after := tableDigest(t, path, "records") + tableDigest(t, path, "other"); after != before {
		t.Error("evaluating the subgroups changed the user's tables")
	}
	// Small cells publish no counts either.
	db := rawDB(t, path)
	var n any
	if err := db.QueryRow(`SELECT n FROM crff_gate WHERE subgroup = 'tiny'`).Scan(&n); err != nil || n != nil {
		t.Errorf("the small cell's n is %v (%v), want NULL", n, err)
	}
	// Rescoring after a deletion recomputes them.
	execSQL(t, path, `DELETE FROM records WHERE age >= 65 AND sex = 1`)
	if _, err := s.PruneScores(ctx, "run-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateLocalATE(ctx, "run-1"); err != nil {
		t.Fatal(err)
	}
	again, _ := s.ReadGATE(ctx)
	for _, g := range again {
		if g.Subgroup == "old" {
			if g.N != byName["old_men"].N {
				t.Errorf("after deleting the old women, the old are %d rows, want the old men's %d", g.N, byName["old_men"].N)
			}
		}
	}
}

// TestGATEOwnSubgroupTable: a crff_subgroup a user created with other
// columns makes the run's publication fail with an error naming the
// columns it needs, not a crash.
func TestGATEOwnSubgroupTable(t *testing.T) {
	ctx := context.Background()
	path, s, _, _, _, _, _ := gateSite(t, 50)
	execSQL(t, path, `DROP TABLE crff_subgroup; CREATE TABLE crff_subgroup (label TEXT, rule TEXT)`)
	_, err := s.UpdateLocalATE(ctx, "run-1")
	if err == nil || !strings.Contains(err.Error(), "crff_subgroup must have the columns name and predicate") {
		t.Errorf("err %v", err)
	}
}

// TestSubgroupPredicate: a site whose policy names federated subgroups
// approves each with the predicate its crff_subgroup holds under the
// name; a name it holds none under is not approved.
func TestSubgroupPredicate(t *testing.T) {
	ctx := context.Background()
	path, s, _, _, _, _, _ := gateSite(t, 50)
	execSQL(t, path, `INSERT INTO crff_subgroup VALUES ('older', 'age >= 65'), ('women', 'sex = 1')`)
	for _, c := range []struct {
		name, want string
		ok         bool
	}{{"older", "age >= 65", true}, {"women", "sex = 1", true}, {"Older", "", false}, {"", "", false}} {
		got, ok, err := s.SubgroupPredicate(ctx, c.name)
		if err != nil || got != c.want || ok != c.ok {
			t.Errorf("%q: %q, %v, %v; want %q, %v", c.name, got, ok, err, c.want, c.ok)
		}
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFederatedSubgroups is issue 34's pooling acceptance: three site
// daemons over grpc, two that allow any of the coordinator's subgroups and
// one that names one of them, approved in its own crff_subgroup. Every
// site's crff_gate holds each subgroup's global effect, equal to 1e-9 to
// the stratified formula on the sites' own ψ in crff_cate, and names the
// sites it covers; a site that is one of only two covered gets it
// withheld, since it could subtract its own sums and single out the
// other's.
func TestFederatedSubgroups(t *testing.T) {
	const sites, rows = 3, 150
	dir := sandbox(t, sites, rows, "grpc")
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "coordinator:\n", `coordinator:
  subgroups:
    - {name: x1 set, predicate: x1 = 1}
    - {name: x2 unset, predicate: "x2 = 0 AND (x3 = 1 OR x4 = 1)"}
    - {name: nobody, predicate: x1 = 7}
`)
	policy := []string{"allow", "allow", "[x1 set]"}
	for k := 1; k <= sites; k++ {
		editFile(t, filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "  on_invalid: refuse\n", "  on_invalid: refuse\n  subgroups: "+policy[k-1]+"\n")
	}
	// site3 approves "x1 set" with the coordinator's predicate.
	own := openDB(t, filepath.Join(dir, "site3.sqlite"))
	if _, err := own.Exec(`CREATE TABLE IF NOT EXISTS crff_subgroup (name TEXT PRIMARY KEY, predicate TEXT NOT NULL);
		INSERT INTO crff_subgroup VALUES ('x1 set', 'x1 = 1')`); err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	runFederation(t, dir, sites, true)
	preds := map[string]string{"x1 set": "x1 = 1", "x2 unset": "x2 = 0 AND (x3 = 1 OR x4 = 1)"}
	covers := map[string][]string{"x1 set": {"site1", "site2", "site3"}, "x2 unset": {"site1", "site2"}}
	for name, pred := range preds {
		// The stratified formula on each covered site's own ψ.
		var within, sum float64
		var n int
		for _, site := range covers[name] {
			db := openDB(t, filepath.Join(dir, site+".sqlite"))
			var k int
			var s, ss float64
			if err := db.QueryRow(`SELECT count(*), total(c.psi), total(c.psi * c.psi) FROM records r JOIN crff_cate c ON c.row_id = r.id
				WHERE c.psi IS NOT NULL AND (`+pred+`)`).Scan(&k, &s, &ss); err != nil {
				t.Fatal(err)
			}
			within += ss - s*s/float64(k)
			sum += s
			n += k
		}
		mean, se := sum/float64(n), math.Sqrt(within/(float64(n)*float64(n-len(covers[name]))))
		for k := 1; k <= sites; k++ {
			db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
			if c := covers[name]; len(c) == 2 && slices.Contains(c, fmt.Sprintf("site%d", k)) {
				var reason string
				if err := db.QueryRow(`SELECT reason FROM crff_gate WHERE scope = 'global' AND subgroup = ? AND estimate IS NULL`, name).Scan(&reason); err != nil ||
					!strings.HasPrefix(reason, "withheld") {
					t.Errorf("site%d: %s: reason %q (%v), want it withheld", k, name, reason, err)
				}
				continue
			}
			var est, gse float64
			var count int
			var js string
			if err := db.QueryRow(`SELECT estimate, se, n, sites FROM crff_gate WHERE scope = 'global' AND subgroup = ?`, name).Scan(&est, &gse, &count, &js); err != nil {
				t.Fatalf("site%d: %s: %v", k, name, err)
			}
			var named []string
			if err := json.Unmarshal([]byte(js), &named); err != nil {
				t.Fatal(err)
			}
			if math.Abs(est-mean) > 1e-9 || math.Abs(gse-se) > 1e-9 || count != n || !slices.Equal(named, covers[name]) {
				t.Errorf("site%d: %s: %v ± %v over %d rows of %v; the stratified formula gives %v ± %v over %d of %v", k, name, est, gse, count, named, mean, se, n, covers[name])
			}
			if k == 1 {
				t.Logf("%s: global %.4f ± %.4f over %d rows of %v", name, est, gse, count, named)
			}
		}
	}
	// A subgroup no site can evaluate has a reason, and no figures.
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	var reason string
	if err := db.QueryRow(`SELECT reason FROM crff_gate WHERE scope = 'global' AND subgroup = 'nobody' AND estimate IS NULL`).Scan(&reason); err != nil || reason == "" {
		t.Errorf("the subgroup no site evaluated: reason %q (%v)", reason, err)
	}
}

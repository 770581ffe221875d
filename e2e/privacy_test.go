package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivateFederation runs three sites, each differentially private with
// a budget of its own, over grpc and over spool: the run completes, and
// each site's crff_privacy shows one run, spending its run ε within 1%
// (the noise is calibrated to it), at its δ, with the rest of its budget
// remaining.
func TestPrivateFederation(t *testing.T) {
	const sites, rows = 3, 120
	budgets := []struct{ eps, run, delta float64 }{{2, 0, 1e-5}, {8, 4, 1e-5}, {16, 1, 1e-6}}
	for _, tr := range []string{"grpc", "spool"} {
		t.Run(tr, func(t *testing.T) {
			dir := sandbox(t, sites, rows, tr)
			coord := filepath.Join(dir, "coordinator.yaml")
			b, err := os.ReadFile(coord)
			if err != nil {
				t.Fatal(err)
			}
			// A private site refuses model selection, whose statistics are
			// not private.
			s := strings.Replace(string(b), "  samples: 20\n", "  samples: 20\n  estimator: latent\n", 1)
			if err := os.WriteFile(coord, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			for k, bg := range budgets {
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("site%d.yaml", k+1)), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = fmt.Fprintf(f, "privacy:\n  epsilon: %g\n  run_epsilon: %g\n  delta: %g\n", bg.eps, bg.run, bg.delta)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			runFederation(t, dir, sites, tr == "grpc")
			run := checkSiteResults(t, dir, sites)
			for k, bg := range budgets {
				db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k+1)))
				var got string
				var eps, delta, spent, budget, remaining float64
				var charges int
				if err := db.QueryRow(`SELECT COUNT(*) FROM crff_privacy`).Scan(&charges); err != nil || charges != 1 {
					t.Fatalf("site%d: %d rows in crff_privacy (%v), want 1", k+1, charges, err)
				}
				if err := db.QueryRow(`SELECT run, epsilon, delta, epsilon_spent, epsilon_budget, epsilon_remaining FROM crff_privacy`).
					Scan(&got, &eps, &delta, &spent, &budget, &remaining); err != nil {
					t.Fatalf("site%d: crff_privacy: %v", k+1, err)
				}
				want := bg.run
				if want == 0 {
					want = bg.eps
				}
				if got != run || !(eps <= want && eps > 0.99*want) || delta != bg.delta || budget != bg.eps || !(spent <= want && spent > 0.99*want) ||
					math.Abs(remaining-(bg.eps-spent)) > 1e-9 {
					t.Errorf("site%d: crff_privacy run %s ε %v δ %v spent %v budget %v remaining %v; want run %s, ε %v, δ %v, budget %v",
						k+1, got, eps, delta, spent, budget, remaining, run, want, bg.delta, bg.eps)
				}
				t.Logf("site%d: spent ε %.4f of %g (δ %g), %.4f remaining", k+1, spent, budget, delta, remaining)
				// Every ATE of a private site is marked: its intervals do
				// not cover the noise.
				var rows, private int
				if err := db.QueryRow(`SELECT count(*), total(private) FROM crff_ate`).Scan(&rows, &private); err != nil || rows == 0 || private != rows {
					t.Errorf("site%d: %v of %d crff_ate rows marked private (%v), want all", k+1, private, rows, err)
				}
				db.Close()
			}
		})
	}
}

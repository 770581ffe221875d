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
// each site's crff_privacy shows the run's charges, one per model's
// training rounds and one per aggregate released with noise (the hello's
// moments and the ATE's sums), spending its run ε within 1% (the noise is
// calibrated to it), at its δ, with the rest of its budget remaining,
// under the add/remove relation with the row count named as exact. Every
// crff_ate row is marked private; the global AIPW row's se includes the
// noise of the sites' sums (noise_se > 0), the local rows are exact. A
// private site without public bounds for its continuous columns refuses
// to start, naming them.
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
				file := filepath.Join(dir, fmt.Sprintf("site%d.yaml", k+1))
				f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = fmt.Fprintf(f, "privacy:\n  epsilon: %g\n  run_epsilon: %g\n  delta: %g\n", bg.eps, bg.run, bg.delta)
				if k == 0 {
					// Without bounds the site refuses to start.
					if cerr := f.Close(); cerr != nil {
						t.Fatal(cerr)
					}
					r := crffd(t, nil, "site", "--config", file, "--once")
					if r.code != 2 || !strings.Contains(r.stderr, "no public bound (privacy.bounds) for x30, the outcome") {
						t.Errorf("site1 without bounds: exit %d, want 2 naming x30 and the outcome:\n%s", r.code, r.stderr)
					}
					if f, err = os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0); err != nil {
						t.Fatal(err)
					}
				}
				if err == nil {
					_, err = fmt.Fprintf(f, "  bounds:\n    x30: [0, 1]\n    y: [-5, 25]\n")
				}
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
				rows, err := db.Query(`SELECT run, step, epsilon, delta, epsilon_spent, epsilon_budget, epsilon_remaining, relation, exact FROM crff_privacy`)
				if err != nil {
					t.Fatalf("site%d: crff_privacy: %v", k+1, err)
				}
				var steps []string
				var got, step, relation, exact string
				var eps, delta, spent, budget, remaining float64
				for rows.Next() {
					if err := rows.Scan(&got, &step, &eps, &delta, &spent, &budget, &remaining, &relation, &exact); err != nil {
						t.Fatalf("site%d: crff_privacy: %v", k+1, err)
					}
					steps = append(steps, step)
					if got != run || relation != "add/remove, row count public" || exact != "row_count" || !(eps > 0 && eps <= spent) {
						t.Errorf("site%d: crff_privacy step %s of run %s: ε %v of %v spent, relation %q, exact %q", k+1, step, got, eps, spent, relation, exact)
					}
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()
				if want := []string{"training propensity", "training outcome", "training latent", "moments", "ate"}; strings.Join(steps, ",") != strings.Join(want, ",") {
					t.Errorf("site%d: crff_privacy steps %q, want %q", k+1, steps, want)
				}
				want := bg.run
				if want == 0 {
					want = bg.eps
				}
				if delta != bg.delta || budget != bg.eps || !(spent <= want && spent > 0.99*want) || math.Abs(remaining-(bg.eps-spent)) > 1e-9 {
					t.Errorf("site%d: crff_privacy δ %v spent %v budget %v remaining %v; want spent just under %v, δ %v, budget %v",
						k+1, delta, spent, budget, remaining, want, bg.delta, bg.eps)
				}
				t.Logf("site%d: spent ε %.4f of %g (δ %g), %.4f remaining", k+1, spent, budget, delta, remaining)
				// Every ATE of a private site is marked; the global AIPW
				// interval includes the noise of the sites' sums, the local
				// ones are the site's exact sums.
				var ates, private int
				if err := db.QueryRow(`SELECT count(*), total(private) FROM crff_ate`).Scan(&ates, &private); err != nil || ates == 0 || private != ates {
					t.Errorf("site%d: %v of %d crff_ate rows marked private (%v), want all", k+1, private, ates, err)
				}
				var globalNoise, localNoise, se float64
				if err := db.QueryRow(`SELECT noise_se, se FROM crff_ate WHERE scope = 'global' AND estimator = 'aipw'`).Scan(&globalNoise, &se); err != nil ||
					!(globalNoise > 0 && globalNoise < se) {
					t.Errorf("site%d: global AIPW noise se %v of se %v (%v), want a positive part", k+1, globalNoise, se, err)
				}
				if err := db.QueryRow(`SELECT total(noise_se) FROM crff_ate WHERE scope = 'local'`).Scan(&localNoise); err != nil || localNoise != 0 {
					t.Errorf("site%d: local noise se %v (%v), want 0", k+1, localNoise, err)
				}
				db.Close()
			}
		})
	}
}

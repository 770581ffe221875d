package e2e

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
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
			// No model selection: this test counts the training charges
			// alone (TestPrivateFederationDefaults selects a model).
			s := strings.Replace(string(b), "  samples: 20\n", "  samples: 20\n  estimator: latent\n", 1)
			if err := os.WriteFile(coord, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			for k, bg := range budgets {
				file := filepath.Join(dir, fmt.Sprintf("site%d.yaml", k+1))
				settings := fmt.Sprintf("  epsilon: %g\n  run_epsilon: %g\n  delta: %g\n", bg.eps, bg.run, bg.delta)
				if k == 0 {
					// Without the bounds crffd simulate wrote, the site
					// refuses to start.
					b, err := os.ReadFile(file)
					if err != nil {
						t.Fatal(err)
					}
					unbounded := regexp.MustCompile(`(?m)^  bounds:\n(    .*\n)*`).ReplaceAll(b, nil)
					if bytes.Equal(unbounded, b) {
						t.Fatalf("crffd simulate wrote no bounds:\n%s", b)
					}
					unbounded = bytes.Replace(unbounded, []byte("privacy:\n"), []byte("privacy:\n"+settings), 1)
					if err := os.WriteFile(file, unbounded, 0o644); err != nil {
						t.Fatal(err)
					}
					r := crffd(t, nil, "site", "--config", file, "--once")
					if r.code != 2 || !strings.Contains(r.stderr, "no public bound (privacy.bounds) for") || !strings.Contains(r.stderr, "the outcome") {
						t.Errorf("site1 without bounds: exit %d, want 2 naming the outcome:\n%s", r.code, r.stderr)
					}
					if err := os.WriteFile(file, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				setPrivacy(t, file, settings)
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
				// No nuisance step: sites this small take their DP-trained
				// models' nuisances (federation.NuisanceRowsPerNoise).
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

// TestPrivateFederationDefaults is issue 31's acceptance: three sites of
// crffd simulate --federation with privacy.epsilon: 4 at every site and
// the coordinator's defaults (model.estimator auto: model selection)
// complete a run over grpc and over spool. Each site's crff_privacy lists
// every charge, the three models' training rounds and model selection's
// noised sums, spending at most ε = 4; crff_model_selection shows the
// chosen estimator. (The sandbox shrinks the model, as every federation
// test's does, to keep the test short.)
func TestPrivateFederationDefaults(t *testing.T) {
	const sites, rows = 3, 200
	for _, tr := range []string{"grpc", "spool"} {
		t.Run(tr, func(t *testing.T) {
			dir := sandbox(t, sites, rows, tr)
			// Only the budget: crffd simulate wrote the design's public
			// bounds, and the coordinator keeps every default.
			for k := 1; k <= sites; k++ {
				setPrivacy(t, filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "  epsilon: 4\n")
			}
			runFederation(t, dir, sites, tr == "grpc")
			run := checkSiteResults(t, dir, sites)
			want := []string{"training propensity", "training outcome", "training latent", "moments", "ate", "selection"}
			for k := 1; k <= sites; k++ {
				db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
				rs, err := db.Query(`SELECT run, step, epsilon, epsilon_spent, epsilon_budget, mechanisms, sampling_rate, noise_multiplier, relation, exact FROM crff_privacy`)
				if err != nil {
					t.Fatalf("site%d: crff_privacy: %v", k, err)
				}
				var steps []string
				var spent float64
				for rs.Next() {
					var got, step, relation, exact string
					var eps, budget, q, noise float64
					var mech int
					if err := rs.Scan(&got, &step, &eps, &spent, &budget, &mech, &q, &noise, &relation, &exact); err != nil {
						t.Fatalf("site%d: crff_privacy: %v", k, err)
					}
					steps = append(steps, step)
					t.Logf("site%d crff_privacy: %-20s ε %.4f, spent %.4f of %g, %d mechanisms at q %g, noise %.3f, %s, exact %s", k, step, eps, spent, budget, mech, q, noise, relation, exact)
					if got != run || budget != 4 || !(eps > 0) || !(noise > 0) || exact != "row_count" {
						t.Errorf("site%d: crff_privacy %s of run %s: ε %v, budget %v, noise %v, exact %q", k, step, got, eps, budget, noise, exact)
					}
				}
				if err := rs.Err(); err != nil {
					t.Fatal(err)
				}
				rs.Close()
				if strings.Join(steps, ",") != strings.Join(want, ",") {
					t.Errorf("site%d: crff_privacy steps %q, want %q", k, steps, want)
				}
				if !(spent > 0 && spent <= 4*(1+1e-9)) {
					t.Errorf("site%d: spent ε = %v, want at most 4", k, spent)
				}
				var chosen string
				var cands int
				if err := db.QueryRow(`SELECT (SELECT candidate FROM crff_model_selection WHERE chosen = 1 AND run = ?), (SELECT count(*) FROM crff_model_selection WHERE run = ?)`, run, run).Scan(&chosen, &cands); err != nil || chosen == "" {
					t.Errorf("site%d: no chosen estimator in crff_model_selection (%v)", k, err)
				}
				t.Logf("site%d: chose %s of %d candidates", k, chosen, cands)
				db.Close()
			}
		})
	}
}

// setPrivacy adds settings (indented lines) to the privacy section crffd
// simulate wrote in the site configuration at path.
func setPrivacy(t *testing.T, path, settings string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("privacy:\n")) {
		t.Fatalf("%s has no privacy section:\n%s", path, b)
	}
	b = bytes.Replace(b, []byte("privacy:\n"), []byte("privacy:\n"+settings), 1)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunGoesOnWithoutFaultySites is coordinator.min_sites: with three
// sites and min_sites 2, a run that site3 refuses (its arms are below its
// min_arm_rows), or in which it stays silent (never started), is recorded
// as such and run again at once with site1 and site2 alone, and the
// coordinator started with --once leaves with status 0. The global ATE
// and the transfer factors then cover the two sites, and the views say so:
// crff_coordinator_runs.sites at the coordinator, crff_ate.sites and the
// peers of crff_transfer at the sites. With min_sites 3 (the default, every
// site) the refusal ends the run, as before.
func TestRunGoesOnWithoutFaultySites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		minSites int
		silent   bool // site3 never starts, instead of refusing
		reason   string
		wantExit int
	}{
		{"refusal", 2, false, "site3 refused the run", 0},
		{"silence", 2, true, "[site3] did not answer", 0},
		{"refusal with every site required", 3, false, "site3 refused the run", exitRunFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const sites = 3
			dir := sandbox(t, sites, 60, "grpc")
			coordinator := fmt.Sprintf("coordinator:\n  min_sites: %d\n", tc.minSites)
			editFile(t, filepath.Join(dir, "coordinator.yaml"), "coordinator:\n", coordinator, "round_timeout: 30s", "round_timeout: 3s", "retries: 3", "retries: 1")
			editFile(t, filepath.Join(dir, "site3.yaml"), "federation:\n", "federation:\n  min_arm_rows: 1000\n")
			n := sites
			if tc.silent {
				n = 2
			}
			for k := 1; k <= n; k++ {
				startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)))
			}
			coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
			if code := coord.wait(t, 3*time.Minute); code != tc.wantExit {
				t.Fatalf("coordinator exited %d, want %d\nstderr:\n%s", code, tc.wantExit, coord.err.String())
			}
			state := openDB(t, filepath.Join(dir, "coordinator.sqlite"))
			var first, reason string
			if err := state.QueryRow(`SELECT status, reason FROM crff_coordinator_run_log ORDER BY ended_at LIMIT 1`).Scan(&first, &reason); err != nil {
				t.Fatal(err)
			}
			if first == "completed" || !strings.Contains(reason, tc.reason) {
				t.Errorf("first run %s: %q, want a reason saying %q", first, reason, tc.reason)
			}
			completed := queryFloat(t, state, `SELECT count(*) FROM crff_coordinator_run_log WHERE status = 'completed'`)
			if tc.wantExit != 0 {
				if completed != 0 {
					t.Errorf("%v runs completed without site3, want none with min_sites %d", completed, tc.minSites)
				}
				return
			}
			if completed != 1 {
				t.Fatalf("%v completed runs, want 1", completed)
			}
			var covered string
			var rows float64
			if err := state.QueryRow(`SELECT sites, rows FROM crff_coordinator_runs`).Scan(&covered, &rows); err != nil {
				t.Fatal(err)
			}
			if covered != `["site1","site2"]` {
				t.Errorf("crff_coordinator_runs.sites %s, want site1 and site2", covered)
			}
			var total float64
			for k := 1; k <= 2; k++ {
				db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
				// The site publishes its results before it confirms the run.
				deadline := time.Now().Add(30 * time.Second)
				for queryFloat(t, db, `SELECT count(*) FROM crff_ate WHERE scope = 'global'`) == 0 && time.Now().Before(deadline) {
					time.Sleep(100 * time.Millisecond)
				}
				var js string
				var n float64
				if err := db.QueryRow(`SELECT sites, n FROM crff_ate WHERE scope = 'global' AND estimator = 'aipw'`).Scan(&js, &n); err != nil {
					t.Fatalf("site%d: %v", k, err)
				}
				var got []string
				if err := json.Unmarshal([]byte(js), &got); err != nil || !slices.Equal(got, []string{"site1", "site2"}) {
					t.Errorf("site%d: crff_ate.sites %s, want site1 and site2", k, js)
				}
				if n != rows {
					t.Errorf("site%d: global ATE over %v rows, the coordinator's over %v", k, n, rows)
				}
				total += queryFloat(t, db, `SELECT n FROM crff_ate WHERE scope = 'local' AND estimator = 'aipw'`)
				peer := fmt.Sprintf("site%d", 3-k)
				if got := queryFloat(t, db, fmt.Sprintf(`SELECT count(*) FROM crff_transfer WHERE peer <> '%s'`, peer)); got != 0 {
					t.Errorf("site%d: %v transfer factors to peers other than %s", k, got, peer)
				}
			}
			if total != rows {
				t.Errorf("the two sites' local ATEs cover %v rows, the global %v", total, rows)
			}
		})
	}
}

// TestCoordinatorConfigurationErrors: a coordinator whose configuration
// cannot run stops at once with exit status 2 (exitConfig) and an error
// naming the key.
func TestCoordinatorConfigurationErrors(t *testing.T) {
	for _, tc := range []struct {
		from, to, want string
	}{
		{"coordinator:\n", "coordinator:\n  min_sites: 3\n", "coordinator.min_sites 3"},
		{"coordinator:\n", "coordinator:\n  min_sites: -1\n", "coordinator.min_sites -1"},
		{"retries: 3", "retries: -1", "federation.retries -1"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			dir := sandbox(t, 2, 40, "grpc")
			cfg := filepath.Join(dir, "coordinator.yaml")
			editFile(t, cfg, tc.from, tc.to)
			d := startDaemon(t, "coordinator", "coordinator", "--config", cfg, "--once")
			if code := d.wait(t, time.Minute); code != 2 || !strings.Contains(d.err.String(), tc.want) {
				t.Errorf("exit %d, want 2, and an error saying %q:\n%s", code, tc.want, d.err.String())
			}
		})
	}
}

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFederatedSiteScoresNewRowsBetweenRuns checks that a long-lived
// federated site scores rows added to its table after a run with that
// run's model, without waiting for the next run.
func TestFederatedSiteScoresNewRowsBetweenRuns(t *testing.T) {
	const sites, rows = 2, 80
	dir := sandbox(t, sites, rows, "spool")
	for k := 1; k <= sites; k++ {
		editFile(t, filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "  on_invalid: refuse\n", "  on_invalid: refuse\n  poll_interval: 200ms\n")
	}
	for k := 1; k <= sites; k++ {
		startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)))
	}
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	coord.mustSucceed(t, 3*time.Minute)

	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	deadline := time.Now().Add(time.Minute)
	for queryFloat(t, db, `SELECT count(*) FROM crff_ate WHERE scope = 'global'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("site1 did not publish the run within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_cate`); n != rows {
		t.Fatalf("crff_cate has %v rows after the run, want %d", n, rows)
	}
	if _, err := db.Exec(`INSERT INTO records SELECT id + 1000, w, y, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10,
		x11, x12, x13, x14, x15, x16, x17, x18, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29, x30
		FROM records WHERE id <= 5`); err != nil {
		t.Fatal(err)
	}
	inserted := time.Now()
	for queryFloat(t, db, `SELECT count(*) FROM crff_cate_records WHERE cate IS NOT NULL`) != rows+5 {
		if time.Since(inserted) > 20*time.Second {
			t.Fatalf("new rows not scored within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("5 new rows scored %.2f s after insertion", time.Since(inserted).Seconds())
	// The new rows were scored with the run's model, not a model of their own.
	if n := queryFloat(t, db, `SELECT count(DISTINCT run) FROM crff_cate`); n != 1 {
		t.Errorf("crff_cate spans %v runs, want 1", n)
	}
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_cate WHERE row_id > 1000 AND NOT (lower <= cate AND cate <= upper)`); n != 0 {
		t.Errorf("%v new rows with cate outside [lower, upper]", n)
	}
}

// exitRunFailed is crffd's exit status for a run that failed or was
// refused under --once (docs/operations.md's table).
const exitRunFailed = 5

// TestFederatedSiteRefusesARunOneRowAfterItsLast runs two runs with
// long-lived sites and adds one row to site1's table in between. A site
// reads its table when a run begins, so the second run's sums would differ
// from the first's by that row alone: site1 refuses it before it sends
// anything computed from its rows, and the coordinator stops at once,
// naming site1 and the reason, instead of waiting for a silent site. The
// coordinator, started with --once, exits 5; site1 records the refusal in
// crff_run_log and keeps serving.
func TestFederatedSiteRefusesARunOneRowAfterItsLast(t *testing.T) {
	const sites, rows = 2, 80
	dir := sandbox(t, sites, rows, "spool")
	daemons := make([]*daemon, sites)
	for k := 1; k <= sites; k++ {
		daemons[k-1] = startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)))
	}
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	coordinator := func(name string) *daemon {
		return startDaemon(t, name, "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	}
	coordinator("coordinator1").mustSucceed(t, 3*time.Minute)
	if n := queryFloat(t, db, `SELECT count(DISTINCT run) FROM crff_run_rows`); n != 1 {
		t.Fatalf("crff_run_rows holds %v runs after the first, want 1", n)
	}
	if _, err := db.Exec(`INSERT INTO records SELECT id + 1000, w, y, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10,
		x11, x12, x13, x14, x15, x16, x17, x18, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29, x30
		FROM records WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	second := coordinator("coordinator2")
	if code := second.wait(t, 2*time.Minute); code != exitRunFailed {
		t.Fatalf("the second coordinator exited %d, want %d; stderr:\n%s", code, exitRunFailed, second.err.String())
	}
	took := time.Since(started)
	for _, want := range []string{"site1 refused the run", "its rows differ too little from an earlier run's"} {
		if !strings.Contains(second.err.String(), want) {
			t.Errorf("the coordinator's error lacks %q", want)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for queryFloat(t, db, `SELECT count(*) FROM crff_run_log WHERE status = 'refused' AND reason LIKE '%by 1 (added 1, deleted 0, edited 0)%'`) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("site1 recorded no refusal saying why; its log:\n%s", daemons[0].err.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-daemons[0].done:
		t.Errorf("site1 exited %d after refusing the run; it must keep serving", daemons[0].code)
	default:
	}
	if n := queryFloat(t, db, `SELECT count(DISTINCT run) FROM crff_run_rows`); n != 1 {
		t.Errorf("crff_run_rows holds %v runs after the refused one, want 1", n)
	}
	t.Logf("the refused run ended %.1f s after its coordinator started", took.Seconds())
}

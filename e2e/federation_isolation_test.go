package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFederationSurvivesRefusedRun is issue 15's failure isolation: with
// long-lived daemons and coordinator.run_every, a site that gains 3 rows
// refuses the next run by the row-difference rule (fewer than
// min_arm_rows changed). That used to stop the coordinator and two of the
// three sites. Now the refusal is logged and recorded at both ends
// (crff_run_log, crff_coordinator_run_log), every daemon keeps serving,
// the coordinator tries again after coordinator.retry_after, and once the
// site has 5 new rows the next run completes.
func TestFederationSurvivesRefusedRun(t *testing.T) {
	const sites = 3
	dir := sandbox(t, sites, 120, "grpc")
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "coordinator:\n", "coordinator:\n  run_every: 2s\n  retry_after: 1s\n")
	var ds []*daemon
	for k := 1; k <= sites; k++ {
		editFile(t, filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "  on_invalid: refuse\n", "  on_invalid: refuse\n  poll_interval: 200ms\n")
		ds = append(ds, startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k))))
	}
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"))
	site2 := openDB(t, filepath.Join(dir, "site2.sqlite"))
	logged := func(db *sql.DB, status string) float64 {
		return queryFloat(t, db, fmt.Sprintf(`SELECT count(*) FROM crff_run_log WHERE status = '%s'`, status))
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !ok() {
			for _, d := range append(ds, coord) {
				select {
				case <-d.done:
					t.Fatalf("%s exited %d while waiting for %s\nstderr:\n%s", d.name, d.code, what, d.err.String())
				default:
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 2 minutes\ncoordinator:\n%s", what, coord.err.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("first completed run at site2", func() bool { return logged(site2, "completed") >= 1 })

	add := func(from, to int) {
		t.Helper()
		if _, err := site2.Exec(`INSERT INTO records SELECT id + 1000, w, y, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10,
			x11, x12, x13, x14, x15, x16, x17, x18, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29, x30
			FROM records WHERE id BETWEEN ? AND ?`, from, to); err != nil {
			t.Fatal(err)
		}
	}
	add(1, 3)
	waitFor("refused run at site2", func() bool { return logged(site2, "refused") >= 1 })
	var reason string
	if err := site2.QueryRow(`SELECT reason FROM crff_run_log WHERE status = 'refused'`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "its rows differ from those of run") || !strings.Contains(reason, "by 3 (added 3") {
		t.Errorf("site2 recorded the refusal as %q", reason)
	}
	state := openDB(t, filepath.Join(dir, "coordinator.sqlite"))
	waitFor("refused run at the coordinator", func() bool {
		return queryFloat(t, state, `SELECT count(*) FROM crff_coordinator_run_log WHERE status = 'refused' AND reason LIKE '%site2 refused the run%'`) >= 1
	})
	completedBefore := logged(site2, "completed")

	add(4, 5)
	waitFor("a completed run after the refusal", func() bool { return logged(site2, "completed") > completedBefore })
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		var check string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
			t.Errorf("site%d: integrity_check %q %v", k, check, err)
		}
	}
	if n := queryFloat(t, site2, `SELECT count(*) FROM crff_cate`); n != 125 {
		t.Errorf("site2 has %v CATEs for 125 rows", n)
	}
	// Every daemon is still serving; stopped, each exits cleanly.
	for _, d := range append(ds, coord) {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range append(ds, coord) {
		select {
		case <-d.done:
		case <-ctx.Done():
			t.Fatalf("%s did not stop on SIGTERM", d.name)
		}
		if d.code != 0 && d.code != 130 {
			t.Errorf("%s exited %d on SIGTERM\nstderr:\n%s", d.name, d.code, d.err.String())
		}
	}
}

// TestOnceExitStatus: with --once, a refused run ends the refusing site and
// the coordinator with exit status 5 (documented in docs/operations.md), and each
// records why. (The other site is told the run is aborted only if the
// coordinator's abort reaches it before the coordinator's transport ends;
// it then waits for a next run, as a daemon does.)
func TestOnceExitStatus(t *testing.T) {
	const sites = 2
	dir := sandbox(t, sites, 60, "grpc")
	editFile(t, filepath.Join(dir, "site2.yaml"), "federation:\n", "federation:\n  min_arm_rows: 1000\n")
	var ds []*daemon
	for k := 1; k <= sites; k++ {
		ds = append(ds, startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once"))
	}
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	for _, d := range []*daemon{ds[1], coord} {
		if code := d.wait(t, 2*time.Minute); code != exitRunFailed {
			t.Errorf("%s exited %d, want %d\nstderr:\n%s", d.name, code, exitRunFailed, d.err.String())
		}
	}
	db := openDB(t, filepath.Join(dir, "site2.sqlite"))
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_run_log WHERE status = 'refused' AND reason LIKE '%too few rows%'`); n != 1 {
		t.Errorf("site2: %v refused runs logged, want 1", n)
	}
	state := openDB(t, filepath.Join(dir, "coordinator.sqlite"))
	if n := queryFloat(t, state, `SELECT count(*) FROM crff_coordinator_run_log WHERE status = 'refused'`); n != 1 {
		t.Errorf("coordinator: %v refused runs logged, want 1", n)
	}
}

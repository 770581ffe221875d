package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFederationCoordinatorKilledResumes is issue 5's coordinator fault:
// SIGKILL of the coordinator at a random point of training, then a restart,
// finishes with the same model as the simulated federation (and so as an
// uninterrupted run), and no file is corrupted.
func TestFederationCoordinatorKilledResumes(t *testing.T) {
	const sites = 3
	dir := sandbox(t, sites, 100, "grpc")
	var ds []*daemon
	for k := 1; k <= sites; k++ {
		ds = append(ds, startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once"))
	}
	cfg := filepath.Join(dir, "coordinator.yaml")
	// Envelopes are logged at debug: the kill is timed by counting them.
	first := startDaemon(t, "coordinator", "coordinator", "--config", cfg, "--once", "--log-level", "debug")
	// About 12 envelope lines before training and 6 per round: kill
	// somewhere in rounds 4–24.
	killAt := 36 + rand.IntN(120)
	if !waitFor(2*time.Minute, func() bool { return strings.Count(first.err.String(), "msg=envelope") >= killAt }) {
		t.Fatalf("coordinator never reached %d envelopes:\n%s", killAt, first.err.String())
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 30*time.Second)
	t.Logf("coordinator killed after %d envelope log lines", killAt)
	var second *daemon
	for attempt := 0; ; attempt++ {
		second = startDaemon(t, "coordinator (restarted)", "coordinator", "--config", cfg, "--once")
		if !waitFor(5*time.Second, func() bool {
			s := second.err.String()
			return strings.Contains(s, "coordinator listening") || strings.Contains(s, "address already in use")
		}) || !strings.Contains(second.err.String(), "address already in use") || attempt == 10 {
			break
		}
		second.wait(t, 30*time.Second) // the killed transport still held the port
		time.Sleep(500 * time.Millisecond)
	}
	second.mustSucceed(t, 3*time.Minute)
	if !strings.Contains(second.err.String(), "resuming run from checkpoint") {
		t.Errorf("the restarted coordinator did not resume:\n%s", second.err.String())
	}
	for _, d := range ds {
		d.mustSucceed(t, time.Minute)
	}
	run := checkSiteResults(t, dir, sites)
	checkEquivalence(t, dir, sites, run)
	db := openDB(t, filepath.Join(dir, "coordinator.sqlite"))
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("coordinator.sqlite integrity_check %q %v", check, err)
	}
	if n := queryFloat(t, db, `SELECT COUNT(*) FROM crff_coordinator_runs WHERE run = '`+run+`'`); n != 1 {
		t.Errorf("coordinator recorded run %s %v times", run, n)
	}
}

// TestFederationSilentSiteIsNamed is issue 5's last fault: a site that never
// comes stops the run, after the retries, with an error naming it.
func TestFederationSilentSiteIsNamed(t *testing.T) {
	dir := sandbox(t, 2, 60, "grpc")
	cfg := filepath.Join(dir, "coordinator.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "round_timeout: 30s", "round_timeout: 1s", 1)
	s = strings.Replace(s, "retries: 3", "retries: 2", 1)
	if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	site := startDaemon(t, "site1", "site", "--config", filepath.Join(dir, "site1.yaml"), "--once")
	coord := startDaemon(t, "coordinator", "coordinator", "--config", cfg, "--once")
	if code := coord.wait(t, time.Minute); code == 0 {
		t.Fatalf("coordinator succeeded without site2:\n%s", coord.err.String())
	}
	msg := coord.err.String()
	if !strings.Contains(msg, "site silent: [site2] did not answer hello") || !strings.Contains(msg, "after 2 retries") {
		t.Errorf("coordinator's error does not name site2:\n%s", msg)
	}
	if code := site.wait(t, 30*time.Second); code == 0 {
		t.Errorf("site1 succeeded in an aborted run")
	} else if !strings.Contains(site.err.String(), "aborted run") {
		t.Errorf("site1's error:\n%s", site.err.String())
	}
}

// TestFederationHealthAndMetrics checks the coordinator's local HTTP port.
func TestFederationHealthAndMetrics(t *testing.T) {
	dir := sandbox(t, 2, 60, "grpc")
	cfg := filepath.Join(dir, "coordinator.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "metrics_address: "); ok {
			addr = v
		}
	}
	if addr == "" {
		t.Fatal("coordinator.yaml has no metrics_address")
	}
	// Without --once the coordinator stays up after its run, serving metrics.
	coord := startDaemon(t, "coordinator", "coordinator", "--config", cfg)
	for k := 1; k <= 2; k++ {
		d := startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once")
		defer d.mustSucceed(t, 2*time.Minute)
	}
	if !waitFor(2*time.Minute, func() bool { return strings.Contains(coord.err.String(), "run finished") }) {
		t.Fatalf("no run finished:\n%s", coord.err.String())
	}
	get := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		return string(b)
	}
	if h := get("/healthz"); !strings.Contains(h, `"status":"ok"`) {
		t.Errorf("/healthz: %s", h)
	}
	m := get("/metrics")
	for _, want := range []string{"crffd_rounds_total 30", "crffd_round_seconds_total ", "crffd_payload_bytes_sent_total ", "crffd_payload_bytes_received_total ", "crffd_certificate_days_left 89.9"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, m)
		}
	}
	t.Logf("metrics after one run:\n%s", m)
}

// TestFederationSiteKilledRejoins is issue 5's site fault: SIGKILL of one
// site daemon mid-run and a restart within the round timeout; the run
// finishes with the simulated federation's model and no file is corrupted.
func TestFederationSiteKilledRejoins(t *testing.T) {
	const sites = 3
	dir := sandbox(t, sites, 100, "grpc")
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "round_timeout: 30s", "round_timeout: 3s", "retries: 3", "retries: 10")
	siteArgs := func(k int) []string {
		return []string{"site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once"}
	}
	var ds []*daemon
	for k := 1; k <= sites; k++ {
		ds = append(ds, startDaemon(t, fmt.Sprintf("site%d", k), siteArgs(k)...))
	}
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once", "--log-level", "debug")
	killAt := 36 + rand.IntN(120)
	if !waitFor(2*time.Minute, func() bool { return strings.Count(coord.err.String(), "msg=envelope") >= killAt }) {
		t.Fatalf("coordinator never reached %d envelopes:\n%s", killAt, coord.err.String())
	}
	if err := ds[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	ds[1].wait(t, 30*time.Second)
	t.Logf("site2 killed after %d coordinator envelope log lines", killAt)
	ds[1] = startDaemon(t, "site2 (restarted)", siteArgs(2)...)
	coord.mustSucceed(t, 3*time.Minute)
	for _, d := range ds {
		d.mustSucceed(t, time.Minute)
	}
	if !strings.Contains(coord.err.String(), "site rejoins the run") {
		t.Errorf("site2 never rejoined:\n%s", coord.err.String())
	}
	run := checkSiteResults(t, dir, sites)
	checkEquivalence(t, dir, sites, run)
}

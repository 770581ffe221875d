package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/testbin"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// fedModel keeps federated e2e runs small: the figures are not about
// accuracy here.
const fedModel = `model:
  features: 20
  latent: 3
  rounds: 10
  samples: 20
`

// daemon is a crffd process of a test.
type daemon struct {
	name     string
	cmd      *exec.Cmd
	out, err *syncBuf
	done     chan struct{}
	code     int
}

// startDaemon starts crffd with args; it is stopped at the end of the test
// if still running.
func startDaemon(t *testing.T, name string, args ...string) *daemon {
	t.Helper()
	return startDaemonEnv(t, name, nil, args...)
}

// startDaemonEnv is startDaemon with extra environment variables.
func startDaemonEnv(t *testing.T, name string, env []string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, out: &syncBuf{}, err: &syncBuf{}, done: make(chan struct{})}
	d.cmd = exec.Command(filepath.Join(testbin.Build(t), "crffd"), args...)
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.err
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := d.cmd.Wait()
		d.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			d.code = ee.ExitCode()
		} else if err != nil {
			d.code = -1
		}
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(15 * time.Second):
				_ = d.cmd.Process.Kill()
				<-d.done
			}
		}
	})
	return d
}

// wait waits for the daemon to exit and returns its exit status.
func (d *daemon) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-d.done:
		return d.code
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s\nstderr:\n%s", d.name, timeout, d.err.String())
		return -1
	}
}

// mustSucceed waits for the daemon and fails the test unless it exits 0.
func (d *daemon) mustSucceed(t *testing.T, timeout time.Duration) {
	t.Helper()
	if code := d.wait(t, timeout); code != 0 {
		t.Fatalf("%s exited %d\nstdout:\n%s\nstderr:\n%s", d.name, code, d.out.String(), d.err.String())
	}
}

// sandbox writes a federation with crffd simulate --federation, made small
// and switched to the transport named, with every envelope captured (grpc)
// or archived (spool). x30 is made a continuous covariate so that a
// sentinel covariate value can be planted.
func sandbox(t *testing.T, sites, rows int, transportName string) string {
	t.Helper()
	dir := t.TempDir()
	crffd(t, nil, "simulate", "--sources", strconv.Itoa(sites), "--rows", strconv.Itoa(rows),
		"--format", "sqlite", "--federation", "--out", dir).mustSucceed(t)
	edit := func(file string, repl ...string) {
		p := filepath.Join(dir, file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for i := 0; i < len(repl); i += 2 {
			if !strings.Contains(s, repl[i]) {
				t.Fatalf("%s lacks %q", file, repl[i])
			}
			s = strings.Replace(s, repl[i], repl[i+1], 1)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr := func(name string) string {
		if transportName == "spool" {
			return "transport: spool\n  transport_options:\n    dir: spool\n    archive: \"true\"\n"
		}
		return "transport: grpc\n  transport_options:\n    capture: " + name + ".capture\n"
	}
	if transportName == "spool" {
		if err := os.Mkdir(filepath.Join(dir, "spool"), 0o770); err != nil {
			t.Fatal(err)
		}
	}
	edit("coordinator.yaml", "model:\n  features: 50\n  latent: 5\n  rounds: 100\n", fedModel,
		"round_timeout: 2m", "round_timeout: 30s", "transport: grpc\n", tr("coordinator"))
	for k := 1; k <= sites; k++ {
		name := fmt.Sprintf("site%d", k)
		edit(name+".yaml", "  on_invalid: refuse\n", "  on_invalid: refuse\n  continuous: [x30]\n", "transport: grpc\n", tr(name))
	}
	return dir
}

// sentinels are distinctive values planted in the rows of site k.
func sentinels(k int) (y, x []float64) {
	return []float64{13.579246801357913 + float64(k), 11.235813213455891 + float64(k)},
		[]float64{0.8642097531246801 + float64(k)/10, 0.3141592653897932 + float64(k)/10}
}

// plant writes the sentinels of site k into rows 1 and 2 of its records.
func plant(t *testing.T, dir string, k int) {
	t.Helper()
	db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
	y, x := sentinels(k)
	for i := range y {
		if _, err := db.Exec(`UPDATE records SET y = ?, x30 = ? WHERE id = ?`, y[i], x[i], i+1); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
}

// patterns returns the byte patterns of v that must never cross the wire:
// its float64 bits in both byte orders and its decimal text.
func patterns(v float64) [][]byte {
	var le, be [8]byte
	binary.LittleEndian.PutUint64(le[:], math.Float64bits(v))
	binary.BigEndian.PutUint64(be[:], math.Float64bits(v))
	return [][]byte{le[:], be[:], []byte(strconv.FormatFloat(v, 'g', -1, 64)), []byte(strconv.FormatFloat(v, 'f', 6, 64))}
}

// waitLogged waits until d has logged msg, the event a test orders the
// next daemon's start after; it fails the test if d exits first or takes
// longer than two minutes.
func waitLogged(t *testing.T, d *daemon, msg string) {
	t.Helper()
	exited := false
	if !waitFor(2*time.Minute, func() bool {
		select {
		case <-d.done:
			exited = true
		default:
		}
		return exited || strings.Contains(d.err.String(), msg)
	}) || !strings.Contains(d.err.String(), msg) {
		t.Fatalf("%s did not log %q (exited: %v)\nstderr:\n%s", d.name, msg, exited, d.err.String())
	}
}

// runFederation runs a coordinator and the sites of dir to completion,
// starting the sites first or last.
func runFederation(t *testing.T, dir string, sites int, sitesFirst bool) *daemon {
	t.Helper()
	var ds []*daemon
	startSites := func() {
		for k := 1; k <= sites; k++ {
			ds = append(ds, startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once"))
		}
	}
	if sitesFirst {
		startSites()
		for _, d := range ds {
			waitLogged(t, d, "site waiting for the coordinator")
		}
	}
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	if !sitesFirst {
		waitLogged(t, coord, "coordinator listening")
		startSites()
	}
	coord.mustSucceed(t, 3*time.Minute)
	for _, d := range ds {
		d.mustSucceed(t, time.Minute)
	}
	return coord
}

// checkSiteResults checks every site's CATEs and ATEs and returns the run.
func checkSiteResults(t *testing.T, dir string, sites int) string {
	t.Helper()
	var num, den, global, noiseSE, localRows, globalRows, clipped float64
	run := ""
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		if n, c := queryFloat(t, db, `SELECT COUNT(*) FROM records`), queryFloat(t, db, `SELECT COUNT(*) FROM crff_cate WHERE cate IS NOT NULL`); n != c {
			t.Errorf("site%d: %v CATEs for %v rows", k, c, n)
		}
		var ate, n float64
		var r string
		if err := db.QueryRow(`SELECT ate, n, run FROM crff_ate WHERE scope = 'local' AND estimator = 'aipw'`).Scan(&ate, &n, &r); err != nil {
			t.Fatalf("site%d local ATE: %v", k, err)
		}
		num += n * ate
		den += n
		// A private site releases its scores clipped to ±B, by default 8
		// pooled sds of y (federation.DefaultPsiClipSDs), and keeps its
		// exact local ATE: what the clipping moved is allowed for below.
		if queryFloat(t, db, `SELECT private FROM crff_ate WHERE scope = 'local' AND estimator = 'aipw'`) == 1 {
			clipped += math.Abs(queryFloat(t, db, `SELECT COALESCE(SUM(psi - MAX(-b, MIN(b, psi))), 0) FROM crff_cate,
				(SELECT 8 * json_extract(setup, '$.scaler.YSD') AS b FROM crff_run WHERE run = '`+r+`') WHERE psi IS NOT NULL`))
		}
		g := queryFloat(t, db, `SELECT ate FROM crff_ate WHERE scope = 'global' AND estimator = 'aipw'`)
		noiseSE = queryFloat(t, db, `SELECT noise_se FROM crff_ate WHERE scope = 'global' AND estimator = 'aipw'`)
		if k > 1 && (g != global || r != run) {
			t.Errorf("site%d: global ATE %v run %s, site1 has %v run %s", k, g, r, global, run)
		}
		global, run = g, r
		rows, err := db.Query(`SELECT DISTINCT kind FROM crff_audit`)
		if err != nil {
			t.Fatal(err)
		}
		kinds := 0
		for rows.Next() {
			var kind string
			if err := rows.Scan(&kind); err != nil {
				t.Fatal(err)
			}
			if _, err := wire.ParseKind(kind); err != nil {
				t.Errorf("site%d: crff_audit lists kind %q, not one of the kinds of docs/protocol.md", k, kind)
			}
			kinds++
		}
		rows.Close()
		if kinds < 6 {
			t.Errorf("site%d: crff_audit lists %d kinds", k, kinds)
		}
		// crff_balance: the local balance of the site's rows, and the global
		// one, the same at every site, over every site's rows.
		// A private site sends no balance sums, and then no site has a
		// global balance.
		localRows += queryFloat(t, db, `SELECT treated + control FROM crff_check WHERE scope = 'local'`)
		scopes := 2.0
		if queryFloat(t, db, `SELECT count(*) FROM crff_ate WHERE private = 1`) > 0 {
			scopes = 1
			if n := queryFloat(t, db, `SELECT count(*) FROM crff_check WHERE scope = 'global'`); n != 0 {
				t.Errorf("site%d: a global balance in a run with private sites", k)
			}
		} else {
			g2 := queryFloat(t, db, `SELECT treated + control FROM crff_check WHERE scope = 'global'`)
			if k > 1 && g2 != globalRows {
				t.Errorf("site%d: global balance over %v rows, site1's over %v", k, g2, globalRows)
			}
			globalRows = g2
		}
		if n, want := queryFloat(t, db, `SELECT count(*) FROM crff_balance`), scopes*queryFloat(t, db, `SELECT count(*) FROM crff_check_covariate WHERE scope = 'local'`); n != want || n == 0 {
			t.Errorf("site%d: crff_balance has %v rows, want %v (one per covariate and scope)", k, n, want)
		}
		var check string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
			t.Errorf("site%d: integrity_check %q %v", k, check, err)
		}
	}
	if globalRows != 0 && globalRows != localRows {
		t.Errorf("global balance over %v rows, the sites' local balances over %v", globalRows, localRows)
	}
	// Private sites send their sums with noise (and their scores clipped),
	// and keep their exact local ATEs: the global ATE is then within a few
	// noise standard errors, and what the clipping moved, of the mean of
	// the local ones.
	if want := num / den; math.Abs(global-want) > 1e-9*math.Max(1, math.Abs(want))+6*noiseSE+clipped/den {
		t.Errorf("global ATE %v, n-weighted mean of local ATEs %v, noise se %v, clipping %v", global, want, noiseSE, clipped/den)
	}
	return run
}

// scanCarried fails the test when any sentinel pattern occurs in the files
// under root whose names match keep.
func scanCarried(t *testing.T, root string, sites int, keep func(path string) bool, extra ...[]byte) int {
	t.Helper()
	var pats [][]byte
	for k := 1; k <= sites; k++ {
		y, x := sentinels(k)
		for _, v := range append(y, x...) {
			pats = append(pats, patterns(v)...)
		}
	}
	scanned := 0
	scan := func(name string, b []byte) {
		for _, p := range pats {
			if bytes.Contains(b, p) {
				t.Errorf("%s holds a sentinel pattern %q", name, p)
			}
		}
	}
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !keep(path) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned += len(b)
		scan(path, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range extra {
		scan(fmt.Sprintf("log %d", i), b)
	}
	return scanned
}

// TestFederationEndToEnd is issue 5's end-to-end and privacy acceptance:
// a coordinator and three site daemons, with the real kernel and transport
// plugins, on files from crffd simulate --federation, once over grpc (sites
// started first) and once over the spool (coordinator first). Sentinel
// covariate and outcome values planted in the rows never cross the wire.
func TestFederationEndToEnd(t *testing.T) {
	const sites, rows = 3, 120
	for _, tc := range []struct {
		transport  string
		sitesFirst bool
	}{{"grpc", true}, {"spool", false}} {
		t.Run(tc.transport, func(t *testing.T) {
			dir := sandbox(t, sites, rows, tc.transport)
			for k := 1; k <= sites; k++ {
				plant(t, dir, k)
			}
			start := time.Now()
			coord := runFederation(t, dir, sites, tc.sitesFirst)
			elapsed := time.Since(start)
			run := checkSiteResults(t, dir, sites)
			var keep func(string) bool
			if tc.transport == "grpc" {
				keep = func(p string) bool { return strings.HasSuffix(p, ".capture") }
			} else {
				keep = func(p string) bool {
					return strings.Contains(p, string(filepath.Separator)+"spool"+string(filepath.Separator))
				}
			}
			scanned := scanCarried(t, dir, sites, keep, []byte(coord.err.String()))
			if scanned == 0 {
				t.Fatal("nothing carried to scan")
			}
			// Control: the scan finds the sentinels where they are.
			raw, err := os.ReadFile(filepath.Join(dir, "site1.sqlite"))
			if err != nil {
				t.Fatal(err)
			}
			y, x := sentinels(1)
			for _, v := range []float64{y[0], x[0]} {
				if p := patterns(v); !bytes.Contains(raw, p[1]) {
					t.Errorf("control: sentinel %v not found in site1.sqlite", v)
				}
			}
			t.Logf("%s: run %s in %.1fs; scanned %d bytes carried", tc.transport, run, elapsed.Seconds(), scanned)
			if tc.transport == "grpc" {
				checkEquivalence(t, dir, sites, run)
			}
		})
	}
}

// checkEquivalence compares every site's stored model with the simulated
// federation on the same rows, with the same kernel plugin: estimator.Fit
// when the run selected no model, and otherwise the fit of model
// selection, on each site's rows less the default held-out share
// (model.validation 0.2, federation.min_arm_rows 5), under their
// standardisation.
func checkEquivalence(t *testing.T, dir string, sites int, run string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc, dbs, recs := sandboxRecords(ctx, t, dir, sites)
	open := func(context.Context, modelstore.Kernel) (estimator.Spectral, error) { return kc, nil }
	var data []*estimator.Data
	var schema estimator.Schema
	var own []*estimator.Model
	for k, db := range dbs {
		data, schema = append(data, recs[k].Data), recs[k].Schema
		m, setup, err := modelstore.Load(ctx, db, run, open)
		if err != nil {
			t.Fatal(err)
		}
		if setup.Site != k || setup.Sites != sites {
			t.Fatalf("site%d stored as index %d of %d", k+1, setup.Site, setup.Sites)
		}
		own = append(own, m)
	}
	cfg := own[0].Setup.Config
	want, err := estimator.Fit(ctx, data, schema, kc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	held := make([][]int, len(data)) // none without model selection
	if selected := queryFloat(t, openDB(t, filepath.Join(dir, "site1.sqlite")), "SELECT count(*) FROM crff_model_selection"); selected > 0 {
		train := make([]*estimator.Data, len(data))
		for s, d := range data {
			var err error
			if held[s], err = selection.SiteHoldout(d.W, 0.2, cfg.Seed, federation.DefaultMinArmRows); err != nil {
				t.Fatal(err)
			}
			rows, err := selection.TrainingRows(d.Rows(), held[s])
			if err != nil {
				t.Fatal(err)
			}
			train[s] = d.Subset(rows)
		}
		// The standardisation, too, is of the training rows.
		if want, err = estimator.Fit(ctx, train, schema, kc, cfg); err != nil {
			t.Fatal(err)
		}
	}
	worst := 0.0
	for s, m := range own {
		for _, kind := range estimator.Kinds {
			for name, w := range want.Trained(kind).Weights[s] {
				got := m.Trained(kind).Weights[s][name]
				r, c := w.Dims()
				for i := range r {
					for j := range c {
						worst = math.Max(worst, math.Abs(got.At(i, j)-w.At(i, j)))
					}
				}
			}
		}
	}
	if worst > 1e-9 {
		t.Errorf("daemons' effective weights differ from the simulated federation's by up to %g", worst)
	}
	t.Logf("max abs difference of effective weights, daemons vs simulated federation: %g", worst)

	// The global AIPW estimate and interval: each site's cross-fitted sums
	// in the simulated federation (no nuisance model trained on a held-out
	// row), added, with the stratified variance Σ_k(Σψ²_k − (Σψ_k)²/n_k) /
	// (N(N − K)), against what every daemon stored.
	var sums inference.Sums
	var within float64
	for s := range data {
		nu, err := estimator.CrossFitExcept(ctx, want.Setup, s, data[s], held[s])
		if err != nil {
			t.Fatal(err)
		}
		an, err := inference.Analyse(data[s].W, data[s].Y, nu, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sums = sums.Add(an.Sums)
		within += an.Sums.SumSq - an.Sums.Sum*an.Sums.Sum/float64(an.Sums.N)
	}
	n := float64(sums.N)
	mean, sd := sums.Sum/n, math.Sqrt(within/(n*(n-float64(len(data)))))
	g := inference.Estimate{Estimate: mean, SE: sd, Lower: mean - 1.959963984540054*sd, Upper: mean + 1.959963984540054*sd}
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		var ate, se, lo, hi float64
		if err := db.QueryRow(`SELECT ate, se, lower, upper FROM crff_ate WHERE scope = 'global' AND estimator = 'aipw'`).Scan(&ate, &se, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if d := math.Max(math.Max(math.Abs(ate-g.Estimate), math.Abs(se-g.SE)), math.Max(math.Abs(lo-g.Lower), math.Abs(hi-g.Upper))); d > 1e-9 {
			t.Errorf("site%d's global AIPW %v ± %v [%v, %v] differs from the simulated federation's %+v by %g", k, ate, se, lo, hi, g, d)
		}
	}
	t.Logf("global AIPW ATE %.4f, 95%% interval [%.4f, %.4f], equal to the simulated federation's", g.Estimate, g.Lower, g.Upper)
}

// TestSimulateFederationSandbox is issue 5's sandbox acceptance: the files
// of crffd simulate --format sqlite --federation, used as written (only the
// model made small), complete a run with the daemons started in a mixed
// order: a site, the coordinator, then the other sites.
func TestSimulateFederationSandbox(t *testing.T) {
	dir := t.TempDir()
	crffd(t, nil, "simulate", "--sources", "3", "--rows", "80", "--format", "sqlite", "--federation", "--out", dir).mustSucceed(t)
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "model:\n  features: 50\n  latent: 5\n  rounds: 100\n", fedModel)
	for _, f := range []string{"certs/ca/ca.crt", "certs/coordinator/coordinator.key", "certs/site3/site3.crt", "certs/site3/ca.crt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("simulate --federation did not write %s: %v", f, err)
		}
	}
	site := func(k int) *daemon {
		return startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once")
	}
	ds := []*daemon{site(1)}
	waitLogged(t, ds[0], "site waiting for the coordinator")
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	waitLogged(t, coord, "coordinator listening")
	ds = append(ds, site(3), site(2))
	coord.mustSucceed(t, 3*time.Minute)
	for _, d := range ds {
		d.mustSucceed(t, time.Minute)
	}
	checkSiteResults(t, dir, 3)
	if !strings.Contains(coord.out.String(), "3 sites, 240 rows; global ATE") {
		t.Errorf("coordinator printed:\n%s", coord.out.String())
	}
}

// sandboxRecords opens the Gaussian kernel plugin, closed when the test
// ends, and reads the records of the sandbox's sites as their daemons do;
// each site file stays open until the test ends.
func sandboxRecords(ctx context.Context, t *testing.T, dir string, sites int) (*kernels.Client, []*store.Site, []*store.Records) {
	t.Helper()
	kc, err := kernels.Open(ctx, kernels.Options{Dir: testbin.Build(t), Name: "gaussian"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.Close() })
	var dbs []*store.Site
	var recs []*store.Records
	for k := 1; k <= sites; k++ {
		path := filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k))
		db, err := store.Open(ctx, path, store.Options{BusyTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		r, err := db.ReadRecords(ctx, store.Source{DB: path, Table: "records", IDColumn: "id", TreatmentColumn: "w",
			OutcomeColumn: "y", OutcomeType: "continuous", Continuous: []string{"x30"}, OnInvalid: "refuse"})
		if err != nil {
			t.Fatal(err)
		}
		dbs, recs = append(dbs, db), append(recs, r)
	}
	return kc, dbs, recs
}

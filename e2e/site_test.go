package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/crffd/crffd/internal/testbin"
)

// smallModel makes training fast enough for tests; the figures are not
// about accuracy here.
const smallModel = `model:
  features: 20
  latent: 3
  rounds: 30
  samples: 20
`

// openDB opens a site file as a second, independent client would: one
// that waits out another connection's lock (busy_timeout) rather than fail
// with SQLITE_BUSY, since a daemon may be writing the file meanwhile; a
// test's write that met the daemon's scoring transaction failed under load
// without it (TestSiteScoresEditedRows).
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	return openWaiting(t, path, 10*time.Second)
}

// openWriter opens a site file as a client that writes records while a
// daemon runs. Unlike reads, writes are serialised by SQLite even in WAL
// mode, so a writer waits out the daemon's write transaction as any
// application on the site would.
func openWriter(t *testing.T, path string) *sql.DB {
	t.Helper()
	return openWaiting(t, path, 10*time.Second)
}

// openWaiting opens a site file whose locks are waited for up to busy.
func openWaiting(t *testing.T, path string, busy time.Duration) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)", path, busy.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func queryFloat(t *testing.T, db *sql.DB, q string) float64 {
	t.Helper()
	var v float64
	if err := db.QueryRow(q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// tableSum digests every row of a table, so that any change shows.
func tableSum(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	rows, err := db.Query("SELECT * FROM " + table + " ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	h := sha256.New()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%#v\n", vals)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// simulateSite writes one simulated site with rows rows and returns its
// configuration file, extended with extra YAML.
func simulateSite(t *testing.T, rows int, extra string) (dir, cfg string) {
	t.Helper()
	dir = t.TempDir()
	crffd(t, nil, "simulate", "--sources", "1", "--rows", strconv.Itoa(rows), "--format", "sqlite", "--out", dir).mustSucceed(t)
	cfg = filepath.Join(dir, "site1.yaml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(extra); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return dir, cfg
}

var fitLine = regexp.MustCompile(`run \S+: (\d+) rows scored, 0 rejected\nlocal ATE (-?[0-9.]+), 95% interval \[(-?[0-9.]+), (-?[0-9.]+)\] \(AIPW, se ([0-9.]+), (\d+) rows, (\d+) propensities clipped to \[0.01, 0.99\]\)\nlocal ATE (-?[0-9.]+) \(plug-in: mean of the CATEs before calibration; no standard error\)`)

// TestFitAndScoreNewRows is issue 4's acceptance: fit one simulated site,
// check the views, then keep crffd site running while another process
// reads the views and inserts rows, which must be scored within 10 s. It
// fits the latent CATE (model.estimator: latent), whose mean is the plug-in
// ATE; TestFitModelSelection covers the default, auto.
func TestFitAndScoreNewRows(t *testing.T) {
	dir, cfg := simulateSite(t, 200, smallModel+"  estimator: latent\n")
	b, _ := os.ReadFile(cfg)
	b = bytes.Replace(b, []byte("  on_invalid: refuse\n"), []byte("  on_invalid: refuse\n  poll_interval: 200ms\n"), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "site1.sqlite")
	db := openDB(t, path)
	before := tableSum(t, db, "records")

	r := crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	m := fitLine.FindStringSubmatch(r.stdout)
	if m == nil || m[1] != "200" {
		t.Fatalf("fit output %q does not report 200 rows scored", r.stdout)
	}
	printed, _ := strconv.ParseFloat(m[8], 64)
	aipw, _ := strconv.ParseFloat(m[2], 64)
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_cate"); n != 200 {
		t.Errorf("crff_cate has %v rows, want 200", n)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_cate WHERE NOT (latent_q025 <= latent_cate AND latent_cate <= latent_q975)"); n != 0 {
		t.Errorf("%v rows with latent_cate outside [latent_q025, latent_q975]", n)
	}
	ate := queryFloat(t, db, "SELECT ate FROM crff_ate WHERE scope = 'local' AND estimator = 'plugin'")
	if mean := queryFloat(t, db, "SELECT avg(latent_cate) FROM crff_cate"); math.Abs(ate-mean) > 1e-9 || math.Abs(ate-printed) > 1e-4 {
		t.Errorf("local plug-in ATE %v, mean CausalRFF CATE %v, printed %v: want all equal", ate, mean, printed)
	}
	// The AIPW row: as printed, with an interval ±1.96 se around it.
	var got, se, lo, hi float64
	if err := db.QueryRow(`SELECT ate, se, lower, upper FROM crff_ate WHERE scope = 'local' AND estimator = 'aipw'`).Scan(&got, &se, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-aipw) > 1e-4 || !(se > 0) || math.Abs(hi-lo-2*1.959963984540054*se) > 1e-9 || math.Abs((lo+hi)/2-got) > 1e-9 {
		t.Errorf("local AIPW row %v ± %v [%v, %v], printed %v", got, se, lo, hi, aipw)
	}
	// The calibration's intercept moves the mean CATE from the plug-in ATE
	// toward the AIPW one (all the way unless it is shrunk), and every
	// scored row has an interval around its CATE.
	if mean := queryFloat(t, db, "SELECT avg(cate) FROM crff_cate"); math.Abs(mean-got)+math.Abs(mean-printed) > math.Abs(got-printed)+1e-9 {
		t.Errorf("mean calibrated CATE %v is not between the plug-in ATE %v and the AIPW ATE %v", mean, printed, got)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_cate WHERE NOT (lower <= cate AND cate <= upper AND lower < upper AND se > 0)"); n != 0 {
		t.Errorf("%v rows without an interval around their CATE", n)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_cate_records WHERE cate IS NOT NULL"); n != 200 {
		t.Errorf("crff_cate_records joins %v rows to a CATE, want 200", n)
	}
	// crff_cate keeps each row's AIPW score and uncalibrated CATE, whose
	// means are the local ATEs.
	checkLocalATE(t, db, 200)
	if after := tableSum(t, db, "records"); after != before {
		t.Error("fit changed the user's records table")
	}

	// crffd site scores rows added later.
	stderr := startSiteDaemon(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	writer := openWriter(t, path)
	copyFirstRows(t, ctx, writer)
	inserted := time.Now()
	var busy int
	for {
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM crff_cate_records WHERE cate IS NOT NULL").Scan(&n)
		if err != nil {
			busy++
			t.Logf("read while crffd site runs: %v", err)
		}
		if n == 205 {
			break
		}
		if time.Since(inserted) > 10*time.Second {
			t.Fatalf("new rows not scored within 10 s (%d of 205 scored); crffd site log:\n%s", n, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("5 new rows scored %.2f s after insertion", time.Since(inserted).Seconds())
	if busy > 0 {
		t.Errorf("%d reads failed while crffd site was running", busy)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_cate WHERE row_id > 1000 AND NOT (lower <= cate AND cate <= upper AND lower < upper AND se > 0)"); n != 0 {
		t.Errorf("%v new rows without an interval around their CATE", n)
	}
	// A copy of a row gets the same calibrated CATE as the row: the
	// calibration saved with the model was applied.
	if d := queryFloat(t, db, `SELECT max(abs(a.cate - b.cate) + abs(a.upper - b.upper)) FROM crff_cate a JOIN crff_cate b ON b.row_id = a.row_id + 1000`); d > 1e-9 {
		t.Errorf("new copies of rows differ from the rows by %v in their calibrated CATE or interval", d)
	}

	// A deleted row's CATE leaves crff_cate.
	if _, err := writer.ExecContext(ctx, `DELETE FROM records WHERE id IN (1003, 7)`); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	for queryFloat(t, db, "SELECT count(*) FROM crff_cate") != 203 {
		if time.Since(deleted) > 10*time.Second {
			t.Fatalf("the CATEs of deleted rows still in crff_cate after 10 s; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The local ATEs follow: over the 203 rows the table holds now.
	for queryFloat(t, db, "SELECT n FROM crff_ate WHERE scope = 'local' AND estimator = 'aipw'") != 203 {
		if time.Since(deleted) > 10*time.Second {
			t.Fatalf("crff_ate not recomputed after 10 s; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkLocalATE(t, db, 203)
}

// checkLocalATE checks that the local ATEs of crff_ate are over the n
// rows of crff_cate: the AIPW estimate the mean of their ψ with its
// standard error sd/√n, the plug-in the mean of their uncalibrated CATEs.
func checkLocalATE(t *testing.T, db *sql.DB, n float64) {
	t.Helper()
	var ate, se, rows, mean, sd, count, plugin, prows, raw float64
	if err := db.QueryRow(`SELECT a.ate, a.se, a.n, p.ate, p.n FROM crff_ate a, crff_ate p
		WHERE a.scope = 'local' AND a.estimator = 'aipw' AND p.scope = 'local' AND p.estimator = 'plugin'`).Scan(&ate, &se, &rows, &plugin, &prows); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT avg(psi), sqrt((total(psi * psi) - count(psi) * avg(psi) * avg(psi)) / (count(psi) - 1)), count(psi), avg(raw_cate)
		FROM crff_cate`).Scan(&mean, &sd, &count, &raw); err != nil {
		t.Fatal(err)
	}
	if rows != n || count != n || prows != n || math.Abs(ate-mean) > 1e-9 || math.Abs(se-sd/math.Sqrt(n)) > 1e-9 || math.Abs(plugin-raw) > 1e-9 {
		t.Errorf("local ATEs: AIPW %v (se %v, %v rows), plug-in %v (%v rows); crff_cate: mean ψ %v (sd/√n %v, %v rows), mean uncalibrated CATE %v; want %v rows",
			ate, se, rows, plugin, prows, mean, sd/math.Sqrt(n), count, raw, n)
	}
}

// startSiteDaemon starts crffd site with cfg until the test ends, and
// returns its standard error.
func startSiteDaemon(t *testing.T, cfg string) *bytes.Buffer {
	t.Helper()
	cmd := exec.Command(filepath.Join(testbin.Build(t), "crffd"), "site", "--config", cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	return &stderr
}

// copyFirstRows adds copies of the simulated records with ids 1 to 5,
// with ids 1001 to 1005.
func copyFirstRows(t *testing.T, ctx context.Context, db *sql.DB) {
	t.Helper()
	if _, err := db.ExecContext(ctx, `INSERT INTO records SELECT id + 1000, w, y, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10,
		x11, x12, x13, x14, x15, x16, x17, x18, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29, x30
		FROM records WHERE id <= 5`); err != nil {
		t.Fatal(err)
	}
}

// TestFitRefusesBadRecords checks that fit names the file, column and rows
// of invalid records and leaves the user's table alone; with on_invalid:
// skip it goes on and lists them in crff_rejected.
func TestFitRefusesBadRecords(t *testing.T) {
	dir, cfg := simulateSite(t, 120, smallModel)
	path := filepath.Join(dir, "site1.sqlite")
	db := openDB(t, path)
	if _, err := db.Exec("UPDATE records SET x3 = NULL WHERE id IN (7, 9)"); err != nil {
		t.Fatal(err)
	}
	before := tableSum(t, db, "records")
	crffd(t, nil, "fit", "--config", cfg).mustFail(t, path, `column "x3"`, "ids 7, 9")
	if tableSum(t, db, "records") != before {
		t.Error("a refused fit changed the user's table")
	}
	b, _ := os.ReadFile(cfg)
	b = bytes.Replace(b, []byte("on_invalid: refuse"), []byte("on_invalid: skip"), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	if !bytes.Contains([]byte(r.stdout), []byte("118 rows scored, 2 rejected")) {
		t.Errorf("fit with skip printed %q", r.stdout)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_rejected WHERE row_id IN (7, 9)"); n != 2 {
		t.Errorf("crff_rejected lists %v of rows 7 and 9", n)
	}
	if tableSum(t, db, "records") != before {
		t.Error("fit changed the user's table")
	}

	// Not a SQLite file.
	bad := filepath.Join(dir, "site1.sqlite")
	if err := os.WriteFile(bad+".txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("db: site1.sqlite"), []byte("db: site1.sqlite.txt"), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "fit", "--config", cfg).mustFail(t, bad+".txt", "not an SQLite database")
}

func TestImportCSV(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "visits.csv")
	if err := os.WriteFile(csvPath, []byte("id,age,smoker,note\n1,34.5,0,a\n2,61,1,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "site.sqlite")
	r := crffd(t, nil, "import", "--db", db, "--table", "visits", "--csv", csvPath, "--header").mustSucceed(t)
	if want := "imported 2 rows into " + db + ".visits (id INTEGER, age REAL, smoker INTEGER, note TEXT)"; !bytes.Contains([]byte(r.stdout), []byte(want)) {
		t.Errorf("import printed %q, want %q", r.stdout, want)
	}
	crffd(t, nil, "import", "--db", db, "--table", "visits", "--csv", csvPath, "--header").mustFail(t, `"visits"`, "already exists")
	crffd(t, nil, "import", "--db", db, "--table", "visits", "--csv", csvPath, "--header", "--replace").mustSucceed(t)
	if n := queryFloat(t, openDB(t, db), "SELECT count(*) FROM visits WHERE note IS NULL"); n != 1 {
		t.Errorf("%v NULL notes, want 1 (the empty field)", n)
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("a,b\n1,2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "import", "--db", db, "--table", "t2", "--csv", bad, "--header").mustFail(t, bad, "line 3")
}

// TestSiteScoresEditedRows is issue 15's "results follow the rows": while
// crffd site runs, a row whose covariate is edited is scored again (its
// CATE changes), a row whose outcome is edited keeps its CATE (the CATE
// depends on the covariates only), and a deleted row leaves crff_cate.
func TestSiteScoresEditedRows(t *testing.T) {
	dir, cfg := simulateSite(t, 120, smallModel)
	b, _ := os.ReadFile(cfg)
	b = bytes.Replace(b, []byte("  on_invalid: refuse\n"), []byte("  on_invalid: refuse\n  poll_interval: 200ms\n"), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	cateOf := func(id int) (float64, string) {
		var c float64
		var at string
		if err := db.QueryRow(`SELECT cate, scored_at FROM crff_cate WHERE row_id = ?`, id).Scan(&c, &at); err != nil {
			t.Fatalf("CATE of row %d: %v", id, err)
		}
		return c, at
	}
	c1, at1 := cateOf(1)
	c2, at2 := cateOf(2)
	stderr := startSiteDaemon(t, cfg)
	if _, err := db.Exec(`UPDATE records SET x1 = 1 - x1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE records SET y = y + 100 WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM records WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n float64
		if err := db.QueryRow(`SELECT count(*) FROM crff_cate WHERE row_id = 1 AND scored_at <> ?`, at1).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 && queryFloat(t, db, `SELECT count(*) FROM crff_cate WHERE row_id = 3`) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("edited row 1 not scored again, or deleted row 3 still scored, within 15 s; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c, _ := cateOf(1); c == c1 {
		t.Errorf("row 1's CATE %v did not change after its covariate x1 changed", c)
	}
	// Row 2's outcome changed: its CATE, a function of its covariates,
	// is the same, but it was scored again for its AIPW score.
	for _, at := cateOf(2); at == at2; _, at = cateOf(2) {
		if time.Now().After(deadline) {
			t.Fatalf("row 2 not scored again after its outcome changed; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c, _ := cateOf(2); math.Abs(c-c2) > 1e-9 {
		t.Errorf("row 2's CATE changed from %v to %v after only its outcome changed", c2, c)
	}
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_cate`); n != 119 {
		t.Errorf("crff_cate has %v rows for 119", n)
	}
	// The local ATEs follow the scores, in a transaction of their own:
	// wait for them to cover the 119 rows.
	for queryFloat(t, db, "SELECT n FROM crff_ate WHERE scope = 'local' AND estimator = 'aipw'") != 119 {
		if time.Now().After(deadline) {
			t.Fatalf("crff_ate not recomputed over 119 rows; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkLocalATE(t, db, 119)

	// on_invalid: refuse. A new row without x5 is refused: the daemon says
	// so and keeps serving, and scores the row once it is mended.
	if _, err := db.Exec(`INSERT INTO records SELECT id + 1000, w, y, x1, x2, x3, x4, NULL, x6, x7, x8, x9, x10,
		x11, x12, x13, x14, x15, x16, x17, x18, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29, x30
		FROM records WHERE id = 4`); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for !strings.Contains(stderr.String(), "new rows refused") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged for a row without x5; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := db.Exec(`UPDATE records SET x5 = 1 WHERE id = 1004`); err != nil {
		t.Fatal(err)
	}
	for queryFloat(t, db, `SELECT count(*) FROM crff_cate WHERE row_id = 1004`) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the mended row not scored; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

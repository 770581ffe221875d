package e2e

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWhatIfRows: crffd fit scores the what-if rows already in
// crff_whatif, and a running crffd site scores rows inserted later within
// two poll intervals; a row with a covariate that is not a number gets an
// error, and the others are still scored.
func TestWhatIfRows(t *testing.T) {
	const poll = time.Second
	// The T-learner's CATE is a function of the covariates alone, so a
	// what-if copy of a row must get the row's own CATE and interval.
	dir, cfg := simulateSite(t, 200, smallModel+"  estimator: tlearner\n")
	b, _ := os.ReadFile(cfg)
	b = bytes.Replace(b, []byte("  on_invalid: refuse\n"), []byte(fmt.Sprintf("  on_invalid: refuse\n  poll_interval: %s\n", poll)), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "site1.sqlite")
	db := openDB(t, path)
	var cols []string
	for j := 1; j <= 30; j++ {
		cols = append(cols, fmt.Sprintf("x%d", j))
	}
	list := strings.Join(cols, ", ")
	// crff_whatif exists once a run is published; the user may create it
	// first, with the same columns.
	if _, err := db.Exec(`CREATE TABLE crff_whatif (id INTEGER PRIMARY KEY, ` + list + `);
		INSERT INTO crff_whatif (id, ` + list + `) SELECT id, ` + list + ` FROM records WHERE id <= 2`); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_whatif_cate WHERE lower <= cate AND cate <= upper AND error IS NULL`); n != 2 {
		t.Fatalf("crffd fit scored %v what-if rows, want 2", n)
	}
	if d := queryFloat(t, db, `SELECT max(abs(w.cate - c.cate) + abs(w.lower - c.lower) + abs(w.upper - c.upper))
		FROM crff_whatif_cate w JOIN crff_cate c ON c.row_id = w.id`); d > 1e-9 {
		t.Errorf("a what-if copy of a row differs from the row's CATE and interval by %g", d)
	}

	stderr := startSiteDaemon(t, cfg)
	time.Sleep(poll) // the daemon's first poll
	w := openWriter(t, path)
	if _, err := w.Exec(`INSERT INTO crff_whatif (id, ` + list + `) SELECT id + 1000, ` + list + ` FROM records WHERE id BETWEEN 3 AND 5;
		INSERT INTO crff_whatif (id, x1) VALUES (2000, 'yes')`); err != nil {
		t.Fatal(err)
	}
	inserted := time.Now()
	for {
		if n := queryFloat(t, db, `SELECT count(*) FROM crff_whatif_cate`); n == 6 {
			break
		}
		if time.Since(inserted) > 2*poll {
			t.Fatalf("what-if rows not scored within two poll intervals; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("scored within %v (poll interval %v)", time.Since(inserted).Round(time.Millisecond), poll)
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_whatif_cate WHERE id > 1000 AND id < 2000 AND lower <= cate AND cate <= upper`); n != 3 {
		t.Errorf("%v of the 3 new what-if rows have a CATE in its interval", n)
	}
	var reason string
	if err := db.QueryRow(`SELECT error FROM crff_whatif_cate WHERE id = 2000 AND cate IS NULL`).Scan(&reason); err != nil ||
		reason != `column "x1": not a number` {
		t.Errorf("the faulty row's error: %q (%v)", reason, err)
	}
}

// TestGATEAgainstTruth: crffd fit's subgroup effects on a simulated site
// lie within three standard errors of each group's true mean effect, the
// mean of μ1 − μ0 over its rows in the simulation's truth table.
func TestGATEAgainstTruth(t *testing.T) {
	dir, cfg := simulateSite(t, 600, smallModel)
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	groups := map[string]string{"x1 set": "x1 = 1", "x2 unset": "x2 = 0", "x3 and x4": "x3 = 1 AND x4 = 1"}
	for name, pred := range groups {
		if _, err := db.Exec(`INSERT INTO crff_subgroup (name, predicate) VALUES (?, ?)`, name, pred); err != nil {
			t.Fatal(err)
		}
	}
	crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	for name, pred := range groups {
		truth := queryFloat(t, db, `SELECT avg(t.mu1 - t.mu0) FROM records r JOIN truth t ON t.id = r.id WHERE `+pred)
		var est, se float64
		var n int
		if err := db.QueryRow(`SELECT estimate, se, n FROM crff_gate WHERE scope = 'local' AND subgroup = ?`, name).Scan(&est, &se, &n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %.3f ± %.3f over %d rows, truth %.3f", name, est, se, n, truth)
		if math.Abs(est-truth) > 3*se {
			t.Errorf("%s: %v ± %v, truth %v: off by more than three standard errors", name, est, se, truth)
		}
	}
}

package e2e

import (
	"bytes"
	"fmt"
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

package sqlfiles

import (
	"context"
	"database/sql"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/positivity"
)

// TestPositivityView checks that crff_positivity says, word for word, what
// package positivity says of the same rows, over cases on either side of
// each threshold, and that crff_overlap's share column adds up.
func TestPositivityView(t *testing.T) {
	ctx := context.Background()
	db, _ := migrated(t, 0)
	// Names that need quoting, in SQL and in the warning's text.
	if _, err := db.ExecContext(ctx, `CREATE TABLE "my ""records""" ("patient id" INTEGER, "got 'it'" INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for _, view := range []func(string, string, string) (string, error){OverlapView, PositivityView} {
		v, err := view(`my "records"`, "patient id", "got 'it'")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, v); err != nil {
			t.Fatalf("create view: %v\n%s", err, v)
		}
	}
	// crff_cate shows the current run's rows.
	if _, err := db.ExecContext(ctx, `INSERT INTO crff_run (run, state, layout, started_at) VALUES ('r', 'current', '{}', 't')`); err != nil {
		t.Fatal(err)
	}
	insertCATE := cateInsert(t, db)
	view, _ := PositivityView(`my "records"`, "patient id", "got 'it'")
	var stored string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'crff_positivity'`).Scan(&stored); err != nil || stored != view {
		t.Errorf("sqlite_schema keeps\n%s\nwant\n%s (%v)", stored, view, err)
	}

	tests := []struct {
		name                      string
		treated, control, outside int
		other                     int // scored rows whose treatment is NULL: counted in neither arm
	}{
		{"no rows", 0, 0, 0, 0},
		{"balanced", 150, 150, 0, 0},
		{"arm of exactly 20 rows and 5%", 380, 20, 0, 0},
		{"arm of 19 rows", 181, 19, 0, 0},
		{"treated arm under 5%", 49, 951, 0, 0},
		{"one control row", 299, 1, 0, 0},
		{"both arms thin, rows outside", 6, 6, 4, 3},
		{"outside at exactly 5%", 200, 200, 20, 0},
		{"outside above 5%, rounding half up", 380, 20, 21, 0},
		{"one row outside", 5, 5, 1, 0},
		{"NULL treatments only", 0, 0, 0, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			for _, q := range []string{`DELETE FROM crff_cate_rows`, `DELETE FROM "my ""records"""`} {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			var treated, control []float64
			id := 0
			add := func(w any, p float64) {
				id++
				if _, err := tx.ExecContext(ctx, `INSERT INTO "my ""records""" VALUES (?, ?)`, id, w); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, insertCATE, id, p); err != nil {
					t.Fatal(err)
				}
				switch w {
				case 1:
					treated = append(treated, p)
				case 0:
					control = append(control, p)
				}
			}
			for i := range tt.treated + tt.control {
				w := 0
				if i < tt.treated {
					w = 1
				}
				p := 0.5
				if i < tt.outside { // alternate the two ends
					p = []float64{0.995, 0.004}[i%2]
				}
				add(w, p)
			}
			for range tt.other {
				add(nil, 0.999)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			want := positivity.Of("got 'it'", treated, control)

			var c positivity.Counts
			var share sql.NullFloat64
			var warning sql.NullString
			err = db.QueryRowContext(ctx, `SELECT treated, control, outside, outside_share, warning FROM crff_positivity`).
				Scan(&c.Treated, &c.Control, &c.Outside, &share, &warning)
			if err != nil {
				t.Fatal(err)
			}
			if c.Treated != want.Treated || c.Control != want.Control || c.Outside != want.Outside {
				t.Errorf("crff_positivity counts %+v, want %+v", c, want)
			}
			if w := want.Warning(); warning.String != w || warning.Valid != (w != "") {
				t.Errorf("warning\n got %q (valid %v)\nwant %q", warning.String, warning.Valid, w)
			}
			if n := want.Rows(); share.Valid != (n > 0) || n > 0 && math.Abs(share.Float64-float64(want.Outside)/float64(n)) > 1e-12 {
				t.Errorf("outside_share %v, want %d/%d", share, want.Outside, n)
			}
			if tt.name == "one control row" && !strings.Contains(warning.String, `1 control row (got 'it' = 0) among 300 (0.3%)`) {
				t.Errorf("warning %q does not name the column and the arm", warning.String)
			}

			var sum sql.NullFloat64
			var extreme int
			if err := db.QueryRowContext(ctx, `SELECT sum(share), sum(CASE WHEN extreme THEN treated + control END) FROM crff_overlap`).
				Scan(&sum, &extreme); err != nil {
				t.Fatal(err)
			}
			if n := want.Rows(); n > 0 && math.Abs(sum.Float64-1) > 1e-9 || n == 0 && sum.Valid {
				t.Errorf("crff_overlap shares add up to %v over %d rows", sum, n)
			}
			if extreme != want.Outside {
				t.Errorf("crff_overlap: %d rows in extreme buckets, want %d", extreme, want.Outside)
			}
		})
	}
}

// cateInsert returns an INSERT into crff_cate_rows of a row id and a
// propensity under run 'r', every other figure 0, whatever its other
// columns are.
func cateInsert(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM pragma_table_info('crff_cate_rows') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols, vals []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		v := "0"
		switch c {
		case "row_id":
			v = "?1"
		case "propensity":
			v = "?2"
		case "run":
			v = "'r'"
		case "scored_at":
			v = "'t'"
		case "x_digest":
			v = "NULL"
		}
		cols, vals = append(cols, c), append(vals, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return "INSERT INTO crff_cate_rows (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ")"
}

// TestViewsParseInOldSQLite keeps the views free of SQL that older SQLite
// clients cannot parse: a view they cannot parse makes the whole schema of
// the file unreadable to them ("malformed database schema"). It looks for
// the newer syntax, and when the system's sqlite3 is installed, opens a
// file holding the views with it.
func TestViewsParseInOldSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, _ := Migrations()
	for _, m := range ms {
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER, w INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for name, view := range map[string]func(string, string, string) (string, error){"crff_overlap": OverlapView, "crff_positivity": PositivityView} {
		v, err := view("t", "id", "w")
		if err != nil {
			t.Fatal(err)
		}
		// Aggregates with ORDER BY and concat (3.44), ->> (3.38), window
		// functions (3.25).
		for _, bad := range []string{" ORDER BY k)", "concat(", "concat_ws(", "->>", " OVER ("} {
			if strings.Contains(v, bad) {
				t.Errorf("%s uses %q, which older SQLite clients cannot parse", name, bad)
			}
		}
		if _, err := db.ExecContext(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("no sqlite3 on PATH")
	}
	out, err := exec.Command(bin, path, "SELECT sqlite_version(); SELECT count(*) FROM crff_overlap; SELECT count(*) FROM crff_positivity;").CombinedOutput()
	if err != nil || strings.Contains(string(out), "rror") {
		t.Errorf("%s cannot read the views: %v\n%s", bin, err, out)
	}
	t.Logf("%s reads the views: %q", bin, out)
}

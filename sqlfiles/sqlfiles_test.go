package sqlfiles

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	_ "modernc.org/sqlite"
)

func TestMigrations(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Version != 1 || ms[0].Name != "init" {
		t.Errorf("first migration = %d %q, want 1 init", ms[0].Version, ms[0].Name)
	}
	if got := Latest(); got != ms[len(ms)-1].Version {
		t.Errorf("Latest() = %d, want %d", got, ms[len(ms)-1].Version)
	}
}

func TestParseMigrationsRejects(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  string
	}{
		{"none", nil, "no migrations"},
		{"bad name", []string{"0001_init.sql", "2_more.sql"}, `"2_more.sql" is not named`},
		{"upper case", []string{"0001_Init.sql"}, "is not named"},
		{"gap", []string{"0001_init.sql", "0003_more.sql"}, "expected version 2, found 0003_more.sql"},
		{"starts at 2", []string{"0002_init.sql"}, "expected version 1"},
		{"duplicate", []string{"0001_init.sql", "0001_again.sql"}, "expected version 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"m": &fstest.MapFile{Mode: fs.ModeDir | 0o755}}
			for _, f := range tt.files {
				fsys["m/"+f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
			}
			_, err := parseMigrations(fsys, "m")
			if !errors.Is(err, ErrBadMigration) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrBadMigration containing %q", err, tt.want)
			}
		})
	}
}

// TestMigrationsApply applies every migration to an empty database, and
// checks that each object it creates is a crff_ object.
func TestMigrationsApply(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.sqlite")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("migration %04d_%s: %v", m.Version, m.Name, err)
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name FROM sqlite_schema`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var typ, name, tbl string
		if err := rows.Scan(&typ, &name, &tbl); err != nil {
			t.Fatal(err)
		}
		n++
		name = strings.TrimPrefix(name, "sqlite_autoindex_")
		if !strings.HasPrefix(name, "crff_") || !strings.HasPrefix(tbl, "crff_") {
			t.Errorf("%s %q on %q is not a crff_ object", typ, name, tbl)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Errorf("only %d schema objects created", n)
	}
}

func TestQuoteIdent(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{"x", `"x"`, false},
		{"select", `"select"`, false},
		{`a "b" c`, `"a ""b"" c"`, false},
		{"naïve col", `"naïve col"`, false},
		{"", "", true},
		{"a\x00b", "", true},
	}
	for _, tt := range tests {
		got, err := QuoteIdent(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("QuoteIdent(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestCateRecordsView(t *testing.T) {
	ctx := context.Background()
	db, _ := migrated(t, 0)
	const table, id = `my "records"`, "patient id"
	if _, err := db.ExecContext(ctx, `CREATE TABLE "my ""records""" ("patient id" INTEGER, x REAL)`); err != nil {
		t.Fatal(err)
	}
	view, err := CateRecordsView(table, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(view, "CREATE VIEW crff_cate_records AS") {
		t.Errorf("view SQL starts %.40q", view)
	}
	if _, err := db.ExecContext(ctx, view); err != nil {
		t.Fatalf("create view: %v\n%s", err, view)
	}
	var stored string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'crff_cate_records'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != view {
		t.Errorf("sqlite_schema keeps\n%s\nwant\n%s", stored, view)
	}
	if _, err := CateRecordsView("", "id"); err == nil {
		t.Error("empty table name accepted")
	}
	if _, err := CateRecordsView("t", "a\x00"); err == nil {
		t.Error("NUL in id column name accepted")
	}
}

// TestMigrationATEEstimators applies the migrations up to 0004, writes a
// crff_ate row of that schema, and checks that 0005 keeps it as a plugin
// estimate whose old se, which was not a standard error, is dropped.
func TestMigrationATEEstimators(t *testing.T) {
	ctx := context.Background()
	db, ms := migrated(t, 4)
	for _, q := range []string{
		`INSERT INTO crff_run (run, state, layout, started_at) VALUES ('r1', 'current', '{}', '2026-01-01T00:00:00.000Z')`,
		`INSERT INTO crff_ate (scope, ate, se, n, run, computed_at) VALUES ('local', 1.5, 0.01, 300, 'r1', '2026-01-01T00:00:00.000Z')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, db, ms[4])
	var scope, estimator string
	var ate float64
	var se, lower sql.NullFloat64
	var n int
	if err := db.QueryRowContext(ctx, `SELECT scope, estimator, ate, se, lower, n FROM crff_ate`).Scan(&scope, &estimator, &ate, &se, &lower, &n); err != nil {
		t.Fatal(err)
	}
	if scope != "local" || estimator != "plugin" || ate != 1.5 || se.Valid || lower.Valid || n != 300 {
		t.Errorf("migrated row: %s %s %v se %v lower %v n %d", scope, estimator, ate, se, lower, n)
	}
	// One row per scope and estimator.
	if _, err := db.ExecContext(ctx, `INSERT INTO crff_ate (scope, estimator, ate, n, run, computed_at) VALUES ('local', 'plugin', 2, 3, 'r1', 'x')`); err == nil {
		t.Error("a second local plugin row was accepted")
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO crff_ate (scope, estimator, ate, se, lower, upper, n, run, computed_at) VALUES ('local', 'aipw', 2, 0.1, 2.2, 1.8, 3, 'r1', 'x')`); err == nil {
		t.Error("an interval with upper < lower was accepted")
	}
}

// TestMigrationCATEIntervals applies the migrations up to 0005 to a file
// with a scored row and the crff_cate_records view of that schema, then
// 0006: the row keeps its figures as the latent ones, with no interval.
func TestMigrationCATEIntervals(t *testing.T) {
	ctx := context.Background()
	db, ms := migrated(t, 5)
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE visits (id INTEGER PRIMARY KEY, w, y)`)
	exec(`INSERT INTO visits VALUES (7, 1, 2.5)`)
	exec(`CREATE VIEW crff_cate_records AS SELECT r.*, c.cate, c.sd, c.lower, c.upper, c.y0, c.y1, c.propensity, c.run, c.scored_at
		FROM visits AS r LEFT JOIN crff_cate AS c ON c.row_id = +r.id`)
	exec(`INSERT INTO crff_run (run, state, layout, started_at) VALUES ('r1', 'current', '{}', 'x')`)
	exec(`INSERT INTO crff_cate (row_id, cate, sd, lower, upper, y0, y1, propensity, run, scored_at)
		VALUES (7, 1.5, 0.25, 1.0, 2.0, 3, 4.5, 0.4, 'r1', 'x')`)
	apply(t, db, ms[5])
	var cate, latent, sd, q025, q975 float64
	var se, lower, upper sql.NullFloat64
	if err := db.QueryRowContext(ctx, `SELECT cate, se, lower, upper, latent_cate, latent_sd, latent_q025, latent_q975 FROM crff_cate WHERE row_id = 7`).
		Scan(&cate, &se, &lower, &upper, &latent, &sd, &q025, &q975); err != nil {
		t.Fatal(err)
	}
	if cate != 1.5 || latent != 1.5 || sd != 0.25 || q025 != 1 || q975 != 2 || se.Valid || lower.Valid || upper.Valid {
		t.Errorf("migrated row: cate %v latent %v sd %v q %v..%v se %v interval %v..%v", cate, latent, sd, q025, q975, se, lower, upper)
	}
	// The old view still reads, under the renamed columns.
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM crff_cate_records WHERE cate = 1.5`).Scan(&n); err != nil || n != 1 {
		t.Errorf("crff_cate_records after the migration: %d rows, %v", n, err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE crff_cate SET lower = 2, upper = 1`); err == nil {
		t.Error("an interval with upper < lower was accepted")
	}
}

// migrated returns a new database with the first n migrations applied (all
// of them for n = 0), and every migration.
func migrated(t *testing.T, n int) (*sql.DB, []Migration) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		n = len(ms)
	}
	for _, m := range ms[:n] {
		apply(t, db, m)
	}
	return db, ms
}

// apply runs migration m on db.
func apply(t *testing.T, db *sql.DB, m Migration) {
	t.Helper()
	if _, err := db.Exec(m.SQL); err != nil {
		t.Fatalf("migration %04d_%s: %v", m.Version, m.Name, err)
	}
}

// TestCoordinatorMigrations applies the coordinator's migrations with
// Apply to an empty database: each is recorded, and every object is a
// crff_ object.
func TestCoordinatorMigrations(t *testing.T) {
	ctx := context.Background()
	ms, err := CoordinatorMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Version != 1 || ms[0].Name != "init" {
		t.Errorf("first migration = %d %q, want 1 init", ms[0].Version, ms[0].Name)
	}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "c.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := SchemaVersion(ctx, db); err != nil || v != 0 {
		t.Fatalf("empty file: version %d (%v)", v, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, tx, ms, 0, "2026-01-01T00:00:00.000Z"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if v, err := SchemaVersion(ctx, db); err != nil || v != ms[len(ms)-1].Version {
		t.Errorf("version %d (%v), want %d", v, err, ms[len(ms)-1].Version)
	}
	var bad string
	if err := db.QueryRowContext(ctx, `SELECT coalesce(group_concat(name), '') FROM sqlite_schema WHERE name NOT LIKE 'crff\_%' ESCAPE '\' AND name NOT LIKE 'sqlite\_autoindex\_crff\_%' ESCAPE '\'`).Scan(&bad); err != nil || bad != "" {
		t.Errorf("objects not named crff_: %q (%v)", bad, err)
	}
}

// TestMigrationCATERuns applies 0025 to a file with scored rows of the
// current run and of a run left over, a user's own view of crff_cate and
// crff_cate_records: crff_cate then reads the current run's rows, with
// every value and in the same column order, and both views still read.
func TestMigrationCATERuns(t *testing.T) {
	ctx := context.Background()
	db, ms := migrated(t, 24)
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE visits (id INTEGER PRIMARY KEY, w, y)`)
	exec(`INSERT INTO visits VALUES (7, 1, 2.5), (8, 0, 1.5)`)
	exec(`CREATE VIEW crff_cate_records AS SELECT r.*, c.cate, c.run FROM visits AS r LEFT JOIN crff_cate AS c ON c.row_id = +r.id`)
	exec(`CREATE VIEW my_top AS SELECT row_id, cate FROM crff_cate WHERE cate > 1`)
	exec(`INSERT INTO crff_run (run, state, layout, started_at) VALUES ('r1', 'current', '{}', 'x')`)
	exec(`INSERT INTO crff_cate (row_id, cate, latent_sd, latent_q025, latent_q975, y0, y1, propensity, run, scored_at, latent_cate, se, lower, upper, raw_cate, psi, psi_clipped)
		VALUES (7, 1.5, 0.25, 1.0, 2.0, 3, 4.5, 0.4, 'r1', 'x', 1.4, 0.1, 1.3, 1.7, 1.45, 2.5, 0),
		       (8, 0.5, 0.25, 0.0, 1.0, 3, 3.5, 0.6, 'r1', 'x', 0.4, 0.1, 0.3, 0.7, 0.45, -1, 1)`)
	before := func() []string {
		rows, err := db.QueryContext(ctx, `SELECT * FROM crff_cate ORDER BY row_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		out := []string{strings.Join(cols, ",")}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(vals...))
		}
		return out
	}
	want := before()
	apply(t, db, ms[24])
	if got := before(); !slices.Equal(got, want) {
		t.Errorf("crff_cate after 0025:\n%q\nwant\n%q", got, want)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM crff_cate_records WHERE run = 'r1') + (SELECT count(*) FROM my_top)`).Scan(&n); err != nil || n != 3 {
		t.Errorf("the views after 0025: %d rows, %v; want 3", n, err)
	}
	// Rows of another run are in crff_cate_rows, not in crff_cate.
	exec(`INSERT INTO crff_cate_rows (run, row_id, cate, latent_sd, latent_q025, latent_q975, y0, y1, propensity, scored_at)
		VALUES ('r2', 7, 9, 0, 0, 0, 0, 0, 0.5, 'x')`)
	if got := before(); !slices.Equal(got, want) {
		t.Errorf("crff_cate with another run's row written:\n%q\nwant\n%q", got, want)
	}
}

// FuzzQuoteString: what QuoteString accepts, SQLite reads back as the
// same string, whatever quotes, semicolons or comments it holds.
func FuzzQuoteString(f *testing.F) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{"", "run-1", "it's", "'; DROP TABLE crff_run; --", "''", "a\nb", "\x00", "é'\"`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := QuoteString(s)
		if strings.IndexByte(s, 0) >= 0 {
			if err == nil {
				t.Fatalf("%q with a NUL byte quoted as %s", s, q)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var back []byte
		if err := db.QueryRow(`SELECT CAST(` + q + ` AS BLOB)`).Scan(&back); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if string(back) != s {
			t.Fatalf("%q read back as %q", s, back)
		}
	})
}

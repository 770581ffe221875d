package subgroup_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/crffd/crffd/subgroup"
)

// sandbox is an in-memory database with the table a predicate is meant for
// (records) and one it must not reach (other), plus what it looked like
// before any predicate ran.
type sandbox struct {
	db     *sql.DB
	root   int64  // rootpage of records, the one b-tree a predicate may open
	before string // snapshot before any predicate ran
}

func newSandbox(tb testing.TB) *sandbox {
	tb.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		tb.Fatal(err)
	}
	// Every connection to :memory: is a database of its own: keep one.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	tb.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE records(age INTEGER, sex INTEGER, site_code TEXT, bmi REAL, region TEXT, score REAL, name TEXT, "group" INTEGER)`,
		`INSERT INTO records VALUES
			(70, 1, 'north', 31.5, 'a', 0.9, 'O''Brien', 1),
			(30, 0, 'south', 22.0, 'b', -0.2, 'ann', 2),
			(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
			(45, 1, 'North', 28.1, 'c ', 3.5, 'Bob', 1)`,
		`CREATE TABLE other(secret TEXT)`,
		`INSERT INTO other VALUES ('do not read')`,
	} {
		if _, err := db.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	s := &sandbox{db: db}
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'records'`).Scan(&s.root); err != nil {
		tb.Fatal(err)
	}
	if s.before, err = s.snapshot(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// snapshot renders everything a predicate could change: the schema, the
// attached databases, and the rows of both tables.
func (s *sandbox) snapshot() (string, error) {
	var b strings.Builder
	for _, q := range []string{
		`SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master ORDER BY name`,
		`SELECT count(*) FROM sqlite_temp_master`,
		`SELECT seq, name, file FROM pragma_database_list ORDER BY seq`,
		`SELECT rowid, * FROM other ORDER BY rowid`,
		`SELECT rowid, * FROM records ORDER BY rowid`,
	} {
		rows, err := s.db.Query(q)
		if err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return "", err
			}
			fmt.Fprintf(&b, "%v\n", vals)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// intact reports whether the database still looks as it did at the start.
func (s *sandbox) intact() error {
	now, err := s.snapshot()
	if err != nil {
		return fmt.Errorf("snapshot after the predicate: %w", err)
	}
	if now != s.before {
		return fmt.Errorf("the database changed:\nbefore:\n%s\nafter:\n%s", s.before, now)
	}
	return nil
}

// query is the statement a predicate ends up in, as crffd builds it.
func query(p string) string {
	return `SELECT count(*) FROM records WHERE (` + p + `)`
}

// plan prepares the query under EXPLAIN and reports a program that opens a
// b-tree other than records, writes, touches another database, or calls a
// function outside subgroup.Functions. prepared is false when SQLite
// refused the statement, which Check allows it to do.
func (s *sandbox) plan(ctx context.Context, p string) (prepared bool, err error) {
	rows, err := s.db.QueryContext(ctx, `EXPLAIN `+query(p))
	if err != nil {
		return false, nil
	}
	defer rows.Close()
	funcs := append(slices.Clone(subgroup.Functions), "like", "glob")
	ephemeral := map[int64]bool{} // cursors on scratch tables, such as IN lists
	for rows.Next() {
		var (
			addr, p1, p2, p3, p5 int64
			opcode               string
			p4, comment          any
		)
		if err := rows.Scan(&addr, &opcode, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			return true, err
		}
		name := ""
		if s, ok := p4.(string); ok {
			name, _, _ = strings.Cut(s, "(")
		}
		bad := false
		switch opcode {
		case "OpenEphemeral", "OpenAutoindex", "SorterOpen", "OpenDup", "OpenPseudo":
			ephemeral[p1] = true
		case "Insert", "IdxInsert", "Delete", "IdxDelete":
			bad = !ephemeral[p1]
		case "OpenRead", "ReopenIdx":
			bad = p2 != s.root || p3 != 0
		case "Transaction":
			bad = p1 != 0 || p2 != 0
		case "Function", "PureFunc":
			bad = !slices.Contains(funcs, strings.ToLower(name))
		case "AggStep", "AggStep1", "AggFinal", "AggValue", "AggInverse":
			bad = name != "count"
		case "OpenWrite", "CreateBtree", "Destroy",
			"Clear", "DropTable", "DropIndex", "DropTrigger", "ParseSchema", "SqlExec", "Vacuum",
			"IncrVacuum", "SetCookie", "Program", "VOpen", "VFilter", "VUpdate", "VCreate",
			"VDestroy", "VBegin", "JournalMode", "Checkpoint", "LoadAnalysis", "Expire":
			bad = true
		}
		if bad {
			return true, fmt.Errorf("EXPLAIN step %d: %s p1=%d p2=%d p3=%d p4=%v", addr, opcode, p1, p2, p3, p4)
		}
	}
	return true, rows.Err()
}

// run runs the query; SQLite may refuse or fail it, which is reported.
func (s *sandbox) run(ctx context.Context, p string) error {
	var n int64
	return s.db.QueryRowContext(ctx, query(p)).Scan(&n)
}

// TestAcceptedRunInSQLite runs every case the way crffd would: only a
// predicate Check accepts reaches SQLite, and there it must prepare, stay
// within records, run, and leave the database as it was.
func TestAcceptedRunInSQLite(t *testing.T) {
	s := newSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range accepted {
		if err := subgroup.Check(p, columns); err != nil {
			t.Errorf("Check(%q) = %v", p, err)
			continue
		}
		prepared, err := s.plan(ctx, p)
		if !prepared {
			_, err = s.db.PrepareContext(ctx, query(p))
			t.Errorf("%q does not prepare: %v", p, err)
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", p, err)
		}
		if err := s.run(ctx, p); err != nil {
			t.Errorf("%q does not run: %v", p, err)
		}
		if err := s.intact(); err != nil {
			t.Fatalf("after %q: %v", p, err)
		}
	}
	for _, r := range refused {
		err := subgroup.Check(r.predicate, columns)
		if !errors.Is(err, subgroup.ErrRefused) {
			t.Errorf("Check(%.60q) = %v, want a refusal", r.predicate, err)
			if err == nil {
				_ = s.run(ctx, r.predicate)
			}
		}
	}
	if err := s.intact(); err != nil {
		t.Fatal(err)
	}
	var secret string
	if err := s.db.QueryRow(`SELECT secret FROM other`).Scan(&secret); err != nil {
		t.Fatalf("table other is gone: %v", err)
	}
}

// TestOracleDetects makes sure the EXPLAIN oracle the fuzzer relies on is
// not vacuous: predicates Check refuses for reaching beyond records, run
// without Check, are caught by it.
func TestOracleDetects(t *testing.T) {
	s := newSandbox(t)
	ctx := context.Background()
	for _, p := range []string{
		`age IN (SELECT rowid FROM other)`,
		`(SELECT count(*) FROM sqlite_master) > 0`,
		`random() > 0`,
		`sqlite_version() = 1`,
		`exists (select 1 from other)`,
	} {
		if subgroup.Check(p, columns) == nil {
			t.Errorf("Check(%q) = nil", p)
		}
		prepared, err := s.plan(ctx, p)
		if !prepared || err == nil {
			t.Errorf("the EXPLAIN oracle let %q through (prepared %v)", p, prepared)
		}
	}
}

package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectionSettings checks the per-connection settings Open promises:
// foreign keys and the busy timeout on both pools, query_only on the
// read pool.
func TestConnectionSettings(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.sqlite"), Options{Create: true, BusyTimeout: 1234e6})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, db := range map[string]querier{"write": s.rw, "read": s.ro} {
		var fk, busy, queryOnly int
		if err := db.QueryRowContext(ctx, `SELECT (SELECT * FROM pragma_foreign_keys),
			(SELECT * FROM pragma_busy_timeout), (SELECT * FROM pragma_query_only)`).Scan(&fk, &busy, &queryOnly); err != nil {
			t.Fatal(err)
		}
		if fk != 1 || busy != 1234 || (queryOnly == 1) != (name == "read") {
			t.Errorf("%s pool: foreign_keys %d, busy_timeout %d, query_only %d", name, fk, busy, queryOnly)
		}
	}
	if _, err := s.ro.ExecContext(ctx, `CREATE TABLE x (a)`); err == nil {
		t.Error("the read pool can write")
	}
}

func TestRowID(t *testing.T) {
	tests := []struct {
		in    any
		str   string
		valid bool
	}{
		{int64(17), "17", true},
		{"abc", `"abc"`, true},
		{nil, "NULL", false},
		{1.5, "1.5", false},
		{[]byte{0, 255}, "x'00ff'", false},
	}
	for _, tt := range tests {
		id, err := rowIDOf(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if id.String() != tt.str || id.Valid() != tt.valid {
			t.Errorf("%v: %s valid %v", tt.in, id, id.Valid())
		}
		v, _ := id.Value()
		back, _ := rowIDOf(v)
		if back != id {
			t.Errorf("%v does not survive Value/Scan", tt.in)
		}
	}
	if _, err := rowIDOf(struct{}{}); err == nil {
		t.Error("unsupported type accepted")
	}
}

// TestPropensitiesQuerySearchesByKey: the queries of ReadPropensities and
// ReadPositivity scan the user's table once and find each row's CATE by
// key, not the other way round (which took minutes at 100 000 rows).
func TestPropensitiesQuerySearchesByKey(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.sqlite"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.rw.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, w INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for q, args := range map[string][]any{propensitiesQuery(`"t"`, `"id"`, `"w"`): nil, positivityQuery(`"t"`, `"id"`, `"w"`): {0.01, 0.99}} {
		if p := QueryPlan(t, s.rw, q, args...); !strings.HasPrefix(p, "SCAN r") || !strings.Contains(p, "SEARCH crff_cate_rows USING PRIMARY KEY (run=? AND row_id=?)") {
			t.Errorf("plan of %s: %s", q, p)
		}
	}
}

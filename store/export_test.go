package store

import (
	"database/sql"
	"strings"
	"testing"
)

// SetCATEChunk makes transactions write or delete at most n CATEs (the
// default is about 10 000) until t ends, so that a test of a few rows
// sees them written in many transactions.
func SetCATEChunk(t testing.TB, n int) {
	old := cateChunk
	cateChunk = n
	t.Cleanup(func() { cateChunk = old })
}

// QueryPlan returns SQLite's plan of query (with args) on db, its steps
// joined by "; ".
func QueryPlan(t testing.TB, db interface {
	Query(string, ...any) (*sql.Rows, error)
}, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}

// SetMapRowsMin makes reads of s with Options.MapRows map covariates of
// at least values values, so that a test's few rows are mapped.
func SetMapRowsMin(s *Site, values int) { s.mapRows = values }

// Mapped reports whether r's covariates are in a mapping.
func Mapped(r *Records) bool { return r.mapped }

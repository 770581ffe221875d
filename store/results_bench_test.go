package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

// scoredFile returns an open site whose table of n rows (five covariates)
// is scored by run-1, every CATE with its row's covariate digest.
func scoredFile(b *testing.B, n int) (string, *store.Site) {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "site.sqlite")
	var q strings.Builder
	q.WriteString(`CREATE TABLE records (id INTEGER PRIMARY KEY, w INTEGER, y REAL, x1 REAL, x2 REAL, x3 REAL, x4 REAL, x5 REAL);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < `)
	fmt.Fprint(&q, n)
	q.WriteString(`) INSERT INTO records SELECT i, i % 2, i * 0.5, i * 0.1, i % 7, i % 11, i * 0.01, i % 3 FROM n;`)
	execSQL(b, path, q.String())
	s := openSite(b, path)
	recs, err := s.ReadRecords(ctx, store.Source{DB: path, Table: "records", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y"})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.BeginRun(ctx, "run-1", recs.Layout); err != nil {
		b.Fatal(err)
	}
	res := fakeResults(recs.IDs, 1)
	for i := range res.CATE {
		res.CATE[i].XDigest = &recs.XDigests[i]
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		b.Fatal(err)
	}
	return path, s
}

// BenchmarkPoll measures what crffd site does each poll of a scored table
// where nothing changed: look for the CATEs of deleted and of edited rows.
// Its cost should grow about linearly with the row count.
func BenchmarkPoll(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			ctx := context.Background()
			_, s := scoredFile(b, n)
			b.ResetTimer()
			for range b.N {
				if k, err := s.PruneScores(ctx, "run-1"); err != nil || k != 0 {
					b.Fatalf("prune: %d, %v", k, err)
				}
				if k, err := s.ForgetEdited(ctx, "run-1"); err != nil || k != 0 {
					b.Fatalf("forget edited: %d, %v", k, err)
				}
			}
		})
	}
}

// TestDataVersion: the data version changes when another connection
// commits to the file, and not when the Site itself writes.
func TestDataVersion(t *testing.T) {
	ctx := context.Background()
	path, s, _ := fittedRecords(t)
	v0, err := s.DataVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteATE(ctx, "run-1", store.ATE{Scope: store.ScopeGlobal, Estimator: store.EstimatorAIPW, ATE: 1, SE: 0.1, Lower: 0.8, Upper: 1.2, N: 3}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.DataVersion(ctx); err != nil || v != v0 {
		t.Errorf("after the Site's own write: %d, %v; want %d", v, err, v0)
	}
	execSQL(t, path, `UPDATE records SET age = age + 1 WHERE patient_id = 1`)
	if v, err := s.DataVersion(ctx); err != nil || v == v0 {
		t.Errorf("after another connection's write: %d, %v; want a change from %d", v, err, v0)
	}
	ro, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.DataVersion(ctx); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("read-only site: %v, want ErrReadOnly", err)
	}
}

// BenchmarkWriteResultsSubgroups measures publishing a run's results with
// no subgroup and with five in crff_subgroup, whose effects the same
// transaction computes; issue 34 allows them 5% of a fit, of which this
// write is a small part.
func BenchmarkWriteResultsSubgroups(b *testing.B) {
	for _, n := range []int{1000, 20000, 100000} {
		for _, groups := range []int{0, 5} {
			b.Run(fmt.Sprintf("rows=%d/subgroups=%d", n, groups), func(b *testing.B) {
				ctx := context.Background()
				path, s := scoredFile(b, n)
				for g := range groups {
					execSQL(b, path, `INSERT INTO crff_subgroup (name, predicate) VALUES (?, ?)`, fmt.Sprint("g", g), fmt.Sprintf("x2 >= %d AND x4 < %g", g, 0.5*float64(n)))
				}
				recs, err := s.ReadRecords(ctx, store.Source{DB: path, Table: "records", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y"})
				if err != nil {
					b.Fatal(err)
				}
				res := fakeResults(recs.IDs, 2)
				for i := range res.CATE {
					res.CATE[i].PSI = float64(i % 5)
				}
				b.ResetTimer()
				for i := range b.N {
					run := fmt.Sprint("run-b", i)
					if err := s.BeginRun(ctx, run, recs.Layout); err != nil {
						b.Fatal(err)
					}
					if err := s.WriteResults(ctx, run, res); err != nil {
						b.Fatal(err)
					}
				}
				// Publishing writes the new run's rows and deletes the old
				// run's, each with its pauses (Site.WriteCATE).
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crffd/crffd/store"
)

// newBigSite returns a site file with a table of n rows, ids 1..n, and
// their ids; half the rows are treated.
func newBigSite(t testing.TB, n int) (string, []store.RowID) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "big.sqlite")
	s, err := store.Open(ctx, path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cols := []store.Column{{"id", store.Integer}, {"x", store.Real}, {"w", store.Integer}, {"y", store.Real}}
	rows := make([][]any, n)
	ids := make([]store.RowID, n)
	for i := range rows {
		rows[i] = []any{int64(i + 1), float64(i % 17), int64(i % 2), float64(i%5) + 0.5}
		ids[i] = store.IntID(int64(i + 1))
	}
	if err := s.CreateTable(ctx, "t", cols, rows, false); err != nil {
		t.Fatal(err)
	}
	return path, ids
}

func bigSource(path string) store.Source {
	return store.Source{DB: path, Table: "t", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y"}
}

// publish begins run and writes results for ids whose every value is v.
func publish(ctx context.Context, s *store.Site, layout store.Layout, run string, ids []store.RowID, v float64) error {
	if err := s.BeginRun(ctx, run, layout); err != nil {
		return err
	}
	return s.WriteResults(ctx, run, fakeResults(ids, v))
}

// checkOneRun reads the published results in one statement (one snapshot)
// and reports a mix of runs or a partial run.
func checkOneRun(q interface {
	QueryRow(string, ...any) *sql.Row
}, n int) error {
	var rows, runs int
	var lo, hi float64
	var ateRun, cateRun sql.NullString
	err := q.QueryRow(`SELECT count(*), count(DISTINCT run), min(cate), max(cate),
		(SELECT run FROM crff_ate WHERE scope = 'local'), min(run) FROM crff_cate`).Scan(&rows, &runs, &lo, &hi, &ateRun, &cateRun)
	if err != nil {
		return err
	}
	if rows != n || runs != 1 || lo != hi || ateRun != cateRun {
		return fmt.Errorf("mixed results: %d rows of %d runs, cate %v..%v, ATE of %v, CATE of %v", rows, runs, lo, hi, ateRun.String, cateRun.String)
	}
	return nil
}

// TestReadersSeeOneRun writes run after run while readers in other
// connections, without any busy timeout (as the sqlite3 shell), read
// crff_cate, crff_ate and crff_cate_records. Every read must succeed (no
// SQLITE_BUSY) and see exactly one complete run.
func TestReadersSeeOneRun(t *testing.T) {
	const n = 2000
	ctx := context.Background()
	path, ids := newBigSite(t, n)
	s := openSite(t, path)
	recs, err := s.ReadRecords(ctx, bigSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(ctx, s, recs.Layout, "run-0", ids, 0); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var writes atomic.Int64
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		for k := 1; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := publish(ctx, s, recs.Layout, fmt.Sprintf("run-%d", k), ids, float64(k)); err != nil {
				writeErr = err
				return
			}
			writes.Add(1)
		}
	})
	dsn := "file:" + path + "?_pragma=busy_timeout(0)&mode=ro"
	var reads atomic.Int64
	errs := make(chan error, 2)
	for r := range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				// Reader 0 reuses one connection; reader 1 opens a new one
				// for every read, as a shell started per query does.
				db, err := sql.Open("sqlite", dsn)
				if err != nil {
					errs <- err
					return
				}
				for range 1 + 19*(1-r) {
					if err := checkOneRun(db, n); err != nil {
						db.Close()
						errs <- err
						return
					}
					var c int
					if err := db.QueryRow(`SELECT count(*) FROM crff_cate_records WHERE cate IS NOT NULL`).Scan(&c); err != nil || c != n {
						db.Close()
						errs <- fmt.Errorf("crff_cate_records: %d scored rows, %v", c, err)
						return
					}
					reads.Add(1)
				}
				db.Close()
			}
		})
	}
	// Run for a second at least, and until enough runs and reads have
	// happened (slow under the race detector), but 30 s at most.
	start := time.Now()
	for time.Since(start) < time.Second || (writes.Load() < 5 || reads.Load() < 20) && time.Since(start) < 30*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("reader: %v", err)
		}
	}
	if writeErr != nil {
		t.Fatalf("writer: %v", writeErr)
	}
	if writes.Load() < 3 || reads.Load() < 10 {
		t.Errorf("only %d writes and %d reads: the test proved little", writes.Load(), reads.Load())
	}
	t.Logf("%d runs written while %d consistent reads were made", writes.Load(), reads.Load())
}

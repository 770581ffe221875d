package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
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

// publishedBigSite returns newBigSite's file of n rows, open, its records
// read, and run published on them with every value 1.
func publishedBigSite(t *testing.T, n int, run string) (string, *store.Site, *store.Records, []store.RowID) {
	t.Helper()
	ctx := context.Background()
	path, ids := newBigSite(t, n)
	s := openSite(t, path)
	recs, err := s.ReadRecords(ctx, bigSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(ctx, s, recs.Layout, run, ids, 1); err != nil {
		t.Fatal(err)
	}
	return path, s, recs, ids
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
	// Each run's CATEs in 14 transactions, and the old run's deleted in
	// as many.
	store.SetCATEChunk(t, 150)
	ctx := context.Background()
	path, s, recs, ids := publishedBigSite(t, n, "run-0")

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

// TestUserWritesBetweenChunks: while a run of many CATEs is published,
// a writer of the user's, with a busy timeout as SQLite's shell sets
// with .timeout, commits between crffd's transactions, not only before
// or after all of them: it sees the new run's rows partly written. And
// once published, the old run's rows are gone from crff_cate_rows.
func TestUserWritesBetweenChunks(t *testing.T) {
	const n = 3000
	store.SetCATEChunk(t, 100)
	ctx := context.Background()
	path, s, recs, ids := publishedBigSite(t, n, "run-1")
	user, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	user.SetMaxOpenConns(1)
	if _, err := user.Exec(`CREATE TABLE notes (at INTEGER, seen INTEGER)`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- publish(ctx, s, recs.Layout, "run-2", ids, 2) }()
	var partial, writes int
	for published := false; !published; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			published = true
		default:
		}
		// One user transaction: what it saw of run-2 is what was
		// committed before it took the write lock.
		var seen int
		tx, err := user.Begin()
		if err == nil {
			_, err = tx.Exec(`INSERT INTO notes VALUES (?, (SELECT count(*) FROM crff_cate_rows WHERE run = 'run-2'))`, writes)
		}
		if err == nil {
			err = tx.QueryRow(`SELECT seen FROM notes WHERE at = ?`, writes).Scan(&seen)
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			t.Fatalf("user write %d: %v", writes, err)
		}
		writes++
		if seen > 0 && seen < n {
			partial++
		}
		// A user writes now and then, not without a pause: a writer that
		// never pauses would keep crffd out instead.
		time.Sleep(5 * time.Millisecond)
	}
	if partial == 0 {
		t.Errorf("%d user writes, none between crffd's chunks of run-2's CATEs", writes)
	}
	var rows, runs int
	if err := user.QueryRow(`SELECT count(*), count(DISTINCT run) FROM crff_cate_rows`).Scan(&rows, &runs); err != nil || rows != n || runs != 1 {
		t.Errorf("crff_cate_rows after publishing: %d rows of %d runs, %v; want %d of 1", rows, runs, err, n)
	}
	t.Logf("%d user writes, %d of them with run-2 partly written", writes, partial)
}

// TestInterruptedWrite: CATEs written for a run that is not published
// (a fit stopped while writing) leave crff_cate the current run's whole;
// publishing the run again replaces them, and publishing another deletes
// them. Writing a row twice, or writing to the current run, fails. A run
// id may hold quotes.
func TestInterruptedWrite(t *testing.T) {
	const n = 300
	store.SetCATEChunk(t, 40)
	ctx := context.Background()
	path, s, recs, ids := publishedBigSite(t, n, "run-1")
	if err := s.BeginRun(ctx, "run-2", recs.Layout); err != nil {
		t.Fatal(err)
	}
	cs := fakeResults(ids, 2).CATE
	if err := s.WriteCATE(ctx, "run-2", cs[:n/2]); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	if err := checkOneRun(db, n); err != nil {
		t.Errorf("with run-2 half written: %v", err)
	}
	if err := s.WriteCATE(ctx, "run-2", cs[n/2-1:n/2]); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("row %s", ids[n/2-1])) {
		t.Errorf("a row written twice: %v, want an error naming row %s", err, ids[n/2-1])
	}
	if err := s.WriteCATE(ctx, "run-1", cs[:1]); !errors.Is(err, store.ErrStaleRun) {
		t.Errorf("CATEs of the current run: %v, want ErrStaleRun", err)
	}
	// Publishing run-2 again writes its every row once.
	if err := s.WriteResults(ctx, "run-2", fakeResults(ids, 2)); err != nil {
		t.Fatal(err)
	}
	if err := checkOneRun(db, n); err != nil {
		t.Errorf("run-2 published: %v", err)
	}
	// A run stopped while writing, and then published over.
	if err := s.BeginRun(ctx, "run-3", recs.Layout); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteCATE(ctx, "run-3", cs[:n/3]); err != nil {
		t.Fatal(err)
	}
	// A run id with a quote (the statements hold it as a literal).
	const run4 = "run-4 'o''k'; --"
	if err := publish(ctx, s, recs.Layout, run4, ids, 4); err != nil {
		t.Fatal(err)
	}
	var rows int
	var runs string
	if err := db.QueryRow(`SELECT count(*), group_concat(DISTINCT run) FROM crff_cate_rows`).Scan(&rows, &runs); err != nil || rows != n || runs != run4 {
		t.Errorf("crff_cate_rows: %d rows of runs %q, %v; want %d of %q", rows, runs, err, n, run4)
	}
	if err := checkOneRun(db, n); err != nil {
		t.Errorf("%s published: %v", run4, err)
	}
}

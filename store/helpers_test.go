package store_test

import (
	"net/url"

	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/crffd/crffd/sqlfiles"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crffd/crffd/store"
)

// recordsSource is the Source of testdata/records.sql.
func recordsSource(path string) store.Source {
	return store.Source{
		DB:              path,
		Table:           "records",
		IDColumn:        "patient_id",
		TreatmentColumn: "treated",
		OutcomeColumn:   "outcome",
	}
}

// rawDB opens path with a plain connection, as another program would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqlfiles.FileURI(path, url.Values{"_pragma": {"busy_timeout(5000)"}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// execSQL runs statements on path through a plain connection.
func execSQL(t testing.TB, path string, query string, args ...any) {
	t.Helper()
	if _, err := rawDB(t, path).Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// newRecordsFile returns a fresh file holding testdata/records.sql, with
// setup statements applied after it.
func newRecordsFile(t testing.TB, setup ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "site.sqlite")
	fixture, err := os.ReadFile(filepath.Join("testdata", "records.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, q := range append([]string{string(fixture)}, setup...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("setup %q: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// openSite opens path for the test, with a short busy timeout.
func openSite(t testing.TB, path string) *store.Site {
	t.Helper()
	s, err := store.Open(context.Background(), path, store.Options{BusyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tableDigest returns a SHA-256 over everything a user could see of table:
// its CREATE statement, every row with its rowid, each value with its
// storage class and exact bits (a REAL by its IEEE 754 bits, not printed),
// and the raw bytes of every database page that belongs to the table or its
// indexes (dbstat and sqlite_dbpage). Two equal digests mean the table is
// byte for byte the same.
func tableDigest(t testing.TB, path, table string) string {
	t.Helper()
	db := rawDB(t, path)
	h := sha256.New()
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = ?`, table).Scan(&ddl); err != nil {
		t.Fatalf("digest %s: %v", table, err)
	}
	fmt.Fprintf(h, "ddl %q\n", ddl)
	rows, err := db.Query(fmt.Sprintf(`SELECT rowid, * FROM %q ORDER BY rowid`, table))
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		n++
		for _, v := range vals {
			switch v := v.(type) {
			case float64:
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
				fmt.Fprintf(h, "real %x|", b)
			default:
				fmt.Fprintf(h, "%T %v|", v, v)
			}
		}
		h.Write([]byte("\n"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	pages, err := db.Query(`SELECT pgno, data FROM sqlite_dbpage
		WHERE pgno IN (SELECT pageno FROM dbstat WHERE name IN
			(SELECT name FROM sqlite_schema WHERE tbl_name = ? AND type IN ('table', 'index')))
		ORDER BY pgno`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer pages.Close()
	np := 0
	for pages.Next() {
		var pgno int
		var data []byte
		if err := pages.Scan(&pgno, &data); err != nil {
			t.Fatal(err)
		}
		np++
		fmt.Fprintf(h, "page %d %x\n", pgno, sha256.Sum256(data))
	}
	if err := pages.Err(); err != nil {
		t.Fatal(err)
	}
	if np == 0 {
		t.Fatalf("digest %s: no pages found", table)
	}
	return fmt.Sprintf("%d rows, %d pages, %s", n, np, hex.EncodeToString(h.Sum(nil)))
}

// fileDigest returns the SHA-256 of a file's bytes.
func fileDigest(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// fakeResults returns results for ids, with every value equal to v so that
// a reader can tell runs apart.
func fakeResults(ids []store.RowID, v float64) store.Results {
	res := store.Results{ATE: []store.ATE{
		{Scope: store.ScopeLocal, Estimator: store.EstimatorAIPW, ATE: v, SE: 0.1, Lower: v - 0.196, Upper: v + 0.196, N: len(ids), Clipped: 0},
		{Scope: store.ScopeLocal, Estimator: store.EstimatorPlugIn, ATE: v, SE: math.NaN(), Lower: math.NaN(), Upper: math.NaN(), N: len(ids), Clipped: -1},
	}}
	for _, id := range ids {
		res.CATE = append(res.CATE, store.CATE{
			RowID: id, CATE: v, SE: 0.5, Lower: v - 0.98, Upper: v + 0.98, Latent: v - 0.1, LatentSD: 0.5, LatentQ025: v - 1, LatentQ975: v + 1,
			Y0: 1, Y1: 1 + v, Propensity: 0.5, Raw: v, PSI: math.NaN(),
		})
	}
	return res
}

// begunRun returns a records file with run-1 begun on it, with age and
// smoker as covariates and faulty rows skipped, its open site and the
// records read; the test writes the run's results.
func begunRun(t testing.TB) (string, *store.Site, *store.Records) {
	t.Helper()
	path := newRecordsFile(t)
	s := openSite(t, path)
	src := recordsSource(path)
	src.OnInvalid = store.Skip
	src.Covariates = []string{"age", "smoker"}
	recs, err := s.ReadRecords(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(context.Background(), "run-1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	return path, s, recs
}

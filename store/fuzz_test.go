package store_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/sqlfiles"
	"github.com/crffd/crffd/store"
)

// FuzzImportCSV checks that ImportCSV never panics, that every error is an
// *ImportError naming the input, and that an accepted input becomes a table
// with as many rows as the CSV has data records, each value stored with its
// column's type. The seed corpus lives in testdata/fuzz/FuzzImportCSV.
func FuzzImportCSV(f *testing.F) {
	f.Add([]byte("id,age,w,y\n1,34.5,1,3.25\n2,51,0,1e-3\n"), true)
	f.Add([]byte("1,2\n3,4\n"), false)
	f.Add([]byte("a,\"b \"\"q\"\"\"\n\"x\ny\",inf\n"), true)
	f.Add([]byte("\ufeffA,a\n1,2\n"), true)
	f.Add([]byte("007,NaN,-0,+5\n"), false)
	f.Add([]byte("id;score\n1;1,5\n2;n/a\n"), false)
	f.Add([]byte("a\tb\n\"x\ty\"\t2\n"), true)
	f.Add([]byte("1;2,5\n2;3,5\n"), false)
	f.Add([]byte("a|b\n\"x\ny\"|2\n"), false)
	f.Add([]byte("score\n1.5\nn/a\n?\n-\n2\n"), false)
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(f.TempDir(), "fuzz.sqlite"), store.Options{Create: true})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	db := rawDB(f, s.Path())
	f.Fuzz(func(t *testing.T, data []byte, header bool) {
		res, err := s.ImportCSV(ctx, "t", bytes.NewReader(data), store.ImportOptions{Header: header, Replace: true, Name: "fuzz.csv"})
		if err != nil {
			var ie *store.ImportError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), `import "fuzz.csv"`) {
				t.Fatalf("error %q is not an ImportError naming the input", err)
			}
			return
		}
		if !res.Detected || !strings.ContainsRune(",;\t|", res.Comma) {
			t.Fatalf("separator %q (detected %v), want one of comma, semicolon, tab, pipe, detected", res.Comma, res.Detected)
		}
		for _, c := range res.Text {
			if c.ByHeader && (!res.HeaderLike || c.Values-c.Numbers != 1) {
				t.Fatalf("column %s TEXT by the header, but header-like %v and %d of %d values not numbers", c.Name, res.HeaderLike, c.Values-c.Numbers, c.Values)
			}
		}
		if header && res.HeaderLike {
			t.Fatal("a file imported with its header row is said to look like it has one")
		}
		// Given the separator it detected, ImportCSV reads the same table.
		again, err := s.ImportCSV(ctx, "t", bytes.NewReader(data), store.ImportOptions{Header: header, Replace: true, Name: "fuzz.csv", Comma: res.Comma})
		if err != nil || again.Detected || again.Rows != res.Rows || fmt.Sprint(again.Columns) != fmt.Sprint(res.Columns) ||
			fmt.Sprint(again.Text) != fmt.Sprint(res.Text) || again.HeaderLike != res.HeaderLike {
			t.Fatalf("with --delimiter %q: %+v, %v\nwant %+v", res.Comma, again, err, res)
		}
		// The oracle reads with the separator ImportCSV detected.
		cr := csv.NewReader(bytes.NewReader(data))
		cr.Comma = res.Comma
		recs, err := cr.ReadAll()
		if err != nil {
			t.Fatalf("ImportCSV accepted input encoding/csv refuses: %v", err)
		}
		if header {
			recs = recs[1:]
		}
		if res.Rows != len(recs) {
			t.Fatalf("imported %d rows of %d records", res.Rows, len(recs))
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != res.Rows {
			t.Fatalf("table t has %d rows (%v), want %d", n, err, res.Rows)
		}
		// Values have their column's type (checked on the first columns).
		var q strings.Builder
		q.WriteString("SELECT 0")
		for j, c := range res.Columns[:min(8, len(res.Columns))] {
			qc, err := sqlfiles.QuoteIdent(c.Name)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&q, " + (SELECT count(*) FROM t WHERE typeof(%s) NOT IN ('null', '%s'))", qc, strings.ToLower(string(c.Type)))
			// A TEXT field is stored as read.
			if c.Type == store.Text {
				for i, rec := range recs {
					if strings.TrimSpace(rec[j]) == "" {
						continue
					}
					var v string
					if err := db.QueryRow(fmt.Sprintf(`SELECT %s FROM t WHERE rowid = ?`, qc), i+1).Scan(&v); err != nil || v != rec[j] {
						t.Fatalf("row %d, column %q: stored %q (%v), read %q", i+1, c.Name, v, err, rec[j])
					}
					break
				}
			}
		}
		if err := db.QueryRow(q.String()).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d values of the wrong type (%v)", n, err)
		}
	})
}

// FuzzDetectDelimiter checks the detection of the separator and of a header
// row on any bytes: no panic, a separator crffd knows, and never one other
// than a comma that does not split the file's first record; LooksLikeHeader
// is given the ragged records that lenient quotes make of the input.
func FuzzDetectDelimiter(f *testing.F) {
	f.Add([]byte("a;b\n1;2\n"))
	f.Add([]byte("1,5;2,5\n3,1;4,2\n"))
	f.Add([]byte("\"a\nb\"\tc\n1\t2\n"))
	f.Add([]byte("x|\"y\n"))
	f.Add([]byte(strings.Repeat("1;2\n", 30) + "1;2;3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := store.DetectDelimiter(data)
		if !strings.ContainsRune(",;\t|", c) {
			t.Fatalf("separator %q", c)
		}
		if again := store.DetectDelimiter(data); again != c {
			t.Fatalf("separator %q, then %q", c, again)
		}
		r := csv.NewReader(bytes.NewReader(data))
		r.Comma, r.FieldsPerRecord, r.LazyQuotes = c, -1, true
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatalf("lenient read: %v", err)
		}
		if c != ',' && (len(recs) == 0 || len(recs[0]) < 2) {
			t.Fatalf("separator %q does not split the first record %q", c, recs)
		}
		store.LooksLikeHeader(recs)
	})
}

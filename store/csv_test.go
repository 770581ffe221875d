package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

func TestImportCSV(t *testing.T) {
	ctx := context.Background()
	f, err := os.Open(filepath.Join("testdata", "csv", "visits.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path := filepath.Join(t.TempDir(), "site.sqlite")
	res, err := store.ImportCSV(ctx, path, "visits", f, store.ImportOptions{Header: true, Name: "visits.csv"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Columns {
		got = append(got, c.Name+" "+string(c.Type))
	}
	want := "patient_id INTEGER, age REAL, smoker INTEGER, zip TEXT, note TEXT, treated INTEGER, outcome REAL"
	if strings.Join(got, ", ") != want || res.Rows != 3 {
		t.Errorf("columns %s (%d rows)\nwant    %s", strings.Join(got, ", "), res.Rows, want)
	}
	db := rawDB(t, path)
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'visits'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, `"patient_id" INTEGER, "age" REAL`) {
		t.Errorf("table %s", ddl)
	}
	var rows []string
	r, err := db.Query(`SELECT quote(patient_id), quote(age), quote(smoker), quote(zip), quote(note), typeof(outcome), outcome < 0 FROM visits ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var a, b, c, d, e, ty string
		var neg bool
		if err := r.Scan(&a, &b, &c, &d, &e, &ty, &neg); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, strings.Join([]string{a, b, c, d, e, ty}, " "))
	}
	r.Close()
	wantRows := []string{
		`1 34.5 0 '02139' 'first, visit' real`,
		`2 51.0 1 '10001' NULL real`,
		`3 47.0 NULL '02139' 'said "hi"' real`,
	}
	if strings.Join(rows, "\n") != strings.Join(wantRows, "\n") {
		t.Errorf("rows\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}
}

func TestImportCSVTypes(t *testing.T) {
	tests := []struct {
		name, csv string
		want      string // column types
	}{
		{"integers", "1\n-2\n+3\n", "INTEGER"},
		{"reals", "1\n2.5\n.5\n1e3\n", "REAL"},
		{"infinity", "1\ninf\n-Infinity\n", "REAL"},
		{"text", "1\nabc\n", "TEXT"},
		{"leading zero", "007\n8\n", "TEXT"},
		{"huge integer", "123456789012345678901234567890\n", "TEXT"},
		{"hex is text", "0x10\n", "TEXT"},
		{"all empty", "\"\"\n \n", "TEXT"},
		{"zero", "0\n0.0\n", "REAL"},
		{"two signs", "+-1\n", "TEXT"},
		{"exponent without digits", "1e\n", "TEXT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sqlite")
			res, err := store.ImportCSV(context.Background(), path, "t", strings.NewReader(tt.csv), store.ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.Columns[0].Type); got != tt.want || res.Columns[0].Name != "c1" {
				t.Errorf("column %s %s, want c1 %s", res.Columns[0].Name, got, tt.want)
			}
		})
	}
}

func TestImportCSVRefuses(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, table, csv string
		header           bool
		want             error
		msg              string
	}{
		{"NaN", "t", "a,b\n1,2\n3,NaN\n", true, store.ErrNotFinite, `import "in.csv": line 3, column 2 ("b"): not a finite number: NaN cannot be stored`},
		{"ragged", "t", "1,2\n3\n", false, store.ErrCSV, `import "in.csv": line 2: invalid CSV: wrong number of fields`},
		{"bad quote", "t", "1,\"2\n", false, store.ErrCSV, `import "in.csv": line 1: invalid CSV: extraneous or missing " in quoted-field`},
		{"duplicate header", "t", "a,A\n1,2\n", true, store.ErrCSV, `import "in.csv": line 1, column 2 ("A"): invalid CSV: the name of column 1 again`},
		{"no rows", "t", "a,b\n", true, store.ErrEmpty, `import "in.csv": no rows: no data rows`},
		{"empty input", "t", "", false, store.ErrEmpty, `no data rows`},
		{"crff table", "crff_cate", "1\n", false, store.ErrReservedName, `table "crff_cate": reserved table name`},
		{"exists", "records", "1\n", false, store.ErrTableExists, `table already exists: table "records" (replace it explicitly to overwrite it)`},
		{"exists in other case", "RECORDS", "1\n", false, store.ErrTableExists, `table "records"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newRecordsFile(t)
			before := tableDigest(t, path, "records")
			_, err := store.ImportCSV(ctx, path, tt.table, strings.NewReader(tt.csv), store.ImportOptions{Header: tt.header, Name: "in.csv"})
			var ie *store.ImportError
			if !errors.Is(err, tt.want) || !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v\nwant %v containing %q", err, tt.want, tt.msg)
			}
			if after := tableDigest(t, path, "records"); after != before {
				t.Error("a refused import changed a user table")
			}
			var n int
			if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 't'`).Scan(&n); err != nil || n != 0 {
				t.Errorf("a refused import left table t behind (%d, %v)", n, err)
			}
		})
	}
}

func TestImportCSVReplace(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t, `CREATE VIEW v AS SELECT 1`)
	for _, table := range []string{"records", "v"} {
		res, err := store.ImportCSV(ctx, path, table, strings.NewReader("id,x\n1,2\n"), store.ImportOptions{Header: true, Replace: true})
		if err != nil || res.Rows != 1 {
			t.Fatalf("replace %s: %+v, %v", table, res, err)
		}
		var typ string
		var n int
		db := rawDB(t, path)
		if err := db.QueryRow(`SELECT type, (SELECT count(*) FROM `+table+`) FROM sqlite_schema WHERE name = ?`, table).Scan(&typ, &n); err != nil || typ != "table" || n != 1 {
			t.Errorf("after replacing %s: %s with %d rows, %v", table, typ, n, err)
		}
	}
}

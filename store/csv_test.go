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
		why       string // for a TEXT column: why, as TextColumn.String says it
	}{
		{"integers", "1\n-2\n+3\n", "INTEGER", ""},
		{"reals", "1\n2.5\n.5\n1e3\n", "REAL", ""},
		{"infinity", "1\ninf\n-Infinity\n", "REAL", ""},
		{"text", "1\nabc\n", "TEXT", `column c1 stored as TEXT: 1 of 2 values is not a number (line 2: "abc")`},
		{"leading zero", "007\n8\n", "TEXT", `column c1 stored as TEXT: 1 of 2 values is not a number (line 1: "007", a leading zero marks a code)`},
		{"leading zero with decimals", "-007.5\n", "TEXT", `column c1 stored as TEXT: its only value is not a number (line 1: "-007.5", a leading zero marks a code)`},
		{"huge integer", "123456789012345678901234567890\n", "TEXT",
			`column c1 stored as TEXT: its only value is not a number (line 1: "123456789012345678901234567890", an integer too long for 64 bits)`},
		{"hex is text", "0x10\n", "TEXT", `column c1 stored as TEXT: its only value is not a number (line 1: "0x10")`},
		{"all empty", "\"\"\n \n", "TEXT", `column c1 stored as TEXT: every field is empty`},
		{"zero", "0\n0.0\n", "REAL", ""},
		{"two signs", "+-1\n", "TEXT", `column c1 stored as TEXT: its only value is not a number (line 1: "+-1")`},
		{"exponent without digits", "1e\n", "TEXT", `column c1 stored as TEXT: its only value is not a number (line 1: "1e")`},
		{"NaN beside a text", "nan\nabc\n", "TEXT",
			`column c1 stored as TEXT: none of its 2 values is a number (line 1: "nan", NaN: leave the field empty for a missing value)`},
		{"names", "Ada\n\nGrace\nBarbara\n", "TEXT", `column c1 stored as TEXT: none of its 3 values is a number (line 1: "Ada")`},
		{"numbers with markers", "1.5\nn/a\n2\n?\n3\n", "TEXT", `column c1 stored as TEXT: 2 of 5 values are not numbers (lines 2: "n/a", 4: "?")`},
		{"more markers than quoted", "n/a\n1\n?\n2\n-\nn/a\n", "TEXT", `column c1 stored as TEXT: 4 of 6 values are not numbers (lines 1: "n/a", 3: "?", 5: "-", …)`},
		{"codes among numbers", "1\n007\n2\n0042\n", "TEXT", `column c1 stored as TEXT: 2 of 4 values are not numbers (lines 2: "007", 4: "0042"; a leading zero marks a code)`},
		{"reasons differ", "1\n007\nabc\n", "TEXT", `column c1 stored as TEXT: 2 of 3 values are not numbers (lines 2: "007" (a leading zero marks a code), 3: "abc")`},
		{"decimal comma", "1\n\"2,5\"\n", "TEXT",
			`column c1 stored as TEXT: 1 of 2 values is not a number (line 2: "2,5", a comma in a number: crffd reads a decimal point only, and no thousands separators)`},
		{"long text shortened", strings.Repeat("x", 50) + "\n1\n", "TEXT",
			`column c1 stored as TEXT: 1 of 2 values is not a number (line 1: "` + strings.Repeat("x", 40) + `"…)`},
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
			switch {
			case tt.why == "" && len(res.Text) != 0:
				t.Errorf("Text = %+v for a %s column", res.Text, tt.want)
			case tt.why != "" && (len(res.Text) != 1 || res.Text[0].String() != tt.why):
				t.Errorf("Text = %+v\nwant %s", res.Text, tt.why)
			}
		})
	}
}

// TestImportCSVTextColumns checks that every TEXT column is reported with
// its line, and that only a column holding numbers is Mixed: the one crffd
// import warns about.
func TestImportCSVTextColumns(t *testing.T) {
	csv := "id,score,name,empty\n1,1.5,Ada,\n2,0.25,Grace,\n3, n/a ,Linus,\n4,2,Barbara,\n"
	res, err := store.ImportCSV(context.Background(), filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader(csv),
		store.ImportOptions{Header: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line  string
		mixed bool
	}{
		{`column score stored as TEXT: 1 of 4 values is not a number (line 4: " n/a ")`, true},
		{`column name stored as TEXT: none of its 4 values is a number (line 2: "Ada")`, false},
		{`column empty stored as TEXT: every field is empty`, false},
	}
	if len(res.Text) != len(want) {
		t.Fatalf("Text = %+v, want %d columns", res.Text, len(want))
	}
	for i, w := range want {
		if got := res.Text[i]; got.String() != w.line || got.Mixed() != w.mixed {
			t.Errorf("Text[%d] = %q (mixed %v), want %q (mixed %v)", i, got.String(), got.Mixed(), w.line, w.mixed)
		}
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

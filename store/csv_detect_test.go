package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

func TestDetectDelimiter(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       rune
	}{
		{"comma", "a,b,c\n1,2,3\n", ','},
		{"semicolon with decimal commas", "a;b;c\n1,5;2;3,25\n4;5;6\n", ';'},
		{"tab", "a\tb\n1\t2\n", '\t'},
		{"pipe", "a|b|c\n1|2|3\n", '|'},
		{"comma inside quotes", "name;note\nAda;\"x, y\"\nBob;\"z\"\n", ';'},
		{"one column", "1.5\n2\n", ','},
		{"ragged semicolons, consistent commas", "a,b\n1;2,3\n4,5\n", ','},
		{"no newline at the end", "a;b\n1;2", ';'},
		// Without a header row, a semicolon file with decimal commas
		// splits evenly by commas too: only by semicolons are the fields
		// numbers.
		{"decimal commas without a header", "1;2,5\n2;3,5\n", ';'},
		{"decimal commas in every field", "1,5;2,5\n3,1;4,2\n", ';'},
		{"thousands separators in a tab file", "1,000\t2,000\n3,000\t4,000\n", '\t'},
		{"text with semicolons in a comma file", "1,a;b\n2,c;d\n", ','},
		{"names only: a tie goes to comma", "Ada,x;y\nBob,z;w\n", ','},
		{"stray quote", "a;b\n5\";6\n", ';'},
		{"empty", "", ','},
		{"blank lines only", "\n\n", ','},
	} {
		if got := store.DetectDelimiter([]byte(tc.data)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLooksLikeHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs [][]string
		want bool
	}{
		{"names over numbers", [][]string{{"id", "age"}, {"1", "30"}, {"2", "41"}}, true},
		{"a number in the first row", [][]string{{"1", "age"}, {"1", "30"}}, false},
		{"an empty name", [][]string{{"id", ""}, {"1", "30"}}, false},
		{"text all the way down", [][]string{{"Ada", "Lovelace"}, {"Grace", "Hopper"}}, false},
		{"one row", [][]string{{"id", "age"}}, false},
		{"one column", [][]string{{"score"}, {"1.5"}, {"n/a"}, {"2"}}, true},
		{"mostly text below", [][]string{{"score"}, {"1.5"}, {"n/a"}, {"?"}}, false},
		{"decimal commas below", [][]string{{"id", "bmi"}, {"x1", "22,5"}, {"x2", "27,1"}}, true},
		{"a decimal comma in the first row", [][]string{{"22,5", "bmi"}, {"1", "2"}}, false},
		{"empty rows below", [][]string{{"id", "age"}, {"", ""}, {" ", ""}}, false},
		{"ragged", [][]string{{"id", "age"}, {"1"}, {"2", "30", "x"}}, true},
	} {
		if got := store.LooksLikeHeader(tc.recs); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestImportDetects checks what ImportCSV reports about a file: the
// detected separator, a header imported as data, every bad field's count
// with its first lines, and the empty fields per column.
func TestImportDetects(t *testing.T) {
	ctx := context.Background()
	data := "id;score;note\n1;1,5;a\n2;n/a;\n3;?;c\n4;-;d\n5;2;e\n6;;f\n"
	res, err := store.ImportCSV(ctx, filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader(data), store.ImportOptions{Name: "x.csv"})
	if err != nil {
		t.Fatal(err)
	}
	// Only c1 (id) is TEXT because of the header row alone; c2 (score)
	// has other values that are not numbers, c3 (note) holds no numbers.
	byHeader := func(res store.ImportResult) []string {
		var names []string
		for _, c := range res.Text {
			if c.ByHeader {
				names = append(names, c.Name)
			}
		}
		return names
	}
	if res.Comma != ';' || !res.Detected || !res.HeaderLike || res.Rows != 7 || !slices.Equal(byHeader(res), []string{"c1"}) {
		t.Errorf("comma %q detected %v header-like %v rows %d, TEXT by the header %v; want ';', true, true, 7, [c1]",
			res.Comma, res.Detected, res.HeaderLike, res.Rows, byHeader(res))
	}
	var score store.TextColumn
	for _, c := range res.Text {
		if c.Name == "c2" {
			score = c
		}
	}
	if got, want := score.String(), `column c2 stored as TEXT: 5 of 6 values are not numbers (lines 1: "score", 2: "1,5" (a comma in a number: crffd reads a decimal point only, and no thousands separators), 3: "n/a", …)`; got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
	if res.Nulls[1] != 1 || res.Nulls[2] != 1 || res.Nulls[0] != 0 {
		t.Errorf("empty fields %v, want [0 1 1]", res.Nulls)
	}
	res, err = store.ImportCSV(ctx, filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader(data), store.ImportOptions{Header: true, Comma: ';'})
	if err != nil {
		t.Fatal(err)
	}
	if res.Detected || res.HeaderLike || res.Rows != 6 || byHeader(res) != nil {
		t.Errorf("with --header and a given separator: detected %v, header-like %v, %d rows, TEXT by the header %v; want false, false, 6, none",
			res.Detected, res.HeaderLike, res.Rows, byHeader(res))
	}
	res, err = store.ImportCSV(ctx, filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader("\n\n"+data), store.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first data row is on line 3 now.
	if !res.HeaderLike || !slices.Equal(byHeader(res), []string{"c1"}) {
		t.Errorf("after two blank lines: header-like %v, TEXT by the header %v; want true, [c1]", res.HeaderLike, byHeader(res))
	}
}

// TestImportRaggedAfterDetection: a row of the wrong field count says,
// when the separator was guessed, which one, and how to name another;
// through ImportCSV's bounded read a huge first line is still detected.
func TestImportRaggedAfterDetection(t *testing.T) {
	ctx := context.Background()
	ragged := strings.Repeat("1;2\n", 24) + "1;2;3\n"
	_, err := store.ImportCSV(ctx, filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader(ragged), store.ImportOptions{Name: "x.csv"})
	if err == nil || !strings.Contains(err.Error(), "line 25") || !strings.Contains(err.Error(), "(separator semicolon detected; name it with --delimiter)") {
		t.Errorf("ragged, detected: %v", err)
	}
	_, err = store.ImportCSV(ctx, filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader(ragged), store.ImportOptions{Name: "x.csv", Comma: ';'})
	if err == nil || strings.Contains(err.Error(), "detected") {
		t.Errorf("ragged, separator given: %v, want no word of detection", err)
	}
	// Two rows of 1100 fields of 1000 characters: 1.1 MB a line.
	row := strings.Repeat(strings.Repeat("x", 1000)+"|", 1099) + "x\n"
	res, err := store.ImportCSV(ctx, filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader(row+row), store.ImportOptions{Name: "x.csv"})
	if err != nil || res.Comma != '|' || res.Rows != 2 || len(res.Columns) != 1100 {
		t.Errorf("huge lines: separator %q, %d rows, %d columns, %v", res.Comma, res.Rows, len(res.Columns), err)
	}
}

// TestDetectDelimiterSample checks the 20-line sample: a record cut by its
// end (here a quoted field with a line break) is left out, else its
// missing fields would make the true separator look inconsistent.
func TestDetectDelimiterSample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "csv", "semicolon_quoted_break.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if got := store.DetectDelimiter(data); got != ';' {
		t.Errorf("%q, want ';'", got)
	}
	// Lines past the sample do not count: a ragged line 25 is the
	// import's to refuse, not detection's.
	long := strings.Repeat("1;2\n", 24) + "1;2;3\n"
	if got := store.DetectDelimiter([]byte(long)); got != ';' {
		t.Errorf("ragged after the sample: %q, want ';'", got)
	}
	// One huge line: the sample stops at 1 MiB, inside it.
	huge := strings.Repeat("x|", 600_000) + "x\n"
	if got := store.DetectDelimiter([]byte(huge)); got != '|' {
		t.Errorf("huge line: %q, want '|'", got)
	}
}

// TestImportCSVFiles imports the files of testdata/csv as crffd import
// would, without --header and --delimiter unless the case gives them, and
// checks the separator, the header warning and the columns.
func TestImportCSVFiles(t *testing.T) {
	for _, tc := range []struct {
		file     string
		opts     store.ImportOptions
		comma    rune
		detected bool
		header   bool // ImportResult.HeaderLike
		columns  string
		rows     int
		text     []string // ImportResult.Text, as String says it
	}{
		{file: "visits.csv", opts: store.ImportOptions{Header: true}, comma: ',', detected: true,
			columns: "patient_id INTEGER, age REAL, smoker INTEGER, zip TEXT, note TEXT, treated INTEGER, outcome REAL", rows: 3,
			text: []string{
				`column zip stored as TEXT: 2 of 3 values are not numbers (lines 2: "02139", 4: "02139"; a leading zero marks a code)`,
				`column note stored as TEXT: none of its 2 values is a number (line 2: "first, visit")`,
			}},
		{file: "semicolon_header.csv", comma: ';', detected: true, header: true,
			columns: "c1 TEXT, c2 TEXT, c3 TEXT, c4 TEXT, c5 TEXT", rows: 5,
			text: []string{
				`column c1 stored as TEXT: 1 of 5 values is not a number (line 1: "id")`,
				`column c2 stored as TEXT: 1 of 5 values is not a number (line 1: "age")`,
				`column c3 stored as TEXT: none of its 4 values is a number (line 1: "bmi")`,
				`column c4 stored as TEXT: 1 of 5 values is not a number (line 1: "treated")`,
				`column c5 stored as TEXT: none of its 5 values is a number (line 1: "outcome")`,
			}},
		{file: "semicolon_header.csv", opts: store.ImportOptions{Header: true, Comma: ';'}, comma: ';',
			columns: "id INTEGER, age INTEGER, bmi TEXT, treated INTEGER, outcome TEXT", rows: 4,
			text: []string{
				`column bmi stored as TEXT: none of its 3 values is a number (line 2: "22,5", a comma in a number: crffd reads a decimal point only, and no thousands separators)`,
				`column outcome stored as TEXT: none of its 4 values is a number (line 2: "3,25", a comma in a number: crffd reads a decimal point only, and no thousands separators)`,
			}},
		{file: "semicolon_decimal_comma.csv", comma: ';', detected: true,
			columns: "c1 INTEGER, c2 INTEGER, c3 TEXT, c4 INTEGER", rows: 4,
			text: []string{
				`column c3 stored as TEXT: none of its 4 values is a number (line 1: "22,5", a comma in a number: crffd reads a decimal point only, and no thousands separators)`,
			}},
		{file: "tab.tsv", comma: '\t', detected: true, header: true,
			columns: "c1 TEXT, c2 TEXT, c3 TEXT", rows: 3,
			text: []string{
				`column c1 stored as TEXT: 1 of 3 values is not a number (line 1: "id")`,
				`column c2 stored as TEXT: 1 of 3 values is not a number (line 1: "age")`,
				`column c3 stored as TEXT: none of its 3 values is a number (line 1: "city")`,
			}},
		{file: "pipe.csv", opts: store.ImportOptions{Header: true}, comma: '|', detected: true,
			columns: "id INTEGER, score TEXT, note TEXT", rows: 3,
			text: []string{
				`column score stored as TEXT: 1 of 3 values is not a number (line 3: "n/a")`,
				`column note stored as TEXT: none of its 2 values is a number (line 2: "ok")`,
			}},
		{file: "one_column.csv", opts: store.ImportOptions{Comma: ';'}, comma: ';', columns: "c1 REAL", rows: 3},
		{file: "one_column.csv", comma: ',', detected: true, columns: "c1 REAL", rows: 3},
		{file: "semicolon_quoted_break.csv", comma: ';', detected: true,
			columns: "c1 TEXT, c2 TEXT", rows: 25,
			text: []string{
				`column c1 stored as TEXT: 11 of 25 values are not numbers (lines 1: "1,5", 3: "1,5", 5: "1,5", …; a comma in a number: crffd reads a decimal point only, and no thousands separators)`,
				`column c2 stored as TEXT: 24 of 25 values are not numbers (lines 1: "2,5", 2: "4,5", 3: "2,5", …; a comma in a number: crffd reads a decimal point only, and no thousands separators)`,
			}},
	} {
		name := fmt.Sprintf("%s header=%v comma=%q", tc.file, tc.opts.Header, tc.opts.Comma)
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "csv", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res, err := store.ImportCSV(context.Background(), filepath.Join(t.TempDir(), "s.sqlite"), "t", f, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var cols []string
			for _, c := range res.Columns {
				cols = append(cols, c.Name+" "+string(c.Type))
			}
			if res.Comma != tc.comma || res.Detected != tc.detected || res.HeaderLike != tc.header {
				t.Errorf("comma %q detected %v header-like %v; want %q %v %v", res.Comma, res.Detected, res.HeaderLike, tc.comma, tc.detected, tc.header)
			}
			if got := strings.Join(cols, ", "); got != tc.columns || res.Rows != tc.rows {
				t.Errorf("columns %s, %d rows; want %s, %d rows", got, res.Rows, tc.columns, tc.rows)
			}
			var text []string
			for _, c := range res.Text {
				text = append(text, c.String())
			}
			if strings.Join(text, "\n") != strings.Join(tc.text, "\n") {
				t.Errorf("TEXT columns\n%s\nwant\n%s", strings.Join(text, "\n"), strings.Join(tc.text, "\n"))
			}
		})
	}
}

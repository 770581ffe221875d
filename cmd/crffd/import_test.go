package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportCatchesMistakes: a semicolon-separated file without --header
// is imported with its separator detected, and import says so, warns that
// the first row looks like names, reports every bad value of a column of
// numbers with its first lines, and sums up the types.
func TestImportCatchesMistakes(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "export.csv")
	body := "id;age;score\n1;34;1.5\n2;51;n/a\n3;;?\n4;47;2\n5;29;-\n"
	if err := os.WriteFile(csvPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.sqlite")
	a, err := execute(t, "import", "--db", db, "--table", "t", "--csv", csvPath)
	if err != nil {
		t.Fatal(err)
	}
	out := a.stdout.(*bytes.Buffer).String()
	for _, want := range []string{
		"delimiter: semicolon (detected)\n",
		"warning: the first row looks like column names (none of its fields is a number, while the rows below hold numbers) but was imported as a data row, which made columns c1, c2 TEXT; run import again with --header --replace\n",
		`warning: column c3 stored as TEXT: 4 of 6 values are not numbers (lines 1: "score", 3: "n/a", 4: "?", …)`,
		"types: 3 TEXT; empty fields (NULL): c2 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import printed\n%s\nwant it to contain %q", out, want)
		}
	}
	// The columns only the header made TEXT are named in its warning,
	// not blamed for it one by one.
	if strings.Contains(out, "column c1 stored as TEXT") || strings.Contains(out, "column c2 stored as TEXT") {
		t.Errorf("import blames the header row on columns of its own:\n%s", out)
	}
	a, err = execute(t, "import", "--db", db, "--table", "t", "--csv", csvPath, "--header", "--replace", "--delimiter", ";")
	if err != nil {
		t.Fatal(err)
	}
	out = a.stdout.(*bytes.Buffer).String()
	for _, want := range []string{
		"(id INTEGER, age INTEGER, score TEXT)", "delimiter: semicolon (given)\n",
		`warning: column score stored as TEXT: 3 of 5 values are not numbers (lines 3: "n/a", 4: "?", 6: "-")`,
		"types: 2 INTEGER, 1 TEXT; empty fields (NULL): age 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import --header printed\n%s\nwant it to contain %q", out, want)
		}
	}
	if strings.Contains(out, "looks like column names") {
		t.Errorf("import --header warns of a header:\n%s", out)
	}
}

// TestImportDelimiterFlag: import refuses a --delimiter that is not one.
func TestImportDelimiterFlag(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(csvPath, []byte("a\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, "import", "--db", filepath.Join(dir, "s.sqlite"), "--table", "t", "--csv", csvPath, "--delimiter", "ab"); err == nil || !strings.Contains(err.Error(), `--delimiter "ab"`) {
		t.Errorf("import --delimiter ab: %v", err)
	}
}

// TestImportOutput checks what import prints for files of each kind: the
// separator when it is not a comma (detected or given), the warnings of a
// single column and of a header imported as data, and the summary of the
// types with the empty fields per column; and what it must not print.
func TestImportOutput(t *testing.T) {
	for _, tc := range []struct {
		name, csv string
		flags     []string
		want      []string
		not       []string
	}{
		{
			name:  "comma with a header",
			csv:   "id,age,bmi\n1,34,22.5\n2,,27.1\n3,47,\n4,,30\n",
			flags: []string{"--header"},
			want: []string{
				"(id INTEGER, age INTEGER, bmi REAL)\n",
				"types: 2 INTEGER, 1 REAL; empty fields (NULL): age 2, bmi 1\n",
			},
			not: []string{"delimiter:", "warning:"},
		},
		{
			name: "semicolons with decimal commas and no header row",
			csv:  "1;34;22,5\n2;51;27,1\n",
			want: []string{
				"(c1 INTEGER, c2 INTEGER, c3 TEXT)\n",
				"delimiter: semicolon (detected)\n",
				`column c3 stored as TEXT: none of its 2 values is a number (line 1: "22,5", a comma in a number`,
				"types: 2 INTEGER, 1 TEXT; empty fields (NULL): none\n",
			},
			not: []string{"warning:"},
		},
		{
			name:  "tab given by name",
			csv:   "id\tnote\n1\tfirst, visit\n",
			flags: []string{"--header", "--delimiter", "tab"},
			want:  []string{"(id INTEGER, note TEXT)\n", "delimiter: tab (given)\n"},
		},
		{
			name:  `tab given as \t`,
			csv:   "id\tnote\n1\tx\n",
			flags: []string{"--header", "--delimiter", `\t`},
			want:  []string{"(id INTEGER, note TEXT)\n", "delimiter: tab (given)\n"},
		},
		{
			name:  "a character of one's own",
			csv:   "id:w\n1:0\n2:1\n",
			flags: []string{"--header", "--delimiter", ":"},
			want:  []string{"(id INTEGER, w INTEGER)\n", "delimiter: ':' (given)\n"},
			not:   []string{"warning:"},
		},
		{
			name: "a separator detection does not know",
			csv:  "id:w\n1:0\n2:1\n",
			want: []string{
				"(c1 TEXT)\n",
				"warning: the file has a single column: no comma, semicolon, tab or pipe splits its lines into fields; if another character separates them, name it with --delimiter\n",
			},
			not: []string{"delimiter:"},
		},
		{
			name:  "a single column given as such",
			csv:   "1.5\n2\n",
			flags: []string{"--delimiter", "comma"},
			want:  []string{"(c1 REAL)\n", "types: 1 REAL; empty fields (NULL): none\n"},
			not:   []string{"warning:", "delimiter:"},
		},
		{
			name: "a header row of one column",
			csv:  "score\n1.5\n2\n",
			want: []string{"imported as a data row, which made column c1 TEXT; run import again", "warning: the file has a single column"},
			not:  []string{"stored as TEXT"},
		},
		{
			name: "a header row after a blank line",
			csv:  "\nid,age,name\n1,30,Ada\n2,,Grace\n",
			want: []string{
				"imported as a data row, which made columns c1, c2 TEXT; run",
				`column c3 stored as TEXT: none of its 3 values is a number (line 2: "name"); crffd fit does not choose it as a covariate`,
			},
			not: []string{"column c1 stored", "column c2 stored"},
		},
		{
			name: "a header row and a bad value",
			csv:  "id,score\n1,n/a\n2,1.5\n",
			want: []string{
				"imported as a data row, which made column c1 TEXT; run",
				`warning: column c2 stored as TEXT: 2 of 3 values are not numbers (lines 1: "score", 2: "n/a")`,
			},
		},
		{
			name: "names only: no header to suspect",
			csv:  "Ada,London\nGrace,Arlington\n",
			want: []string{"types: 2 TEXT; empty fields (NULL): none\n"},
			not:  []string{"warning:"},
		},
		{
			name:  "every bad value counted, the first three quoted",
			csv:   "id,score\n1,n/a\n2,1.5\n3,?\n4,-\n5,2\n6,n/a\n7,\n",
			flags: []string{"--header"},
			want: []string{
				`warning: column score stored as TEXT: 4 of 6 values are not numbers (lines 2: "n/a", 4: "?", 5: "-", …); as a covariate`,
				"types: 1 INTEGER, 1 TEXT; empty fields (NULL): score 1\n",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			csvPath := filepath.Join(dir, "in.csv")
			if err := os.WriteFile(csvPath, []byte(tc.csv), 0o600); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"import", "--db", filepath.Join(dir, "s.sqlite"), "--table", "t", "--csv", csvPath}, tc.flags...)
			a, err := execute(t, args...)
			if err != nil {
				t.Fatalf("import: %v", err)
			}
			out := a.stdout.(*bytes.Buffer).String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("import printed\n%s\nwant it to contain %q", out, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("import printed\n%s\nwant no %q", out, n)
				}
			}
		})
	}
}

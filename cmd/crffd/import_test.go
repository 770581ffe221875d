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
		"warning: the first row looks like column names",
		`warning: column c3 stored as TEXT: 4 of 6 values are not numbers (lines 1: "score", 3: "n/a", 4: "?", …)`,
		"types: 3 TEXT; empty fields (NULL): c2 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import printed\n%s\nwant it to contain %q", out, want)
		}
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

func TestParseDelimiter(t *testing.T) {
	for in, want := range map[string]rune{"": 0, "comma": ',', "Semicolon": ';', "tab": '\t', `\t`: '\t', "pipe": '|', ":": ':'} {
		if got, err := parseDelimiter(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ab", `"`, "\n"} {
		if _, err := parseDelimiter(bad); err == nil || !strings.Contains(err.Error(), "--delimiter") {
			t.Errorf("%q: %v, want an error naming --delimiter", bad, err)
		}
	}
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(csvPath, []byte("a\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, "import", "--db", filepath.Join(dir, "s.sqlite"), "--table", "t", "--csv", csvPath, "--delimiter", "ab"); err == nil || !strings.Contains(err.Error(), `--delimiter "ab"`) {
		t.Errorf("import --delimiter ab: %v", err)
	}
}

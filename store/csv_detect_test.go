package store_test

import (
	"context"
	"path/filepath"
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
	if res.Comma != ';' || !res.Detected || !res.HeaderLike || res.Rows != 7 {
		t.Errorf("comma %q detected %v header-like %v rows %d; want ';', true, true, 7", res.Comma, res.Detected, res.HeaderLike, res.Rows)
	}
	var score store.TextColumn
	for _, c := range res.Text {
		if c.Name == "c2" {
			score = c
		}
	}
	if got, want := score.String(), `column c2 stored as TEXT: 5 of 6 values are not numbers (lines 1: "score", 2: "1,5", 3: "n/a", …)`; got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
	if res.Nulls[1] != 1 || res.Nulls[2] != 1 || res.Nulls[0] != 0 {
		t.Errorf("empty fields %v, want [0 1 1]", res.Nulls)
	}
	res, err = store.ImportCSV(ctx, filepath.Join(t.TempDir(), "s.sqlite"), "t", strings.NewReader(data), store.ImportOptions{Header: true, Comma: ';'})
	if err != nil {
		t.Fatal(err)
	}
	if res.Detected || res.HeaderLike || res.Rows != 6 {
		t.Errorf("with --header and a given separator: detected %v, header-like %v, %d rows", res.Detected, res.HeaderLike, res.Rows)
	}
}

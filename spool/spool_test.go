package spool

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// written returns a closed spool of rows rows of cols values, value j of
// row i being i + j/10 (row 3 holding NaN and ±Inf, which pass through).
func written(t testing.TB, rows, cols int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rows.spool")
	w, err := Create(path, cols)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float64, cols)
	for i := range rows {
		for j := range row {
			row[j] = float64(i) + float64(j)/10
		}
		if i == 3 {
			row[0] = math.NaN()
			row[cols-1] = math.Inf(-1)
		}
		if err := w.Append(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func want(i, j, cols int) float64 {
	if i == 3 && j == 0 {
		return math.NaN()
	}
	if i == 3 && j == cols-1 {
		return math.Inf(-1)
	}
	return float64(i) + float64(j)/10
}

func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// TestRoundTrip: rows come back bit for bit, by range and by any
// ascending set, runs of consecutive rows and gaps alike; the file is its
// owner's alone.
func TestRoundTrip(t *testing.T) {
	const rows, cols = 1000, 7
	path := written(t, rows, cols)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Rows() != rows || f.Cols() != cols {
		t.Fatalf("%d rows of %d", f.Rows(), f.Cols())
	}
	dst := make([]float64, 10*cols)
	if err := f.ReadRange(0, 10, dst); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		for j := range cols {
			if !same(dst[i*cols+j], want(i, j, cols)) {
				t.Fatalf("row %d value %d: %v", i, j, dst[i*cols+j])
			}
		}
	}
	for _, idx := range [][]int{{}, {999}, {0, 1, 2, 500, 501, 998, 999}, {3, 5, 7, 9}} {
		dst := make([]float64, len(idx)*cols)
		if err := f.ReadRows(idx, dst); err != nil {
			t.Fatalf("%v: %v", idx, err)
		}
		for k, i := range idx {
			for j := range cols {
				if !same(dst[k*cols+j], want(i, j, cols)) {
					t.Errorf("rows %v: row %d value %d: %v", idx, i, j, dst[k*cols+j])
				}
			}
		}
	}
}

// TestErrors: each misuse and each damaged file gets an error that says
// what is wrong.
func TestErrors(t *testing.T) {
	const rows, cols = 20, 3
	path := written(t, rows, cols)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reads := map[string]struct {
		err  error
		want string
	}{
		"range past the end":  {f.ReadRange(15, 21, make([]float64, 6*cols)), "rows 15..21 of 20"},
		"range backwards":     {f.ReadRange(5, 4, nil), "rows 5..4 of 20"},
		"range buffer":        {f.ReadRange(0, 2, make([]float64, 5)), "5 values for 2 rows of 3"},
		"rows not ascending":  {f.ReadRows([]int{4, 4}, make([]float64, 2*cols)), "row 4 (at 1 of the rows asked for)"},
		"rows past the end":   {f.ReadRows([]int{19, 20}, make([]float64, 2*cols)), "row 20 (at 1 of the rows asked for)"},
		"rows negative":       {f.ReadRows([]int{-1}, make([]float64, cols)), "row -1"},
		"rows buffer":         {f.ReadRows([]int{1, 2}, make([]float64, cols)), "3 values for 2 rows of 3"},
		"short row appended":  {appendShort(t), "row 0 has 2 values; want 3"},
		"no values per row":   {createErr(t, 0), "0 values per row"},
		"too many per row":    {createErr(t, MaxCols+1), "65537 values per row"},
		"existing file":       {func() error { _, err := Create(path, cols); return err }(), "exists"},
		"missing file":        {func() error { _, err := Open(path + ".no"); return err }(), "no such file"},
		"writer never closed": {openErr(t, unclosed(t)), "0 rows of 3 values need 0 bytes after the header; the file has 24"},
	}
	for name, c := range reads {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", name, c.err, c.want)
		}
	}
	damaged := map[string]struct {
		edit func([]byte) []byte
		want string
	}{
		"cut short":      {func(b []byte) []byte { return b[:len(b)-8] }, "20 rows of 3 values need 480 bytes after the header; the file has 472"},
		"extra bytes":    {func(b []byte) []byte { return append(b, 0) }, "the file has 481"},
		"empty":          {func([]byte) []byte { return nil }, "header"},
		"not a spool":    {func(b []byte) []byte { copy(b, "SQLite f"); return b }, "no spool header"},
		"later version":  {func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 2); return b }, "version 2"},
		"zero columns":   {func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 0); return b }, "0 values per row"},
		"huge row count": {func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], 1<<62); return b }, "4611686018427387904 rows"},
	}
	for name, c := range damaged {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "damaged.spool")
		if err := os.WriteFile(p, c.edit(b), 0o600); err != nil {
			t.Fatal(err)
		}
		err = openErr(t, p)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v; want ErrFormat naming the file, with %q", name, err, c.want)
		}
	}
}

func appendShort(t *testing.T) error {
	w, err := Create(filepath.Join(t.TempDir(), "s.spool"), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.Append([]float64{1, 2})
}

func createErr(t *testing.T, cols int) error {
	_, err := Create(filepath.Join(t.TempDir(), "c.spool"), cols)
	return err
}

func unclosed(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "u.spool")
	w, err := Create(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]float64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	// Flushed but never closed: the header still says 0 rows.
	if err := w.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

func openErr(t *testing.T, path string) error {
	f, err := Open(path)
	if err == nil {
		f.Close()
	}
	return err
}

// FuzzParseHeader: no header and size make parseHeader panic, and what
// it accepts describes exactly the bytes after the header.
func FuzzParseHeader(f *testing.F) {
	f.Add(header(3, 20), int64(headerSize+480))
	f.Add(header(1, 0), int64(headerSize))
	f.Add([]byte("CRFFROWS"), int64(8))
	f.Add(header(MaxCols, 1<<40), int64(1<<62))
	f.Fuzz(func(t *testing.T, h []byte, size int64) {
		cols, rows, err := parseHeader(h, size)
		if err != nil {
			return
		}
		if cols < 1 || cols > MaxCols || rows < 0 || int64(headerSize)+int64(8*cols)*int64(rows) != size {
			t.Errorf("accepted %d rows of %d for a file of %d bytes", rows, cols, size)
		}
	})
}

package dataset

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestReadValid(t *testing.T) {
	const in = "1,5.5,4.25,3,6.75,-0.5,1,2\n" +
		"0, 6 ,7e1,-0,1,0.125,0,1\r\n" +
		"\n" + // blank lines are not rows
		"-0,1,2,3,4,5,6,7\n"
	tab, err := Read(strings.NewReader(in), "t.csv")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got := tab.Rows(); got != 3 {
		t.Fatalf("Rows() = %d, want 3", got)
	}
	if got := tab.Covariates(); got != 3 {
		t.Fatalf("Covariates() = %d, want 3", got)
	}
	want := &Table{
		X:   mat.NewDense(3, 3, []float64{-0.5, 1, 2, 0.125, 0, 1, 5, 6, 7}),
		W:   []float64{1, 0, 0},
		Y:   []float64{5.5, 6, 1},
		YCF: []float64{4.25, 70, 2},
		Mu0: []float64{3, math.Copysign(0, -1), 3},
		Mu1: []float64{6.75, 1, 4},
	}
	if !equalTables(tab, want) {
		t.Errorf("Read = %+v, want %+v", tab, want)
	}
	if math.Signbit(tab.W[2]) {
		t.Errorf("w = -0 not normalised to 0")
	}
	if !math.Signbit(tab.Mu0[1]) {
		t.Errorf("mu0 = -0 lost its sign")
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		wantErr error  // sentinel in the chain, if any
		wantMsg string // the whole message
	}{
		{"empty", "", ErrEmpty, "f.csv: no rows"},
		{"blank lines only", "\n\n\r\n", ErrEmpty, "f.csv: no rows"},
		{"syntax", "1,2,3,4,5,6\n0,1,abc,3,4,5\n", strconv.ErrSyntax,
			`f.csv: row 2, column 3 (y_cfactual): parse "abc": invalid syntax`},
		{"empty field", "1,2,3,4,5,\n", strconv.ErrSyntax,
			`f.csv: row 1, column 6 (x1): parse "": invalid syntax`},
		{"range", "1,2,3,4,5,1e999\n", strconv.ErrRange,
			`f.csv: row 1, column 6 (x1): parse "1e999": value out of range`},
		{"NaN", "1,2,3,NaN,5,6\n", ErrNotFinite,
			`f.csv: row 1, column 4 (mu0): value "NaN": not a finite number`},
		{"Inf", "1,2,3,4,5,6,7\n1,2,3,4,5,6,-Inf\n", ErrNotFinite,
			`f.csv: row 2, column 7 (x2): value "-Inf": not a finite number`},
		{"treatment 2", "2,2,3,4,5,6\n", ErrTreatment,
			`f.csv: row 1, column 1 (w): value "2": treatment is not 0 or 1`},
		{"treatment 0.5", "1,2,3,4,5,6\n0.5,2,3,4,5,6\n", ErrTreatment,
			`f.csv: row 2, column 1 (w): value "0.5": treatment is not 0 or 1`},
		{"too few fields", "1,2,3,4,5\n", ErrFieldCount,
			"f.csv: row 1: 5 fields, want at least 6 (w, y_factual, y_cfactual, mu0, mu1 and one covariate or more): wrong number of fields"},
		{"ragged short", "1,2,3,4,5,6,7\n1,2,3,4,5,6\n", ErrFieldCount,
			"f.csv: row 2: 6 fields, want 7 as in row 1: wrong number of fields"},
		{"ragged long", "1,2,3,4,5,6\n1,2,3,4,5,6\n0,2,3,4,5,6,7\n", ErrFieldCount,
			"f.csv: row 3: 7 fields, want 6 as in row 1: wrong number of fields"},
		{"bare quote", "1,2,3,4,5,6\n1,2\"x,3,4,5,6\n", nil,
			"f.csv: row 2: parse error on line 2, column 4: bare \" in non-quoted-field"},
		{"header", "w,y,ycf,mu0,mu1,x1\n0,1,2,3,4,5\n", strconv.ErrSyntax,
			`f.csv: row 1, column 1 (w): parse "w": invalid syntax`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Read(strings.NewReader(tc.in), "f.csv")
			if err == nil {
				t.Fatalf("Read succeeded with %d rows, want error %q", tab.Rows(), tc.wantMsg)
			}
			if tab != nil {
				t.Errorf("Read returned a table with an error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *ParseError", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantErr)
			}
			if got := err.Error(); got != tc.wantMsg {
				t.Errorf("error:\n got %s\nwant %s", got, tc.wantMsg)
			}
		})
	}
}

func TestParseErrorWithoutName(t *testing.T) {
	_, err := Read(strings.NewReader("1,2,3,4,5,x\n"), "")
	const want = `row 1, column 6 (x1): parse "x": invalid syntax`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	if err := os.WriteFile(good, []byte("1,2,3,4,5,6\n0,1,1,1,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tab, err := ReadFile(good)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if tab.Rows() != 2 || tab.Covariates() != 1 {
		t.Errorf("ReadFile: %d×%d table, want 2×1", tab.Rows(), tab.Covariates())
	}

	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("1,2,3,4,5,6\n0,1,1,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile(bad)
	if err == nil || !strings.HasPrefix(err.Error(), bad+": row 2: ") {
		t.Errorf("ReadFile(%s) error = %v, want it to name the file and row", bad, err)
	}

	_, err = ReadFile(filepath.Join(dir, "missing.csv"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) error = %v, want fs.ErrNotExist", err)
	}
}

func TestColumnName(t *testing.T) {
	for col, want := range map[int]string{
		-1: "?", 0: "?", 1: "w", 2: "y_factual", 3: "y_cfactual", 4: "mu0", 5: "mu1", 6: "x1", 30: "x25",
	} {
		if got := ColumnName(col); got != want {
			t.Errorf("ColumnName(%d) = %q, want %q", col, got, want)
		}
	}
}

func TestWriteRoundTrip(t *testing.T) {
	tab := &Table{
		X:   mat.NewDense(2, 2, []float64{0.1, 1e-300, -1.7976931348623157e308, 5e-324}),
		W:   []float64{0, 1},
		Y:   []float64{1.0 / 3, -2},
		YCF: []float64{math.Pi, math.Copysign(0, -1)},
		Mu0: []float64{1e21, 123456789.123},
		Mu1: []float64{-1e-7, 0},
	}
	var buf bytes.Buffer
	if err := Write(&buf, tab); err != nil {
		t.Fatalf("Write: %v", err)
	}
	const want = "0,0.3333333333333333,3.141592653589793,1e+21,-1e-07,0.1,1e-300\n" +
		"1,-2,-0,123456789.123,0,-1.7976931348623157e+308,5e-324\n"
	if got := buf.String(); got != want {
		t.Errorf("Write:\n got %q\nwant %q", got, want)
	}
	back, err := Read(&buf, "round-trip")
	if err != nil {
		t.Fatalf("Read after Write: %v", err)
	}
	if !equalTables(back, tab) {
		t.Errorf("round trip changed the table:\n got %+v\nwant %+v", back, tab)
	}
}

func TestWriteInvalid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tab     *Table
		wantErr error
	}{
		{"nil", nil, ErrShape},
		{"no X", &Table{W: []float64{1}}, ErrShape},
		{"short Y", &Table{X: mat.NewDense(2, 1, nil), W: []float64{0, 1}, Y: []float64{1},
			YCF: []float64{1, 1}, Mu0: []float64{1, 1}, Mu1: []float64{1, 1}}, ErrShape},
		{"NaN covariate", &Table{X: mat.NewDense(1, 1, []float64{math.NaN()}), W: []float64{0}, Y: []float64{1},
			YCF: []float64{1}, Mu0: []float64{1}, Mu1: []float64{1}}, ErrNotFinite},
		{"Inf outcome", &Table{X: mat.NewDense(1, 1, nil), W: []float64{0}, Y: []float64{math.Inf(1)},
			YCF: []float64{1}, Mu0: []float64{1}, Mu1: []float64{1}}, ErrNotFinite},
		{"treatment", &Table{X: mat.NewDense(1, 1, nil), W: []float64{3}, Y: []float64{1},
			YCF: []float64{1}, Mu0: []float64{1}, Mu1: []float64{1}}, ErrTreatment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.tab)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Write error = %v, want %v", err, tc.wantErr)
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %q despite the error", buf.String())
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteIOError(t *testing.T) {
	tab := &Table{X: mat.NewDense(1, 1, nil), W: []float64{0}, Y: []float64{1},
		YCF: []float64{1}, Mu0: []float64{1}, Mu1: []float64{1}}
	err := Write(failWriter{}, tab)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write to a failing writer: error = %v, want disk full", err)
	}
}

// equalTables reports whether a and b hold bit-identical values.
func equalTables(a, b *Table) bool {
	if a.Rows() != b.Rows() || a.Covariates() != b.Covariates() {
		return false
	}
	same := func(x, y []float64) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
		return true
	}
	return same(a.W, b.W) && same(a.Y, b.Y) && same(a.YCF, b.YCF) &&
		same(a.Mu0, b.Mu0) && same(a.Mu1, b.Mu1) &&
		same(a.X.RawMatrix().Data, b.X.RawMatrix().Data)
}

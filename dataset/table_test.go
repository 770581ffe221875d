package dataset

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// seqTable returns a table of n rows and dx covariates whose values encode
// their row: y = i, x_ij = 10*i + j, w alternates.
func seqTable(n, dx int) *Table {
	t := &Table{X: mat.NewDense(n, dx, nil)}
	for i := range n {
		t.W = append(t.W, float64(i%2))
		t.Y = append(t.Y, float64(i))
		t.YCF = append(t.YCF, float64(-i))
		t.Mu0 = append(t.Mu0, float64(i)/2)
		t.Mu1 = append(t.Mu1, float64(i)*2)
		for j := range dx {
			t.X.Set(i, j, float64(10*i+j))
		}
	}
	return t
}

func TestSources(t *testing.T) {
	for _, tc := range []struct {
		rows, size int
		wantN      int
		wantMsg    string
	}{
		{747, 249, 3, ""},
		{747, 747, 1, ""},
		{6, 1, 6, ""},
		{747, 250, 0, "dataset: 747 rows do not divide into sources of 250 (2 sources leave 247 rows over)"},
		{10, 249, 0, "dataset: 10 rows are too few for one source of 249"},
		{10, 0, 0, "dataset: source size 0, want at least 1"},
		{10, -3, 0, "dataset: source size -3, want at least 1"},
	} {
		tab := seqTable(tc.rows, 2)
		src, err := tab.Sources(tc.size)
		if tc.wantMsg != "" {
			if err == nil || err.Error() != tc.wantMsg {
				t.Errorf("Sources(%d) of %d rows: error %v, want %s", tc.size, tc.rows, err, tc.wantMsg)
			}
			continue
		}
		if err != nil {
			t.Errorf("Sources(%d) of %d rows: %v", tc.size, tc.rows, err)
			continue
		}
		if len(src) != tc.wantN {
			t.Errorf("Sources(%d) of %d rows: %d sources, want %d", tc.size, tc.rows, len(src), tc.wantN)
		}
		for s, st := range src {
			if st.Rows() != tc.size {
				t.Errorf("source %d has %d rows, want %d", s+1, st.Rows(), tc.size)
			}
			first := s * tc.size
			if st.Y[0] != float64(first) || st.X.At(0, 1) != float64(10*first+1) ||
				st.Y[tc.size-1] != float64(first+tc.size-1) {
				t.Errorf("source %d does not start at row %d", s+1, first+1)
			}
		}
	}
}

func TestSplit(t *testing.T) {
	tab := seqTable(249, 3)
	tr, te, va, err := tab.Split(50, 100, 99)
	if err != nil {
		t.Fatalf("Split: %v", err)
	}
	for _, c := range []struct {
		name        string
		part        *Table
		rows, first int
	}{{"train", tr, 50, 0}, {"test", te, 100, 50}, {"val", va, 99, 150}} {
		if c.part.Rows() != c.rows || c.part.Covariates() != 3 {
			t.Errorf("%s: %d×%d, want %d×3", c.name, c.part.Rows(), c.part.Covariates(), c.rows)
		}
		if c.part.Y[0] != float64(c.first) || c.part.X.At(c.rows-1, 2) != float64(10*(c.first+c.rows-1)+2) {
			t.Errorf("%s does not hold rows %d..%d", c.name, c.first+1, c.first+c.rows)
		}
		if err := c.part.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}

	_, _, va, err = tab.Split(100, 149, 0)
	if err != nil || va != nil {
		t.Errorf("Split(100,149,0) = val %v, error %v; want nil, nil", va, err)
	}
	if va.Rows() != 0 {
		t.Errorf("nil table has %d rows", va.Rows())
	}

	for _, tc := range []struct {
		train, test, val int
		wantMsg          string
	}{
		{50, 100, 100, "dataset: split 50+100+100 = 250 rows, table has 249"},
		{50, 100, 98, "dataset: split 50+100+98 = 248 rows, table has 249"},
		{-1, 150, 100, "dataset: split -1,150,100 has a negative count"},
	} {
		_, _, _, err := tab.Split(tc.train, tc.test, tc.val)
		if err == nil || err.Error() != tc.wantMsg {
			t.Errorf("Split(%d,%d,%d) error = %v, want %s", tc.train, tc.test, tc.val, err, tc.wantMsg)
		}
	}
}

func TestSliceCopies(t *testing.T) {
	tab := seqTable(5, 2)
	s, err := tab.Slice(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	s.X.Set(0, 0, -99)
	s.W[0] = 0
	s.W = append(s.W, 1)
	if tab.X.At(1, 0) != 10 || tab.W[1] != 1 || tab.W[3] != 1 {
		t.Errorf("changing a slice changed its parent")
	}
	for _, r := range [][2]int{{-1, 2}, {2, 2}, {3, 1}, {0, 6}} {
		if _, err := tab.Slice(r[0], r[1]); err == nil {
			t.Errorf("Slice(%d, %d) of 5 rows succeeded", r[0], r[1])
		}
	}
	bad := seqTable(5, 2)
	bad.Mu1 = bad.Mu1[:4]
	if _, err := bad.Slice(0, 5); !errors.Is(err, ErrShape) {
		t.Errorf("Slice of a malformed table: error %v, want ErrShape", err)
	}
}

func TestConcat(t *testing.T) {
	tab := seqTable(9, 2)
	src, err := tab.Sources(3)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Concat(src...)
	if err != nil {
		t.Fatalf("Concat: %v", err)
	}
	if !equalTables(back, tab) {
		t.Errorf("Concat(Sources(3)) differs from the table")
	}
	if _, err := Concat(); !errors.Is(err, ErrEmpty) {
		t.Errorf("Concat(): error %v, want ErrEmpty", err)
	}
	if _, err := Concat(tab, seqTable(2, 3)); !errors.Is(err, ErrShape) {
		t.Errorf("Concat of 2 and 3 covariates: error %v, want ErrShape", err)
	}
	bad := seqTable(2, 2)
	bad.W[1] = 2
	if _, err := Concat(tab, bad); !errors.Is(err, ErrTreatment) ||
		!strings.Contains(err.Error(), "table 2: dataset: row 2, column 1 (w)") {
		t.Errorf("Concat with a bad treatment: error %v", err)
	}
}

func TestValidateNamesCell(t *testing.T) {
	tab := seqTable(4, 3)
	tab.X.Set(2, 1, math.Inf(-1))
	err := tab.Validate()
	const want = "dataset: row 3, column 7 (x2): value -Inf: not a finite number"
	if err == nil || err.Error() != want || !errors.Is(err, ErrNotFinite) {
		t.Errorf("Validate: error %v, want %s", err, want)
	}
	tab = seqTable(4, 3)
	tab.X = &mat.Dense{}
	if err := tab.Validate(); !errors.Is(err, ErrShape) {
		t.Errorf("Validate with an empty X: error %v, want ErrShape", err)
	}
}

func TestDataAndTau(t *testing.T) {
	tab := seqTable(4, 2)
	d := tab.Data()
	if d.Rows() != 4 || d.X != tab.X || &d.W[0] != &tab.W[0] || &d.Y[0] != &tab.Y[0] {
		t.Errorf("Data does not share the table's X, W and Y")
	}
	want := []float64{0, 1.5, 3, 4.5}
	if got := tab.Tau(); !slices.Equal(got, want) {
		t.Errorf("Tau() = %v, want %v", got, want)
	}
}

func TestInferSchema(t *testing.T) {
	a := &Table{
		X: mat.NewDense(3, 4, []float64{
			0, 1, 0.5, 1,
			1, 1, 0, 1,
			0, 0, 1, 1,
		}),
		W: []float64{0, 1, 0}, Y: []float64{1, 0, 1},
		YCF: []float64{0, 0, 0}, Mu0: []float64{0, 0, 0}, Mu1: []float64{0, 0, 0},
	}
	b := &Table{
		X: mat.NewDense(1, 4, []float64{1, 0, 1, 2}),
		W: []float64{1}, Y: []float64{0.5},
		YCF: []float64{0}, Mu0: []float64{0}, Mu1: []float64{0},
	}
	for _, tc := range []struct {
		name       string
		tables     []*Table
		wantBinary []bool
		wantBinY   bool
	}{
		{"a", []*Table{a}, []bool{true, true, false, true}, true},
		{"a and b", []*Table{a, b}, []bool{true, true, false, false}, false},
	} {
		s, err := InferSchema(tc.tables...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(s.Binary, tc.wantBinary) || s.BinaryOutcome != tc.wantBinY {
			t.Errorf("%s: schema %+v, want binary %v, binary outcome %t", tc.name, s, tc.wantBinary, tc.wantBinY)
		}
	}
	if _, err := InferSchema(); !errors.Is(err, ErrEmpty) {
		t.Errorf("InferSchema(): error %v, want ErrEmpty", err)
	}
	if _, err := InferSchema(a, seqTable(2, 3)); !errors.Is(err, ErrShape) {
		t.Errorf("InferSchema of 4 and 3 covariates: error %v, want ErrShape", err)
	}
}

package dataset

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/records"
)

// ErrShape means that the parts of a Table disagree in length, or that
// tables to be combined have different numbers of covariates.
var ErrShape = errors.New("inconsistent table shape")

// Table is a table in the IHDP layout. Row i of X and element i of every
// slice describe the same record. A Table returned by this package always
// has at least one row and one covariate, and passes Validate.
type Table struct {
	X   *mat.Dense // n×dx covariates, columns x1..xdx
	W   []float64  // treatments, 0 or 1
	Y   []float64  // factual outcomes y(w)
	YCF []float64  // counterfactual outcomes y(1-w)
	Mu0 []float64  // noiseless outcomes under w=0
	Mu1 []float64  // noiseless outcomes under w=1
}

// Rows returns the number of rows of t, 0 for a nil Table.
func (t *Table) Rows() int {
	if t == nil {
		return 0
	}
	return len(t.W)
}

// Covariates returns the number of covariates dx of t, 0 for a nil Table
// or one without X.
func (t *Table) Covariates() int {
	if t == nil || t.X == nil {
		return 0
	}
	_, c := t.X.Dims()
	return c
}

// Validate reports whether t is a well-formed table: X present with at
// least one row and column, every slice as long as X has rows, every value
// finite and every treatment 0 or 1. The error names the first bad row and
// column, counted from 1 as in the file.
func (t *Table) Validate() error {
	if err := t.checkShape(); err != nil {
		return err
	}
	n, dx := t.X.Dims()
	cols := t.columns()
	for i := range n {
		for j, c := range cols {
			if err := checkValue(c[i], j+1); err != nil {
				return fmt.Errorf("dataset: row %d, column %d (%s): %w", i+1, j+1, ColumnName(j+1), err)
			}
		}
		for j := range dx {
			col := FixedColumns + j + 1
			if err := checkValue(t.X.At(i, j), col); err != nil {
				return fmt.Errorf("dataset: row %d, column %d (%s): %w", i+1, col, ColumnName(col), err)
			}
		}
	}
	return nil
}

// checkShape is the part of Validate that does not look at values.
func (t *Table) checkShape() error {
	if t == nil || t.X == nil {
		return fmt.Errorf("dataset: no covariate matrix: %w", ErrShape)
	}
	n, dx := t.X.Dims()
	if n == 0 || dx == 0 {
		return fmt.Errorf("dataset: %d×%d covariate matrix: %w", n, dx, ErrShape)
	}
	for j, c := range t.columns() {
		if len(c) != n {
			return fmt.Errorf("dataset: %s has %d values, X has %d rows: %w",
				ColumnName(j+1), len(c), n, ErrShape)
		}
	}
	return nil
}

// columns returns the five leading columns in file order.
func (t *Table) columns() [FixedColumns][]float64 {
	return [FixedColumns][]float64{t.W, t.Y, t.YCF, t.Mu0, t.Mu1}
}

func checkValue(v float64, col int) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("value %v: %w", v, ErrNotFinite)
	}
	if col == 1 && v != 0 && v != 1 {
		return fmt.Errorf("value %v: %w", v, ErrTreatment)
	}
	return nil
}

// Slice returns a copy of rows i to j-1 of t. It returns an error if t is
// malformed (see Validate) or unless 0 <= i < j <= t.Rows(). The copy shares
// no storage with t.
func (t *Table) Slice(i, j int) (*Table, error) {
	if err := t.checkShape(); err != nil {
		return nil, err
	}
	if i < 0 || j <= i || j > t.Rows() {
		return nil, fmt.Errorf("dataset: rows [%d, %d) out of range for a table of %d rows", i, j, t.Rows())
	}
	var x mat.Dense
	x.CloneFrom(t.X.Slice(i, j, 0, t.Covariates()))
	return &Table{
		X:   &x,
		W:   clone(t.W[i:j]),
		Y:   clone(t.Y[i:j]),
		YCF: clone(t.YCF[i:j]),
		Mu0: clone(t.Mu0[i:j]),
		Mu1: clone(t.Mu1[i:j]),
	}, nil
}

func clone(s []float64) []float64 { return append([]float64(nil), s...) }

// Sources cuts t into sources of size rows each, consecutive blocks in
// order: rows 1..size form source 1, and so on. It returns an error if size
// is not positive, if t has fewer than size rows, or if its rows do not
// divide into blocks of size. The sources are copies.
func (t *Table) Sources(size int) ([]*Table, error) {
	n := t.Rows()
	switch {
	case size <= 0:
		return nil, fmt.Errorf("dataset: source size %d, want at least 1", size)
	case n < size:
		return nil, fmt.Errorf("dataset: %d rows are too few for one source of %d", n, size)
	case n%size != 0:
		return nil, fmt.Errorf("dataset: %d rows do not divide into sources of %d (%d sources leave %d rows over)",
			n, size, n/size, n%size)
	}
	src := make([]*Table, n/size)
	for s := range src {
		var err error
		if src[s], err = t.Slice(s*size, (s+1)*size); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// Split cuts t, typically one source, into its first train rows, the next
// test rows and the last val rows. The three counts must be non-negative and
// sum to t.Rows(), so that no row is left out. A part of zero rows is
// returned as nil; the others are copies.
func (t *Table) Split(train, test, val int) (trainT, testT, valT *Table, err error) {
	n := t.Rows()
	if train < 0 || test < 0 || val < 0 {
		return nil, nil, nil, fmt.Errorf("dataset: split %d,%d,%d has a negative count", train, test, val)
	}
	if sum := train + test + val; sum != n {
		return nil, nil, nil, fmt.Errorf("dataset: split %d+%d+%d = %d rows, table has %d", train, test, val, sum, n)
	}
	bounds := [4]int{0, train, train + test, n}
	var parts [3]*Table
	for k := range parts {
		if bounds[k] == bounds[k+1] {
			continue
		}
		if parts[k], err = t.Slice(bounds[k], bounds[k+1]); err != nil {
			return nil, nil, nil, err
		}
	}
	return parts[0], parts[1], parts[2], nil
}

// Concat returns a new table holding the rows of the given tables in order.
// It returns an error if there are none, if any is not valid, or if their
// covariate counts differ.
func Concat(tables ...*Table) (*Table, error) {
	if len(tables) == 0 {
		return nil, fmt.Errorf("dataset: nothing to concatenate: %w", ErrEmpty)
	}
	var n int
	dx := tables[0].Covariates()
	for k, t := range tables {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("dataset: table %d: %w", k+1, err)
		}
		if c := t.Covariates(); c != dx {
			return nil, fmt.Errorf("dataset: table %d has %d covariates, table 1 has %d: %w", k+1, c, dx, ErrShape)
		}
		n += t.Rows()
	}
	out := &Table{X: mat.NewDense(n, dx, nil)}
	var at int
	for _, t := range tables {
		r := t.Rows()
		out.X.Slice(at, at+r, 0, dx).(*mat.Dense).Copy(t.X)
		out.W = append(out.W, t.W...)
		out.Y = append(out.Y, t.Y...)
		out.YCF = append(out.YCF, t.YCF...)
		out.Mu0 = append(out.Mu0, t.Mu0...)
		out.Mu1 = append(out.Mu1, t.Mu1...)
		at += r
	}
	return out, nil
}

// Data returns the observed part of t, the covariates, treatments and
// factual outcomes, for training or scoring. It shares storage with t.
func (t *Table) Data() *records.Data {
	return &records.Data{X: t.X, W: t.W, Y: t.Y}
}

// Tau returns the true conditional average treatment effect of every row,
// mu1 - mu0, in a new slice. For a malformed table it covers only the rows
// that have both mu0 and mu1.
func (t *Table) Tau() []float64 {
	tau := make([]float64, min(len(t.Mu0), len(t.Mu1)))
	for i := range tau {
		tau[i] = t.Mu1[i] - t.Mu0[i]
	}
	return tau
}

// InferSchema infers the schema shared by the given tables from their
// values. A covariate is binary when every value it takes, in every table,
// is 0 or 1, and continuous otherwise; the outcome is binary when every
// factual outcome is 0 or 1. Infer over all the rows a federation will see,
// not a subset: a count that happens to be 0 or 1 in a few rows looks binary.
// In the IHDP files x14 takes the values 1 and 2 and is therefore
// continuous. InferSchema returns an error if there are no tables, if any is
// not valid, or if their covariate counts differ.
func InferSchema(tables ...*Table) (records.Schema, error) {
	if len(tables) == 0 {
		return records.Schema{}, fmt.Errorf("dataset: no tables to infer a schema from: %w", ErrEmpty)
	}
	dx := tables[0].Covariates()
	s := records.Schema{Binary: make([]bool, dx), BinaryOutcome: true}
	for j := range s.Binary {
		s.Binary[j] = true
	}
	for k, t := range tables {
		if err := t.Validate(); err != nil {
			return records.Schema{}, fmt.Errorf("dataset: table %d: %w", k+1, err)
		}
		if c := t.Covariates(); c != dx {
			return records.Schema{}, fmt.Errorf("dataset: table %d has %d covariates, table 1 has %d: %w",
				k+1, c, dx, ErrShape)
		}
		for i, y := range t.Y {
			s.BinaryOutcome = s.BinaryOutcome && isBit(y)
			for j := range s.Binary {
				s.Binary[j] = s.Binary[j] && isBit(t.X.At(i, j))
			}
		}
	}
	return s, nil
}

func isBit(v float64) bool { return v == 0 || v == 1 }

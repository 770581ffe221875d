package dataset

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// FixedColumns is the number of leading columns of a row that are not
// covariates: w, y_factual, y_cfactual, mu0 and mu1.
const FixedColumns = 5

// Errors reported by Read, Write and Table.Validate, wrapped with the file,
// row and column they concern. Test for them with errors.Is.
var (
	// ErrEmpty means that the input holds no rows.
	ErrEmpty = errors.New("no rows")
	// ErrFieldCount means that a row has too few fields, or a number of
	// fields different from the first row.
	ErrFieldCount = errors.New("wrong number of fields")
	// ErrNotFinite means that a value is NaN or ±Inf.
	ErrNotFinite = errors.New("not a finite number")
	// ErrTreatment means that a treatment is neither 0 nor 1.
	ErrTreatment = errors.New("treatment is not 0 or 1")
)

// ParseError is the error returned by Read for input that is not a valid
// IHDP-layout table. It names the place of the fault; Err says what it is.
type ParseError struct {
	File   string // name of the input as given to Read; may be empty
	Row    int    // 1-based row (CSV record) number; 0 for the whole input
	Column int    // 1-based column number; 0 for a whole row
	Err    error  // the fault, often wrapping a sentinel such as ErrNotFinite
}

// Error formats the error as, for example,
//
//	ihdp_npci_1.csv: row 17, column 3 (y_cfactual): parse "abc": invalid syntax
func (e *ParseError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Row > 0 {
		fmt.Fprintf(&b, "row %d", e.Row)
		if e.Column > 0 {
			fmt.Fprintf(&b, ", column %d (%s)", e.Column, ColumnName(e.Column))
		}
		b.WriteString(": ")
	}
	if e.Err == nil {
		b.WriteString("invalid input")
	} else {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns e.Err.
func (e *ParseError) Unwrap() error { return e.Err }

// ColumnName returns the name of the 1-based column col of the layout:
// "w", "y_factual", "y_cfactual", "mu0", "mu1", then "x1", "x2" and so on.
// It returns "?" for col < 1.
func ColumnName(col int) string {
	switch col {
	case 1:
		return "w"
	case 2:
		return "y_factual"
	case 3:
		return "y_cfactual"
	case 4:
		return "mu0"
	case 5:
		return "mu1"
	}
	if col < 1 {
		return "?"
	}
	return "x" + strconv.Itoa(col-FixedColumns)
}

// ReadFile reads the IHDP-layout table in the named file. Errors name the
// file as path.
func ReadFile(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads an IHDP-layout table from r. The name is used in errors only,
// typically the file name. Every error is a *ParseError. Spaces around a
// number are ignored, and so are blank lines; any other fault is an error.
func Read(r io.Reader, name string) (*Table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked below, with a clearer message
	cr.ReuseRecord = true

	var (
		width int // fields per row, set by row 1
		t     = &Table{}
		x     []float64
	)
	for row := 1; ; row++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &ParseError{File: name, Row: row, Err: err}
		}
		if row == 1 {
			if len(rec) <= FixedColumns {
				return nil, &ParseError{File: name, Row: row, Err: fmt.Errorf(
					"%d fields, want at least %d (w, y_factual, y_cfactual, mu0, mu1 and one covariate or more): %w",
					len(rec), FixedColumns+1, ErrFieldCount)}
			}
			width = len(rec)
		} else if len(rec) != width {
			return nil, &ParseError{File: name, Row: row, Err: fmt.Errorf(
				"%d fields, want %d as in row 1: %w", len(rec), width, ErrFieldCount)}
		}
		for j, field := range rec {
			v, err := parseField(field, j+1)
			if err != nil {
				return nil, &ParseError{File: name, Row: row, Column: j + 1, Err: err}
			}
			switch j {
			case 0:
				t.W = append(t.W, v)
			case 1:
				t.Y = append(t.Y, v)
			case 2:
				t.YCF = append(t.YCF, v)
			case 3:
				t.Mu0 = append(t.Mu0, v)
			case 4:
				t.Mu1 = append(t.Mu1, v)
			default:
				x = append(x, v)
			}
		}
	}
	if len(t.W) == 0 {
		return nil, &ParseError{File: name, Err: ErrEmpty}
	}
	t.X = mat.NewDense(len(t.W), width-FixedColumns, x)
	return t, nil
}

// parseField parses the value of the 1-based column col.
func parseField(field string, col int) (float64, error) {
	s := strings.TrimSpace(field)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok {
			err = ne.Err
		}
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("value %q: %w", s, ErrNotFinite)
	}
	if col == 1 {
		switch v {
		case 0:
			return 0, nil // also turns -0 into 0
		case 1:
			return 1, nil
		}
		return 0, fmt.Errorf("value %q: %w", s, ErrTreatment)
	}
	return v, nil
}

// Write writes t to w in the IHDP layout, one row per line, with each number
// in the shortest form that reads back to the same float64, in plain notation
// unless its magnitude is below 1e-6 or at least 1e21. It validates t
// first, so that whatever Write produces, Read accepts and returns unchanged.
func Write(w io.Writer, t *Table) error {
	if err := t.Validate(); err != nil {
		return err
	}
	n, dx := t.X.Dims()
	cw := csv.NewWriter(w)
	rec := make([]string, FixedColumns+dx)
	for i := range n {
		rec[0] = format(t.W[i])
		rec[1] = format(t.Y[i])
		rec[2] = format(t.YCF[i])
		rec[3] = format(t.Mu0[i])
		rec[4] = format(t.Mu1[i])
		for j := range dx {
			rec[FixedColumns+j] = format(t.X.At(i, j))
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("dataset: writing row %d: %w", i+1, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("dataset: writing: %w", err)
	}
	return nil
}

// format returns the shortest decimal form of v that parses back to v, in
// plain notation unless v is very small or very large, as encoding/json does.
func format(v float64) string {
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(v, 'e', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// WriteFile writes t to path as Write does, through a temporary file
// renamed over path once complete, so that a reader never sees half a
// file.
func WriteFile(path string, t *Table) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*.csv")
	if err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, t); err != nil {
		tmp.Close()
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

package store

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrCSV means that the input is not well-formed CSV, or that its rows have
// differing numbers of fields.
var ErrCSV = errors.New("invalid CSV")

// maxColumns is SQLite's default limit on the columns of a table.
const maxColumns = 2000

// ImportOptions configure ImportCSV.
type ImportOptions struct {
	Header  bool    // the first record names the columns; without it they are c1, c2, …
	Replace bool    // drop an existing table or view of the same name first
	Name    string  // the CSV's name in errors, such as its path; "" means "CSV"
	Comma   rune    // field separator; 0 means ','
	Open    Options // how ImportCSV opens the site file; the file is created if missing
}

// ImportResult describes an imported table.
type ImportResult struct {
	Table   string
	Columns []Column // with the inferred types
	Rows    int
}

// ImportError reports a fault of the CSV input, with its place.
type ImportError struct {
	File       string // ImportOptions.Name
	Line       int    // 1-based line of the input; 0 when not about one line
	Column     int    // 1-based field number; 0 when not about one field
	ColumnName string // the column's name, when known
	Err        error
}

// Error formats the error as, for example,
//
//	import "visits.csv": line 17, column 3 ("age"): NaN cannot be stored in SQLite …
func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "import %q", e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Column > 0 {
		fmt.Fprintf(&b, ", column %d", e.Column)
		if e.ColumnName != "" {
			fmt.Fprintf(&b, " (%q)", e.ColumnName)
		}
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the fault.
func (e *ImportError) Unwrap() error { return e.Err }

// ImportCSV opens (or creates) the site file at path and imports the CSV
// read from r into a new table; see [Site.ImportCSV].
func ImportCSV(ctx context.Context, path, table string, r io.Reader, opts ImportOptions) (ImportResult, error) {
	o := opts.Open
	o.Create = true
	s, err := Open(ctx, path, o)
	if err != nil {
		return ImportResult{}, err
	}
	res, err := s.ImportCSV(ctx, table, r, opts)
	if cerr := s.Close(); err == nil && cerr != nil {
		return res, cerr
	}
	return res, err
}

// ImportCSV reads CSV from r into a new table of the site, in one
// transaction: afterwards either the whole table is there or nothing
// changed. Each column's type is inferred from its values: INTEGER when
// every value is a decimal integer that fits in 64 bits, else REAL when
// every value is a decimal number (or inf, infinity), else TEXT; numbers
// may have surrounding spaces. An empty field (or one of spaces only) is
// NULL, and a column with no values at all is TEXT. Integers too large for
// 64 bits, and numbers with a leading zero such as 007 (codes, more
// likely than numbers), make the column TEXT, so that they are kept
// exactly. NaN is
// refused: SQLite stores it as NULL, so leave the field empty instead.
//
// An existing table or view of the same name is refused (ErrTableExists)
// unless opts.Replace is set. Errors name the CSV (opts.Name), the line and
// the column (*ImportError).
func (s *Site) ImportCSV(ctx context.Context, table string, r io.Reader, opts ImportOptions) (ImportResult, error) {
	name := opts.Name
	if name == "" {
		name = "CSV"
	}
	res := ImportResult{Table: table}
	if err := checkTableName(table); err != nil {
		return res, &ImportError{File: name, Err: fmt.Errorf("table %q: %w", table, err)}
	}
	cols, recs, lines, err := readCSV(r, name, opts)
	if err != nil {
		return res, err
	}
	types := make([]ColumnType, len(cols))
	for j := range cols {
		types[j] = inferType(recs, j)
		cols[j].Type = types[j]
	}
	rows := make([][]any, len(recs))
	for i, rec := range recs {
		row := make([]any, len(rec))
		for j, f := range rec {
			v, err := fieldValue(f, types[j])
			if err != nil {
				return res, &ImportError{File: name, Line: lines[i], Column: j + 1, ColumnName: cols[j].Name, Err: err}
			}
			row[j] = v
		}
		rows[i] = row
	}
	if err := s.CreateTable(ctx, table, cols, rows, opts.Replace); err != nil {
		return res, &ImportError{File: name, Err: err}
	}
	res.Columns, res.Rows = cols, len(rows)
	s.log.InfoContext(ctx, "csv imported", "path", s.path, "table", table, "columns", len(cols), "rows", len(rows))
	return res, nil
}

// readCSV reads the whole input: the column names and the data records,
// with the line each record starts on.
func readCSV(r io.Reader, name string, opts ImportOptions) ([]Column, [][]string, []int, error) {
	cr := csv.NewReader(r)
	if opts.Comma != 0 {
		cr.Comma = opts.Comma
	}
	var cols []Column
	var recs [][]string
	var lines []int
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			ie := &ImportError{File: name, Err: fmt.Errorf("%w: %w", ErrCSV, err)}
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				ie.Line, ie.Err = pe.Line, fmt.Errorf("%w: %w", ErrCSV, pe.Err)
			}
			return nil, nil, nil, ie
		}
		line, _ := cr.FieldPos(0)
		if cols == nil {
			if len(rec) > maxColumns {
				return nil, nil, nil, &ImportError{File: name, Line: line,
					Err: fmt.Errorf("%w: %d columns, SQLite allows %d", ErrCSV, len(rec), maxColumns)}
			}
			cols = make([]Column, len(rec))
			for j := range cols {
				cols[j].Name = "c" + strconv.Itoa(j+1)
			}
			if opts.Header {
				if err := headerNames(cols, rec, name, line); err != nil {
					return nil, nil, nil, err
				}
				continue
			}
		}
		recs = append(recs, rec)
		lines = append(lines, line)
	}
	if len(recs) == 0 {
		return nil, nil, nil, &ImportError{File: name, Err: fmt.Errorf("%w: no data rows", ErrEmpty)}
	}
	return cols, recs, lines, nil
}

// headerNames names cols from the header record: a byte order mark is
// dropped, an empty name stays cN, and names must differ (ignoring case).
func headerNames(cols []Column, rec []string, file string, line int) error {
	seen := map[string]int{}
	for j, h := range rec {
		if j == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		if strings.TrimSpace(h) != "" {
			cols[j].Name = h
		}
		if strings.IndexByte(cols[j].Name, 0) >= 0 {
			return &ImportError{File: file, Line: line, Column: j + 1, Err: fmt.Errorf("%w: column name contains a NUL byte", ErrCSV)}
		}
		k := strings.ToLower(cols[j].Name)
		if prev, ok := seen[k]; ok {
			return &ImportError{File: file, Line: line, Column: j + 1, ColumnName: cols[j].Name,
				Err: fmt.Errorf("%w: the name of column %d again", ErrCSV, prev)}
		}
		seen[k] = j + 1
	}
	return nil
}

// numberKind classifies a field.
type numberKind int

const (
	notNumber numberKind = iota
	intNumber
	realNumber
	nanNumber
)

// classify says what field holds, after trimming spaces.
func classify(f string) numberKind {
	f = strings.TrimSpace(f)
	body := strings.TrimLeft(f, "+-")
	if body == "" || len(f)-len(body) > 1 {
		return notNumber
	}
	if len(body) > 1 && body[0] == '0' && isDigit(body[1]) {
		return notNumber // a code such as 007: keep it exact, as text
	}
	if _, err := strconv.ParseInt(f, 10, 64); err == nil {
		return intNumber
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		return realNumber
	case "nan":
		return nanNumber
	}
	if !decimal(body) {
		return notNumber
	}
	if allDigits(body) {
		return notNumber // an integer beyond 64 bits: keep it exact, as text
	}
	return realNumber
}

// decimal reports whether s is digits[.digits][e[±]digits] or .digits[…],
// with at least one digit in the mantissa.
func decimal(s string) bool {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// inferType returns the type of column j of recs.
func inferType(recs [][]string, j int) ColumnType {
	allInt, values := true, false
	for _, rec := range recs {
		f := rec[j]
		if strings.TrimSpace(f) == "" {
			continue
		}
		values = true
		switch classify(f) {
		case intNumber:
		case realNumber, nanNumber:
			allInt = false
		default:
			return Text
		}
	}
	switch {
	case !values:
		return Text
	case allInt:
		return Integer
	}
	return Real
}

// fieldValue converts a field to the value stored in a column of type t.
func fieldValue(f string, t ColumnType) (any, error) {
	tf := strings.TrimSpace(f)
	if tf == "" {
		return nil, nil
	}
	switch t {
	case Integer:
		return strconv.ParseInt(tf, 10, 64)
	case Real:
		if classify(tf) == nanNumber {
			return nil, fmt.Errorf("%w: NaN cannot be stored in SQLite (it would become NULL); leave the field empty for a missing value", ErrNotFinite)
		}
		v, err := strconv.ParseFloat(tf, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, err
		}
		return v, nil // out of range: ±Inf or 0, as SQLite itself would read it
	}
	return f, nil
}

package store

import (
	"bytes"
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
	Comma   rune    // field separator; 0 means detect it (DetectDelimiter)
	Open    Options // how ImportCSV opens the site file; the file is created if missing
}

// ImportResult describes an imported table.
type ImportResult struct {
	Table   string
	Columns []Column // with the inferred types
	Rows    int
	Text    []TextColumn // why each TEXT column is TEXT, in column order
	Nulls   []int        // per column, its empty fields (stored as NULL)
	// Comma is the field separator used, and Detected says whether it was
	// detected rather than given.
	Comma    rune
	Detected bool
	// HeaderLike is set when the file was imported without a header but
	// its first row looks like column names (LooksLikeHeader): the caller
	// should say so, since that row is now a data row.
	HeaderLike bool
}

// TextColumn says why ImportCSV stored a column as TEXT. It quotes the
// first field that is not a number: the site's own data, for its own
// operator's terminal, never for the network.
type TextColumn struct {
	Name    string
	Values  int    // fields that are not empty (NULL)
	Numbers int    // of those, fields that are numbers
	Line    int    // the line of the first field that is not a number; 0 when there is none
	Field   string // that field, as in the CSV
	// Examples are the first fields that are not numbers (at most
	// maxExamples), with their lines; Examples[0] is Line and Field.
	Examples []BadField
}

// BadField is a field that is not a number, with its line.
type BadField struct {
	Line  int
	Field string
}

// maxExamples is how many fields that are not numbers a TextColumn quotes.
const maxExamples = 3

// Mixed reports whether the column holds numbers as well as values that
// are not: most likely a numeric column with a few bad or missing-value
// markers ("n/a", "?"), which crffd fit refuses as a covariate until they
// are corrected, or skips their rows with on_invalid: skip.
func (t TextColumn) Mixed() bool { return t.Numbers > 0 }

// String says why the column is TEXT, for example
//
//	column score stored as TEXT: 1 of 300 values is not a number (line 18: "n/a")
//	column name stored as TEXT: none of its 300 values is a number (line 2: "Ada")
//	column zip stored as TEXT: 40 of 300 values are not numbers (line 3: "02139", a leading zero marks a code)
//	column notes stored as TEXT: every field is empty
func (t TextColumn) String() string {
	var why string
	bad := t.Values - t.Numbers
	switch {
	case t.Values == 0:
		return fmt.Sprintf("column %s stored as TEXT: every field is empty", t.Name)
	case t.Numbers == 0 && t.Values == 1:
		why = "its only value is not a number"
	case t.Numbers == 0:
		why = fmt.Sprintf("none of its %d values is a number", t.Values)
	case bad == 1:
		why = fmt.Sprintf("1 of %d values is not a number", t.Values)
	default:
		why = fmt.Sprintf("%d of %d values are not numbers", bad, t.Values)
	}
	if len(t.Examples) > 1 && t.Numbers > 0 {
		parts := make([]string, len(t.Examples))
		for i, e := range t.Examples {
			parts[i] = fmt.Sprintf("%d: %s", e.Line, quoteField(e.Field))
		}
		more := ""
		if bad > len(t.Examples) {
			more = ", …"
		}
		return fmt.Sprintf("column %s stored as TEXT: %s (lines %s%s)", t.Name, why, strings.Join(parts, ", "), more)
	}
	return fmt.Sprintf("column %s stored as TEXT: %s (line %d: %s%s)", t.Name, why, t.Line, quoteField(t.Field), textKind(t.Field))
}

// quoteField quotes a field for a message, shortened to 40 characters.
func quoteField(f string) string {
	r := []rune(f)
	if len(r) > 40 {
		return strconv.Quote(string(r[:40])) + "…"
	}
	return strconv.Quote(f)
}

// textKind explains a field that looks like a number but is kept as text.
func textKind(f string) string {
	tf := strings.TrimSpace(f)
	body := strings.TrimLeft(tf, "+-")
	switch {
	case classify(f) == nanNumber:
		return ", NaN: leave the field empty for a missing value"
	case len(tf)-len(body) > 1:
		return ""
	case len(body) > 1 && body[0] == '0' && isDigit(body[1]):
		return ", a leading zero marks a code"
	case allDigits(body):
		return ", an integer too long for 64 bits" // digits with one sign at most that classify refused
	}
	return ""
}

// textColumn describes why column j of recs is TEXT.
func textColumn(name string, recs [][]string, lines []int, j int) TextColumn {
	t := TextColumn{Name: name}
	for i, rec := range recs {
		f := rec[j]
		if strings.TrimSpace(f) == "" {
			continue
		}
		t.Values++
		if k := classify(f); k == intNumber || k == realNumber {
			t.Numbers++
		} else if len(t.Examples) < maxExamples {
			t.Examples = append(t.Examples, BadField{Line: lines[i], Field: f})
			if t.Line == 0 {
				t.Line, t.Field = lines[i], f
			}
		}
	}
	return t
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
// Every TEXT column is described in ImportResult.Text, with the first
// field that made it TEXT, so that the caller can say why: a column of
// numbers with one "n/a" is imported as TEXT, and crffd fit then refuses
// that value (or skips its row) when the column is a covariate.
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
	data, err := io.ReadAll(r)
	if err != nil {
		return res, &ImportError{File: name, Err: err}
	}
	res.Comma = opts.Comma
	if res.Comma == 0 {
		res.Comma, res.Detected = DetectDelimiter(data), true
		opts.Comma = res.Comma
	}
	cols, recs, lines, err := readCSV(bytes.NewReader(data), name, opts)
	if err != nil {
		return res, err
	}
	res.HeaderLike = !opts.Header && LooksLikeHeader(recs)
	types := make([]ColumnType, len(cols))
	res.Nulls = make([]int, len(cols))
	for j := range cols {
		types[j] = inferType(recs, j)
		cols[j].Type = types[j]
		if types[j] == Text {
			res.Text = append(res.Text, textColumn(cols[j].Name, recs, lines, j))
		}
		for _, rec := range recs {
			if strings.TrimSpace(rec[j]) == "" {
				res.Nulls[j]++
			}
		}
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

// delimiters are the field separators DetectDelimiter considers, in order
// of preference when several fit equally.
var delimiters = []rune{',', ';', '\t', '|'}

// sniffLines is how many lines DetectDelimiter reads.
const sniffLines = 20

// DetectDelimiter returns the field separator of the CSV data: of comma,
// semicolon, tab and pipe, the one that splits the first lines into the
// same number of fields, more than one, and the most fields when several
// do (a comma on a tie). When none does, it returns the one that splits
// the first line into the most fields, or a comma.
func DetectDelimiter(data []byte) rune {
	sample := data
	for i, n := 0, 0; i < len(data); i++ {
		if data[i] == '\n' {
			if n++; n == sniffLines {
				sample = data[:i+1]
				break
			}
		}
	}
	best, bestFields := ',', 1
	fallback, fallbackFields := ',', 1
	for _, c := range delimiters {
		r := csv.NewReader(bytes.NewReader(sample))
		r.Comma, r.FieldsPerRecord, r.LazyQuotes = c, -1, true
		fields, consistent := 0, true
		for k := 0; ; k++ {
			rec, err := r.Read()
			if err != nil {
				// io.EOF, or a line cut short by the sample's end.
				break
			}
			if k == 0 {
				fields = len(rec)
				if fields > fallbackFields {
					fallback, fallbackFields = c, fields
				}
			} else if len(rec) != fields {
				consistent = false
			}
		}
		if consistent && fields > bestFields {
			best, bestFields = c, fields
		}
	}
	if bestFields > 1 {
		return best
	}
	return fallback
}

// LooksLikeHeader reports whether the first of recs looks like a row of
// column names rather than data: every one of its fields is filled and is
// not a number, while in at least one column most of the other fields are
// numbers.
func LooksLikeHeader(recs [][]string) bool {
	if len(recs) < 2 {
		return false
	}
	for _, f := range recs[0] {
		if k := classify(f); strings.TrimSpace(f) == "" || k == intNumber || k == realNumber {
			return false
		}
	}
	for j := range recs[0] {
		numbers, values := 0, 0
		for _, rec := range recs[1:] {
			if strings.TrimSpace(rec[j]) == "" {
				continue
			}
			values++
			if k := classify(rec[j]); k == intNumber || k == realNumber {
				numbers++
			}
		}
		if values > 0 && 2*numbers > values {
			return true
		}
	}
	return false
}

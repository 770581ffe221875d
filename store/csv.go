package store

import (
	"bufio"
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
	Values  int // fields that are not empty (NULL)
	Numbers int // of those, fields that are numbers
	// Examples are the first fields that are not numbers (at most
	// maxExamples), with their lines.
	Examples []BadField
	// ByHeader is set when the only field that is not a number is the
	// first data row's, and that row looks like column names
	// (ImportResult.HeaderLike): a header read as data made the column
	// TEXT.
	ByHeader bool
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
//	column score stored as TEXT: 5 of 300 values are not numbers (lines 18: "n/a", 40: "?", 77: "-", …)
//	column zip stored as TEXT: 40 of 300 values are not numbers (lines 3: "02139", 5: "02144", 9: "01002", …; a leading zero marks a code)
//	column name stored as TEXT: none of its 300 values is a number (line 2: "Ada")
//	column notes stored as TEXT: every field is empty
//
// A column of numbers with other values (Mixed) quotes up to three of them
// with their lines, and "…" when there are more; any other column quotes
// its first value. A field that looks like a number but was kept as text
// is explained: once after the list when every quoted field has the same
// reason, else after each field.
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
		kinds := make([]string, len(t.Examples))
		same := true
		for i, e := range t.Examples {
			kinds[i] = strings.TrimPrefix(textKind(e.Field), ", ")
			same = same && kinds[i] == kinds[0]
		}
		parts := make([]string, len(t.Examples))
		for i, e := range t.Examples {
			parts[i] = fmt.Sprintf("%d: %s", e.Line, quoteField(e.Field))
			if !same && kinds[i] != "" {
				parts[i] += " (" + kinds[i] + ")"
			}
		}
		tail := ""
		if bad > len(t.Examples) {
			tail = ", …"
		}
		if same && kinds[0] != "" {
			tail += "; " + kinds[0]
		}
		return fmt.Sprintf("column %s stored as TEXT: %s (lines %s%s)", t.Name, why, strings.Join(parts, ", "), tail)
	}
	e := t.Examples[0] // Values > Numbers: there is one
	return fmt.Sprintf("column %s stored as TEXT: %s (line %d: %s%s)", t.Name, why, e.Line, quoteField(e.Field), textKind(e.Field))
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
	case decimalComma(f):
		// Common in semicolon-separated exports: crffd does not guess
		// whether 1,500 is one and a half or fifteen hundred.
		return ", a comma in a number: crffd reads a decimal point only, and no thousands separators"
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
// exactly, and so does a decimal comma ("2,5"), which is not guessed at.
// NaN is refused: SQLite stores it as NULL, so leave the field empty
// instead. Every TEXT column is described in ImportResult.Text, with the
// count of its fields that are not numbers and the first of them, so that
// the caller can say why: a column of numbers with one "n/a" is imported
// as TEXT, and crffd fit then refuses that value (or skips its row) when
// the column is a covariate.
//
// With opts.Comma 0 the separator is detected (DetectDelimiter) and
// ImportResult says which it used. Without opts.Header,
// ImportResult.HeaderLike says whether the first row, imported as data,
// looks like column names (LooksLikeHeader); the import is not refused for
// it, since a caller that asked for no header may mean it.
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
	// Detection reads at most sniffBytes, so the file is not held whole
	// beside its parsed records.
	br := bufio.NewReaderSize(r, sniffBytes+1)
	res.Comma = opts.Comma
	if res.Comma == 0 {
		head, err := br.Peek(sniffBytes + 1)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return res, &ImportError{File: name, Err: err}
		}
		res.Comma, res.Detected = DetectDelimiter(head), true
		opts.Comma = res.Comma
	}
	cols, recs, lines, err := readCSV(br, name, opts)
	if err != nil {
		var ie *ImportError
		if res.Detected && errors.Is(err, csv.ErrFieldCount) && errors.As(err, &ie) {
			ie.Err = fmt.Errorf("%w (separator %s detected; name it with --delimiter)", ie.Err, DelimiterName(res.Comma))
		}
		return res, err
	}
	res.HeaderLike = !opts.Header && LooksLikeHeader(recs)
	types := make([]ColumnType, len(cols))
	res.Nulls = make([]int, len(cols))
	for j := range cols {
		types[j] = inferType(recs, j)
		cols[j].Type = types[j]
		if types[j] == Text {
			t := textColumn(cols[j].Name, recs, lines, j)
			// lines[0] is the first data row's: readCSV refuses a file
			// without one.
			t.ByHeader = res.HeaderLike && t.Mixed() && t.Values-t.Numbers == 1 && t.Examples[0].Line == lines[0]
			res.Text = append(res.Text, t)
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
			if v == nil {
				res.Nulls[j]++
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

// DelimiterNames are the words that name a field separator (crffd import's
// --delimiter), besides the character itself.
var DelimiterNames = map[string]rune{"comma": ',', "semicolon": ';', "tab": '\t', `\t`: '\t', "pipe": '|'}

// DelimiterName names a field separator for a message: its word, or the
// quoted character.
func DelimiterName(r rune) string {
	for name, c := range DelimiterNames {
		if c == r && name != `\t` {
			return name
		}
	}
	return strconv.QuoteRune(r)
}

// sniffLines is how many lines DetectDelimiter reads, and sniffBytes caps
// their size, for a file with very long lines or none at all: the import
// parses the whole file anyway, but need not do it four more times.
const (
	sniffLines = 20
	sniffBytes = 1 << 20
)

// sniffed tallies one record of the sample as split by one separator.
type sniffed struct {
	fields  int // fields of the record
	values  int // fields that are not empty
	numbers int // of those, fields that are numbers, decimal commas included
}

// DetectDelimiter returns the field separator of the CSV data, of comma,
// semicolon, tab and pipe. It reads the first 20 lines (at most 1 MiB),
// honouring quotes, and keeps the separators that split every one of them
// into the same number of fields, more than one. Of those it returns the
// one whose fields are most often numbers, then the one giving the most
// fields, then the first in the order comma, semicolon, tab, pipe. The
// share of numbers decides first because a semicolon file with decimal
// commas ("1;2,5") splits as evenly by commas as by semicolons when it has
// no header row, and only by semicolons are its fields numbers.
//
// When no separator fits, it returns the one that splits the first line
// into the most fields, or a comma: ImportCSV then refuses the line whose
// number of fields differs, naming it, rather than importing the file as
// one column.
func DetectDelimiter(data []byte) rune {
	sample, cut := data, false
	for i, n := 0, 0; i < len(data) && i < sniffBytes; i++ {
		if data[i] == '\n' {
			if n++; n == sniffLines {
				sample, cut = data[:i+1], i+1 < len(data)
				break
			}
		}
	}
	if len(sample) > sniffBytes {
		sample, cut = sample[:sniffBytes], true
	}
	best, bestFields, bestNumbers, bestValues := ',', 1, 0, 1
	fallback, fallbackFields := ',', 1
	for _, c := range delimiters {
		recs := sniff(sample, c)
		if cut && len(recs) > 1 {
			// The sample may end inside a record (a quoted field with a
			// line break, or the byte cap): its fields are not all there.
			recs = recs[:len(recs)-1]
		}
		if len(recs) == 0 {
			continue
		}
		if recs[0].fields > fallbackFields {
			fallback, fallbackFields = c, recs[0].fields
		}
		numbers, values := 0, 0
		consistent := true
		for _, r := range recs {
			consistent = consistent && r.fields == recs[0].fields
			numbers, values = numbers+r.numbers, values+r.values
		}
		if !consistent || recs[0].fields < 2 {
			continue
		}
		values = max(values, 1)
		// Compare numbers/values with bestNumbers/bestValues, in integers.
		share, bestShare := numbers*bestValues, bestNumbers*values
		if bestFields < 2 || share > bestShare || share == bestShare && recs[0].fields > bestFields {
			best, bestFields, bestNumbers, bestValues = c, recs[0].fields, numbers, values
		}
	}
	if bestFields > 1 {
		return best
	}
	return fallback
}

// sniff splits the sample by separator c and tallies each record. Quotes
// are read leniently (a stray quote is a character), so that one odd field
// does not hide the file's separator; the import itself is strict.
func sniff(sample []byte, c rune) []sniffed {
	r := csv.NewReader(bytes.NewReader(sample))
	r.Comma, r.FieldsPerRecord, r.LazyQuotes = c, -1, true
	var recs []sniffed
	for {
		rec, err := r.Read()
		if err != nil {
			// io.EOF: with lenient quotes and any number of fields per
			// record, encoding/csv has no other error for a valid Comma.
			return recs
		}
		s := sniffed{fields: len(rec)}
		for _, f := range rec {
			if strings.TrimSpace(f) != "" {
				s.values++
				if numberLike(f) {
					s.numbers++
				}
			}
		}
		recs = append(recs, s)
	}
}

// numberLike reports whether a field is a number, or would be with a
// decimal point for its comma ("2,5"): what detection counts as a number,
// though the import stores a decimal comma as text (see textKind).
func numberLike(f string) bool {
	k := classify(f)
	return k == intNumber || k == realNumber || decimalComma(f)
}

// decimalComma reports whether f is a number written with one comma
// between digits, such as "2,5" or "1,000", and no point.
func decimalComma(f string) bool {
	tf := strings.TrimSpace(f)
	i := strings.IndexByte(tf, ',')
	if i < 1 || i+1 >= len(tf) || !isDigit(tf[i-1]) || !isDigit(tf[i+1]) ||
		strings.Count(tf, ",") != 1 || strings.IndexByte(tf, '.') >= 0 {
		return false
	}
	k := classify(tf[:i] + "." + tf[i+1:])
	return k == realNumber
}

// LooksLikeHeader reports whether the first of recs looks like a row of
// column names rather than data: every one of its fields is filled and is
// not a number, while in at least one column most of the other filled
// fields are numbers (a decimal comma such as "2,5" counts as a number
// here). The second condition is what tells names from data: a file of
// names and codes has no such column, and its first row may well be data.
// A row of a ragged recs is read as far as it goes.
func LooksLikeHeader(recs [][]string) bool {
	if len(recs) < 2 {
		return false
	}
	for _, f := range recs[0] {
		if strings.TrimSpace(f) == "" || numberLike(f) {
			return false
		}
	}
	for j := range recs[0] {
		numbers, values := 0, 0
		for _, rec := range recs[1:] {
			if j >= len(rec) || strings.TrimSpace(rec[j]) == "" {
				continue
			}
			values++
			if numberLike(rec[j]) {
				numbers++
			}
		}
		if values > 0 && 2*numbers > values {
			return true
		}
	}
	return false
}

package sqlfiles

import (
	"fmt"
	"strconv"
	"strings"
	"text/template"

	"github.com/crffd/crffd/positivity"
)

var (
	overlap        = template.Must(template.ParseFS(files, "views/overlap.sql"))
	positivityView = template.Must(template.ParseFS(files, "views/positivity.sql"))
)

// OverlapView returns the CREATE VIEW statement of crff_overlap for a site
// whose records are in table (a table or view), with ids in column id and
// the 0/1 treatment in column treatment. As with [CateRecordsView], the text
// is exactly what SQLite keeps in sqlite_schema.sql once the view is
// created.
func OverlapView(table, id, treatment string) (string, error) {
	v, err := newViewFields(table, id, treatment)
	if err != nil {
		return "", err
	}
	return render(overlap, "crff_overlap", v)
}

// PositivityView returns the CREATE VIEW statement of crff_positivity, the
// site's verdict by the rules of package positivity, for a site whose
// records are in table with ids in column id and the 0/1 treatment in
// column treatment. Its warning column says what
// [positivity.Counts.Warning] says of the same counts. As with
// [CateRecordsView], the text is exactly what SQLite keeps in
// sqlite_schema.sql once the view is created.
func PositivityView(table, id, treatment string) (string, error) {
	v, err := newViewFields(table, id, treatment)
	if err != nil {
		return "", err
	}
	return render(positivityView, "crff_positivity", v)
}

// viewFields are what the overlap and positivity templates are rendered
// with: quoted identifiers, the treatment column's name as a string
// literal, and the thresholds as SQL literals.
type viewFields struct {
	Table, ID, Treatment string // quoted identifiers
	Name                 string // the treatment column's name, as a string literal
	Low, High            string
	SoftRows, SoftShare  string
	MaxOutside           string
	ArmRule, OutsideRule string // string literals
}

func newViewFields(table, id, treatment string) (viewFields, error) {
	var v viewFields
	var err error
	if v.Table, err = QuoteIdent(table); err != nil {
		return v, fmt.Errorf("table name: %w", err)
	}
	if v.ID, err = QuoteIdent(id); err != nil {
		return v, fmt.Errorf("id column name: %w", err)
	}
	if v.Treatment, err = QuoteIdent(treatment); err != nil {
		return v, fmt.Errorf("treatment column name: %w", err)
	}
	v.Name = quoteString(treatment)
	v.Low, v.High = literal(positivity.Low), literal(positivity.High)
	v.SoftRows = strconv.Itoa(positivity.SoftArmRows)
	v.SoftShare, v.MaxOutside = literal(positivity.SoftArmShare), literal(positivity.MaxOutsideShare)
	v.ArmRule, v.OutsideRule = quoteString(positivity.ArmRule()), quoteString(positivity.OutsideRule())
	return v, nil
}

// render executes a view template and keeps the statement from CREATE VIEW
// on, as SQLite stores it.
func render(t *template.Template, name string, v viewFields) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	s := b.String()
	if i := strings.Index(s, "CREATE VIEW"); i >= 0 {
		s = s[i:]
	}
	return strings.TrimSpace(s), nil
}

// quoteString returns s as an SQL string literal (QuoteString), for
// names already checked to hold no NUL byte.
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// literal returns f as an SQL real literal that reads back as f exactly.
func literal(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

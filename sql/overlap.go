package sqlfiles

import (
	"fmt"
	"strings"
	"text/template"
)

// Positivity bounds: a propensity below PositivityLow or above
// PositivityHigh means that a row could hardly have received the other arm,
// so that its effect rests on extrapolation. crff_overlap flags the buckets
// beyond them as extreme.
const (
	PositivityLow  = 0.01
	PositivityHigh = 0.99
)

var overlap = template.Must(template.ParseFS(files, "views/overlap.sql"))

// OverlapView returns the CREATE VIEW statement of crff_overlap for a site
// whose records are in table (a table or view), with ids in column id and
// the 0/1 treatment in column treatment. As with [CateRecordsView], the text
// is exactly what SQLite keeps in sqlite_schema.sql once the view is
// created.
func OverlapView(table, id, treatment string) (string, error) {
	qt, err := QuoteIdent(table)
	if err != nil {
		return "", fmt.Errorf("table name: %w", err)
	}
	qi, err := QuoteIdent(id)
	if err != nil {
		return "", fmt.Errorf("id column name: %w", err)
	}
	qw, err := QuoteIdent(treatment)
	if err != nil {
		return "", fmt.Errorf("treatment column name: %w", err)
	}
	var b strings.Builder
	if err := overlap.Execute(&b, struct{ Table, ID, Treatment string }{qt, qi, qw}); err != nil {
		return "", fmt.Errorf("render crff_overlap: %w", err)
	}
	s := b.String()
	if i := strings.Index(s, "CREATE VIEW"); i >= 0 {
		s = s[i:]
	}
	return strings.TrimSpace(s), nil
}

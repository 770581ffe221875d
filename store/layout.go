package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/crffd/crffd/records"
	"github.com/crffd/crffd/sqlfiles"
)

// Layout is a resolved [Source]: the exact columns read, in the table's own
// spelling, and the type of each covariate. It is stored with each run, so
// that rows added later are read and scored exactly as the run's training
// rows were, whatever happens to the configuration or the table meanwhile.
type Layout struct {
	Table         string    `json:"table"`
	ID            string    `json:"id_column"`
	Treatment     string    `json:"treatment_column"`
	Outcome       string    `json:"outcome_column"`
	Covariates    []string  `json:"covariates"`       // the columns of Data.X, in order
	Binary        []bool    `json:"binary"`           // per covariate: Bernoulli (true) or Gaussian
	BinaryOutcome bool      `json:"binary_outcome"`   // the outcome is 0/1
	Identity      []string  `json:"identity_columns"` // for de-duplication across sites
	OnInvalid     OnInvalid `json:"on_invalid"`
}

// Schema returns the estimator's view of the layout.
func (l Layout) Schema() records.Schema {
	return records.Schema{Binary: slices.Clone(l.Binary), BinaryOutcome: l.BinaryOutcome}
}

// column is one column of the user's table or view.
type column struct {
	name     string // as declared
	declType string // declared type, "" when none
}

// affinity is SQLite's column affinity, from the declared type by the rules
// of https://sqlite.org/datatype3.html#determination_of_column_affinity.
type affinity int

const (
	affNone affinity = iota // BLOB affinity: no declared type
	affInteger
	affText
	affReal
	affNumeric
)

func affinityOf(declType string) affinity {
	t := strings.ToUpper(declType)
	switch {
	case strings.Contains(t, "INT"):
		return affInteger
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return affText
	case t == "", strings.Contains(t, "BLOB"):
		return affNone
	case strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return affReal
	default:
		return affNumeric
	}
}

// tableColumns returns the columns of the table or view, or nil when there
// is no such table or view.
func tableColumns(ctx context.Context, q querier, table string) ([]column, error) {
	rows, err := q.QueryContext(ctx,
		`SELECT name, type, hidden FROM pragma_table_xinfo(?) ORDER BY cid`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []column
	for rows.Next() {
		var c column
		var hidden int
		if err := rows.Scan(&c.name, &c.declType, &hidden); err != nil {
			return nil, err
		}
		if hidden == 1 { // a hidden column of a virtual table
			continue
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// colType is the configured type of a covariate.
type colType int

const (
	typeAuto colType = iota
	typeBinary
	typeContinuous
)

// plan is a Layout in the making: the columns are known, the automatic
// covariate types are not yet.
type plan struct {
	Layout
	types       []colType       // per covariate, as configured
	autoOutcome bool            // detect the outcome type from the values
	chosen      map[string]bool // covariates chosen by the rule of [Source], not listed
	unused      []UnusedColumn  // the other columns the rule left out
}

// resolve matches src against the table's columns: it finds each configured
// column (case-insensitively), chooses the covariates when none are listed,
// and records each covariate's configured type. It reads values only to
// choose the covariates, by the rule of [Source].
func (s *Site) resolve(ctx context.Context, q querier, src Source) (*plan, error) {
	cols, err := tableColumns(ctx, q, src.Table)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, &ValidationError{File: s.path, Table: src.Table, Err: ErrMissingTable}
	}
	byName := map[string]column{}
	for _, c := range cols {
		if _, dup := byName[strings.ToLower(c.name)]; !dup {
			byName[strings.ToLower(c.name)] = c
		}
	}
	find := func(name string) (string, error) {
		c, ok := byName[strings.ToLower(name)]
		if !ok {
			return "", &ValidationError{File: s.path, Table: src.Table, Column: name, Err: ErrMissingColumn}
		}
		return c.name, nil
	}
	p := &plan{Layout: Layout{Table: src.Table, OnInvalid: src.OnInvalid}}
	if p.OnInvalid == "" {
		p.OnInvalid = Refuse
	}
	if p.ID, err = find(src.IDColumn); err != nil {
		return nil, err
	}
	if p.Treatment, err = find(src.TreatmentColumn); err != nil {
		return nil, err
	}
	if p.Outcome, err = find(src.OutcomeColumn); err != nil {
		return nil, err
	}
	for _, c := range src.IdentityColumns {
		name, err := find(c)
		if err != nil {
			return nil, err
		}
		p.Identity = append(p.Identity, name)
	}
	types := map[string]colType{}
	for _, l := range []struct {
		cols []string
		t    colType
	}{{src.Binary, typeBinary}, {src.Continuous, typeContinuous}} {
		for _, c := range l.cols {
			if _, err := find(c); err != nil {
				return nil, err
			}
			types[strings.ToLower(c)] = l.t
		}
	}
	if len(src.Covariates) > 0 {
		for _, c := range src.Covariates {
			name, err := find(c)
			if err != nil {
				return nil, err
			}
			p.Covariates = append(p.Covariates, name)
		}
	} else {
		taken := map[string]bool{}
		for _, c := range append([]string{p.ID, p.Treatment, p.Outcome}, p.Identity...) {
			taken[strings.ToLower(c)] = true
		}
		for _, c := range cols {
			if taken[strings.ToLower(c.name)] {
				continue
			}
			why, err := covariateColumn(ctx, q, src.Table, c)
			if err != nil {
				return nil, err
			}
			if why != "" {
				p.unused = append(p.unused, UnusedColumn{Name: c.name, Reason: why})
				continue
			}
			p.Covariates = append(p.Covariates, c.name)
			if p.chosen == nil {
				p.chosen = map[string]bool{}
			}
			p.chosen[c.name] = true
		}
		for c := range types {
			if !slices.ContainsFunc(p.Covariates, func(n string) bool { return strings.EqualFold(n, c) }) {
				return nil, &ValidationError{File: s.path, Table: src.Table, Column: c,
					Err: fmt.Errorf("%w: listed as binary or continuous, but not a numeric column", ErrConfig)}
			}
		}
	}
	if len(p.Covariates) == 0 {
		return nil, &ValidationError{File: s.path, Table: src.Table, Err: ErrNoCovariates}
	}
	for _, c := range p.Covariates {
		p.types = append(p.types, types[strings.ToLower(c)])
	}
	switch src.outcomeType() {
	case OutcomeBinary:
		p.BinaryOutcome = true
	case OutcomeAuto:
		p.autoOutcome = true
	}
	return p, nil
}

// covariateColumn applies the rule of [Source] to column c when the
// covariates are chosen automatically: it returns "" when c is a covariate,
// and otherwise why not. c is a covariate when it is declared with an
// INTEGER or REAL affinity, or when at least one of its values is a number
// (stored as an integer or a real, or a text that crffd import would have
// read as a number); every value of a covariate must then be a finite
// number, which reading the rows checks.
func covariateColumn(ctx context.Context, q querier, table string, c column) (string, error) {
	switch affinityOf(c.declType) {
	case affInteger, affReal:
		return "", nil
	}
	qt, err := sqlfiles.QuoteIdent(table)
	if err != nil {
		return "", err
	}
	qc, err := sqlfiles.QuoteIdent(c.name)
	if err != nil {
		return "", err
	}
	var values, numbers int
	err = q.QueryRowContext(ctx, fmt.Sprintf(
		`SELECT count(%[2]s), count(CASE WHEN typeof(%[2]s) IN ('integer', 'real') THEN 1 END) FROM %[1]s`,
		qt, qc)).Scan(&values, &numbers)
	if err != nil {
		return "", err
	}
	if numbers > 0 {
		return "", nil
	}
	rows, err := q.QueryContext(ctx, fmt.Sprintf(`SELECT %[2]s FROM %[1]s WHERE typeof(%[2]s) = 'text'`, qt, qc))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return "", err
		}
		if k := classify(v); k == intNumber || k == realNumber {
			return "", nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	switch values {
	case 0:
		return "it holds no value (every one is NULL)", nil
	case 1:
		return "its only value is not a number", nil
	}
	return fmt.Sprintf("none of its %d values is a number", values), nil
}

package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/crffd/crffd/estimator"
	sqlfiles "github.com/crffd/crffd/sql"
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
func (l Layout) Schema() estimator.Schema {
	return estimator.Schema{Binary: slices.Clone(l.Binary), BinaryOutcome: l.BinaryOutcome}
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
	types       []colType // per covariate, as configured
	autoOutcome bool      // detect the outcome type from the values
}

// resolve matches src against the table's columns: it finds each configured
// column (case-insensitively), chooses the covariates when none are listed,
// and records each covariate's configured type. It reads values only to
// classify untyped columns when choosing covariates.
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
			ok, err := numericColumn(ctx, q, src.Table, c)
			if err != nil {
				return nil, err
			}
			if ok {
				p.Covariates = append(p.Covariates, c.name)
			}
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

// numericColumn says whether c is numeric by the rule of [Source]: by its
// declared affinity, or by its values when the affinity does not decide.
func numericColumn(ctx context.Context, q querier, table string, c column) (bool, error) {
	switch affinityOf(c.declType) {
	case affInteger, affReal:
		return true, nil
	case affText:
		return false, nil
	}
	qt, err := sqlfiles.QuoteIdent(table)
	if err != nil {
		return false, err
	}
	qc, err := sqlfiles.QuoteIdent(c.name)
	if err != nil {
		return false, err
	}
	var numeric bool
	err = q.QueryRowContext(ctx, fmt.Sprintf(
		`SELECT EXISTS (SELECT 1 FROM %[1]s WHERE %[2]s IS NOT NULL)
		    AND NOT EXISTS (SELECT 1 FROM %[1]s WHERE typeof(%[2]s) NOT IN ('integer', 'real', 'null'))`,
		qt, qc)).Scan(&numeric)
	return numeric, err
}

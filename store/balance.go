package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/sqlfiles"
)

// ErrNoBalance means that the file holds no balance diagnostics of the
// scope asked for: crffd check (or fit, or a federated run for the global
// scope) has not run on it.
var ErrNoBalance = errors.New("no balance diagnostics")

// Balance is the balance diagnostics of one scope, as crff_check,
// crff_check_covariate and the crff_balance view hold them.
type Balance struct {
	Scope   Scope
	At      time.Time
	Run     string // the federated run of a global scope; "" for local
	Sites   int    // the sites whose rows went in
	LeftOut int    // rows left out for faults such as missing values; -1 when unknown (global)
	Missing []int  // per covariate, NULL fields of its column; nil when unknown (global)
	Report  balance.Report
}

// WriteBalance replaces the diagnostics of b's scope.
func (s *Site) WriteBalance(ctx context.Context, b Balance) error {
	if b.Scope != ScopeLocal && b.Scope != ScopeGlobal {
		return fmt.Errorf("write balance to %q: %w: scope %q", s.path, ErrBadResult, b.Scope)
	}
	r := b.Report
	if b.Missing != nil && len(b.Missing) != len(r.Covariates) {
		return fmt.Errorf("write balance to %q: %w: %d missing counts for %d covariates", s.path, ErrBadResult, len(b.Missing), len(r.Covariates))
	}
	rank := make(map[string]int, len(r.Covariates))
	for i, c := range r.Ranked() {
		rank[c.Name] = i + 1
	}
	var run any
	if b.Run != "" {
		run = b.Run
	}
	leftOut := any(nil)
	if b.LeftOut >= 0 {
		leftOut = b.LeftOut
	}
	return s.writeTx(ctx, "write balance to", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM crff_check_covariate WHERE scope = ?`, string(b.Scope)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM crff_check WHERE scope = ?`, string(b.Scope)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO crff_check (scope, checked_at, run, sites, treated, control, left_out, ess_treated, ess_control, outside_treated, outside_control, verdict, reasons, advice)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			string(b.Scope), b.At.UTC().Format(time.RFC3339Nano), run, max(b.Sites, 1), r.Rows[balance.Treated], r.Rows[balance.Control], leftOut,
			nullable(r.ESS[balance.Treated]), nullable(r.ESS[balance.Control]), r.Outside[balance.Treated], r.Outside[balance.Control], string(r.Verdict),
			nullString(strings.Join(r.Reasons, "; ")), r.Advice); err != nil {
			return err
		}
		for j, c := range r.Covariates {
			t := "continuous"
			if c.Binary {
				t = "binary"
			}
			var missing any
			if b.Missing != nil {
				missing = b.Missing[j]
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO crff_check_covariate (scope, position, rank, covariate, type, missing, mean_treated, mean_control, sd, smd,
				 mean_treated_weighted, mean_control_weighted, smd_weighted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				string(b.Scope), j, rank[c.Name], c.Name, t, missing,
				nullable(c.Mean[balance.Treated]), nullable(c.Mean[balance.Control]), nullable(c.SD), nullable(c.SMD),
				nullable(c.WMean[balance.Treated]), nullable(c.WMean[balance.Control]), nullable(c.WSMD)); err != nil {
				return fmt.Errorf("covariate %s: %w", c.Name, err)
			}
		}
		return nil
	})
}

// nullString is s, or NULL when s is empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ReadBalance returns the diagnostics of scope, with the covariates in
// column order. It fails with ErrNoBalance when there are none.
func (s *Site) ReadBalance(ctx context.Context, scope Scope) (Balance, error) {
	b := Balance{Scope: scope, LeftOut: -1}
	err := s.readTx(ctx, "read balance from", func(tx *sql.Tx) error {
		var at string
		var run, reasons sql.NullString
		var leftOut sql.NullInt64
		var essT, essC sql.NullFloat64
		r := &b.Report
		err := tx.QueryRowContext(ctx,
			`SELECT checked_at, run, sites, treated, control, left_out, ess_treated, ess_control, outside_treated, outside_control, verdict, reasons, advice
			 FROM crff_check WHERE scope = ?`, string(scope)).Scan(&at, &run, &b.Sites, &r.Rows[balance.Treated], &r.Rows[balance.Control],
			&leftOut, &essT, &essC, &r.Outside[balance.Treated], &r.Outside[balance.Control], &r.Verdict, &reasons, &r.Advice)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w of scope %s", ErrNoBalance, scope)
		}
		if err != nil {
			return err
		}
		if b.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return err
		}
		b.Run = run.String
		if leftOut.Valid {
			b.LeftOut = int(leftOut.Int64)
		}
		r.ESS = [2]float64{nan(essC), nan(essT)}
		if reasons.Valid {
			r.Reasons = strings.Split(reasons.String, "; ")
		}
		rows, err := tx.QueryContext(ctx,
			`SELECT covariate, type, missing, mean_treated, mean_control, sd, smd, mean_treated_weighted, mean_control_weighted, smd_weighted
			 FROM crff_check_covariate WHERE scope = ? ORDER BY position`, string(scope))
		if err != nil {
			return err
		}
		defer rows.Close()
		var missing []int
		known := true
		for rows.Next() {
			var c balance.Covariate
			var t string
			var m sql.NullInt64
			var v [8]sql.NullFloat64
			if err := rows.Scan(&c.Name, &t, &m, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]); err != nil {
				return err
			}
			c.Binary = t == "binary"
			c.Mean = [2]float64{nan(v[1]), nan(v[0])}
			c.SD, c.SMD = nan(v[2]), nan(v[3])
			c.WMean = [2]float64{nan(v[5]), nan(v[4])}
			c.WSMD = nan(v[6])
			r.Covariates = append(r.Covariates, c)
			known = known && m.Valid
			missing = append(missing, int(m.Int64))
		}
		if known {
			b.Missing = missing
		}
		return rows.Err()
	})
	return b, err
}

// nan is v's value, or NaN when it is NULL.
func nan(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}

// CountMissing returns, per covariate of l, the rows of l's table whose
// field is NULL, and the rows of the table.
func (s *Site) CountMissing(ctx context.Context, l Layout) (missing []int, rows int, err error) {
	table, err := sqlfiles.QuoteIdent(l.Table)
	if err != nil {
		return nil, 0, err
	}
	// SQLite reads a quoted name that is no column as a string literal:
	// each name must be one of the table's columns.
	have, err := tableColumns(ctx, s.ro, l.Table)
	if err != nil {
		return nil, 0, fmt.Errorf("count missing values in %s of %q: %w", l.Table, s.path, err)
	}
	cols := []string{"count(*)"}
	for _, c := range l.Covariates {
		if !slices.ContainsFunc(have, func(h column) bool { return strings.EqualFold(h.name, c) }) {
			return nil, 0, fmt.Errorf("count missing values in %s of %q: %w: %s", l.Table, s.path, ErrMissingColumn, c)
		}
		q, err := sqlfiles.QuoteIdent(c)
		if err != nil {
			return nil, 0, err
		}
		cols = append(cols, "count(*) - count("+q+")")
	}
	vals := make([]int, len(cols))
	dst := make([]any, len(cols))
	for i := range vals {
		dst[i] = &vals[i]
	}
	if err := s.ro.QueryRowContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM `+table).Scan(dst...); err != nil {
		return nil, 0, fmt.Errorf("count missing values in %s of %q: %w", l.Table, s.path, err)
	}
	return vals[1:], vals[0], nil
}

// CheckBalance computes the balance of recs' rows, read from s, from sums,
// or when sums is nil from the balance sums of the rows weighted by a
// logistic propensity fitted on them (balance.Of), with the missing fields
// of each covariate column of the table, and stores it as s's local
// balance.
func (s *Site) CheckBalance(ctx context.Context, recs *Records, sums *balance.Sums) (Balance, error) {
	missing, _, err := s.CountMissing(ctx, recs.Layout)
	if err != nil {
		return Balance{}, err
	}
	if sums == nil {
		b, err := balance.Of(ctx, recs.Data.X, recs.Data.W)
		if err != nil {
			return Balance{}, fmt.Errorf("balance of %q: %w", recs.File, err)
		}
		sums = &b
	}
	l := recs.Layout
	r, err := balance.Summarise(*sums, l.Covariates, l.Binary, l.Treatment)
	if err != nil {
		return Balance{}, err
	}
	b := Balance{Scope: ScopeLocal, At: time.Now(), Sites: 1, LeftOut: len(recs.Rejected), Missing: missing, Report: r}
	if err := s.WriteBalance(ctx, b); err != nil {
		return Balance{}, err
	}
	return b, nil
}

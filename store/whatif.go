package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/records"
	"github.com/crffd/crffd/sqlfiles"
)

// WhatIfTable is the table of what-if rows: an integer id and the
// covariate columns of the current run's layout.
const WhatIfTable = "crff_whatif"

// WhatIf are the what-if rows that need scoring under a run: those never
// scored under it, or edited since. Data holds the valid ones (X alone,
// in the layout's covariate order), IDs their ids; Faults are the rows
// crffd cannot score, by id, with the reason.
type WhatIf struct {
	IDs     []int64
	Data    *records.Data
	digests []string
	Faults  []WhatIfFault
	Stale   []int64 // results of rows no longer in crff_whatif
}

// WhatIfFault is a what-if row that cannot be scored, and why.
type WhatIfFault struct {
	ID     int64
	Reason string
	digest string
}

// WhatIfCATE is a scored what-if row, a row of crff_whatif_cate.
type WhatIfCATE struct {
	ID                 int64
	CATE, Lower, Upper float64
}

// ensureWhatIf creates crff_whatif for layout l when it does not exist: an
// integer id and l's covariates, typed as the run reads them. A table a
// user made first is kept; its columns are checked when it is read.
func ensureWhatIf(ctx context.Context, tx *sql.Tx, l Layout) error {
	cols := []string{"id INTEGER PRIMARY KEY"}
	for j, c := range l.Covariates {
		q, err := sqlfiles.QuoteIdent(c)
		if err != nil {
			return err
		}
		typ := "REAL"
		if l.Binary[j] {
			typ = "INTEGER"
		}
		cols = append(cols, q+" "+typ)
	}
	_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+WhatIfTable+` (`+strings.Join(cols, ", ")+`)`)
	return err
}

// WhatIfRows returns the what-if rows of crff_whatif that need scoring
// under run, the current run, whose layout names the covariates: those
// not scored under it, or edited since. It only reads, since crffd site
// asks at every poll that finds the file changed; the results of rows no
// longer in crff_whatif are listed (WhatIf.Stale) for WriteWhatIf to
// drop. A crff_whatif without one of the covariates is an error that names
// it; without crff_whatif there is nothing to score.
func (s *Site) WhatIfRows(ctx context.Context, run string) (*WhatIf, error) {
	out := &WhatIf{}
	err := s.readTx(ctx, "read the what-if rows of", func(tx *sql.Tx) error {
		if err := requireCurrent(ctx, tx, run); err != nil {
			return err
		}
		r, err := currentRun(ctx, tx)
		if err != nil {
			return err
		}
		l := r.Layout
		type result struct{ digest, run string }
		scored := map[int64]result{}
		rows, err := tx.QueryContext(ctx, `SELECT id, digest, run FROM crff_whatif_cate`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var res result
			if err := rows.Scan(&id, &res.digest, &res.run); err != nil {
				rows.Close()
				return err
			}
			scored[id] = res
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		have, err := columnNames(ctx, tx, WhatIfTable)
		if err != nil {
			return err
		}
		if err := checkWhatIfColumns(have, l); err != nil {
			return err
		}
		seen := map[int64]bool{}
		if have != nil {
			if err := out.read(ctx, tx, l, func(id int64, digest string) bool {
				seen[id] = true
				return scored[id] != result{digest, run}
			}); err != nil {
				return err
			}
		}
		for id := range scored {
			if !seen[id] {
				out.Stale = append(out.Stale, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkWhatIfColumns returns an error naming the first of id and l's
// covariates that the columns have (crff_whatif's; none: no table) lack.
func checkWhatIfColumns(have []string, l Layout) error {
	if have == nil {
		return nil
	}
	names := map[string]bool{}
	for _, c := range have {
		names[strings.ToLower(c)] = true
	}
	for _, c := range append([]string{"id"}, l.Covariates...) {
		if !names[strings.ToLower(c)] {
			return fmt.Errorf("%w: %s has no column %q; it needs id and the covariates %s", ErrBadResult, WhatIfTable, c, strings.Join(l.Covariates, ", "))
		}
	}
	return nil
}

// read reads crff_whatif's rows in the covariate order of l, keeping in w
// those that want(id, digest) reports as needing scoring.
func (w *WhatIf) read(ctx context.Context, tx *sql.Tx, l Layout, want func(id int64, digest string) bool) error {
	cols, err := quoted(append([]string{"id"}, l.Covariates...)...)
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM `+WhatIfTable+` ORDER BY id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	d := len(l.Covariates)
	var x []float64
	vals := make([]any, d+1)
	ptrs := make([]any, d+1)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		id, ok := vals[0].(int64)
		if !ok {
			continue // a NULL id: not a row that can be named
		}
		row, digest, reason := whatIfValues(vals[1:], l)
		switch {
		case !want(id, digest):
		case reason != "":
			w.Faults = append(w.Faults, WhatIfFault{ID: id, Reason: reason, digest: digest})
		default:
			w.IDs, w.digests, x = append(w.IDs, id), append(w.digests, digest), append(x, row...)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n := len(w.IDs); n > 0 {
		w.Data = &records.Data{X: mat.NewDense(n, d, x), W: make([]float64, n), Y: make([]float64, n)}
	}
	return nil
}

// whatIfValues reads one what-if row's covariates, with the rules of the
// records' (covariateFault): their values, a digest of what was read, and
// the reason they cannot be scored ("" when they can).
func whatIfValues(vals []any, l Layout) (row []float64, digest, reason string) {
	h := sha256.New()
	row = make([]float64, len(vals))
	for j, v := range vals {
		fmt.Fprintf(h, "%T:%v\x00", v, v)
		if reason != "" {
			continue
		}
		if err := covariateFault(v, l.Binary[j]); err != nil {
			reason = fmt.Sprintf("column %q: %v", l.Covariates[j], err)
			continue
		}
		row[j], _ = number(v)
	}
	return row, hex.EncodeToString(h.Sum(nil)), reason
}

// WriteWhatIf writes the what-if rows' CATEs of w (cates[i] of w.IDs[i])
// and w's faults to crff_whatif_cate under run, the current run.
func (s *Site) WriteWhatIf(ctx context.Context, run string, w *WhatIf, cates []WhatIfCATE) error {
	if len(cates) != len(w.IDs) {
		return fmt.Errorf("write what-if CATEs to %q: %w: %d CATEs of %d rows", s.path, ErrBadResult, len(cates), len(w.IDs))
	}
	return s.writeTx(ctx, "write what-if CATEs to", func(tx *sql.Tx) error {
		if err := requireCurrent(ctx, tx, run); err != nil {
			return err
		}
		for _, id := range w.Stale {
			if _, err := tx.ExecContext(ctx, `DELETE FROM crff_whatif_cate WHERE id = ?`, id); err != nil {
				return err
			}
		}
		at := now()
		for i, c := range cates {
			if c.ID != w.IDs[i] {
				return fmt.Errorf("%w: CATE %d is of row %d, want %d", ErrBadResult, i, c.ID, w.IDs[i])
			}
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO crff_whatif_cate (id, cate, lower, upper, run, scored_at, error, digest)
				VALUES (?, ?, ?, ?, ?, ?, NULL, ?)`, c.ID, c.CATE, nullable(c.Lower), nullable(c.Upper), run, at, w.digests[i]); err != nil {
				return fmt.Errorf("what-if row %d: %w", c.ID, err)
			}
		}
		for _, f := range w.Faults {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO crff_whatif_cate (id, cate, lower, upper, run, scored_at, error, digest)
				VALUES (?, NULL, NULL, NULL, ?, ?, ?, ?)`, f.ID, run, at, f.Reason, f.digest); err != nil {
				return fmt.Errorf("what-if row %d: %w", f.ID, err)
			}
		}
		return nil
	})
}

package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
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
// under run, the current run, whose layout names the covariates, and
// deletes the results of rows no longer there. A crff_whatif without one
// of the covariates is an error that names it.
func (s *Site) WhatIfRows(ctx context.Context, run string) (*WhatIf, error) {
	out := &WhatIf{}
	err := s.writeTx(ctx, "read the what-if rows of", func(tx *sql.Tx) error {
		if err := requireCurrent(ctx, tx, run); err != nil {
			return err
		}
		r, err := currentRun(ctx, tx)
		if err != nil {
			return err
		}
		l := r.Layout
		if err := ensureWhatIf(ctx, tx, l); err != nil {
			return err
		}
		have, err := tableColumns(ctx, tx, WhatIfTable)
		if err != nil {
			return err
		}
		names := map[string]bool{}
		for _, c := range have {
			names[strings.ToLower(c.name)] = true
		}
		sel := []string{"id"}
		for _, c := range append([]string{"id"}, l.Covariates...) {
			if !names[strings.ToLower(c)] {
				return fmt.Errorf("%w: %s has no column %q; it needs id and the covariates %s", ErrBadResult, WhatIfTable, c, strings.Join(l.Covariates, ", "))
			}
		}
		for _, c := range l.Covariates {
			q, _ := sqlfiles.QuoteIdent(c)
			sel = append(sel, q)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM crff_whatif_cate WHERE id NOT IN (SELECT id FROM `+WhatIfTable+` WHERE id IS NOT NULL) OR run <> ?`, run); err != nil {
			return err
		}
		scored := map[int64]string{}
		rows, err := tx.QueryContext(ctx, `SELECT id, digest FROM crff_whatif_cate`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var d string
			if err := rows.Scan(&id, &d); err != nil {
				rows.Close()
				return err
			}
			scored[id] = d
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT `+strings.Join(sel, ", ")+` FROM `+WhatIfTable+` ORDER BY id`)
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
			if scored[id] == digest {
				continue
			}
			if reason != "" {
				out.Faults = append(out.Faults, WhatIfFault{ID: id, Reason: reason, digest: digest})
				continue
			}
			out.IDs, out.digests, x = append(out.IDs, id), append(out.digests, digest), append(x, row...)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n := len(out.IDs); n > 0 {
			out.Data = &records.Data{X: mat.NewDense(n, d, x), W: make([]float64, n), Y: make([]float64, n)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// whatIfValues reads one what-if row's covariates: their values, a digest
// of what was read, and the reason they cannot be scored ("" when they
// can).
func whatIfValues(vals []any, l Layout) (row []float64, digest, reason string) {
	h := sha256.New()
	row = make([]float64, len(vals))
	for j, v := range vals {
		fmt.Fprintf(h, "%T:%v\x00", v, v)
		if reason != "" {
			continue
		}
		var f float64
		switch x := v.(type) {
		case nil:
			reason = fmt.Sprintf("column %q is missing", l.Covariates[j])
		case int64:
			f = float64(x)
		case float64:
			f = x
		case string, []byte:
			s := strings.TrimSpace(fmt.Sprintf("%s", x))
			var err error
			if f, err = strconv.ParseFloat(s, 64); err != nil {
				reason = fmt.Sprintf("column %q holds %q, not a number", l.Covariates[j], s)
			}
		default:
			reason = fmt.Sprintf("column %q holds a %T, not a number", l.Covariates[j], v)
		}
		switch {
		case reason != "":
		case math.IsNaN(f) || math.IsInf(f, 0):
			reason = fmt.Sprintf("column %q holds %v", l.Covariates[j], f)
		case l.Binary[j] && f != 0 && f != 1:
			reason = fmt.Sprintf("column %q is binary and holds %v, not 0 or 1", l.Covariates[j], f)
		}
		row[j] = f
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(vals)))
	h.Write(b[:])
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

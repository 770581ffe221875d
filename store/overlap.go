package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	sqlfiles "github.com/crffd/crffd/sql"
)

// OverlapBucket is one row of the crff_overlap view: the scored rows of the
// current run whose propensity falls in [Lower, Upper) ([0.99, 1] for the
// last bucket), by treatment arm.
type OverlapBucket struct {
	Bucket       int
	Lower, Upper float64
	Treated      int
	Control      int
	Extreme      bool // below sqlfiles.PositivityLow or above sqlfiles.PositivityHigh
}

// ensureView makes the view name hold exactly the statement want, replacing
// it only when its SQL differs, so that an unchanged view costs no schema
// change. It reports whether it created the view.
func ensureView(ctx context.Context, tx *sql.Tx, name, want string) (bool, error) {
	var have string
	err := tx.QueryRowContext(ctx,
		`SELECT sql FROM sqlite_schema WHERE type = 'view' AND name = ?`, name).Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, err
	case have == want:
		return false, nil
	default:
		// name is one of crffd's own view names, never user input.
		if _, err := tx.ExecContext(ctx, `DROP VIEW `+name); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, want); err != nil {
		return false, err
	}
	return true, nil
}

// ensureOverlap makes crff_overlap the view of layout's table, id and
// treatment columns.
func (s *Site) ensureOverlap(ctx context.Context, tx *sql.Tx, l Layout) error {
	want, err := sqlfiles.OverlapView(l.Table, l.ID, l.Treatment)
	if err != nil {
		return err
	}
	created, err := ensureView(ctx, tx, "crff_overlap", want)
	if err != nil {
		return err
	}
	if created {
		s.log.InfoContext(ctx, "view crff_overlap created", "path", s.path, "table", l.Table)
	}
	return nil
}

// ReadOverlap returns the crff_overlap view, bucket by bucket. It fails with
// an error when no results were ever written (the view does not exist yet).
func (s *Site) ReadOverlap(ctx context.Context) ([]OverlapBucket, error) {
	var out []OverlapBucket
	err := s.readTx(ctx, "read crff_overlap from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`SELECT bucket, lower, upper, treated, control, extreme FROM crff_overlap ORDER BY bucket`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b OverlapBucket
			if err := rows.Scan(&b.Bucket, &b.Lower, &b.Upper, &b.Treated, &b.Control, &b.Extreme); err != nil {
				return err
			}
			out = append(out, b)
		}
		return rows.Err()
	})
	return out, err
}

// outsideOverlap counts the scores whose propensity lies outside
// [sqlfiles.PositivityLow, sqlfiles.PositivityHigh].
func outsideOverlap(cs []CATE) int {
	n := 0
	for _, c := range cs {
		if c.Propensity < sqlfiles.PositivityLow || c.Propensity > sqlfiles.PositivityHigh {
			n++
		}
	}
	return n
}

// warnPositivity logs a warning when some of the published scores have a
// propensity outside the positivity bounds. It logs counts only, never a
// row's values.
func (s *Site) warnPositivity(ctx context.Context, run string, cs []CATE) {
	n := outsideOverlap(cs)
	if n == 0 {
		return
	}
	s.log.WarnContext(ctx, "positivity looks violated: rows with a propensity outside the bounds; see crff_overlap",
		"path", s.path, "run", run, "rows", len(cs), "outside", n,
		"low", sqlfiles.PositivityLow, "high", sqlfiles.PositivityHigh)
}

// ReadPropensities returns the propensity of every scored row of the
// current run, split by the row's treatment as the run's table holds it
// (rows whose treatment is neither 0 nor 1 are left out). It is for the
// site's own operator, to draw the overlap of the two arms.
func (s *Site) ReadPropensities(ctx context.Context) (treated, control []float64, err error) {
	err = s.readTx(ctx, "read propensities from", func(tx *sql.Tx) error {
		r, err := currentRun(ctx, tx)
		if err != nil {
			return err
		}
		t, err := sqlfiles.QuoteIdent(r.Layout.Table)
		if err != nil {
			return fmt.Errorf("%w: run %q: table: %w", ErrCorrupt, r.ID, err)
		}
		id, err := sqlfiles.QuoteIdent(r.Layout.ID)
		if err != nil {
			return fmt.Errorf("%w: run %q: id column: %w", ErrCorrupt, r.ID, err)
		}
		w, err := sqlfiles.QuoteIdent(r.Layout.Treatment)
		if err != nil {
			return fmt.Errorf("%w: run %q: treatment column: %w", ErrCorrupt, r.ID, err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT c.propensity, r.`+w+` = 1, r.`+w+` = 0
			FROM crff_cate AS c JOIN `+t+` AS r ON c.row_id = +r.`+id+` ORDER BY c.row_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p float64
			var isT, isC sql.NullBool
			if err := rows.Scan(&p, &isT, &isC); err != nil {
				return err
			}
			switch {
			case isT.Bool:
				treated = append(treated, p)
			case isC.Bool:
				control = append(control, p)
			}
		}
		return rows.Err()
	})
	return treated, control, err
}

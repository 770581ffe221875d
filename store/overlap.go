package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/crffd/crffd/positivity"
	"github.com/crffd/crffd/sqlfiles"
)

// OverlapBucket is one row of the crff_overlap view: the scored rows of the
// current run whose propensity falls in [Lower, Upper) ([0.99, 1] for the
// last bucket), by treatment arm.
type OverlapBucket struct {
	Bucket       int
	Lower, Upper float64
	Treated      int
	Control      int
	Extreme      bool    // below positivity.Low or above positivity.High
	Share        float64 // the bucket's share of the rows of all buckets; 0 when there are none
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

// ensureOverlap makes crff_overlap and crff_positivity the views of
// layout's table, id and treatment columns.
func (s *Site) ensureOverlap(ctx context.Context, tx *sql.Tx, l Layout) error {
	for _, v := range []struct {
		name   string
		render func(table, id, treatment string) (string, error)
	}{{"crff_overlap", sqlfiles.OverlapView}, {"crff_positivity", sqlfiles.PositivityView}} {
		want, err := v.render(l.Table, l.ID, l.Treatment)
		if err != nil {
			return err
		}
		created, err := ensureView(ctx, tx, v.name, want)
		if err != nil {
			return err
		}
		if created {
			s.log.DebugContext(ctx, "view "+v.name+" created", "path", s.path, "table", l.Table)
		}
	}
	return nil
}

// ReadOverlap returns the crff_overlap view, bucket by bucket. It fails with
// an error when no results were ever written (the view does not exist yet).
// Share is computed from the counts, so that a view written by an earlier
// crffd, without its share column, reads the same.
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
	total := 0
	for _, b := range out {
		total += b.Treated + b.Control
	}
	if total > 0 {
		for i := range out {
			out[i].Share = float64(out[i].Treated+out[i].Control) / float64(total)
		}
	}
	return out, err
}

// warnPositivity logs a warning when the published scores fail the rules
// of package positivity (an arm below the soft minimum, or too many
// propensities outside the bounds), as crff_positivity says. It logs counts
// only, never a row's values.
func (s *Site) warnPositivity(ctx context.Context, run string) {
	c, err := s.ReadPositivity(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "positivity not checked", "path", s.path, "run", run, "error", err.Error())
		return
	}
	if w := c.Warning(); w != "" {
		s.log.WarnContext(ctx, "positivity: "+w+"; see crff_positivity and crff_overlap",
			"path", s.path, "run", run, "treated", c.Treated, "control", c.Control, "outside", c.Outside)
	}
}

// ReadPositivity counts the current run's scored rows by arm and those of
// them whose propensity lies outside the positivity bounds, as
// crff_positivity does; [positivity.Counts.Problems] says what they fail.
func (s *Site) ReadPositivity(ctx context.Context) (positivity.Counts, error) {
	var c positivity.Counts
	err := s.readTx(ctx, "check positivity in", func(tx *sql.Tx) error {
		r, t, id, w, err := currentLayout(ctx, tx)
		if err != nil {
			return err
		}
		c.Column = r.Layout.Treatment
		// Counted in SQL, not read row by row: reading 100 000 rows'
		// propensities took half a second (BenchmarkWriteResultsSubgroups).
		return tx.QueryRowContext(ctx, positivityQuery(t, id, w), positivity.Low, positivity.High).Scan(&c.Treated, &c.Control, &c.Outside)
	})
	return c, err
}

// currentLayout returns the current run and its quoted table, id and
// treatment column.
func currentLayout(ctx context.Context, tx *sql.Tx) (r Run, t, id, w string, err error) {
	if r, err = currentRun(ctx, tx); err != nil {
		return r, "", "", "", err
	}
	if t, err = sqlfiles.QuoteIdent(r.Layout.Table); err != nil {
		return r, "", "", "", fmt.Errorf("%w: run %q: table: %w", ErrCorrupt, r.ID, err)
	}
	if id, err = sqlfiles.QuoteIdent(r.Layout.ID); err != nil {
		return r, "", "", "", fmt.Errorf("%w: run %q: id column: %w", ErrCorrupt, r.ID, err)
	}
	if w, err = sqlfiles.QuoteIdent(r.Layout.Treatment); err != nil {
		return r, "", "", "", fmt.Errorf("%w: run %q: treatment column: %w", ErrCorrupt, r.ID, err)
	}
	return r, t, id, w, nil
}

// ReadPropensities returns the propensity of every scored row of the
// current run, split by the row's treatment as the run's table holds it
// (rows whose treatment is neither 0 nor 1 are left out). It is for the
// site's own operator, to draw the overlap of the two arms.
func (s *Site) ReadPropensities(ctx context.Context) (treated, control []float64, err error) {
	err = s.readTx(ctx, "read propensities from", func(tx *sql.Tx) error {
		_, t, id, w, err := currentLayout(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, propensitiesQuery(t, id, w))
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

// propensitiesQuery reads the propensity and arm of each scored row of
// table t (its id and treatment columns quoted), in row id order. The
// user's table is the outer loop (CROSS JOIN): crff_cate is a view, and
// SQLite would otherwise take its rows, already in row id order, as the
// outer loop and scan t once per row, since +r.id uses no index of t.
func propensitiesQuery(t, id, w string) string {
	return `SELECT c.propensity, r.` + w + ` = 1, r.` + w + ` = 0
			FROM ` + scoredJoin(t, id) + ` ORDER BY c.row_id`
}

// positivityQuery counts the scored rows of table t by arm, and those of
// them whose propensity lies outside [?1, ?2], as crff_positivity does.
func positivityQuery(t, id, w string) string {
	return `SELECT count(CASE WHEN r.` + w + ` = 1 THEN 1 END), count(CASE WHEN r.` + w + ` = 0 THEN 1 END),
			count(CASE WHEN (r.` + w + ` = 1 OR r.` + w + ` = 0) AND (c.propensity < ? OR c.propensity > ?) THEN 1 END)
			FROM ` + scoredJoin(t, id)
}

// scoredJoin joins table t (its id column quoted) to crff_cate, t the outer
// loop (see propensitiesQuery).
func scoredJoin(t, id string) string {
	return t + ` AS r CROSS JOIN crff_cate AS c ON c.row_id = +r.` + id
}

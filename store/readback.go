package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
)

// ReadCATE returns crff_cate: the CATE of every scored row of the current
// run, in ascending row id order.
func (s *Site) ReadCATE(ctx context.Context) ([]CATE, error) {
	var out []CATE
	err := s.readTx(ctx, "read crff_cate from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`SELECT row_id, cate, se, lower, upper, latent_cate, latent_sd, latent_q025, latent_q975,
			        y0, y1, propensity, run, scored_at, raw_cate, psi, coalesce(psi_clipped, 0) FROM crff_cate ORDER BY row_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c CATE
			var at string
			var se, lower, upper, raw, psi sql.NullFloat64
			if err := rows.Scan(&c.RowID, &c.CATE, &se, &lower, &upper, &c.Latent, &c.LatentSD, &c.LatentQ025, &c.LatentQ975,
				&c.Y0, &c.Y1, &c.Propensity, &c.Run, &at, &raw, &psi, &c.PSIClipped); err != nil {
				return err
			}
			c.SE, c.Lower, c.Upper = nullFloat(se), nullFloat(lower), nullFloat(upper)
			c.Raw, c.PSI = nullFloat(raw), nullFloat(psi)
			if c.ScoredAt, err = parseTime(at); err != nil {
				return fmt.Errorf("%w: crff_cate.scored_at: %w", ErrCorrupt, err)
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// ReadATE returns crff_ate: the local ATEs, then the global ones, where
// present; within a scope the AIPW estimate comes first.
func (s *Site) ReadATE(ctx context.Context) ([]ATE, error) {
	var out []ATE
	err := s.readTx(ctx, "read crff_ate from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`SELECT scope, estimator, ate, se, lower, upper, n, clipped, run, computed_at, sites, private, noise_se FROM crff_ate
			 ORDER BY scope = 'global', scope, estimator != 'aipw', estimator`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a ATE
			var se, lower, upper sql.NullFloat64
			var clipped sql.NullInt64
			var at string
			var sites sql.NullString
			if err := rows.Scan(&a.Scope, &a.Estimator, &a.ATE, &se, &lower, &upper, &a.N, &clipped, &a.Run, &at, &sites, &a.Private, &a.NoiseSE); err != nil {
				return err
			}
			if sites.Valid {
				if err := json.Unmarshal([]byte(sites.String), &a.Sites); err != nil {
					return fmt.Errorf("%w: crff_ate.sites: %w", ErrCorrupt, err)
				}
			}
			a.SE, a.Lower, a.Upper = nullFloat(se), nullFloat(lower), nullFloat(upper)
			a.Clipped = -1
			if clipped.Valid {
				a.Clipped = int(clipped.Int64)
			}
			if a.ComputedAt, err = parseTime(at); err != nil {
				return fmt.Errorf("%w: crff_ate.computed_at: %w", ErrCorrupt, err)
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// nullFloat returns v's value, or NaN for NULL.
func nullFloat(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}

// ReadTransfer returns crff_transfer, ordered by peer and model.
func (s *Site) ReadTransfer(ctx context.Context) ([]Transfer, error) {
	var out []Transfer
	err := s.readTx(ctx, "read crff_transfer from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT peer, model, lambda, run FROM crff_transfer ORDER BY peer, model`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t Transfer
			if err := rows.Scan(&t.Peer, &t.Model, &t.Lambda, &t.Run); err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	return out, err
}

// ReadRejected returns crff_rejected, in the order the faults were written.
// Rejection.Err is nil: only the reason's text is stored.
func (s *Site) ReadRejected(ctx context.Context) ([]Rejection, error) {
	var out []Rejection
	err := s.readTx(ctx, "read crff_rejected from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT row_id, column_name, reason, run FROM crff_rejected ORDER BY rowid`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r Rejection
			if err := rows.Scan(&r.RowID, &r.Column, &r.Reason, &r.Run); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// ReadSelection returns crff_model_selection, in candidate order.
func (s *Site) ReadSelection(ctx context.Context) ([]Selection, error) {
	var out []Selection
	err := s.readTx(ctx, "read crff_model_selection from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT candidate, kind, COALESCE(kernel, ''), COALESCE(ridge, 0), loss, COALESCE(se, 0), diff,
			COALESCE(diff_se, 0), chosen, member, COALESCE(shift, 0), n, site_diff, site_diff_se, own_diff, own_diff_se
			FROM crff_model_selection ORDER BY rowid`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c Selection
			var siteDiff, siteSE, own, ownSE sql.NullFloat64
			if err := rows.Scan(&c.Candidate, &c.Kind, &c.Kernel, &c.Ridge, &c.Loss, &c.SE, &c.Diff, &c.DiffSE, &c.Chosen, &c.Member, &c.Shift, &c.N,
				&siteDiff, &siteSE, &own, &ownSE); err != nil {
				return err
			}
			if siteDiff.Valid && siteSE.Valid {
				c.Site = &SiteDiffs{Diff: siteDiff.Float64, DiffSE: siteSE.Float64}
				if own.Valid && ownSE.Valid {
					c.Site.Own, c.Site.OwnSE = &own.Float64, &ownSE.Float64
				}
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

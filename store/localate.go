package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/crffd/crffd/inference"
)

// UpdateLocalATE recomputes the local ATEs of crff_ate from the CATEs in
// crff_cate, so that they cover the rows the site holds now, not the rows
// the run was trained on: the AIPW estimate is the mean of the rows' ψ
// (CATE.PSI, over the rows that have one), with its standard error, and
// the plug-in estimate the mean of the uncalibrated CATEs (CATE.Raw). It
// returns the ATEs it wrote.
//
// It writes nothing when crff_cate is empty, or holds CATEs written
// before crff_cate kept ψ (their run's figures stand); and it deletes the
// local AIPW row when fewer than two rows have a ψ. The global ATEs, which
// are of the run's rows at every site, are left alone. It fails with
// ErrStaleRun when run is not the current run.
func (s *Site) UpdateLocalATE(ctx context.Context, run string) ([]ATE, error) {
	var out []ATE
	err := s.writeTx(ctx, "update the local ATE in", func(tx *sql.Tx) error {
		if err := requireCurrent(ctx, tx, run); err != nil {
			return err
		}
		var (
			rows, raws, clipped int
			rawSum              float64
			psi                 inference.Sums
		)
		if err := tx.QueryRowContext(ctx, `SELECT count(*), count(raw_cate), total(raw_cate),
			    count(psi), total(psi), total(psi * psi), total(psi_clipped) FROM crff_cate`).
			Scan(&rows, &raws, &rawSum, &psi.N, &psi.Sum, &psi.SumSq, &clipped); err != nil {
			return err
		}
		if rows == 0 || raws < rows {
			return nil
		}
		// The CATEs, and so their ψ, are the run's: private if it was.
		var private bool
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(private), 0) FROM crff_ate WHERE scope = ?`, ScopeLocal).Scan(&private); err != nil {
			return err
		}
		plugin := inference.PointEstimate(rawSum/float64(raws), raws)
		out = []ATE{{Scope: ScopeLocal, Estimator: EstimatorPlugIn, ATE: plugin.Estimate, SE: plugin.SE,
			Lower: plugin.Lower, Upper: plugin.Upper, N: plugin.N, Clipped: -1, Private: private}}
		if aipw, err := psi.Estimate(); err == nil {
			out = append([]ATE{{Scope: ScopeLocal, Estimator: EstimatorAIPW, ATE: aipw.Estimate, SE: aipw.SE,
				Lower: aipw.Lower, Upper: aipw.Upper, N: aipw.N, Clipped: clipped, Private: private}}, out...)
		} else if _, err := tx.ExecContext(ctx, `DELETE FROM crff_ate WHERE scope = ? AND estimator = ?`,
			ScopeLocal, EstimatorAIPW); err != nil {
			return err
		}
		if err := checkATE(out); err != nil {
			return err
		}
		if err := upsertATE(ctx, tx, run, out); err != nil {
			return err
		}
		r, err := currentRun(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := s.updateLocalGATE(ctx, tx, run, r.Layout); err != nil {
			return fmt.Errorf("subgroups: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

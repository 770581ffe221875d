package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
)

// Loss is the training loss of one model at one round of a run.
type Loss struct {
	Model string
	Round int
	Loss  float64

	Run string // set when read back; ignored when appending
}

// AppendLoss records losses of run, which must exist (BeginRun). A round
// recorded before for the same model is overwritten, so that a resumed run
// may record it again. Losses go with their run: publishing another run
// deletes them.
func (s *Site) AppendLoss(ctx context.Context, run string, ls ...Loss) error {
	for _, l := range ls {
		if l.Model == "" || l.Round < 0 || math.IsNaN(l.Loss) || math.IsInf(l.Loss, 0) {
			return fmt.Errorf("append loss of run %q to %q: %w: model %q round %d loss %v",
				run, s.path, ErrBadResult, l.Model, l.Round, l.Loss)
		}
	}
	return s.writeTx(ctx, "append loss to", func(tx *sql.Tx) error {
		if _, err := runState(ctx, tx, run); err != nil {
			return err
		}
		st, err := tx.PrepareContext(ctx,
			`INSERT INTO crff_loss (run, model, round, loss) VALUES (?, ?, ?, ?)
			 ON CONFLICT (run, model, round) DO UPDATE SET loss = excluded.loss`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, l := range ls {
			if _, err := st.ExecContext(ctx, run, l.Model, l.Round, l.Loss); err != nil {
				return fmt.Errorf("loss of %q at round %d: %w", l.Model, l.Round, err)
			}
		}
		return nil
	})
}

// ReadLoss returns the losses recorded for run (all runs when run is
// empty), ordered by run, model and round.
func (s *Site) ReadLoss(ctx context.Context, run string) ([]Loss, error) {
	var out []Loss
	err := s.readTx(ctx, "read crff_loss from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`SELECT run, model, round, loss FROM crff_loss WHERE ? = '' OR run = ?
			 ORDER BY run, model, round`, run, run)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l Loss
			if err := rows.Scan(&l.Run, &l.Model, &l.Round, &l.Loss); err != nil {
				return err
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}

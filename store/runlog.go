package store

import (
	"context"
	"database/sql"
	"fmt"
)

// RunStatus is how a run ended, as crff_run_log records it.
type RunStatus string

// Run statuses.
const (
	RunCompleted RunStatus = "completed" // its results were published
	RunRefused   RunStatus = "refused"   // refused before anything computed from the rows was sent
	RunFailed    RunStatus = "failed"    // stopped for any other reason
)

// RunEnd is one row of crff_run_log.
type RunEnd struct {
	Run    string
	Status RunStatus
	Reason string // empty for completed runs
}

// LogRun records how run ended, replacing what was recorded for it before
// (a run refused by a site that then took part after a restart is
// completed). The log outlives crff_run: see migration 0008.
func (s *Site) LogRun(ctx context.Context, e RunEnd) error {
	switch e.Status {
	case RunCompleted, RunRefused, RunFailed:
	default:
		return fmt.Errorf("log run %q in %q: %w: status %q", e.Run, s.path, ErrBadResult, e.Status)
	}
	if e.Run == "" {
		return fmt.Errorf("log run in %q: %w: empty run id", s.path, ErrBadResult)
	}
	reason := sql.NullString{String: e.Reason, Valid: e.Reason != ""}
	return s.writeTx(ctx, "log run in", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO crff_run_log (run, status, reason, ended_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (run) DO UPDATE SET status = excluded.status, reason = excluded.reason, ended_at = excluded.ended_at`,
			e.Run, string(e.Status), reason, now())
		return err
	})
}

// RunLog returns crff_run_log in the order the runs ended.
func (s *Site) RunLog(ctx context.Context) ([]RunEnd, error) {
	var out []RunEnd
	err := s.readTx(ctx, "read crff_run_log from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT run, status, coalesce(reason, '') FROM crff_run_log ORDER BY ended_at, rowid`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e RunEnd
			if err := rows.Scan(&e.Run, &e.Status, &e.Reason); err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

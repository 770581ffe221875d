package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/crffd/crffd/sqlfiles"
)

// ensureCateRecords makes crff_cate_records the view of layout's table and
// id column, recreating it only when its SQL differs (the configuration
// changed), so that an unchanged view costs no schema change.
func (s *Site) ensureCateRecords(ctx context.Context, tx *sql.Tx, l Layout) error {
	want, err := sqlfiles.CateRecordsView(l.Table, l.ID)
	if err != nil {
		return err
	}
	var have string
	err = tx.QueryRowContext(ctx,
		`SELECT sql FROM sqlite_schema WHERE type = 'view' AND name = 'crff_cate_records'`).Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case have == want:
		return nil
	default:
		if _, err := tx.ExecContext(ctx, `DROP VIEW crff_cate_records`); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, want); err != nil {
		return err
	}
	s.log.DebugContext(ctx, "view crff_cate_records created", "path", s.path, "table", l.Table)
	return nil
}

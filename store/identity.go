package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/crffd/crffd/sqlfiles"
)

// ReadIdentities returns, for every row of the layout's table, the text of
// its identity columns (Layout.Identity) by row id; NULL reads as "". It is
// what federation de-duplication hashes; the values never leave the site.
func (s *Site) ReadIdentities(ctx context.Context, l Layout) (map[RowID][]string, error) {
	if len(l.Identity) == 0 {
		return map[RowID][]string{}, nil
	}
	id, err := sqlfiles.QuoteIdent(l.ID)
	if err != nil {
		return nil, fmt.Errorf("read identity columns of %q: %w", s.path, err)
	}
	sel := []string{id}
	for _, c := range l.Identity {
		q, err := sqlfiles.QuoteIdent(c)
		if err != nil {
			return nil, fmt.Errorf("read identity columns of %q: %w", s.path, err)
		}
		sel = append(sel, "CAST("+q+" AS TEXT)")
	}
	table, err := sqlfiles.QuoteIdent(l.Table)
	if err != nil {
		return nil, fmt.Errorf("read identity columns of %q: %w", s.path, err)
	}
	out := map[RowID][]string{}
	err = s.readTx(ctx, "read identity columns from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM "+table)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rid RowID
			vals := make([]sql.NullString, len(l.Identity))
			dest := []any{&rid}
			for i := range vals {
				dest = append(dest, &vals[i])
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			v := make([]string, len(vals))
			for i, n := range vals {
				v[i] = n.String
			}
			out[rid] = v
		}
		return rows.Err()
	})
	return out, err
}

package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/crffd/crffd/sqlfiles"
)

// SchemaVersion returns the crff_ schema version of the file: the number of
// the last migration applied.
func (s *Site) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.readTx(ctx, "read schema version", func(tx *sql.Tx) error {
		var err error
		v, err = schemaVersion(ctx, tx)
		return err
	})
	return v, err
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type querier = sqlfiles.Querier

// schemaVersion returns 0 for a file without crff_ schema.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	return sqlfiles.SchemaVersion(ctx, q)
}

// migrate applies the migrations the file lacks, all in one IMMEDIATE
// transaction, and refuses a file whose schema is newer than this binary. A
// file already up to date is only read, so opening it does not wait for
// another connection's write lock.
func (s *Site) migrate(ctx context.Context) error {
	ms, err := sqlfiles.Migrations()
	if err != nil {
		return fmt.Errorf("open site %q: %w", s.path, err)
	}
	latest := ms[len(ms)-1].Version
	have, err := schemaVersion(ctx, s.rw)
	if err != nil {
		return s.wrap("open site", err)
	}
	if have > latest {
		return fmt.Errorf("open site %q: %w: the file has schema version %d, this crffd knows up to %d; use a newer crffd",
			s.path, ErrSchemaTooNew, have, latest)
	}
	if have == latest {
		return nil
	}
	from := have
	err = s.writeTx(ctx, "migrate site", func(tx *sql.Tx) error {
		// Read again under the write lock: another process may have
		// migrated the file meanwhile.
		have, err := schemaVersion(ctx, tx)
		if err != nil {
			return err
		}
		if have > latest {
			return fmt.Errorf("%w: the file has schema version %d, this crffd knows up to %d", ErrSchemaTooNew, have, latest)
		}
		from = have
		return sqlfiles.Apply(ctx, tx, ms, have, now())
	})
	if err == nil {
		s.log.InfoContext(ctx, "crff schema migrated", "path", s.path, "from", from, "to", latest)
	}
	return err
}
